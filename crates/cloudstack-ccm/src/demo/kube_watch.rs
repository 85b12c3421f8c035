//! The Kubernetes side of the progress view: Nodes that became initialised, the demo
//! Service's finalizer, ingress and existence, and new Events — each line from a change
//! seen in the API server's objects.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use serde_json::Value;

use super::render::{Line, Mark};
use crate::controllers::node_vocabulary::{LABEL_INSTANCE_TYPE, LABEL_ZONE, UNINITIALIZED_TAINT};

pub use crate::controllers::service::finalizer::FINALIZER;

/// What the demo observed of its objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KubeView {
    /// Nodes that are initialised (providerID set, `uninitialized` taint gone).
    pub initialised: BTreeSet<String>,
    /// The Service exists.
    pub service_exists: bool,
    /// Its UID.
    pub service_uid: Option<String>,
    /// It carries the cleanup finalizer.
    pub finalizer: bool,
    /// `ip[ (ipMode)]` of each ingress entry.
    pub ingress: Vec<String>,
    /// Reasons of the Events about the Service, in order seen.
    pub service_events: Vec<String>,
}

/// Compares successive views of the cluster and describes what changed.
#[derive(Debug, Default)]
pub(crate) struct KubeWatch {
    view: KubeView,
    seen_events: HashSet<String>,
}

impl KubeWatch {
    /// The latest view.
    pub fn view(&self) -> &KubeView {
        &self.view
    }

    /// Lines for what changed since the last call, given the current objects.
    pub fn poll(
        &mut self,
        at: Duration,
        nodes: &[Value],
        service: Option<&Value>,
        events: &[Value],
        service_name: &str,
    ) -> Vec<Line> {
        let mut lines = Vec::new();
        for node in nodes {
            let name = str_at(node, &["metadata", "name"]);
            if self.view.initialised.contains(name) || !is_initialised(node) {
                continue;
            }
            self.view.initialised.insert(name.to_string());
            lines.push(Line::new(
                at,
                Mark::Done,
                format!("Node {name} initialised"),
                node_detail(node),
            ));
        }
        self.poll_service(at, service, &mut lines);
        self.poll_events(at, events, service_name, &mut lines);
        lines
    }

    fn poll_service(&mut self, at: Duration, service: Option<&Value>, lines: &mut Vec<Line>) {
        let Some(service) = service else {
            if self.view.service_exists {
                // The object only goes once its last finalizer is removed.
                let text = if self.view.finalizer {
                    "finalizer removed, Service gone"
                } else {
                    "Service gone"
                };
                self.view.service_exists = false;
                self.view.finalizer = false;
                self.view.ingress.clear();
                lines.push(Line::new(at, Mark::Done, text, FINALIZER));
            }
            return;
        };
        self.view.service_exists = true;
        self.view.service_uid = service["metadata"]["uid"].as_str().map(str::to_string);
        let finalizer = service["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|list| list.iter().any(|f| f.as_str() == Some(FINALIZER)));
        if finalizer != self.view.finalizer {
            self.view.finalizer = finalizer;
            let text = if finalizer {
                "finalizer added"
            } else {
                "finalizer removed"
            };
            lines.push(Line::new(at, Mark::Done, text, FINALIZER));
        }
        let ingress = ingress_of(service);
        if ingress != self.view.ingress {
            let text = match (self.view.ingress.is_empty(), ingress.is_empty()) {
                (_, true) => "ingress cleared".to_string(),
                (true, false) => format!("ingress set: {}", ingress.join(", ")),
                (false, false) => format!("ingress updated: {}", ingress.join(", ")),
            };
            lines.push(Line::new(
                at,
                Mark::Done,
                text,
                "status.loadBalancer.ingress",
            ));
            self.view.ingress = ingress;
        }
    }

    fn poll_events(
        &mut self,
        at: Duration,
        events: &[Value],
        service_name: &str,
        lines: &mut Vec<Line>,
    ) {
        for event in events {
            let key = format!(
                "{}/{}/{}",
                str_at(event, &["apiVersion"]),
                str_at(event, &["metadata", "namespace"]),
                str_at(event, &["metadata", "name"])
            );
            if !self.seen_events.insert(key) {
                continue;
            }
            let regarding = event
                .get("regarding")
                .or_else(|| event.get("involvedObject"));
            let kind = regarding.map_or("", |r| str_at(r, &["kind"]));
            let name = regarding.map_or("", |r| str_at(r, &["name"]));
            let reason = str_at(event, &["reason"]);
            let note = event
                .get("note")
                .or_else(|| event.get("message"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let warning = str_at(event, &["type"]) == "Warning";
            let about_service = kind == "Service" && name == service_name;
            if about_service {
                self.view.service_events.push(reason.to_string());
            }
            if about_service || warning {
                let mark = if warning { Mark::Warn } else { Mark::Note };
                lines.push(Line::new(
                    at,
                    mark,
                    format!("event {reason} on {kind} {name}"),
                    note.to_string(),
                ));
            }
        }
    }
}

/// Whether the cloud-node controller has initialised the Node.
pub(crate) fn is_initialised(node: &Value) -> bool {
    let tainted = node["spec"]["taints"]
        .as_array()
        .is_some_and(|taints| taints.iter().any(|t| t["key"] == UNINITIALIZED_TAINT));
    !tainted && !str_at(node, &["spec", "providerID"]).is_empty()
}

fn node_detail(node: &Value) -> String {
    let labels = &node["metadata"]["labels"];
    let label = |key: &str| labels[key].as_str().unwrap_or("-").to_string();
    let addresses: Vec<String> = node["status"]["addresses"]
        .as_array()
        .map(|list| {
            list.iter()
                .filter(|a| a["type"] == "InternalIP")
                .map(|a| str_at(a, &["address"]).to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut detail = format!(
        "{}, zone {}, type {}",
        str_at(node, &["spec", "providerID"]),
        label(LABEL_ZONE),
        label(LABEL_INSTANCE_TYPE)
    );
    if !addresses.is_empty() {
        detail.push_str(&format!(", {}", addresses.join(",")));
    }
    detail
}

fn ingress_of(service: &Value) -> Vec<String> {
    service["status"]["loadBalancer"]["ingress"]
        .as_array()
        .map(|list| {
            list.iter()
                .map(|entry| {
                    let target = entry["ip"]
                        .as_str()
                        .or(entry["hostname"].as_str())
                        .unwrap_or("?");
                    match entry["ipMode"].as_str() {
                        Some(mode) => format!("{target} (ipMode {mode})"),
                        None => target.to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The string at `path`, or `""`.
fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    path.iter()
        .try_fold(value, |v, key| v.get(*key))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

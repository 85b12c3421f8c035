//! `meta.k8s.io/v1` Table responses, what `kubectl get` asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`): the columns and cells of
//! kube-apiserver's printers (`pkg/printers/internalversion/printers.go`: `printNode`,
//! `printService`, `printPod`, `printEvent`, `printNamespace`, `printLease`), and the
//! default convertor's `Name`/`Created At` (`rest.NewDefaultTableConvertor`) for the other
//! resources. The server always fills the wide columns (priority 1); kubectl shows them
//! with `-o wide`. Ages are `duration.HumanDuration` strings. Rows carry the object's
//! metadata (`PartialObjectMetadata`) unless `includeObject` says otherwise.
//!
//! Simplified: a Pod's Status is its `status.reason` or phase (container waiting and
//! terminated reasons are not derived) and Restarts has no "(x ago)".

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::object::meta_str;
use crate::resources::ResourceKind;

/// Whether the `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// `duration.HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let days = (hours / 24) % 365;
        return if days == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{days}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// `translateTimestampSince`: the age of an RFC 3339 timestamp, `<unknown>` when unset.
fn since(timestamp: Option<&Value>) -> String {
    let Some(parsed) = timestamp
        .and_then(Value::as_str)
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
    else {
        return "<unknown>".into();
    };
    human_duration(jiff::Timestamp::now().as_second() - parsed.as_second())
}

fn str_at<'a>(object: &'a Value, pointer: &str) -> &'a str {
    object
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn or_none(value: &str, none: &str) -> String {
    if value.is_empty() {
        none.to_string()
    } else {
        value.to_string()
    }
}

fn column(name: &str, type_: &str, priority: u8) -> Value {
    let mut c = json!({ "name": name, "type": type_, "format": "", "description": "", "priority": priority });
    if name == "Name" {
        c["format"] = json!("name");
    }
    c
}

/// `labels.FormatLabels`: sorted `k=v` pairs, `<none>` when empty.
fn format_labels(map: Option<&Value>) -> String {
    let pairs: BTreeMap<&str, &str> = map
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.as_str(), v.as_str().unwrap_or("")))
                .collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() {
        return "<none>".into();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn node_address(node: &Value, type_: &str) -> String {
    node.pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|list| list.iter().find(|a| a["type"] == type_))
        .and_then(|a| a["address"].as_str())
        .map_or_else(|| "<none>".to_string(), String::from)
}

fn node_cells(node: &Value) -> Vec<Value> {
    let mut status: Vec<String> = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .map(|ready| {
            if ready["status"] == "True" {
                vec!["Ready".to_string()]
            } else {
                vec!["NotReady".to_string()]
            }
        })
        .unwrap_or_else(|| vec!["Unknown".to_string()]);
    if node.pointer("/spec/unschedulable") == Some(&json!(true)) {
        status.push("SchedulingDisabled".into());
    }
    // findNodeRoles: node-role.kubernetes.io/<role> labels and kubernetes.io/role.
    let mut roles: Vec<String> = Vec::new();
    if let Some(labels) = node.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.push(role.to_string());
                }
            } else if key == "kubernetes.io/role"
                && let Some(role) = value.as_str().filter(|r| !r.is_empty())
            {
                roles.push(role.to_string());
            }
        }
    }
    roles.sort();
    roles.dedup();
    let info = |field: &str| {
        or_none(
            str_at(node, &format!("/status/nodeInfo/{field}")),
            "<unknown>",
        )
    };
    vec![
        json!(meta_str(node, "name")),
        json!(status.join(",")),
        json!(or_none(&roles.join(","), "<none>")),
        json!(since(node.pointer("/metadata/creationTimestamp"))),
        json!(str_at(node, "/status/nodeInfo/kubeletVersion")),
        json!(node_address(node, "InternalIP")),
        json!(node_address(node, "ExternalIP")),
        json!(info("osImage")),
        json!(info("kernelVersion")),
        json!(info("containerRuntimeVersion")),
    ]
}

fn service_cells(service: &Value) -> Vec<Value> {
    let spec = service.get("spec").cloned().unwrap_or_default();
    let type_ = str_at(&spec, "/type");
    let cluster_ip = spec
        .pointer("/clusterIPs/0")
        .and_then(Value::as_str)
        .map_or_else(|| "<none>".to_string(), String::from);
    let external_ips: Vec<&str> = spec
        .get("externalIPs")
        .and_then(Value::as_array)
        .map(|ips| ips.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    // getServiceExternalIP / loadBalancerStatusStringer (sorted, IP before hostname).
    let external = match type_ {
        "ClusterIP" | "NodePort" => or_none(&external_ips.join(","), "<none>"),
        "LoadBalancer" => {
            let mut ingress: Vec<&str> = service
                .pointer("/status/loadBalancer/ingress")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(|i| {
                            i["ip"]
                                .as_str()
                                .filter(|ip| !ip.is_empty())
                                .or_else(|| i["hostname"].as_str().filter(|h| !h.is_empty()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            ingress.sort_unstable();
            ingress.dedup();
            ingress.extend(external_ips);
            or_none(&ingress.join(","), "<pending>")
        }
        "ExternalName" => str_at(&spec, "/externalName").to_string(),
        _ => "<unknown>".to_string(),
    };
    // makePortString.
    let ports: Vec<String> = spec
        .get("ports")
        .and_then(Value::as_array)
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    let protocol = p["protocol"].as_str().unwrap_or("TCP");
                    match p["nodePort"].as_i64().filter(|n| *n > 0) {
                        Some(node_port) => format!("{}:{node_port}/{protocol}", p["port"]),
                        None => format!("{}/{protocol}", p["port"]),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    vec![
        json!(meta_str(service, "name")),
        json!(type_),
        json!(cluster_ip),
        json!(external),
        json!(or_none(&ports.join(","), "<none>")),
        json!(since(service.pointer("/metadata/creationTimestamp"))),
        json!(format_labels(spec.get("selector"))),
    ]
}

fn pod_cells(pod: &Value) -> Vec<Value> {
    let containers = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s["restartCount"].as_i64())
        .sum();
    let reason = match str_at(pod, "/status/reason") {
        "" => str_at(pod, "/status/phase"),
        reason => reason,
    };
    let reason = if pod.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else {
        reason
    };
    vec![
        json!(meta_str(pod, "name")),
        json!(format!("{ready}/{containers}")),
        json!(reason),
        json!(restarts),
        json!(since(pod.pointer("/metadata/creationTimestamp"))),
        json!(or_none(str_at(pod, "/status/podIP"), "<none>")),
        json!(or_none(str_at(pod, "/spec/nodeName"), "<none>")),
        json!(or_none(str_at(pod, "/status/nominatedNodeName"), "<none>")),
        json!("<none>"),
    ]
}

/// `printEvent` over the core form of an Event.
fn event_cells(event: &Value) -> Vec<Value> {
    let micro = |pointer: &str| since(event.pointer(pointer));
    let first = match event.get("firstTimestamp").filter(|v| !v.is_null()) {
        Some(t) => since(Some(t)),
        None => micro("/eventTime"),
    };
    let mut last = match event.get("lastTimestamp").filter(|v| !v.is_null()) {
        Some(t) => since(Some(t)),
        None => first.clone(),
    };
    let mut count = event["count"].as_i64().unwrap_or(0);
    if let Some(series) = event.get("series").filter(|s| s.is_object()) {
        last = since(series.get("lastObservedTime"));
        count = series["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = str_at(event, "/involvedObject/kind").to_lowercase();
    let name = str_at(event, "/involvedObject/name");
    let target = if name.is_empty() {
        kind
    } else {
        format!("{kind}/{name}")
    };
    let component = match str_at(event, "/source/component") {
        "" => str_at(event, "/reportingComponent"),
        c => c,
    };
    let host = match str_at(event, "/source/host") {
        "" => str_at(event, "/reportingInstance"),
        h => h,
    };
    let source = if host.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {host}")
    };
    vec![
        json!(last),
        json!(str_at(event, "/type")),
        json!(str_at(event, "/reason")),
        json!(target),
        json!(str_at(event, "/involvedObject/fieldPath")),
        json!(source),
        json!(str_at(event, "/message").trim()),
        json!(first),
        json!(count),
        json!(meta_str(event, "name")),
    ]
}

/// Computes a row's cells.
type Cells = fn(&Value) -> Vec<Value>;

/// The columns of `kind` and a function computing a row's cells.
fn printer(kind: &ResourceKind) -> (Vec<Value>, Cells) {
    match (kind.group, kind.kind) {
        ("", "Node") => (
            vec![
                column("Name", "string", 0),
                column("Status", "string", 0),
                column("Roles", "string", 0),
                column("Age", "string", 0),
                column("Version", "string", 0),
                column("Internal-IP", "string", 1),
                column("External-IP", "string", 1),
                column("OS-Image", "string", 1),
                column("Kernel-Version", "string", 1),
                column("Container-Runtime", "string", 1),
            ],
            node_cells,
        ),
        ("", "Service") => (
            vec![
                column("Name", "string", 0),
                column("Type", "string", 0),
                column("Cluster-IP", "string", 0),
                column("External-IP", "string", 0),
                column("Port(s)", "string", 0),
                column("Age", "string", 0),
                column("Selector", "string", 1),
            ],
            service_cells,
        ),
        ("", "Pod") => (
            vec![
                column("Name", "string", 0),
                column("Ready", "string", 0),
                column("Status", "string", 0),
                column("Restarts", "string", 0),
                column("Age", "string", 0),
                column("IP", "string", 1),
                column("Node", "string", 1),
                column("Nominated Node", "string", 1),
                column("Readiness Gates", "string", 1),
            ],
            pod_cells,
        ),
        (_, "Event") => (
            vec![
                column("Last Seen", "string", 0),
                column("Type", "string", 0),
                column("Reason", "string", 0),
                column("Object", "string", 0),
                column("Subobject", "string", 1),
                column("Source", "string", 1),
                column("Message", "string", 0),
                column("First Seen", "string", 1),
                column("Count", "string", 1),
                column("Name", "string", 1),
            ],
            event_cells,
        ),
        ("", "Namespace") => (
            vec![
                column("Name", "string", 0),
                column("Status", "string", 0),
                column("Age", "string", 0),
            ],
            |ns| {
                vec![
                    json!(meta_str(ns, "name")),
                    json!(str_at(ns, "/status/phase")),
                    json!(since(ns.pointer("/metadata/creationTimestamp"))),
                ]
            },
        ),
        ("coordination.k8s.io", "Lease") => (
            vec![
                column("Name", "string", 0),
                column("Holder", "string", 0),
                column("Age", "string", 0),
            ],
            |lease| {
                vec![
                    json!(meta_str(lease, "name")),
                    json!(str_at(lease, "/spec/holderIdentity")),
                    json!(since(lease.pointer("/metadata/creationTimestamp"))),
                ]
            },
        ),
        _ => (
            vec![column("Name", "string", 0), column("Created At", "date", 0)],
            |object| {
                vec![
                    json!(meta_str(object, "name")),
                    json!(str_at(object, "/metadata/creationTimestamp")),
                ]
            },
        ),
    }
}

/// The Table of `objects` of `kind`; `include_object` is the `includeObject` parameter
/// (`None`, `Object`, default `Metadata`).
pub fn table(
    kind: &ResourceKind,
    objects: &[Value],
    list_metadata: Value,
    include_object: Option<&str>,
) -> Value {
    let (columns, cells) = printer(kind);
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let mut row = json!({ "cells": cells(object) });
            match include_object {
                Some("None") => {}
                Some("Object") => row["object"] = object.clone(),
                _ => {
                    row["object"] = json!({
                        "kind": "PartialObjectMetadata",
                        "apiVersion": "meta.k8s.io/v1",
                        "metadata": object.get("metadata").cloned().unwrap_or_default(),
                    })
                }
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_metadata,
        "columnDefinitions": columns,
        "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;

    #[test]
    fn human_durations_read_like_kubectl() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (47 * 3600, "47h"),
            (50 * 3600, "2d2h"),
            (10 * 86400, "10d"),
            (3 * 365 * 86400, "3y"),
        ];
        for (seconds, text) in cases {
            assert_eq!(human_duration(seconds), text, "{seconds}");
        }
    }

    #[test]
    fn service_and_event_rows_follow_the_printers() {
        let service = json!({
            "metadata": { "name": "web" },
            "spec": { "type": "LoadBalancer", "clusterIPs": ["10.96.0.10"], "selector": { "app": "web" },
                      "ports": [{ "port": 80, "nodePort": 30080, "protocol": "TCP" }, { "port": 53, "protocol": "UDP" }] },
            "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.9" }, { "hostname": "lb.example" }] } },
        });
        let cells = service_cells(&service);
        assert_eq!(cells[3], "203.0.113.9,lb.example");
        assert_eq!(cells[4], "80:30080/TCP,53/UDP");
        assert_eq!(cells[6], "app=web");
        let pending = json!({ "metadata": { "name": "p" }, "spec": { "type": "LoadBalancer" } });
        assert_eq!(service_cells(&pending)[3], "<pending>");

        let event = json!({
            "metadata": { "name": "web.1" }, "type": "Warning", "reason": "SyncLoadBalancerFailed",
            "involvedObject": { "kind": "Service", "name": "web" }, "message": " bad ",
            "source": { "component": "service-controller" }, "count": 3,
        });
        let cells = event_cells(&event);
        assert_eq!(cells[3], "service/web");
        assert_eq!(cells[5], "service-controller");
        assert_eq!(cells[6], "bad");
        assert_eq!(cells[8], 3);
        let t = table(lookup("events").unwrap(), &[event], json!({}), None);
        assert_eq!(t["columnDefinitions"].as_array().unwrap().len(), 10);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }
}

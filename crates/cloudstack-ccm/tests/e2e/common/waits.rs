//! Waiting (always with a timeout) for what the controllers do, and reading the Events
//! they record.

use std::future::Future;
use std::time::Duration;

use kube::api::{Api, ListParams};
use serde_json::Value;

use super::{Harness, POLL, Target, WAIT};

impl Harness {
    /// Timeout of every wait: [`WAIT`] in process, the environment's in remote mode.
    pub fn wait(&self) -> Duration {
        match &self.target {
            Target::InProcess => WAIT,
            Target::Remote(remote) => remote.settings.wait,
        }
    }

    /// Every Event (core/v1 and events.k8s.io/v1) about the object named `name` (its real
    /// name), read through the API (works in both modes).
    pub async fn events_about_object(&self, name: &str) -> Vec<Value> {
        let mut found = Vec::new();
        let core: Api<k8s_openapi::api::core::v1::Event> = Api::all(self.kube.clone());
        let events: Api<k8s_openapi::api::events::v1::Event> = Api::all(self.kube.clone());
        if let Ok(list) = core.list(&ListParams::default()).await {
            found.extend(
                list.items
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok()),
            );
        }
        if let Ok(list) = events.list(&ListParams::default()).await {
            found.extend(
                list.items
                    .iter()
                    .filter_map(|e| serde_json::to_value(e).ok()),
            );
        }
        found.retain(|event| regards(event, name));
        found
    }

    /// Every Event (core/v1 and events.k8s.io/v1) about the object named `name`.
    pub fn events_about(&self, name: &str) -> Vec<Value> {
        events_in(&self.cluster(), name)
    }

    /// Waits (at most [`WAIT`]) for an Event with `reason` about node `name`; returns it.
    pub async fn wait_for_event(&self, name: &str, reason: &str) -> Value {
        if !self.is_remote() {
            return eventually(&format!("an Event {reason} about {name}"), WAIT, || async {
                self.events_about(name)
                    .into_iter()
                    .find(|event| event_reason(event) == Some(reason))
            })
            .await;
        }
        let name = &self.node_name(name);
        eventually(
            &format!("an Event {reason} about {name}"),
            self.wait(),
            || async {
                self.events_about_object(name)
                    .await
                    .into_iter()
                    .find(|event| event_reason(event) == Some(reason))
            },
        )
        .await
    }
}

/// Every Event (core/v1 and events.k8s.io/v1) of `cluster` about the object named `name`.
pub fn events_in(cluster: &fake_apiserver::Cluster, name: &str) -> Vec<Value> {
    cluster
        .events()
        .into_iter()
        .filter(|event| regards(event, name))
        .collect()
}

/// Whether `event` (core/v1 `involvedObject` or events.k8s.io/v1 `regarding`) is about
/// the object named `name`.
fn regards(event: &Value, name: &str) -> bool {
    let regarding = event
        .get("regarding")
        .or_else(|| event.get("involvedObject"));
    regarding
        .and_then(|r| r.get("name"))
        .and_then(Value::as_str)
        == Some(name)
}

/// Polls `probe` until it returns `Some`, at most `timeout`; panics naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let waited = tokio::time::timeout(timeout, async {
        loop {
            if let Some(found) = probe().await {
                return found;
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    waited.unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting for {what}"))
}

/// The `reason` of an Event.
pub fn event_reason(event: &Value) -> Option<&str> {
    event.get("reason").and_then(Value::as_str)
}

/// The note/message of an Event.
pub fn event_note(event: &Value) -> &str {
    event
        .get("note")
        .or_else(|| event.get("message"))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

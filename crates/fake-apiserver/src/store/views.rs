//! Resources served by two API groups over one store: `events.k8s.io/v1` Events are a
//! view of the core v1 Events, as in kube-apiserver, where both versions convert to the
//! one internal `core.Event` kept in etcd (`pkg/apis/events/v1/conversion.go`:
//! `Convert_v1_Event_To_core_Event` and `Convert_core_Event_To_v1_Event`). An Event
//! posted through either API is read, listed, watched, patched and deleted through both.
//!
//! Field mapping (events.k8s.io/v1 ↔ core/v1): `regarding` ↔ `involvedObject`, `note` ↔
//! `message`, `deprecatedSource` ↔ `source`, `deprecatedFirstTimestamp` ↔
//! `firstTimestamp`, `deprecatedLastTimestamp` ↔ `lastTimestamp`, `deprecatedCount` ↔
//! `count`, `reportingController` ↔ `reportingComponent`; `eventTime`, `series`,
//! `reportingInstance`, `action`, `reason`, `related` and `type` keep their names.

use std::borrow::Cow;

use serde_json::{Map, Value, json};

use crate::resources::{self, ResourceKind};

/// `(events.k8s.io/v1 name, core/v1 name)` of the fields that are renamed.
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
];

fn is_events_v1(kind: &ResourceKind) -> bool {
    kind.group == "events.k8s.io" && kind.kind == "Event"
}

/// The resource whose key space stores objects of `kind` (core Events for events.k8s.io).
pub fn storage_kind(kind: &'static ResourceKind) -> &'static ResourceKind {
    if is_events_v1(kind) {
        resources::find("", "v1", "events").expect("core events are served")
    } else {
        kind
    }
}

/// Whether objects of `a` and `b` live in the same key space.
pub fn same_storage(a: &'static ResourceKind, b: &'static ResourceKind) -> bool {
    std::ptr::eq(storage_kind(a), storage_kind(b))
}

fn rename(object: &Value, from_to: impl Iterator<Item = (&'static str, &'static str)>) -> Value {
    let Value::Object(map) = object else {
        return object.clone();
    };
    let mut out: Map<String, Value> = map.clone();
    for (from, to) in from_to {
        out.remove(to);
        if let Some(value) = map.get(from) {
            out.remove(from);
            out.insert(to.to_string(), value.clone());
        }
    }
    Value::Object(out)
}

/// The stored object as clients of `kind` see it.
pub fn to_view<'a>(kind: &'static ResourceKind, stored: &'a Value) -> Cow<'a, Value> {
    if !is_events_v1(kind) {
        return Cow::Borrowed(stored);
    }
    let mut view = rename(stored, EVENT_FIELDS.iter().map(|(v1, core)| (*core, *v1)));
    view["apiVersion"] = json!(kind.api_version());
    view["kind"] = json!(kind.kind);
    Cow::Owned(view)
}

/// An object written through `kind` in the form it is stored in.
pub fn to_storage(kind: &'static ResourceKind, written: Value) -> Value {
    if !is_events_v1(kind) {
        return written;
    }
    let storage = storage_kind(kind);
    let mut stored = rename(&written, EVENT_FIELDS.iter().copied());
    stored["apiVersion"] = json!(storage.api_version());
    stored["kind"] = json!(storage.kind);
    if stored.get("involvedObject").is_none() {
        // core/v1 `involvedObject` is a required struct: always present on the wire.
        stored["involvedObject"] = json!({});
    }
    stored
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_events_v1_event_round_trips_through_the_core_form() {
        let v1 = resources::find("events.k8s.io", "v1", "events").unwrap();
        let written = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": { "name": "web.1", "namespace": "default" },
            "regarding": { "kind": "Service", "name": "web" },
            "note": "Ensured load balancer", "reason": "EnsuredLoadBalancer", "type": "Normal",
            "reportingController": "service-controller", "reportingInstance": "ccm-1",
            "action": "EnsureLoadBalancer", "eventTime": "2026-01-01T00:00:00.000000Z",
            "series": { "count": 3, "lastObservedTime": "2026-01-01T00:01:00.000000Z" },
            "deprecatedCount": 3,
        });
        let stored = to_storage(v1, written.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "web");
        assert_eq!(stored["message"], "Ensured load balancer");
        assert_eq!(stored["reportingComponent"], "service-controller");
        assert_eq!(stored["count"], 3);
        assert_eq!(stored["series"]["count"], 3);
        assert!(stored.get("note").is_none() && stored.get("regarding").is_none());
        assert_eq!(to_view(v1, &stored).into_owned(), written);
    }

    #[test]
    fn core_events_are_their_own_storage() {
        let core = resources::find("", "v1", "events").unwrap();
        let v1 = resources::find("events.k8s.io", "v1", "events").unwrap();
        assert!(std::ptr::eq(storage_kind(v1), core));
        assert!(same_storage(core, v1));
        let event = json!({ "message": "m", "involvedObject": { "name": "n" } });
        assert_eq!(to_view(core, &event).into_owned(), event);
        assert_eq!(to_view(v1, &event)["note"], "m");
    }
}

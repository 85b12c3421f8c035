//! Event validation (`pkg/apis/core/validation/events.go`, as in v1.33). Events are checked
//! in their stored form (core/v1 field names); error paths name the internal fields
//! (`involvedObject`, `message`, `count`, ...), except `reportingController`, which a
//! core/v1 request calls `reportingComponent`.
//!
//! * `legacyValidateEvent`, which every create and update passes, whatever the API:
//!   - without `eventTime`, the Event's namespace must be its object's, or `default` (or
//!     none) for an object without a namespace such as a Node;
//!   - with `eventTime`, an object without a namespace may only be reported in `default`
//!     or `kube-system`; `reportingController` is required and a qualified name,
//!     `reportingInstance`, `action` and `reason` are required, at most 128 bytes each,
//!     and the message at most 1024;
//!   - the namespace is a DNS subdomain.
//! * `ValidateEventCreate` through events.k8s.io/v1 adds: `metadata.name` (and
//!   `generateName`) a DNS subdomain, `eventTime` required, `type` `Normal` or `Warning`,
//!   the deprecated `firstTimestamp`, `lastTimestamp`, `count` and `source` unset, and a
//!   `series` with `count` at least 2 and a `lastObservedTime`.
//! * `ValidateEventUpdate` through events.k8s.io/v1 adds: a changed `series` is checked as
//!   on create, and every other field is immutable (`eventTime` to the microsecond).
//!
//! core/v1 requests get the legacy checks only ("for backwards compatibility"), which is
//! why the controllers' own Events, posted without `eventTime` as client-go's
//! `tools/record` posts them, pass.

use serde_json::Value;

use super::{FieldError, dns1123_subdomain_errors, qualified_name_errors, quote, str_at};
use crate::object::meta_str;
use crate::resources::ResourceKind;

/// `ReportingInstanceLengthLimit`, `ActionLengthLimit`, `ReasonLengthLimit`.
const SHORT_FIELD_LIMIT: usize = 128;
/// `NoteLengthLimit`.
const NOTE_LIMIT: usize = 1024;

/// The API an Event was written through (`requestGroupVersion` of the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestVersion {
    /// core/v1.
    CoreV1,
    /// events.k8s.io/v1.
    EventsV1,
}

impl RequestVersion {
    /// The version of requests sent to `kind`.
    pub fn of(kind: &ResourceKind) -> Self {
        if kind.group == "events.k8s.io" {
            Self::EventsV1
        } else {
            Self::CoreV1
        }
    }
}

/// A timestamp field; `None` for Go's zero time (missing, null, empty or year 1).
fn time_of(event: &Value, field: &str) -> Option<Result<jiff::Timestamp, String>> {
    let text = event.get(field).and_then(Value::as_str)?;
    if text.is_empty() {
        return None;
    }
    match text.parse::<jiff::Timestamp>() {
        Ok(t) if t == zero_time() => None,
        Ok(t) => Some(Ok(t)),
        Err(_) => Some(Err(text.to_string())),
    }
}

fn zero_time() -> jiff::Timestamp {
    "0001-01-01T00:00:00Z"
        .parse()
        .expect("year 1 is a valid timestamp")
}

fn time_set(event: &Value, field: &str) -> bool {
    time_of(event, field).is_some()
}

/// A timestamp as `ErrorBody` prints a `metav1.Time` (`time.Time.String`, UTC).
fn go_time(time: Option<Result<jiff::Timestamp, String>>) -> String {
    match time {
        Some(Err(text)) => text,
        Some(Ok(t)) => {
            let nanos = t.subsec_nanosecond();
            let fraction = if nanos == 0 {
                String::new()
            } else {
                format!(".{nanos:09}").trim_end_matches('0').to_string()
            };
            format!("{}{fraction} +0000 UTC", t.strftime("%Y-%m-%d %H:%M:%S"))
        }
        None => go_time(Some(Ok(zero_time()))),
    }
}

/// An `ObjectReference` as `ErrorBody` prints the internal struct (`%#v`).
fn go_reference(reference: &Value) -> String {
    let printed: Vec<String> = REFERENCE_FIELDS
        .iter()
        .map(|(go, json)| format!("{go}:{}", quote(str_at(reference, &format!("/{json}")))))
        .collect();
    format!("core.ObjectReference{{{}}}", printed.join(", "))
}

/// The fields of `core.ObjectReference`, in order: Go name, JSON name.
const REFERENCE_FIELDS: &[(&str, &str)] = &[
    ("Kind", "kind"),
    ("Namespace", "namespace"),
    ("Name", "name"),
    ("UID", "uid"),
    ("APIVersion", "apiVersion"),
    ("ResourceVersion", "resourceVersion"),
    ("FieldPath", "fieldPath"),
];

/// `legacyValidateEvent`.
fn legacy(event: &Value, version: RequestVersion) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let namespace = meta_str(event, "namespace");
    let involved = str_at(event, "/involvedObject/namespace");
    let mismatch = || {
        FieldError::invalid(
            "involvedObject.namespace",
            &quote(involved),
            "does not match event.namespace",
        )
    };
    if !time_set(event, "eventTime") {
        let matches = if involved.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved
        };
        if !matches {
            errors.push(mismatch());
        }
    } else {
        if involved.is_empty() && namespace != "default" && namespace != "kube-system" {
            errors.push(mismatch());
        }
        let controller_field = match version {
            RequestVersion::CoreV1 => "reportingComponent",
            RequestVersion::EventsV1 => "reportingController",
        };
        let controller = str_at(event, "/reportingComponent");
        if controller.is_empty() {
            errors.push(FieldError::required(controller_field, ""));
        }
        errors.extend(
            qualified_name_errors(controller)
                .iter()
                .map(|msg| FieldError::invalid(controller_field, &quote(controller), msg)),
        );
        for field in ["reportingInstance", "action", "reason"] {
            let value = str_at(event, &format!("/{field}"));
            if value.is_empty() {
                errors.push(FieldError::required(field, ""));
            }
            if value.len() > SHORT_FIELD_LIMIT {
                errors.push(FieldError::invalid(
                    field,
                    &quote(""),
                    &format!("can have at most {SHORT_FIELD_LIMIT} characters"),
                ));
            }
        }
        if str_at(event, "/message").len() > NOTE_LIMIT {
            errors.push(FieldError::invalid(
                "message",
                &quote(""),
                &format!("can have at most {NOTE_LIMIT} characters"),
            ));
        }
    }
    errors.extend(
        dns1123_subdomain_errors(namespace)
            .iter()
            .map(|msg| FieldError::invalid("namespace", &quote(namespace), msg)),
    );
    errors
}

/// `validateV1EventSeries`.
fn series(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(series) = present(event, "series") else {
        return errors;
    };
    if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        errors.push(FieldError::invalid(
            "series.count",
            &quote(""),
            "should be at least 2",
        ));
    }
    if !time_set(series, "lastObservedTime") {
        errors.push(FieldError::required("series.lastObservedTime", ""));
    }
    errors
}

/// `NameIsDNSSubdomain` on `metadata.generateName` (its trailing dash masked) and
/// `metadata.name`, as `ValidateObjectMeta` applies it.
fn object_meta(event: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let generate_name = meta_str(event, "generateName");
    if !generate_name.is_empty() {
        let masked = match generate_name.strip_suffix('-') {
            Some(rest) if generate_name.len() > 1 => format!("{rest}a"),
            _ => generate_name.to_string(),
        };
        errors.extend(
            dns1123_subdomain_errors(&masked).iter().map(|msg| {
                FieldError::invalid("metadata.generateName", &quote(generate_name), msg)
            }),
        );
    }
    let name = meta_str(event, "name");
    errors.extend(
        dns1123_subdomain_errors(name)
            .iter()
            .map(|msg| FieldError::invalid("metadata.name", &quote(name), msg)),
    );
    errors
}

/// `ValidateEventCreate`.
pub fn validate_create(event: &Value, version: RequestVersion) -> Vec<FieldError> {
    let mut errors = legacy(event, version);
    if version == RequestVersion::CoreV1 {
        return errors;
    }
    errors.extend(object_meta(event));
    errors.extend(series(event));
    if !time_set(event, "eventTime") {
        errors.push(FieldError::required("eventTime", ""));
    }
    let event_type = str_at(event, "/type");
    if event_type != "Normal" && event_type != "Warning" {
        errors.push(FieldError::invalid(
            "type",
            &quote(""),
            &format!("has invalid value: {event_type}"),
        ));
    }
    for field in ["firstTimestamp", "lastTimestamp"] {
        if time_set(event, field) {
            errors.push(FieldError::invalid(field, &quote(""), "needs to be unset"));
        }
    }
    if event.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        errors.push(FieldError::invalid(
            "count",
            &quote(""),
            "needs to be unset",
        ));
    }
    if !str_at(event, "/source/component").is_empty() || !str_at(event, "/source/host").is_empty() {
        errors.push(FieldError::invalid(
            "source",
            &quote(""),
            "needs to be unset",
        ));
    }
    errors
}

/// A field that is set (not missing or null).
fn present<'a>(event: &'a Value, name: &str) -> Option<&'a Value> {
    event.get(name).filter(|v| !v.is_null())
}

/// `ValidateImmutableField` for one field: its new value printed as `ErrorBody` prints it
/// when it differs from the old one.
fn immutable(
    errors: &mut Vec<FieldError>,
    field: &str,
    changed: bool,
    new_value: impl FnOnce() -> String,
) {
    if changed {
        errors.push(FieldError::invalid(
            field,
            &new_value(),
            "field is immutable",
        ));
    }
}

/// `ValidateEventUpdate`.
pub fn validate_update(new: &Value, old: &Value, version: RequestVersion) -> Vec<FieldError> {
    let mut errors = legacy(new, version);
    if version == RequestVersion::CoreV1 {
        return errors;
    }
    let null = Value::Null;
    if present(new, "series") != present(old, "series") {
        errors.extend(series(new));
    }
    // Missing strings are Go's "".
    let same_reference = |name: &str| match (present(new, name), present(old, name)) {
        (None, None) => true,
        (Some(a), Some(b)) => REFERENCE_FIELDS.iter().all(|(_, f)| {
            let pointer = format!("/{f}");
            str_at(a, &pointer) == str_at(b, &pointer)
        }),
        _ => false,
    };
    let same_string = |pointer: &str| str_at(new, pointer) == str_at(old, pointer);
    let string = |pointer: &str| quote(str_at(new, pointer));
    let same_time = |name: &str| time_of(new, name) == time_of(old, name);
    let count = |event: &Value| event.get("count").and_then(Value::as_i64).unwrap_or(0);

    // involvedObject is a struct (missing: its zero value), related a pointer (nil).
    immutable(
        &mut errors,
        "involvedObject",
        !same_reference("involvedObject"),
        || go_reference(present(new, "involvedObject").unwrap_or(&null)),
    );
    immutable(&mut errors, "reason", !same_string("/reason"), || {
        string("/reason")
    });
    immutable(&mut errors, "message", !same_string("/message"), || {
        string("/message")
    });
    immutable(
        &mut errors,
        "source",
        !same_string("/source/component") || !same_string("/source/host"),
        || {
            format!(
                "core.EventSource{{Component:{}, Host:{}}}",
                string("/source/component"),
                string("/source/host")
            )
        },
    );
    immutable(
        &mut errors,
        "firstTimestamp",
        !same_time("firstTimestamp"),
        || go_time(time_of(new, "firstTimestamp")),
    );
    immutable(
        &mut errors,
        "lastTimestamp",
        !same_time("lastTimestamp"),
        || go_time(time_of(new, "lastTimestamp")),
    );
    immutable(&mut errors, "count", count(new) != count(old), || {
        count(new).to_string()
    });
    // `reason` is checked twice upstream; both causes are reported.
    immutable(&mut errors, "reason", !same_string("/reason"), || {
        string("/reason")
    });
    immutable(&mut errors, "type", !same_string("/type"), || {
        string("/type")
    });
    let to_micros = |t: Option<Result<jiff::Timestamp, String>>| {
        t.map(|t| {
            t.map(|t| {
                t.round(
                    jiff::TimestampRound::new()
                        .smallest(jiff::Unit::Microsecond)
                        .mode(jiff::RoundMode::Trunc),
                )
                .unwrap_or(t)
            })
        })
    };
    immutable(
        &mut errors,
        "eventTime",
        to_micros(time_of(new, "eventTime")) != to_micros(time_of(old, "eventTime")),
        || go_time(time_of(new, "eventTime")),
    );
    immutable(&mut errors, "action", !same_string("/action"), || {
        string("/action")
    });
    immutable(&mut errors, "related", !same_reference("related"), || {
        present(new, "related").map_or_else(|| "null".to_string(), go_reference)
    });
    immutable(
        &mut errors,
        "reportingController",
        !same_string("/reportingComponent"),
        || string("/reportingComponent"),
    );
    immutable(
        &mut errors,
        "reportingInstance",
        !same_string("/reportingInstance"),
        || string("/reportingInstance"),
    );
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(errors: &[FieldError]) -> Vec<String> {
        errors.iter().map(FieldError::message).collect()
    }

    fn new_event() -> Value {
        json!({
            "metadata": { "name": "web.1", "namespace": "default" },
            "involvedObject": { "kind": "Service", "namespace": "default", "name": "web" },
            "eventTime": "2026-01-01T00:00:00.123456Z",
            "reason": "EnsuredLoadBalancer", "action": "Ensure", "type": "Normal",
            "reportingComponent": "service-controller", "reportingInstance": "ccm-1",
        })
    }

    #[test]
    fn a_complete_new_event_passes_both_apis() {
        for version in [RequestVersion::CoreV1, RequestVersion::EventsV1] {
            assert!(
                validate_create(&new_event(), version).is_empty(),
                "{version:?}"
            );
        }
    }

    #[test]
    fn limits_and_qualified_names_are_checked_with_event_time() {
        let mut event = new_event();
        event["action"] = json!("a".repeat(129));
        event["message"] = json!("m".repeat(1025));
        event["reportingComponent"] = json!("bad name");
        assert_eq!(
            messages(&validate_create(&event, RequestVersion::CoreV1)),
            [
                format!(
                    "reportingComponent: Invalid value: \"bad name\": {}",
                    qualified_name_errors("bad name")[0]
                ),
                "action: Invalid value: \"\": can have at most 128 characters".to_string(),
                "message: Invalid value: \"\": can have at most 1024 characters".to_string(),
            ]
        );
    }

    #[test]
    fn events_v1_creates_are_strict() {
        let mut event = new_event();
        event["metadata"]["name"] = json!("Web.1");
        event["type"] = json!("Info");
        event["count"] = json!(1);
        event["firstTimestamp"] = json!("2026-01-01T00:00:00Z");
        event["source"] = json!({ "component": "service-controller" });
        event["series"] = json!({ "count": 1 });
        assert!(validate_create(&event, RequestVersion::CoreV1).is_empty());
        assert_eq!(
            messages(&validate_create(&event, RequestVersion::EventsV1)),
            [
                format!(
                    "metadata.name: Invalid value: \"Web.1\": {}",
                    dns1123_subdomain_errors("Web.1")[0]
                ),
                "series.count: Invalid value: \"\": should be at least 2".to_string(),
                "series.lastObservedTime: Required value".to_string(),
                "type: Invalid value: \"\": has invalid value: Info".to_string(),
                "firstTimestamp: Invalid value: \"\": needs to be unset".to_string(),
                "count: Invalid value: \"\": needs to be unset".to_string(),
                "source: Invalid value: \"\": needs to be unset".to_string(),
            ]
        );
    }

    #[test]
    fn events_v1_updates_keep_every_field_but_the_series() {
        let old = new_event();
        let mut new = old.clone();
        new["series"] = json!({ "count": 2, "lastObservedTime": "2026-01-01T00:01:00.000000Z" });
        new["eventTime"] = json!("2026-01-01T00:00:00.123456789Z");
        assert!(validate_update(&new, &old, RequestVersion::EventsV1).is_empty());
        new["message"] = json!("changed");
        new["count"] = json!(3);
        new["eventTime"] = json!("2026-01-01T00:00:01.5Z");
        new["related"] = json!({ "kind": "Node", "name": "n1" });
        assert!(validate_update(&new, &old, RequestVersion::CoreV1).is_empty());
        assert_eq!(
            messages(&validate_update(&new, &old, RequestVersion::EventsV1)),
            [
                "message: Invalid value: \"changed\": field is immutable",
                "count: Invalid value: 3: field is immutable",
                "eventTime: Invalid value: 2026-01-01 00:00:01.5 +0000 UTC: field is immutable",
                "related: Invalid value: core.ObjectReference{Kind:\"Node\", Namespace:\"\", Name:\"n1\", UID:\"\", APIVersion:\"\", ResourceVersion:\"\", FieldPath:\"\"}: field is immutable",
            ]
        );
    }
}

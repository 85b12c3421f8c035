//! Event validation (`pkg/apis/core/validation/events.go`): `legacyValidateEvent`, which
//! every Event create and update passes.
//!
//! Events are checked in their stored form (core/v1 field names).
//!
//! * Without `eventTime`, the Event's namespace must be its object's, or `default` (or
//!   none) for an object without a namespace such as a Node.

use serde_json::Value;

use super::{FieldError, quote, str_at};
use crate::object::meta_str;
use crate::resources::ResourceKind;

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

/// Whether a timestamp field is set (not missing, null or empty).
fn time_set(event: &Value, field: &str) -> bool {
    event
        .get(field)
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty())
}

/// `legacyValidateEvent`.
fn legacy(event: &Value, _version: RequestVersion) -> Vec<FieldError> {
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
    }
    errors
}

/// `ValidateEventCreate`.
pub fn validate_create(event: &Value, version: RequestVersion) -> Vec<FieldError> {
    legacy(event, version)
}

/// `ValidateEventUpdate`.
pub fn validate_update(new: &Value, _old: &Value, version: RequestVersion) -> Vec<FieldError> {
    legacy(new, version)
}

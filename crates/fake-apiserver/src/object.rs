//! Small accessors for the `metadata` of objects stored as `serde_json::Value`.

use serde_json::{Map, Value};

/// `metadata`, created as an empty object when missing.
pub fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let map = object.as_object_mut().expect("object ensured above");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("metadata ensured above")
}

/// A string field of `metadata` (`""` when missing).
pub fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.finalizers` as strings.
pub fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(|f| f.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(object: &Value) -> bool {
    !meta_str(object, "deletionTimestamp").is_empty()
}

/// Sets `metadata.resourceVersion`.
pub fn set_resource_version(object: &mut Value, rv: u64) {
    meta_mut(object).insert("resourceVersion".into(), Value::String(rv.to_string()));
}

/// The current time as the API server formats timestamps (RFC 3339, whole seconds, UTC).
pub fn now_timestamp() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

//! PATCH bodies: JSON patch (RFC 6902, including `test`), JSON merge patch (RFC 7386) and
//! strategic merge patch with the real patch strategies of the fields a cloud controller
//! manager touches.

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::resources::ResourceKind;

/// The three patch flavours, chosen by the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
}

impl PatchType {
    /// The patch type for a `Content-Type` header value.
    pub fn from_content_type(content_type: &str) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or("").trim();
        match media {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" => Ok(Self::Strategic),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// How a list field merges under a strategic merge patch (`patchStrategy`/`patchMergeKey`
/// in the Kubernetes API types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListStrategy {
    /// Atomic: the patch's list replaces the original (the default, and e.g. `spec.taints`
    /// and `status.loadBalancer.ingress`).
    Replace,
    /// Items are merged by the value of this key.
    MergeByKey(&'static str),
    /// A set of scalars: union (`metadata.finalizers`, `spec.podCIDRs`).
    MergeSet,
}

fn list_strategy(kind: &ResourceKind, path: &str) -> ListStrategy {
    match (kind.kind, path) {
        (_, "metadata.finalizers") => ListStrategy::MergeSet,
        (_, "metadata.ownerReferences") => ListStrategy::MergeByKey("uid"),
        (_, "status.conditions") => ListStrategy::MergeByKey("type"),
        ("Node", "status.addresses") => ListStrategy::MergeByKey("type"),
        ("Node", "spec.podCIDRs") => ListStrategy::MergeSet,
        ("Service", "spec.ports") => ListStrategy::MergeByKey("port"),
        ("Pod", "spec.containers" | "spec.initContainers") => ListStrategy::MergeByKey("name"),
        _ => ListStrategy::Replace,
    }
}

/// Applies a patch body to `target`, returning the patched object.
pub fn apply(
    kind: &ResourceKind,
    patch_type: PatchType,
    target: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mut doc = target.clone();
    match patch_type {
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            apply_json_patch(&mut doc, &ops)?;
        }
        PatchType::Merge => {
            let patch = parse_object(body)?;
            json_patch::merge(&mut doc, &patch);
        }
        PatchType::Strategic => {
            let patch = parse_object(body)?;
            doc = strategic_merge(kind, Some(doc), &patch, "").unwrap_or(Value::Null);
        }
    }
    Ok(doc)
}

/// Applies JSON patch operations one by one. Like the real server (evanphx/json-patch), a
/// `test` for `null` succeeds when the path is missing: kube-runtime's `finalizer()` relies
/// on it when an object has no finalizers yet.
fn apply_json_patch(doc: &mut Value, ops: &json_patch::Patch) -> Result<(), ApiError> {
    for (index, op) in ops.0.iter().enumerate() {
        if let json_patch::PatchOperation::Test(test) = op
            && test.value.is_null()
            && doc.pointer(test.path.as_str()).is_none_or(Value::is_null)
        {
            continue;
        }
        json_patch::patch(doc, std::slice::from_ref(op)).map_err(|e| ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(
                "the server rejected our request due to an error in our request: operation {index}: {e}"
            ),
            details: None,
        })?;
    }
    Ok(())
}

fn parse_object(body: &[u8]) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid patch body: {e}")))?;
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "invalid patch body: a merge patch must be a JSON object",
        ));
    }
    Ok(value)
}

fn child_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Merges `patch` into `original`; `None` means the value is deleted (`$patch: delete`).
fn strategic_merge(
    kind: &ResourceKind,
    original: Option<Value>,
    patch: &Value,
    path: &str,
) -> Option<Value> {
    let Value::Object(patch_map) = patch else {
        return Some(patch.clone());
    };
    match patch_map.get("$patch").and_then(Value::as_str) {
        Some("delete") => return None,
        Some("replace") => {
            let mut replaced = patch_map.clone();
            replaced.remove("$patch");
            return Some(Value::Object(replaced));
        }
        _ => {}
    }
    let mut result = match original {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    if let Some(Value::Array(keep)) = patch_map.get("$retainKeys") {
        result.retain(|k, _| keep.iter().any(|kept| kept.as_str() == Some(k)));
    }
    for (key, value) in patch_map {
        if key == "$patch" || key == "$retainKeys" || key.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(remove)) =
                (result.get_mut(field), value)
            {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        let path = child_path(path, key);
        let merged = match value {
            Value::Null => None,
            Value::Object(_) => strategic_merge(kind, result.remove(key), value, &path),
            Value::Array(items) => Some(merge_list(kind, result.remove(key), items, &path)),
            scalar => Some(scalar.clone()),
        };
        match merged {
            Some(v) => {
                result.insert(key.clone(), v);
            }
            None => {
                result.remove(key);
            }
        }
    }
    Some(Value::Object(result))
}

fn merge_list(kind: &ResourceKind, original: Option<Value>, patch: &[Value], path: &str) -> Value {
    let replace_directive = patch
        .iter()
        .any(|item| item.get("$patch").and_then(Value::as_str) == Some("replace"));
    let strategy = list_strategy(kind, path);
    let mut items = match original {
        Some(Value::Array(items)) if strategy != ListStrategy::Replace && !replace_directive => {
            items
        }
        _ => {
            let kept = patch
                .iter()
                .filter(|item| item.get("$patch").is_none())
                .cloned()
                .collect();
            return Value::Array(kept);
        }
    };
    match strategy {
        ListStrategy::Replace => unreachable!("handled above"),
        ListStrategy::MergeSet => {
            for item in patch {
                if !items.contains(item) {
                    items.push(item.clone());
                }
            }
        }
        ListStrategy::MergeByKey(merge_key) => {
            for item in patch {
                let key_value = item.get(merge_key).cloned();
                let position = key_value
                    .as_ref()
                    .and_then(|kv| items.iter().position(|o| o.get(merge_key) == Some(kv)));
                let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                match (position, delete) {
                    (Some(i), true) => {
                        items.remove(i);
                    }
                    (None, true) => {}
                    (Some(i), false) => {
                        let existing = items.remove(i);
                        if let Some(merged) = strategic_merge(kind, Some(existing), item, path) {
                            items.insert(i, merged);
                        }
                    }
                    (None, false) => {
                        if let Some(merged) = strategic_merge(kind, None, item, path) {
                            items.push(merged);
                        }
                    }
                }
            }
        }
    }
    Value::Array(items)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::lookup;
    use serde_json::json;

    fn smp(resource: &str, original: Value, patch: Value) -> Value {
        apply(
            lookup(resource).unwrap(),
            PatchType::Strategic,
            &original,
            patch.to_string().as_bytes(),
        )
        .unwrap()
    }

    #[test]
    fn node_addresses_merge_by_type() {
        let node = json!({ "status": { "addresses": [
            { "type": "InternalIP", "address": "10.0.0.1" },
            { "type": "Hostname", "address": "n1" } ] } });
        let patched = smp(
            "nodes",
            node,
            json!({ "status": { "addresses": [
                { "type": "InternalIP", "address": "10.0.0.2" },
                { "type": "ExternalIP", "address": "1.2.3.4" } ] } }),
        );
        assert_eq!(
            patched["status"]["addresses"],
            json!([
                { "type": "InternalIP", "address": "10.0.0.2" },
                { "type": "Hostname", "address": "n1" },
                { "type": "ExternalIP", "address": "1.2.3.4" }
            ])
        );
    }

    #[test]
    fn node_taints_are_atomic_like_the_real_api() {
        let node = json!({ "spec": { "taints": [
            { "key": "a", "effect": "NoSchedule" },
            { "key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule" } ] } });
        let patched = smp(
            "nodes",
            node,
            json!({ "spec": { "taints": [{ "key": "a", "effect": "NoSchedule" }] } }),
        );
        assert_eq!(
            patched["spec"]["taints"],
            json!([{ "key": "a", "effect": "NoSchedule" }])
        );
    }

    #[test]
    fn finalizers_union_and_delete_from_primitive_list() {
        let obj =
            json!({ "metadata": { "finalizers": ["a", "b"], "labels": { "x": "1", "y": "2" } } });
        let patched = smp(
            "services",
            obj,
            json!({ "metadata": { "finalizers": ["c", "a"], "labels": { "x": null, "z": "3" } } }),
        );
        assert_eq!(patched["metadata"]["finalizers"], json!(["a", "b", "c"]));
        assert_eq!(patched["metadata"]["labels"], json!({ "y": "2", "z": "3" }));
        let removed = smp(
            "services",
            patched,
            json!({ "metadata": { "$deleteFromPrimitiveList/finalizers": ["a"] } }),
        );
        assert_eq!(removed["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn conditions_merge_by_type_and_patch_delete_removes() {
        let obj = json!({ "status": { "conditions": [
            { "type": "Ready", "status": "False" }, { "type": "DiskPressure", "status": "False" } ] } });
        let patched = smp(
            "nodes",
            obj,
            json!({ "status": { "conditions": [
                { "type": "Ready", "status": "True" },
                { "type": "DiskPressure", "$patch": "delete" } ] } }),
        );
        assert_eq!(
            patched["status"]["conditions"],
            json!([{ "type": "Ready", "status": "True" }])
        );
    }

    #[test]
    fn load_balancer_ingress_is_replaced() {
        let svc = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "1.1.1.1" }, { "ip": "2.2.2.2" }] } } });
        let patched = smp(
            "services",
            svc,
            json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "3.3.3.3" }] } } }),
        );
        assert_eq!(
            patched["status"]["loadBalancer"]["ingress"],
            json!([{ "ip": "3.3.3.3" }])
        );
    }

    #[test]
    fn json_patch_test_failure_is_422() {
        let kind = lookup("services").unwrap();
        let ops = json!([{ "op": "test", "path": "/metadata/finalizers", "value": ["x"] },
                          { "op": "remove", "path": "/metadata/finalizers/0" }]);
        let err = apply(
            kind,
            PatchType::Json,
            &json!({ "metadata": { "finalizers": ["y"] } }),
            ops.to_string().as_bytes(),
        )
        .unwrap_err();
        assert_eq!(err.code, 422);
    }

    #[test]
    fn json_patch_test_for_null_passes_on_a_missing_path() {
        let kind = lookup("services").unwrap();
        let ops = json!([{ "op": "test", "path": "/metadata/finalizers", "value": null },
                          { "op": "add", "path": "/metadata/finalizers", "value": ["f"] }]);
        let patched = apply(
            kind,
            PatchType::Json,
            &json!({ "metadata": { "name": "a" } }),
            ops.to_string().as_bytes(),
        )
        .unwrap();
        assert_eq!(patched["metadata"]["finalizers"], json!(["f"]));
    }

    #[test]
    fn unknown_content_type_is_415() {
        assert_eq!(
            PatchType::from_content_type("application/apply-patch+yaml")
                .unwrap_err()
                .code,
            415
        );
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
    }
}

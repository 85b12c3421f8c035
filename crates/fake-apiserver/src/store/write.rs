//! Writes: create, replace (main resource or `/status`), patch and delete, with the real
//! server's metadata handling, optimistic concurrency and finalizer semantics.

use serde_json::{Value, json};

use super::defaults::{apply_defaults, default_decoded, reset_status_on_create};
use super::views::{storage_kind, to_storage, to_view};
use super::{EventType, State, Store, key};
use crate::error::ApiError;
use crate::object::{finalizers, is_deleting, meta_mut, meta_str, now_timestamp};
use crate::patch::{self, PatchType};
use crate::resources::{self, ResourceKind};
use crate::validation::{self, ErrorType, FieldError, quote};

/// Metadata the server owns: kept from the stored object on every update.
const SERVER_OWNED_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "namespace",
];

/// The result of a delete.
#[derive(Debug, Clone, PartialEq)]
pub enum DeleteOutcome {
    /// The object is gone; this was its last state.
    Deleted(Value),
    /// The object has finalizers: it is marked with `deletionTimestamp` and stays.
    Pending(Value),
}

fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    uuid::Uuid::new_v4()
        .as_bytes()
        .iter()
        .take(5)
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect()
}

/// Checks and fills `apiVersion` and `kind`.
fn check_type(kind: &ResourceKind, object: &mut Value) -> Result<(), ApiError> {
    let expected_version = kind.api_version();
    for (field, expected) in [
        ("apiVersion", expected_version.as_str()),
        ("kind", kind.kind),
    ] {
        match object.get(field).and_then(Value::as_str) {
            None | Some("") => object[field] = json!(expected),
            Some(given) if given == expected => {}
            Some(given) => {
                return Err(ApiError::bad_request(format!(
                    "the {field} of the provided object ({given}) does not match the {field} served at this path ({expected})"
                )));
            }
        }
    }
    Ok(())
}

/// Checks the namespace in the body against the URL and fills it.
fn check_namespace(
    kind: &ResourceKind,
    object: &mut Value,
    namespace: Option<&str>,
) -> Result<(), ApiError> {
    let meta = meta_mut(object);
    if !kind.namespaced {
        meta.remove("namespace");
        return Ok(());
    }
    let url_ns = namespace.unwrap_or("");
    let body_ns = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
    if !body_ns.is_empty() && !url_ns.is_empty() && body_ns != url_ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let ns = if url_ns.is_empty() { body_ns } else { url_ns }.to_string();
    if ns.is_empty() {
        return Err(ApiError::bad_request(format!(
            "a namespace is required to create {}",
            kind.plural
        )));
    }
    meta.insert("namespace".into(), json!(ns));
    Ok(())
}

fn spec_of(object: &Value) -> Option<&Value> {
    object.get("spec")
}

impl Store {
    /// Creates an object (`POST`).
    pub fn create(
        &self,
        kind: &'static ResourceKind,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        check_type(kind, &mut object)?;
        check_namespace(kind, &mut object, namespace)?;
        let object = to_storage(kind, object);
        let created = self.lock().create(kind, object)?;
        Ok(to_view(kind, &created).into_owned())
    }

    /// Replaces an object (`PUT`), or only its status when `status_only`.
    pub fn replace(
        &self,
        kind: &'static ResourceKind,
        namespace: Option<&str>,
        name: &str,
        mut object: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        check_type(kind, &mut object)?;
        check_namespace(kind, &mut object, namespace)?;
        let body_name = meta_str(&object, "name").to_string();
        if body_name.is_empty() {
            meta_mut(&mut object).insert("name".into(), json!(name));
        } else if body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let mut object = to_storage(kind, object);
        let mut state = self.lock();
        let ns = meta_str(&object, "namespace").to_string();
        let stored = match state.objects.get(&key(kind, &ns, name)).cloned() {
            Some(existing) => state.update(kind, existing, object, status_only)?,
            None if kind.create_on_update && !status_only => {
                meta_mut(&mut object).remove("resourceVersion");
                state.create(kind, object)?
            }
            None => return Err(ApiError::not_found(kind, name)),
        };
        Ok(to_view(kind, &stored).into_owned())
    }

    /// Patches an object (`PATCH`), or only its status when `status_only`.
    pub fn patch(
        &self,
        kind: &'static ResourceKind,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &[u8],
        status_only: bool,
    ) -> Result<Value, ApiError> {
        let mut state = self.lock();
        let ns = if kind.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        let existing = state
            .objects
            .get(&key(kind, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        let mut patched = patch::apply(kind, patch_type, &to_view(kind, &existing), body)?;
        if !patched.is_object() {
            let error = FieldError::with_body(
                ErrorType::Invalid,
                "<root>",
                "the patched object must be a JSON object",
            );
            return Err(ApiError::invalid(storage_kind(kind), name, &[error]));
        }
        check_type(kind, &mut patched)?;
        let patched_name = meta_str(&patched, "name");
        if patched_name != name {
            // `ValidateObjectMetaUpdate`: `ValidateImmutableField` of the name.
            let error =
                FieldError::invalid("metadata.name", &quote(patched_name), "field is immutable");
            return Err(ApiError::invalid(storage_kind(kind), name, &[error]));
        }
        let stored = state.update(kind, existing, to_storage(kind, patched), status_only)?;
        Ok(to_view(kind, &stored).into_owned())
    }

    /// Deletes an object (`DELETE`) honouring `preconditions` in the delete options and
    /// finalizers.
    pub fn delete(
        &self,
        kind: &'static ResourceKind,
        namespace: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<DeleteOutcome, ApiError> {
        let view = |stored: Value| to_view(kind, &stored).into_owned();
        Ok(match self.delete_stored(kind, namespace, name, options)? {
            DeleteOutcome::Deleted(stored) => DeleteOutcome::Deleted(view(stored)),
            DeleteOutcome::Pending(stored) => DeleteOutcome::Pending(view(stored)),
        })
    }

    fn delete_stored(
        &self,
        kind: &'static ResourceKind,
        namespace: Option<&str>,
        name: &str,
        options: &Value,
    ) -> Result<DeleteOutcome, ApiError> {
        let mut state = self.lock();
        let ns = if kind.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        let existing = state
            .objects
            .get(&key(kind, ns, name))
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        for (field, meta_field, label) in [
            ("uid", "uid", "UID"),
            ("resourceVersion", "resourceVersion", "ResourceVersion"),
        ] {
            if let Some(wanted) = options
                .pointer(&format!("/preconditions/{field}"))
                .and_then(Value::as_str)
            {
                let actual = meta_str(&existing, meta_field);
                if wanted != actual {
                    return Err(ApiError::conflict(
                        kind,
                        name,
                        &format!(
                            "Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}"
                        ),
                    ));
                }
            }
        }
        if !finalizers(&existing).is_empty() {
            if is_deleting(&existing) {
                return Ok(DeleteOutcome::Pending(existing));
            }
            let mut marked = existing;
            let meta = meta_mut(&mut marked);
            meta.insert("deletionTimestamp".into(), json!(now_timestamp()));
            meta.insert("deletionGracePeriodSeconds".into(), json!(0));
            return Ok(DeleteOutcome::Pending(state.commit(
                kind,
                EventType::Modified,
                marked,
            )));
        }
        if kind.kind == "Namespace" {
            state.delete_namespace_contents(name);
        }
        Ok(DeleteOutcome::Deleted(state.commit(
            kind,
            EventType::Deleted,
            existing,
        )))
    }
}

impl State {
    fn create(
        &mut self,
        kind: &'static ResourceKind,
        mut object: Value,
    ) -> Result<Value, ApiError> {
        let ns = meta_str(&object, "namespace").to_string();
        if kind.namespaced {
            let namespaces = resources::lookup("namespaces").expect("namespaces are served");
            if !self.objects.contains_key(&key(namespaces, "", &ns)) {
                return Err(ApiError::not_found(namespaces, &ns));
            }
        }
        if !meta_str(&object, "resourceVersion").is_empty() {
            return Err(ApiError::bad_request(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        let mut name = meta_str(&object, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&object, "generateName");
            if prefix.is_empty() {
                let error =
                    FieldError::required("metadata.name", "name or generateName is required");
                return Err(ApiError::invalid(storage_kind(kind), "", &[error]));
            }
            name = format!("{prefix}{}", random_suffix());
        }
        meta_mut(&mut object).insert("name".into(), json!(name));
        default_decoded(kind, &mut object);
        // The strategy's Validate runs before the storage finds a name taken.
        let errors = validation::validate_create(kind, &object);
        if !errors.is_empty() {
            return Err(ApiError::invalid(storage_kind(kind), &name, &errors));
        }
        if self.objects.contains_key(&key(kind, &ns, &name)) {
            return Err(ApiError::already_exists(kind, &name));
        }
        let meta = meta_mut(&mut object);
        meta.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        meta.insert("creationTimestamp".into(), json!(now_timestamp()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        meta.remove("managedFields");
        reset_status_on_create(kind, &mut object);
        apply_defaults(kind, &mut object, None, &mut self.allocators);
        Ok(self.commit(kind, EventType::Added, object))
    }

    fn update(
        &mut self,
        kind: &'static ResourceKind,
        existing: Value,
        mut incoming: Value,
        status_only: bool,
    ) -> Result<Value, ApiError> {
        default_decoded(kind, &mut incoming);
        let name = meta_str(&existing, "name").to_string();
        let given_rv = meta_str(&incoming, "resourceVersion");
        if !given_rv.is_empty() && given_rv != meta_str(&existing, "resourceVersion") {
            return Err(ApiError::stale(kind, &name));
        }
        let mut updated = if status_only {
            let mut updated = existing.clone();
            match incoming.get("status") {
                Some(status) => updated["status"] = status.clone(),
                None => {
                    if let Some(map) = updated.as_object_mut() {
                        map.remove("status");
                    }
                }
            }
            updated
        } else {
            let mut updated = incoming;
            if kind.has_status {
                match existing.get("status") {
                    Some(status) => updated["status"] = status.clone(),
                    None => {
                        if let Some(map) = updated.as_object_mut() {
                            map.remove("status");
                        }
                    }
                }
            }
            let existing_meta = existing.get("metadata").cloned().unwrap_or_default();
            let meta = meta_mut(&mut updated);
            meta.remove("managedFields");
            for field in SERVER_OWNED_META {
                match existing_meta.get(field) {
                    Some(value) => meta.insert((*field).into(), value.clone()),
                    None => meta.remove(*field),
                };
            }
            updated
        };
        meta_mut(&mut updated).insert(
            "resourceVersion".into(),
            json!(meta_str(&existing, "resourceVersion")),
        );
        if is_deleting(&existing) {
            let old = finalizers(&existing);
            if let Some(added) = finalizers(&updated).into_iter().find(|f| !old.contains(f)) {
                let error = FieldError::forbidden(
                    "metadata.finalizers",
                    &format!(
                        "no new finalizers can be added if the object is being deleted, found new finalizers [{added:?}]"
                    ),
                );
                return Err(ApiError::invalid(storage_kind(kind), &name, &[error]));
            }
        }
        if !status_only {
            apply_defaults(kind, &mut updated, Some(&existing), &mut self.allocators);
            if spec_of(&updated) != spec_of(&existing) {
                let generation = existing
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(0);
                meta_mut(&mut updated).insert("generation".into(), json!(generation + 1));
            }
        }
        let errors = validation::validate_update(kind, &updated, &existing);
        if !errors.is_empty() {
            return Err(ApiError::invalid(storage_kind(kind), &name, &errors));
        }
        if updated == existing {
            return Ok(existing);
        }
        if is_deleting(&updated) && finalizers(&updated).is_empty() {
            return Ok(self.commit(kind, EventType::Deleted, updated));
        }
        Ok(self.commit(kind, EventType::Modified, updated))
    }

    fn delete_namespace_contents(&mut self, namespace: &str) {
        let doomed: Vec<(&'static ResourceKind, Value)> = self
            .objects
            .iter()
            .filter(|((_, _, ns, _), _)| ns == namespace)
            .filter_map(|((group, plural, _, _), obj)| {
                resources::RESOURCES
                    .iter()
                    .find(|r| r.group == *group && r.plural == *plural)
                    .map(|kind| (kind, obj.clone()))
            })
            .collect();
        for (kind, object) in doomed {
            self.commit(kind, EventType::Deleted, object);
        }
    }
}

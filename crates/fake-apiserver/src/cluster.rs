//! `Cluster`: a cloneable handle on the server's state for tests — direct store access
//! without HTTP, fault injection, watch dropping and request counters.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use crate::auth::UserInfo;
use crate::error::ServerError;
use crate::faults::{Fault, Verb};
use crate::patch::PatchType;
use crate::resources::{self, ResourceKind};
use crate::routes::Shared;
use crate::shared::Denial;
use crate::store::{DeleteOutcome, Selection};

/// A handle on the fake cluster's state. Resources are named like kubectl names them:
/// `nodes`, `services`, `svc`, `pods`, `namespaces`, `events` (core/v1),
/// `events.events.k8s.io`, `leases`. Writes go through the same validation, versioning and
/// watch notification as HTTP requests.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub(crate) shared: Arc<Shared>,
}

fn kind(resource: &str) -> Result<&'static ResourceKind, ServerError> {
    resources::lookup(resource).ok_or_else(|| ServerError::UnknownResource(resource.to_string()))
}

impl Cluster {
    /// Creates an object (namespace from `namespace` or the object's metadata).
    pub fn create(
        &self,
        resource: &str,
        namespace: Option<&str>,
        object: Value,
    ) -> Result<Value, ServerError> {
        Ok(self
            .shared
            .store
            .create(kind(resource)?, namespace, object)?)
    }

    /// Reads an object (`namespace` is ignored for cluster-scoped resources).
    pub fn get(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ServerError> {
        let kind = kind(resource)?;
        let ns = if kind.namespaced {
            namespace.unwrap_or("")
        } else {
            ""
        };
        Ok(self.shared.store.get(kind, ns, name)?)
    }

    /// Lists objects, in one namespace or (with `None`) all.
    pub fn list(&self, resource: &str, namespace: Option<&str>) -> Result<Vec<Value>, ServerError> {
        let selection = Selection::all(kind(resource)?, namespace);
        Ok(self.shared.store.list(&selection, None, None)?.items)
    }

    /// Replaces an object (`PUT` semantics, including the resourceVersion precondition).
    pub fn replace(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        object: Value,
    ) -> Result<Value, ServerError> {
        Ok(self
            .shared
            .store
            .replace(kind(resource)?, namespace, name, object, false)?)
    }

    /// Replaces only the status (`PUT .../status`).
    pub fn replace_status(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        object: Value,
    ) -> Result<Value, ServerError> {
        Ok(self
            .shared
            .store
            .replace(kind(resource)?, namespace, name, object, true)?)
    }

    /// Applies a patch to the object, or to its status when `status` is set.
    pub fn patch(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ServerError> {
        let body = patch.to_string();
        Ok(self.shared.store.patch(
            kind(resource)?,
            namespace,
            name,
            patch_type,
            body.as_bytes(),
            status,
        )?)
    }

    /// Deletes an object; an object with finalizers is only marked for deletion.
    pub fn delete(
        &self,
        resource: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<DeleteOutcome, ServerError> {
        Ok(self
            .shared
            .store
            .delete(kind(resource)?, namespace, name, &Value::Null)?)
    }

    /// Every Event once, as core/v1 shows it (Events posted through events.k8s.io/v1
    /// included: both APIs are views of one store).
    pub fn events(&self) -> Vec<Value> {
        let core = resources::find("", "v1", "events").expect("core events are served");
        self.shared.store.all(core)
    }

    /// The latest resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.resource_version()
    }

    /// Keeps only the last `limit` changes for watch replay; older resourceVersions get
    /// 410 Gone.
    pub fn set_history_limit(&self, limit: usize) {
        self.shared.store.set_history_limit(limit);
    }

    /// Compacts the history up to the latest resourceVersion, so that a watch from any
    /// older resourceVersion gets `410 Gone` ("too old resource version") and the client
    /// must list again. kube-apiserver does this when etcd is compacted past a watcher's
    /// version (every `--etcd-compaction-interval`, 5 minutes by default) and when it
    /// restarts: its watch cache then starts at the current revision, and a watch from an
    /// older one is answered 410 (`storage/cacher`'s "too old resource version").
    pub fn compact(&self) {
        self.shared.store.compact_all();
    }

    /// Replaces the injected faults (an empty list clears them).
    pub fn set_faults(&self, faults: Vec<Fault>) {
        self.shared.faults.set(faults);
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.shared.faults.set(Vec::new());
    }

    /// Closes every open watch stream now.
    pub fn drop_watches(&self) {
        self.shared.store.drop_watches();
    }

    /// Requests seen for `verb` on `resource` (`services`, `services/status`,
    /// `events.events.k8s.io`, `leases`).
    pub fn request_count(&self, verb: Verb, resource: &str) -> u64 {
        self.shared.faults.count(verb, resource)
    }

    /// All request counters by verb and resource.
    pub fn request_counts(&self) -> BTreeMap<(Verb, String), u64> {
        self.shared.faults.counts()
    }

    /// Registers a static bearer token for `user` (like a line of kube-apiserver's
    /// `--token-auth-file`).
    pub fn add_token(&self, token: &str, user: UserInfo) {
        self.shared.access.tokens.add_static(token, user);
    }

    /// Issues a bearer token for the existing ServiceAccount `namespace/name`, as
    /// `kubectl create token` does through the TokenRequest API (valid one hour).
    pub fn service_account_token(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<String, ServerError> {
        let account = self.get("serviceaccounts", Some(namespace), name)?;
        let (token, _) = self
            .shared
            .access
            .tokens
            .issue(&account, crate::auth::DEFAULT_TOKEN_LIFETIME);
        Ok(token)
    }

    /// Every request refused with 401 or 403 since start, oldest first.
    pub fn denials(&self) -> Vec<Denial> {
        self.shared.access.denials()
    }

    /// Requests refused with 403 Forbidden since start.
    pub fn forbidden_count(&self) -> usize {
        self.denials().iter().filter(|d| d.code == 403).count()
    }

    /// Zeroes the request counters.
    pub fn reset_request_counts(&self) {
        self.shared.faults.reset_counts();
    }
}

//! `/sim/…`: introspection and fault injection over HTTP (never under `/client/api`).
//!
//! | method | path | body / answer |
//! |---|---|---|
//! | GET | `/sim/counts` | `{command: calls}` |
//! | GET | `/sim/calls` | call log |
//! | POST | `/sim/reset` | clears counters and call log |
//! | GET | `/sim/dump` | whole state |
//! | GET | `/sim/jobs` | jobs with queue timestamps |
//! | GET, PUT | `/sim/faults` | [`crate::Faults`] |
//! | PUT | `/sim/job-duration` | `{"ms": N}` |
//! | POST | `/sim/vms` | [`crate::VmSpec`] → `{"id"}` |
//! | DELETE | `/sim/vms/{id}` | expunge (as `expungeVirtualMachine`: mappings, static NAT, NICs, tags dropped) |
//! | POST | `/sim/vms/{id}/destroy` | destroy without expunge (state Destroyed; mappings, static NAT, NICs kept) |
//! | POST | `/sim/vms/{id}/stop`, `/sim/vms/{id}/start` | state Stopped / Running |
//! | PUT | `/sim/vms/{id}/state` | `{"state": "…"}` |
//! | POST | `/sim/accounts/{name}/keys` | optional `{"api_key", "secret_key"}` → the new keys (see [`rotate_keys`]) |

use crate::faults::Faults;
use crate::scenario::{ScenarioError, Secret, VmSpec};
use crate::shared::{Shared, dump_state, lock};
use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

type Shared_ = AxumState<Arc<Shared>>;

/// The `/sim` router.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/counts", get(|AxumState(s): Shared_| async move { Json(json!(*lock(&s.counts))) }))
        .route("/calls", get(|AxumState(s): Shared_| async move { Json(json!(*lock(&s.log))) }))
        .route(
            "/reset",
            post(|AxumState(s): Shared_| async move {
                lock(&s.counts).clear();
                lock(&s.log).clear();
                StatusCode::NO_CONTENT
            }),
        )
        .route("/dump", get(|AxumState(s): Shared_| async move { Json(dump_state(&lock(&s.state))) }))
        .route("/jobs", get(|AxumState(s): Shared_| async move { Json(json!(lock(&s.state).jobs)) }))
        .route(
            "/faults",
            get(|AxumState(s): Shared_| async move { Json(json!(*lock(&s.faults))) }).put(
                |AxumState(s): Shared_, Json(f): Json<Faults>| async move {
                    *lock(&s.faults) = f;
                    StatusCode::NO_CONTENT
                },
            ),
        )
        .route(
            "/job-duration",
            put(|AxumState(s): Shared_, Json(body): Json<Value>| async move {
                let Some(ms) = body.get("ms").and_then(Value::as_u64) else {
                    return (StatusCode::BAD_REQUEST, "job-duration: field ms (integer) is required").into_response_pair();
                };
                let mut state = lock(&s.state);
                state.settings.job_duration_ms = ms;
                s.persist(&state);
                (StatusCode::NO_CONTENT, "").into_response_pair()
            }),
        )
        .route(
            "/vms",
            post(|AxumState(s): Shared_, Json(spec): Json<VmSpec>| async move {
                match add_vm(&s, &spec) {
                    Ok(id) => (StatusCode::CREATED, Json(json!({"id": id}))),
                    Err(e) => (StatusCode::BAD_REQUEST, Json(json!({"error": e.to_string()}))),
                }
            }),
        )
        .route("/vms/{id}", delete(|AxumState(s): Shared_, Path(id): Path<String>| async move { found(remove_vm(&s, &id)) }))
        .route("/vms/{id}/destroy", post(|AxumState(s): Shared_, Path(id): Path<String>| async move { found(destroy_vm(&s, &id)) }))
        .route("/vms/{id}/stop", post(|AxumState(s): Shared_, Path(id): Path<String>| async move { found(set_vm_state(&s, &id, "Stopped")) }))
        .route("/vms/{id}/start", post(|AxumState(s): Shared_, Path(id): Path<String>| async move { found(set_vm_state(&s, &id, "Running")) }))
        .route(
            "/accounts/{name}/keys",
            post(|AxumState(s): Shared_, Path(name): Path<String>, body: Option<Json<NewKeys>>| async move {
                let Json(asked) = body.unwrap_or_default();
                match rotate_keys(&s, &name, asked) {
                    Some(keys) => (StatusCode::OK, Json(json!({"api_key": keys.api_key, "secret_key": keys.secret_key}))),
                    None => (StatusCode::NOT_FOUND, Json(json!({"error": format!("no account {name:?}")}))),
                }
            }),
        )
        .route(
            "/vms/{id}/state",
            put(|AxumState(s): Shared_, Path(id): Path<String>, Json(body): Json<Value>| async move {
                match body.get("state").and_then(Value::as_str) {
                    Some(state) => found(set_vm_state(&s, &id, state)),
                    None => StatusCode::BAD_REQUEST,
                }
            }),
        )
}

trait PairResponse {
    fn into_response_pair(self) -> (StatusCode, String);
}

impl PairResponse for (StatusCode, &str) {
    fn into_response_pair(self) -> (StatusCode, String) {
        (self.0, self.1.to_owned())
    }
}

/// The keys an account is given by [`rotate_keys`]: the ones asked for, generated otherwise.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NewKeys {
    /// The new API key.
    #[serde(default)]
    pub api_key: Option<Secret>,
    /// The new secret key.
    #[serde(default)]
    pub secret_key: Option<Secret>,
}

/// Gives `account` a new key pair, as CloudStack's `registerUserKeys`
/// (`AccountManagerImpl.createApiKeyAndSecretKey`) does: both keys are replaced at once
/// (generated, unless given, as CloudStack makes them: 64 random bytes of an HmacSHA1
/// `KeyGenerator`, URL-safe base64 without padding), and from
/// then on the old ones match no user, so `ApiServer.verifyRequest` answers every request
/// signed with them 401 "unable to verify user credentials and/or request signature".
/// Async jobs the account started keep running and are queried with the new keys.
/// `None` when no account has this name.
pub(crate) fn rotate_keys(shared: &Shared, account: &str, asked: NewKeys) -> Option<NewKeys> {
    let generate = || {
        let bytes: [u8; 64] = std::array::from_fn(|_| rand::random::<u8>());
        Secret::new(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
    };
    let api_key = asked.api_key.unwrap_or_else(generate);
    let secret_key = asked.secret_key.unwrap_or_else(generate);
    let mut state = lock(&shared.state);
    let entry = state.accounts.iter_mut().find(|a| a.name == account)?;
    entry.api_key = api_key.clone();
    entry.secret_key = secret_key.clone();
    shared.persist(&state);
    Some(NewKeys {
        api_key: Some(api_key),
        secret_key: Some(secret_key),
    })
}

fn found(ok: bool) -> StatusCode {
    if ok {
        StatusCode::NO_CONTENT
    } else {
        StatusCode::NOT_FOUND
    }
}

/// Adds a VM described like a scenario VM.
pub(crate) fn add_vm(shared: &Shared, spec: &VmSpec) -> Result<String, ScenarioError> {
    let mut state = lock(&shared.state);
    if let Some(id) = &spec.id {
        // An expunged VM's record only keeps its UUID resolvable; a new VM may take it.
        state.expunged_vms.retain(|v| &v.id != id);
    }
    if spec.id.as_ref().is_some_and(|id| state.vm(id).is_some()) {
        return Err(ScenarioError::Invalid(format!(
            "vm {:?}: field id: already in use",
            spec.name
        )));
    }
    let vm = state.vm_from_spec(spec)?;
    let id = vm.id.clone();
    state.vms.push(vm);
    shared.persist(&state);
    Ok(id)
}

/// Expunges a VM and what refers to it (`UserVmManagerImpl.expunge`, see
/// [`crate::commands::expunge_vm`]).
pub(crate) fn remove_vm(shared: &Shared, id: &str) -> bool {
    let mut state = lock(&shared.state);
    let found = crate::commands::expunge_vm(&mut state, id);
    if found {
        shared.persist(&state);
    }
    found
}

/// Purges an expunged VM's row (`ResourceCleanupServiceImpl.purgeVMEntities`, CloudStack
/// 4.20+, run by `purgeExpungedResources` or periodically with
/// `expunged.resources.purge.enabled`): the VM row goes with its LB mappings, so its
/// UUID no longer resolves. False when no expunged VM has this id.
pub(crate) fn purge_vm(shared: &Shared, id: &str) -> bool {
    let mut state = lock(&shared.state);
    let before = state.expunged_vms.len();
    state.expunged_vms.retain(|v| v.id != id);
    let found = state.expunged_vms.len() != before;
    if found {
        state.unmap_vm(id);
        shared.persist(&state);
    }
    found
}

/// Destroys a VM without expunging it (see [`crate::commands::destroy_vm`]).
pub(crate) fn destroy_vm(shared: &Shared, id: &str) -> bool {
    let mut state = lock(&shared.state);
    let found = crate::commands::destroy_vm(&mut state, id);
    if found {
        shared.persist(&state);
    }
    found
}

/// Sets a VM's state.
pub(crate) fn set_vm_state(shared: &Shared, id: &str, new_state: &str) -> bool {
    let mut state = lock(&shared.state);
    let Some(vm) = state.vms.iter_mut().find(|v| v.id == id) else {
        return false;
    };
    vm.state = new_state.to_owned();
    shared.persist(&state);
    true
}

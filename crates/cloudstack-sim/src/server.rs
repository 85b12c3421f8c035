//! The simulator process: shared state, job runners, the state file, the router
//! (`/client/api` and `/sim/…`) and the in-process handle tests use.

use crate::commands;
use crate::faults::{CallRecord, Faults, RateLimiter};
use crate::scenario::{Scenario, ScenarioError, Secret, VmSpec};
use crate::shared::{Shared, dump_state, lock};
use crate::state::State;
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Errors starting the simulator.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario is invalid.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// Binding the listen address failed.
    #[error("binding {addr}: {source}")]
    Bind {
        /// Address.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
    /// The state file exists but cannot be read.
    #[error("loading state file {path}: {reason}")]
    StateFile {
        /// Path.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// How to start a simulator.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Listen address (`127.0.0.1:0` = a free port).
    pub listen: SocketAddr,
    /// Load state from here when present; save after every mutation.
    pub state_file: Option<PathBuf>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            state_file: None,
        }
    }
}

/// A running simulator.
pub struct SimServer {
    pub(crate) shared: Arc<Shared>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

/// Alias: the simulator handle.
pub type Simulator = SimServer;

impl SimServer {
    /// Starts the scenario on `127.0.0.1:0`.
    pub async fn start(scenario: Scenario) -> Result<Self, SimError> {
        Self::start_with(scenario, SimOptions::default()).await
    }

    /// Starts with explicit options; state from an existing state file wins over the scenario.
    pub async fn start_with(scenario: Scenario, options: SimOptions) -> Result<Self, SimError> {
        let state = match &options.state_file {
            Some(path) if path.exists() => {
                let shown = path.display().to_string();
                let bytes = std::fs::read(path).map_err(|e| SimError::StateFile {
                    path: shown.clone(),
                    reason: e.to_string(),
                })?;
                serde_json::from_slice::<State>(&bytes).map_err(|e| SimError::StateFile {
                    path: shown,
                    reason: e.to_string(),
                })?
            }
            _ => State::from_scenario(&scenario)?,
        };
        let pending: Vec<String> = state
            .jobs
            .iter()
            .filter(|j| j.status == 0)
            .map(|j| j.id.clone())
            .collect();
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            faults: Mutex::new(Faults::default()),
            counts: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
            limiter: Mutex::new(RateLimiter::default()),
            state_file: options.state_file.clone(),
        });
        shared.persist(&lock(&shared.state));
        let listener = tokio::net::TcpListener::bind(options.listen)
            .await
            .map_err(|source| SimError::Bind {
                addr: options.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SimError::Bind {
            addr: options.listen,
            source,
        })?;
        let app = axum::Router::new()
            .route(
                "/client/api",
                axum::routing::get(crate::http_api::api).post(crate::http_api::api),
            )
            .nest("/sim", crate::admin::routes())
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!(error = %e, "simulator server stopped");
            }
        });
        for job in pending {
            shared.spawn_job(job);
        }
        Ok(Self { shared, addr, task })
    }

    /// The listen address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT/client/api`.
    pub fn api_url(&self) -> String {
        format!("http://{}/client/api", self.addr)
    }

    /// `http://127.0.0.1:PORT/sim`.
    pub fn admin_url(&self) -> String {
        format!("http://{}/sim", self.addr)
    }

    /// API key and secret key of an account.
    pub fn credentials(&self, account: &str) -> Option<(Secret, Secret)> {
        lock(&self.shared.state)
            .account(account)
            .map(|a| (a.api_key.clone(), a.secret_key.clone()))
    }

    /// Gives `account` a new key pair as `registerUserKeys` does (the old keys answer 401
    /// from now on); `None` keys are generated. Returns the new (api key, secret key), or
    /// `None` when no account has this name.
    pub fn rotate_keys(
        &self,
        account: &str,
        api_key: Option<Secret>,
        secret_key: Option<Secret>,
    ) -> Option<(Secret, Secret)> {
        let keys = crate::admin::rotate_keys(
            &self.shared,
            account,
            crate::admin::NewKeys {
                api_key,
                secret_key,
            },
        )?;
        Some((keys.api_key?, keys.secret_key?))
    }

    /// Calls per command since start or the last reset.
    pub fn call_counts(&self) -> BTreeMap<String, u64> {
        lock(&self.shared.counts).clone()
    }

    /// Every call since start or the last reset, in arrival order.
    pub fn call_log(&self) -> Vec<CallRecord> {
        lock(&self.shared.log).clone()
    }

    /// Calls of state-changing commands since start or the last reset.
    pub fn mutating_calls(&self) -> u64 {
        self.call_counts()
            .iter()
            .filter(|(c, _)| commands::is_mutating(c))
            .map(|(_, n)| n)
            .sum()
    }

    /// Clears counters and the call log.
    pub fn reset_counts(&self) {
        lock(&self.shared.counts).clear();
        lock(&self.shared.log).clear();
    }

    /// Replaces the fault plan.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    /// The fault plan.
    pub fn faults(&self) -> Faults {
        lock(&self.shared.faults).clone()
    }

    /// Sets how long jobs started from now on take.
    pub fn set_job_duration(&self, duration: Duration) {
        let ms = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
        let mut state = lock(&self.shared.state);
        state.settings.job_duration_ms = ms;
        self.shared.persist(&state);
    }

    /// Adds a VM at run time; returns its id.
    pub fn add_vm(&self, spec: VmSpec) -> Result<String, ScenarioError> {
        crate::admin::add_vm(&self.shared, &spec)
    }

    /// Expunges a VM as `expungeVirtualMachine` does (its LB mappings, static NAT, NICs and
    /// tags go); false when unknown.
    pub fn remove_vm(&self, id: &str) -> bool {
        crate::admin::remove_vm(&self.shared, id)
    }

    /// Purges an expunged VM's row as CloudStack 4.20+ does after
    /// `expunged.resources.purge.delay` (its UUID no longer resolves); false when no
    /// expunged VM has this id.
    pub fn purge_vm(&self, id: &str) -> bool {
        crate::admin::purge_vm(&self.shared, id)
    }

    /// Destroys a VM without expunging it (state Destroyed; LB mappings, static NAT and NICs
    /// stay until expunge); false when unknown.
    pub fn destroy_vm(&self, id: &str) -> bool {
        crate::admin::destroy_vm(&self.shared, id)
    }

    /// Sets a VM's state (`Running`, `Stopped`, …); false when unknown.
    pub fn set_vm_state(&self, id: &str, state: &str) -> bool {
        crate::admin::set_vm_state(&self.shared, id, state)
    }

    /// The whole state as JSON, API and secret keys redacted.
    pub fn dump(&self) -> Value {
        dump_state(&lock(&self.shared.state))
    }

    /// Runs `f` on the current state.
    pub fn with_state<R>(&self, f: impl FnOnce(&State) -> R) -> R {
        f(&lock(&self.shared.state))
    }

    /// Stops serving.
    pub fn shutdown(self) {
        self.task.abort();
    }
}

impl Drop for SimServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

//! The HTTP server: `/client/api` (signed CloudStack API) and `/sim/…` (introspection and
//! fault injection), plus the in-process handle tests use.

use crate::commands::access::Caller;
use crate::commands::{self, Ctx, JobFaults};
use crate::error::ApiError;
use crate::faults::{CallRecord, Faults, RateLimiter};
use crate::jobs::now_ms;
use crate::params::{Params, parse_form};
use crate::response::{envelope, response_name, to_xml};
use crate::scenario::{Role, Scenario, ScenarioError, Secret, VmSpec};
use crate::signing;
use crate::state::State;
use axum::body::Bytes;
use axum::extract::{RawQuery, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
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

/// State shared by the HTTP handlers, the job runners and the handle.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) counts: Mutex<BTreeMap<String, u64>>,
    pub(crate) log: Mutex<Vec<CallRecord>>,
    limiter: Mutex<RateLimiter>,
    state_file: Option<PathBuf>,
}

/// Locks a mutex, recovering from a poisoned one (a panicking handler must not wedge the server).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Saves the state file (temp file + rename) when one is configured.
    pub(crate) fn persist(&self, state: &State) {
        let Some(path) = &self.state_file else { return };
        let tmp = path.with_extension("tmp");
        let written = serde_json::to_vec(state)
            .map_err(std::io::Error::other)
            .and_then(|bytes| std::fs::write(&tmp, bytes))
            .and_then(|()| std::fs::rename(&tmp, path));
        if let Err(e) = written {
            tracing::error!(path = %path.display(), error = %e, "saving state file failed");
        }
    }

    /// Starts the runner of a job: it waits for the job's turn and completes it.
    pub(crate) fn spawn_job(self: &Arc<Self>, job_id: String) {
        let Some(finish) = lock(&self.state).job(&job_id).and_then(|j| j.finish_ms) else {
            return;
        };
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let wait = finish.saturating_sub(now_ms());
            tokio::time::sleep(Duration::from_millis(wait)).await;
            shared.complete_job(&job_id);
        });
    }

    fn complete_job(&self, job_id: &str) {
        let mut state = lock(&self.state);
        let Some(job) = state.job(job_id).cloned() else {
            return;
        };
        if job.status != 0 {
            return;
        }
        let outcome = match &job.injected_failure {
            Some(failure) => Err(ApiError::from(failure)),
            None => commands::run_job_action(&mut state, &job.action),
        };
        if outcome.is_err() {
            commands::roll_back_job(&mut state, &job.action);
        }
        match &outcome {
            Ok(_) => tracing::info!(job = job_id, command = %job.command, "job succeeded"),
            Err(e) => {
                tracing::info!(job = job_id, command = %job.command, code = e.code, error = %e.text, "job failed")
            }
        }
        state.finish_job(job_id, outcome);
        self.persist(&state);
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
            .route("/client/api", axum::routing::get(api).post(api))
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

    /// Expunges a VM (and its LB memberships, tags, static NAT); false when unknown.
    pub fn remove_vm(&self, id: &str) -> bool {
        crate::admin::remove_vm(&self.shared, id)
    }

    /// Sets a VM's state (`Running`, `Stopped`, …); false when unknown.
    pub fn set_vm_state(&self, id: &str, state: &str) -> bool {
        crate::admin::set_vm_state(&self.shared, id, state)
    }

    /// The whole state as JSON (keys included; this is a test/introspection view).
    pub fn dump(&self) -> Value {
        serde_json::to_value(&*lock(&self.shared.state)).unwrap_or(Value::Null)
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

/// Builds the HTTP answer for a body or error.
fn answer(command: &str, outcome: &Result<Value, ApiError>, json: bool) -> Response {
    let (status, body) = match outcome {
        Ok(body) => (StatusCode::OK, envelope(command, body.clone())),
        Err(e) => {
            let key = if e.code == 432 || command.is_empty() {
                "errorresponse".to_owned()
            } else {
                response_name(command)
            };
            (
                StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                json!({ key: e.body() }),
            )
        }
    };
    let (content_type, text) = if json {
        ("application/json; charset=UTF-8", body.to_string())
    } else {
        ("text/xml; charset=UTF-8", to_xml(&body))
    };
    let mut response = (status, text).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Err(e) = outcome
        && let Ok(v) = HeaderValue::from_str(&e.text)
    {
        response.headers_mut().insert("X-Description", v);
    }
    response
}

/// `/client/api` (GET and POST).
async fn api(
    AxumState(shared): AxumState<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut raw = parse_form(query.unwrap_or_default().as_bytes());
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        raw.extend(parse_form(&body));
    }
    let params = Params::new(raw);
    let json = params
        .get("response")
        .is_some_and(|r| r.eq_ignore_ascii_case("json"));
    let command = params.command.clone();
    let arrived = now_ms();
    let (outcome, account, job_id) = handle(&shared, &params).await;
    *lock(&shared.counts).entry(command.clone()).or_default() += 1;
    let (status, error) = match &outcome {
        Ok(_) => (200, None),
        Err(e) => (e.code, Some(e.text.clone())),
    };
    match &error {
        None => {
            tracing::info!(command = %command, account = account.as_deref().unwrap_or("-"), status, "api call")
        }
        Some(text) => {
            tracing::info!(command = %command, account = account.as_deref().unwrap_or("-"), status, error = %text, "api call failed")
        }
    }
    lock(&shared.log).push(CallRecord {
        at_ms: arrived,
        command: command.clone(),
        account,
        status,
        error,
        job_id,
    });
    answer(&command, &outcome, json)
}

/// Authenticates, throttles, injects faults and runs the command.
async fn handle(
    shared: &Arc<Shared>,
    params: &Params,
) -> (Result<Value, ApiError>, Option<String>, Option<String>) {
    let command_name = params.command.as_str();
    if command_name.is_empty() {
        return (
            Err(ApiError::new(
                432,
                Some(9999),
                "Invalid request, no command sent",
            )),
            None,
            None,
        );
    }
    let Some(command) = commands::find(command_name) else {
        return (Err(ApiError::unknown_command(command_name)), None, None);
    };
    let (caller, latency, throttle) = {
        let state = lock(&shared.state);
        let account = params.get("apikey").and_then(|k| state.account_by_key(k));
        let verified = account.filter(|a| {
            signing::verify(
                &params.raw,
                a.secret_key.expose(),
                &state.version,
                jiff::Timestamp::now(),
            )
        });
        let Some(account) = verified else {
            return (Err(ApiError::unauthorized()), None, None);
        };
        let caller = Caller {
            account: account.name.clone(),
            role: account.role,
        };
        (
            caller,
            state.settings.call_latency_ms,
            state.settings.throttle.clone(),
        )
    };
    let account = Some(caller.account.clone());
    if let Some(t) = throttle.filter(|_| caller.role != Role::Admin)
        && let Err(e) = lock(&shared.limiter).check(
            &caller.account,
            t.max,
            t.interval_secs.saturating_mul(1000),
            now_ms(),
        )
    {
        return (Err(e), account, None);
    }
    let (extra, injected, job_faults) = {
        let faults = lock(&shared.faults);
        let job_faults = JobFaults {
            failure_rate: faults.job_failure_rate,
            never_finish_rate: faults.job_never_finish_rate,
        };
        (
            faults.latency_for(command.name),
            faults.error_for(command.name),
            job_faults,
        )
    };
    if latency + extra > 0 {
        tokio::time::sleep(Duration::from_millis(latency + extra)).await;
    }
    if let Some(e) = injected {
        return (Err(e), account, None);
    }
    let (outcome, new_jobs) = {
        let mut state = lock(&shared.state);
        let mut ctx = Ctx {
            state: &mut state,
            caller,
            params,
            job_faults,
            new_jobs: Vec::new(),
        };
        let outcome = (command.run)(&mut ctx);
        let new_jobs = std::mem::take(&mut ctx.new_jobs);
        if outcome.is_ok() && commands::is_mutating(command.name) {
            shared.persist(&state);
        }
        (outcome, new_jobs)
    };
    let job_id = new_jobs.first().cloned();
    for job in new_jobs {
        shared.spawn_job(job);
    }
    (outcome, account, job_id)
}

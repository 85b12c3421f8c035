//! The state the simulator's HTTP handlers, job runners and in-process handle share, and
//! the job runner that completes each async job at its time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use crate::commands;
use crate::error::ApiError;
use crate::faults::{CallRecord, Faults, RateLimiter};
use crate::jobs::now_ms;
use crate::state::State;

/// State shared by the HTTP handlers, the job runners and the handle.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) faults: Mutex<Faults>,
    pub(crate) counts: Mutex<BTreeMap<String, u64>>,
    pub(crate) log: Mutex<Vec<CallRecord>>,
    pub(crate) limiter: Mutex<RateLimiter>,
    pub(crate) state_file: Option<PathBuf>,
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
    /// A job that never finishes is instead cancelled when it has blocked its queue for
    /// [`crate::Settings::job_cancel_threshold_ms`].
    pub(crate) fn spawn_job(self: &Arc<Self>, job_id: String) {
        let (finish, cancel) = match lock(&self.state).job(&job_id) {
            Some(job) => (job.finish_ms, job.cancel_ms),
            None => return,
        };
        let Some(at) = finish.or(cancel) else {
            return;
        };
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(at.saturating_sub(now_ms()))).await;
            if finish.is_some() {
                shared.complete_job(&job_id);
                return;
            }
            let mut state = lock(&shared.state);
            if let Some(action) = state
                .job(&job_id)
                .filter(|j| j.status == 0)
                .map(|j| j.action.clone())
            {
                tracing::info!(job = %job_id, "job cancelled for blocking its queue");
                state.cancel_job(&job_id);
                // Cancelling (`AsyncJobManagerImpl`: "Job is cancelled as it has been
                // blocking others for too long") marks the job failed and undoes nothing:
                // a rule it was creating stays `Add`. The work itself goes on in its worker;
                // a job that never finishes stands for work that hangs until the agent
                // command times out, and a failed association is released by
                // `IpAddressManagerImpl.associateIPToGuestNetwork` ("Failed to associate ip
                // address, so releasing ip from the database", `releaseOnFailure`). The
                // simulator gives the address back at the cancellation, as that failure
                // will: sooner than the server, to the same end.
                if let crate::jobs::JobAction::AssociateIp { .. } = action {
                    commands::roll_back_job(&mut state, &action);
                }
                shared.persist(&state);
            }
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
            None => commands::run_job_action(&mut state, &job.account, &job.action),
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

/// The state as JSON with every account's keys replaced by `***`.
pub(crate) fn dump_state(state: &State) -> Value {
    let mut value = serde_json::to_value(state).unwrap_or(Value::Null);
    if let Some(accounts) = value.get_mut("accounts").and_then(Value::as_array_mut) {
        for account in accounts {
            account["api_key"] = Value::from("***");
            account["secret_key"] = Value::from("***");
        }
    }
    value
}

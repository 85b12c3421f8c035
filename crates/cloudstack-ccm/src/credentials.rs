//! What the controller manager says when CloudStack refuses its keys: the client's
//! observer, which counts calls and jobs in the metrics and, once per change of state,
//! logs one line naming the cloud-config keys and the account (never their values) and
//! sets the `cloudstack_credentials_refused` gauge.

use std::sync::Arc;
use std::time::Duration;

use cloudstack::{CallObserver, CallOutcome, CredentialsChange};

use crate::metrics::Metrics;

/// The CloudStack client's observer in the controller manager.
#[derive(Debug)]
pub(crate) struct CloudObserver {
    metrics: Arc<Metrics>,
}

impl CloudObserver {
    /// An observer reporting to `metrics`.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Self { metrics }
    }
}

/// How a log line names the account of the keys.
fn account_phrase(account: Option<&str>) -> String {
    match account {
        Some(name) => format!("account {name}"),
        None => "the account of the cloud-config api-key".to_owned(),
    }
}

impl CallObserver for CloudObserver {
    fn on_call(&self, command: &str, outcome: &CallOutcome, latency: Duration) {
        self.metrics.on_call(command, outcome, latency);
    }

    fn on_job(&self, command: &str, succeeded: bool, duration: Duration) {
        self.metrics.on_job(command, succeeded, duration);
    }

    fn on_credentials(&self, change: &CredentialsChange<'_>) {
        match change {
            CredentialsChange::Refused {
                command,
                errortext,
                account,
                probe_interval,
            } => {
                self.metrics.set_credentials_refused(true);
                tracing::error!(
                    command,
                    account = account.unwrap_or("-"),
                    "CloudStack refused the credentials of {}: the cloud-config api-key / \
                     secret-key are not accepted (401 {errortext}); CloudStack calls are held, \
                     one probe every {}, until the cloud-config holds keys CloudStack accepts \
                     (the file is reloaded when it changes)",
                    account_phrase(*account),
                    humantime::format_duration(*probe_interval),
                );
            }
            CredentialsChange::Accepted { account } => {
                self.metrics.set_credentials_refused(false);
                tracing::info!(
                    account = account.unwrap_or("-"),
                    "CloudStack accepts the credentials of {} again; CloudStack calls resume",
                    account_phrase(*account),
                );
            }
        }
    }
}

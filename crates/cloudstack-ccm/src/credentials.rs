//! What the controller manager says when CloudStack refuses its keys or a command to
//! them: the client's observer, which counts calls and jobs in the metrics and, once per
//! change of state, logs one line naming the cloud-config keys and the account (never
//! their values) and sets the `cloudstack_credentials_refused` gauge; and, once per command
//! the keys' role refuses (432), one line naming the command and the features it takes away
//! (`cloudstack_command_refusals_total`).

use std::sync::Arc;
use std::time::Duration;

use cloudstack::{CallObserver, CallOutcome, CredentialsChange};

use crate::cloud::key_access::Feature;
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

    fn on_command_refused(&self, command: &str, errortext: &str) {
        self.metrics.command_refused(command);
        let features = Feature::needing(command);
        let takes_away = if features.is_empty() {
            "what needs it fails until the role allows it".to_owned()
        } else {
            let names: Vec<&str> = features.iter().map(|f| f.describe()).collect();
            format!("unavailable: {}", names.join(", "))
        };
        tracing::warn!(
            command,
            "CloudStack refuses {command} to the role of the cloud-config keys (432: {errortext}); \
             not asked again for a while or until the keys change; {takes_away} (docs/keys.md)"
        );
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

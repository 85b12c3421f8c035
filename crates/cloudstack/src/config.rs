//! Client configuration and the observability hook.

use std::fmt;
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::Secret;

/// The outcome of one HTTP call, as reported to a [`CallObserver`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallOutcome {
    /// The server answered with a success envelope.
    Ok,
    /// The server answered with CloudStack error code N (`"431"`, `"537"`, …).
    ApiError(u32),
    /// No HTTP reply (connection error, timeout, TLS failure).
    Transport,
    /// A reply that could not be decoded.
    Decode,
}

impl CallOutcome {
    /// A short label for metrics: `"ok"`, the error code (`"431"`), `"transport"`, `"decode"`.
    pub fn label(&self) -> String {
        match self {
            CallOutcome::Ok => "ok".into(),
            CallOutcome::ApiError(code) => code.to_string(),
            CallOutcome::Transport => "transport".into(),
            CallOutcome::Decode => "decode".into(),
        }
    }
}

impl fmt::Display for CallOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.label())
    }
}

/// A change of what CloudStack says about the client's keys, reported once per change.
/// Never carries a key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialsChange<'a> {
    /// CloudStack refused the keys in use (401 "unable to verify user credentials and/or
    /// request signature"): calls are held, one probe goes every `probe_interval`.
    Refused {
        /// The command that met the refusal.
        command: &'a str,
        /// CloudStack's `errortext`.
        errortext: &'a str,
        /// The account the keys belong to, when learnt
        /// ([`crate::Client::identify_account`]).
        account: Option<&'a str>,
        /// How often a probe is sent while refused.
        probe_interval: Duration,
    },
    /// CloudStack accepts the keys in use again (a probe passed, or new keys were adopted).
    Accepted {
        /// The account the keys belong to, when learnt.
        account: Option<&'a str>,
    },
}

/// Receives one report per HTTP call (including every retry attempt and every job poll),
/// one per finished async job and one per change of the credentials' state.
/// Implementations must be cheap; they run inline.
pub trait CallObserver: Send + Sync {
    /// One HTTP call of `command` finished with `outcome` after `latency`.
    fn on_call(&self, command: &str, outcome: &CallOutcome, latency: Duration);
    /// An async job started by `command` finished (`succeeded` false for failed or timed-out
    /// jobs) after `duration`, measured from the first poll.
    fn on_job(&self, command: &str, succeeded: bool, duration: Duration);
    /// CloudStack refused the keys, or accepts them again. Nothing by default.
    fn on_credentials(&self, change: &CredentialsChange<'_>) {
        let _ = change;
    }
    /// CloudStack refused `command` to the keys' role (432 `errortext`), for the first time
    /// since the keys were adopted or since the last recheck. Nothing by default.
    fn on_command_refused(&self, command: &str, errortext: &str) {
        let _ = (command, errortext);
    }
}

/// Everything [`crate::Client::new`] needs. Build with [`ClientConfig::new`] and adjust fields.
#[derive(Clone)]
pub struct ClientConfig {
    /// API endpoint, e.g. `https://cloud.example.com/client/api`.
    pub api_url: String,
    /// The user's API key.
    pub api_key: Secret,
    /// The user's secret key (signs requests; never sent).
    pub secret_key: Secret,
    /// When set, `projectid` is added to every command that accepts it (the account-scoped
    /// list commands and `associateIpAddress`) unless the caller set it.
    pub project_id: Option<String>,
    /// Accept any server certificate.
    pub ssl_no_verify: bool,
    /// Extra trusted CA certificates (PEM bundle).
    pub ca_file: Option<PathBuf>,
    /// Timeout of one HTTP request. Default 30 s.
    pub request_timeout: Duration,
    /// Client-side rate limit in requests per second (none by default). Up to that many
    /// requests may go out at once; after that they are spaced evenly.
    pub requests_per_second: Option<NonZeroU32>,
    /// Retries of a read after a retryable failure. Default 5.
    pub max_retries: u32,
    /// First retry delay; doubles per attempt up to `retry_backoff_max`. Default 200 ms.
    pub retry_backoff_initial: Duration,
    /// Largest retry delay (also caps a server's "retry after"). Default 10 s.
    pub retry_backoff_max: Duration,
    /// Overall time to wait for an async job. Default 10 min.
    pub job_timeout: Duration,
    /// First job poll interval. Default 50 ms.
    pub job_poll_initial: Duration,
    /// Largest job poll interval (the interval grows ×1.5 per poll). Default 1 s.
    pub job_poll_max: Duration,
    /// While CloudStack refuses the keys, one call per this interval is sent as a probe;
    /// the others fail at once. Default 5 s.
    pub credentials_probe_interval: Duration,
    /// A command CloudStack refused to the keys' role (432), or that their `listApis` does
    /// not list, is not sent again for this long (calls fail at once with
    /// [`crate::Error::CommandUnavailable`]); then one call may ask again, in case the role
    /// changed. New keys start with nothing refused. Default 30 min.
    pub refused_command_recheck: Duration,
    /// Receives per-call and per-job reports (metrics).
    pub observer: Option<Arc<dyn CallObserver>>,
}

impl ClientConfig {
    /// A configuration with the given endpoint and keys and default settings.
    pub fn new(
        api_url: impl Into<String>,
        api_key: impl Into<Secret>,
        secret_key: impl Into<Secret>,
    ) -> Self {
        Self {
            api_url: api_url.into(),
            api_key: api_key.into(),
            secret_key: secret_key.into(),
            project_id: None,
            ssl_no_verify: false,
            ca_file: None,
            request_timeout: Duration::from_secs(30),
            requests_per_second: None,
            max_retries: 5,
            retry_backoff_initial: Duration::from_millis(200),
            retry_backoff_max: Duration::from_secs(10),
            job_timeout: Duration::from_secs(600),
            job_poll_initial: Duration::from_millis(50),
            job_poll_max: Duration::from_secs(1),
            credentials_probe_interval: Duration::from_secs(5),
            refused_command_recheck: Duration::from_secs(30 * 60),
            observer: None,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfig")
            .field("api_url", &self.api_url)
            .field("api_key", &self.api_key)
            .field("secret_key", &self.secret_key)
            .field("project_id", &self.project_id)
            .field("ssl_no_verify", &self.ssl_no_verify)
            .field("ca_file", &self.ca_file)
            .field("request_timeout", &self.request_timeout)
            .field("requests_per_second", &self.requests_per_second)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff_initial", &self.retry_backoff_initial)
            .field("retry_backoff_max", &self.retry_backoff_max)
            .field("job_timeout", &self.job_timeout)
            .field("job_poll_initial", &self.job_poll_initial)
            .field("job_poll_max", &self.job_poll_max)
            .field(
                "credentials_probe_interval",
                &self.credentials_probe_interval,
            )
            .field("refused_command_recheck", &self.refused_command_recheck)
            .field("observer", &self.observer.as_ref().map(|_| "set"))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::ClientConfig;

    #[test]
    fn debug_hides_keys() {
        let config = ClientConfig::new("http://x/client/api", "KEY-123", "SECRET-456");
        let debug = format!("{config:?}");
        assert!(
            !debug.contains("KEY-123") && !debug.contains("SECRET-456"),
            "{debug}"
        );
        assert!(debug.contains("http://x/client/api"));
    }
}

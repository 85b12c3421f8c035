//! Following the `--cloud-config` file at run time: new keys (and TLS settings) are
//! checked and adopted without a restart.
//!
//! The file (and the `ca-file` it names) is read when inotify reports a change in its
//! directory (`file_watch`), every minute besides, every `POLL_INTERVAL` where inotify is
//! not available, and on `SIGHUP`. Reading the path (not the inode) sees every way it
//! changes: a Secret volume's atomic swap of the `..data` symlink, a rewrite in place, a
//! rename over it; the bytes read are compared, and only a change is parsed as start-up
//! parses the file; what may change at run time (`api-key`, `secret-key`,
//! `ssl-no-verify`, `ca-file`) is then checked with one call (`listAccounts`, signed with
//! the new keys, over the new TLS settings) and adopted by the running client: calls in
//! flight finish, later calls and job polls are signed with the new keys. An invalid file,
//! keys CloudStack refuses or an endpoint that does not answer keep the running
//! configuration, said in one log line naming the key. `api-url`, `zone`, `project-id`
//! and the other start-up settings are not applied: a change is logged as needing a
//! restart. Every attempt is counted in `cloud_config_reloads_total{result}`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::config::CloudConfig;
use crate::connect;
use crate::controllers::{FirstNodePass, Shutdown};
use crate::file_watch::FileChanges;
use crate::metrics::Metrics;

/// How often the file is read where inotify is not available.
pub(crate) const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// `cloud_config_reloads_total` results.
const APPLIED: &str = "applied";
const UNCHANGED: &str = "unchanged";
const RESTART_REQUIRED: &str = "restart_required";
const INVALID: &str = "invalid";
const REJECTED: &str = "rejected";

/// Settings read at start-up only, with their cloud-config keys.
fn restart_only_changes(running: &CloudConfig, new: &CloudConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    let mut check = |key, differs: bool| {
        if differs {
            changed.push(key);
        }
    };
    check("api-url", running.api_url != new.api_url);
    check("project-id", running.project_id != new.project_id);
    check("zone", running.zone != new.zone);
    check("region", running.region != new.region);
    check("version", running.version != new.version);
    check(
        "requests-per-second",
        running.requests_per_second != new.requests_per_second,
    );
    check("job-timeout", running.job_timeout != new.job_timeout);
    changed
}

/// The run-time settings of `new` that differ from `running`, by cloud-config key.
fn reloadable_changes(running: &CloudConfig, new: &CloudConfig) -> Vec<&'static str> {
    let mut changed = Vec::new();
    if running.api_key != new.api_key {
        changed.push("api-key");
    }
    if running.secret_key != new.secret_key {
        changed.push("secret-key");
    }
    if running.ssl_no_verify != new.ssl_no_verify {
        changed.push("ssl-no-verify");
    }
    if running.ca_file != new.ca_file {
        changed.push("ca-file");
    }
    changed
}

/// Follows the cloud-config file and applies its run-time settings to the client.
pub(crate) struct Reloader {
    path: PathBuf,
    running: CloudConfig,
    client: cloudstack::Client,
    metrics: Arc<Metrics>,
    /// The file (and `ca-file`) bytes last looked at.
    last_seen: Option<Vec<u8>>,
    /// The cloud-config bytes last parsed for their `ca-file`, and that path: the file is
    /// parsed again only when it changes, not on every poll.
    ca_file_of: Option<(Vec<u8>, Option<PathBuf>)>,
}

impl Reloader {
    /// Follows `path`, whose settings `running` are in use by `client`.
    pub fn new(
        path: PathBuf,
        running: CloudConfig,
        client: cloudstack::Client,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            path,
            running,
            client,
            metrics,
            last_seen: None,
            ca_file_of: None,
        }
    }

    /// Learns the account of the running keys (for log lines) once Node initialisation's
    /// first pass is done (no read of ours may delay it), and reads the file when it
    /// changes (see [`FileChanges`]) and on `SIGHUP` until `shutdown`.
    pub async fn run(mut self, shutdown: Shutdown, first_node_pass: FirstNodePass) {
        let client = self.client.clone();
        tokio::spawn(async move {
            first_node_pass.wait_quietly().await;
            if let Err(error) = client.identify_account().await {
                tracing::debug!(%error, "cannot tell which account the keys belong to");
            }
        });
        let mut hangup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        {
            Ok(stream) => Some(stream),
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGHUP; the cloud-config is still read when it changes");
                None
            }
        };
        // Read once now: a change between start-up's read and the watch is not missed,
        // and the `ca-file` named is known before the watch starts.
        self.check(false).await;
        let mut changes = FileChanges::new(self.followed_files(), POLL_INTERVAL);
        loop {
            let hangup_received = async {
                match hangup.as_mut() {
                    Some(stream) => stream.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = changes.next() => self.check(false).await,
                _ = hangup_received => {
                    tracing::info!(path = %self.path.display(), "SIGHUP: reloading the cloud-config");
                    self.check(true).await;
                }
                () = shutdown.wait() => return,
            }
            changes.follow(self.followed_files());
        }
    }

    /// The cloud-config and the `ca-file` it names, if any.
    fn followed_files(&self) -> Vec<PathBuf> {
        let ca_file = self
            .ca_file_of
            .as_ref()
            .and_then(|(_, ca_file)| ca_file.clone());
        std::iter::once(self.path.clone()).chain(ca_file).collect()
    }

    /// Reads the file; when it changed (or `forced`), reloads it.
    pub async fn check(&mut self, forced: bool) {
        let bytes = match read_with_ca_file(&self.path, &mut self.ca_file_of) {
            Ok(bytes) => bytes,
            Err(error) => {
                let seen = error.as_bytes().to_vec();
                if forced || self.last_seen.as_ref() != Some(&seen) {
                    self.last_seen = Some(seen);
                    self.metrics.cloud_config_reload(INVALID);
                    tracing::error!(
                        "cloud-config not reloaded: {error}; the running configuration stays"
                    );
                }
                return;
            }
        };
        if !forced && self.last_seen.as_ref() == Some(&bytes) {
            return;
        }
        self.last_seen = Some(bytes);
        let result = self.reload(forced).await;
        self.metrics.cloud_config_reload(result);
    }

    /// Parses, checks and applies the file; returns the metric's result.
    async fn reload(&mut self, forced: bool) -> &'static str {
        let new = match CloudConfig::load(Some(&self.path), |name| std::env::var(name).ok()) {
            Ok(new) => new,
            Err(error) => {
                tracing::error!(
                    "cloud-config not reloaded: {error}; the running configuration stays"
                );
                return INVALID;
            }
        };
        let restart_only = restart_only_changes(&self.running, &new);
        for key in &restart_only {
            tracing::warn!(
                key,
                "cloud-config {key} changed: it is read at start-up only, so the change is not applied until a restart"
            );
        }
        let changed = reloadable_changes(&self.running, &new);
        if changed.is_empty() && !forced {
            return if restart_only.is_empty() {
                UNCHANGED
            } else {
                RESTART_REQUIRED
            };
        }
        // The running start-up settings with the new run-time ones.
        let candidate_config = CloudConfig {
            api_key: new.api_key.clone(),
            secret_key: new.secret_key.clone(),
            ssl_no_verify: new.ssl_no_verify,
            ca_file: new.ca_file.clone(),
            ..self.running.clone()
        };
        let mut client_config = connect::client_config(&candidate_config);
        client_config.max_retries = 1;
        client_config.observer = Some(self.metrics.clone());
        let candidate = match cloudstack::Client::new(client_config) {
            Ok(candidate) => candidate,
            Err(error) => {
                tracing::error!(
                    "cloud-config not reloaded: {error}; the running configuration stays"
                );
                return INVALID;
            }
        };
        if let Err(result) = self.verify(&candidate).await {
            return result;
        }
        self.client.adopt_credentials(&candidate);
        self.running = candidate_config;
        // New keys may have another role: what they may call is learnt again.
        if let Err(error) = connect::discover_access(&self.client).await {
            tracing::debug!(%error, "cannot read listApis for the new keys now; what they may call is learnt from refusals");
        }
        let account = self.client.account();
        tracing::info!(
            changed = %changed.join(", "),
            account = account.as_deref().unwrap_or("-"),
            "cloud-config reloaded: CloudStack calls now use the new {}",
            if changed.is_empty() { "connections (unchanged keys)".to_owned() } else { changed.join(", ") },
        );
        APPLIED
    }

    /// One call with the candidate's keys and TLS settings: `Err` (with the metric's
    /// result) when CloudStack refuses the keys, does not answer, or names another account.
    async fn verify(&self, candidate: &cloudstack::Client) -> Result<(), &'static str> {
        let api_url = &self.running.api_url;
        // A role without listAccounts answers 432 before the signature is checked, which
        // proves nothing: a read the role allows is asked instead.
        let identified = match candidate.identify_account().await {
            Err(error) if error.is_command_refused() => {
                candidate.verify_keys().await.map(|()| None)
            }
            other => other,
        };
        match identified {
            Ok(new_account) => {
                if let (Some(running), Some(new)) = (self.client.account(), new_account)
                    && running != new
                {
                    tracing::error!(
                        "cloud-config not reloaded: the new api-key belongs to account {new}, the running one to account {running}; a change of account needs a restart"
                    );
                    return Err(REJECTED);
                }
                Ok(())
            }
            Err(error) if error.is_refused_credentials() => {
                tracing::error!(
                    "cloud-config not reloaded: CloudStack refused the new api-key / secret-key (HTTP 401); the running keys stay"
                );
                Err(REJECTED)
            }
            Err(
                error @ (cloudstack::Error::Transport { .. }
                | cloudstack::Error::Certificate { .. }),
            ) => {
                tracing::error!(
                    "cloud-config not reloaded: CloudStack at api-url {api_url} does not answer with the new settings (ssl-no-verify, ca-file): {error}; the running configuration stays"
                );
                Err(REJECTED)
            }
            // Any other answer comes after CloudStack verified the keys (a server error):
            // they are accepted.
            Err(error) => {
                tracing::debug!(%error, "the check of the new keys failed after CloudStack verified them");
                Ok(())
            }
        }
    }
}

/// The bytes of the cloud-config file and of the `ca-file` it names (a new CA bundle at
/// the same path is a change too), or why they cannot be read.
/// `ca_file_of` remembers the `ca-file` of the last bytes parsed, so an unchanged file is
/// not parsed again.
fn read_with_ca_file(
    path: &Path,
    ca_file_of: &mut Option<(Vec<u8>, Option<PathBuf>)>,
) -> Result<Vec<u8>, String> {
    let mut bytes = std::fs::read(path)
        .map_err(|error| format!("cannot read cloud-config {}: {error}", path.display()))?;
    let ca_file = match ca_file_of {
        Some((parsed, ca_file)) if *parsed == bytes => ca_file.clone(),
        _ => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let ca_file = CloudConfig::from_text(&text, |name| std::env::var(name).ok())
                .ok()
                .and_then(|config| config.ca_file);
            *ca_file_of = Some((bytes.clone(), ca_file.clone()));
            ca_file
        }
    };
    if let Some(ca_file) = &ca_file {
        match std::fs::read(ca_file) {
            Ok(ca) => bytes.extend(ca),
            Err(error) => bytes.extend(error.to_string().into_bytes()),
        }
    }
    Ok(bytes)
}

/// Starts following `path` (when the cloud-config came from a file) for `client`, which
/// runs with `running`; the account of its keys is learnt once `first_node_pass` opens.
pub fn spawn(
    path: Option<&Path>,
    running: &CloudConfig,
    client: &cloudstack::Client,
    metrics: &Arc<Metrics>,
    shutdown: Shutdown,
    first_node_pass: FirstNodePass,
) {
    let Some(path) = path else {
        tracing::info!(
            "no --cloud-config file: the configuration comes from the environment and is not reloaded"
        );
        return;
    };
    let reloader = Reloader::new(
        path.to_owned(),
        running.clone(),
        client.clone(),
        metrics.clone(),
    );
    tokio::spawn(reloader.run(shutdown, first_node_pass));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> CloudConfig {
        CloudConfig::from_text(text, |_| None).unwrap()
    }

    #[test]
    fn run_time_and_start_up_settings_are_told_apart() {
        let running =
            config("api-url = http://a/client/api\napi-key = K\nsecret-key = S\nzone = z1\n");
        let new = config(
            "api-url = http://b/client/api\napi-key = K2\nsecret-key = S\nzone = z2\nssl-no-verify\nproject-id = p\n",
        );
        assert_eq!(
            restart_only_changes(&running, &new),
            ["api-url", "project-id", "zone"]
        );
        assert_eq!(
            reloadable_changes(&running, &new),
            ["api-key", "ssl-no-verify"]
        );
        assert!(restart_only_changes(&running, &running).is_empty());
        assert!(reloadable_changes(&running, &running).is_empty());
    }
}

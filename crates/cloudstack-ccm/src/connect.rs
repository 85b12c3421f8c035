//! Building the CloudStack and Kubernetes clients from the cloud-config and the flags:
//! the controller manager and the tools that run instead of it (`plan`, `demo`) share these.

use std::sync::Arc;

use crate::cli::ManagerArgs;
use crate::config::CloudConfig;
use crate::metrics::Metrics;

/// Why a client could not be built or the CloudStack version not be learned.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The CloudStack client could not be built (e.g. an unreadable `ca-file`).
    #[error("cannot build the CloudStack client: {0}")]
    CloudStack(#[source] cloudstack::Error),
    /// The cloud-config `version` does not parse.
    #[error("cloud-config: invalid version {text:?}: {reason}")]
    Version {
        /// The configured text.
        text: String,
        /// Why it does not parse.
        reason: String,
    },
    /// `listCapabilities` failed.
    #[error("cannot detect the CloudStack version at {url}: {source}")]
    DetectVersion {
        /// The API endpoint.
        url: String,
        /// The client error.
        #[source]
        source: cloudstack::Error,
    },
    /// The kubeconfig or `--master` is unusable.
    #[error("{0}")]
    Kube(String),
    /// A cloud-config key names a CloudStack object the account cannot see.
    #[error("cloud-config {key}: {reason}")]
    Scope {
        /// The key (`project-id`, `zone`).
        key: &'static str,
        /// What is wrong with its value.
        reason: String,
    },
    /// The objects a cloud-config key names could not be listed.
    #[error("cloud-config {key}: cannot check it: {source}")]
    CheckScope {
        /// The key (`project-id`, `zone`).
        key: &'static str,
        /// The client error.
        #[source]
        source: cloudstack::Error,
    },
}

impl ConnectError {
    /// Whether CloudStack could not be asked (down, unreachable, failing, refusing the keys)
    /// rather than having answered that the cloud-config is wrong: worth asking again.
    /// A certificate CloudStack's endpoint presents that the configured trust refuses is
    /// the cloud-config's to fix (`ca-file`, `ssl-no-verify`): not transient.
    pub fn is_transient(&self) -> bool {
        match self {
            ConnectError::DetectVersion { source, .. }
            | ConnectError::CheckScope { source, .. } => {
                !matches!(source, cloudstack::Error::Certificate { .. })
            }
            _ => false,
        }
    }
}

/// One attempt at what start-up needs of CloudStack: the server version
/// ([`server_version`]) and the cloud-config's scope ([`check_scope`]).
pub async fn contact_cloudstack(
    config: &CloudConfig,
    client: &cloudstack::Client,
) -> Result<cloudstack::ServerVersion, ConnectError> {
    let version = server_version(config, client).await?;
    check_scope(config, client).await?;
    Ok(version)
}

/// The longest wait between two attempts of [`wait_for_cloudstack`].
const CLOUDSTACK_RETRY_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// How often [`wait_for_cloudstack`] says again that it is still waiting.
const CLOUDSTACK_REMINDER: std::time::Duration = std::time::Duration::from_secs(60);

/// After a first attempt of [`contact_cloudstack`] failed with the transient `error`, asks
/// again until CloudStack answers — a management-server upgrade or a network blip at
/// start-up is waited out, not a crash loop: one warning, then a reminder every minute,
/// attempts 0.5 s apart doubling up to 5 s. An answer that the cloud-config is wrong (a
/// version that does not parse, a zone or project the account cannot see, a certificate
/// the configured trust refuses) is returned at once. `Ok(None)` when `shutdown` comes
/// first (the process is stopping).
pub async fn wait_for_cloudstack(
    config: &CloudConfig,
    client: &cloudstack::Client,
    shutdown: impl std::future::Future<Output = ()>,
    error: ConnectError,
) -> Result<Option<cloudstack::ServerVersion>, ConnectError> {
    tokio::pin!(shutdown);
    let started = tokio::time::Instant::now();
    let mut delay = std::time::Duration::from_millis(500);
    let mut attempts = 1u32;
    let mut last_said: Option<tokio::time::Instant> = None;
    let mut error = error;
    loop {
        if !error.is_transient() {
            return Err(error);
        }
        let now = tokio::time::Instant::now();
        match last_said {
            None => tracing::warn!(
                %error,
                "waiting for CloudStack before starting the controllers (health checks are served, readiness says not ready)"
            ),
            Some(at) if now.duration_since(at) >= CLOUDSTACK_REMINDER => tracing::warn!(
                %error,
                waited = ?started.elapsed(),
                attempts,
                "still waiting for CloudStack"
            ),
            Some(_) => tracing::debug!(%error, attempts, "CloudStack does not answer yet"),
        }
        if last_said.is_none_or(|at| now.duration_since(at) >= CLOUDSTACK_REMINDER) {
            last_said = Some(now);
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = &mut shutdown => return Ok(None),
        }
        delay = (delay * 2).min(CLOUDSTACK_RETRY_MAX);
        attempts += 1;
        error = match contact_cloudstack(config, client).await {
            Ok(version) => {
                tracing::info!(
                    waited = ?started.elapsed(),
                    attempts,
                    "CloudStack answers; starting"
                );
                return Ok(Some(version));
            }
            Err(error) => error,
        };
    }
}

/// A CloudStack client for `config`, reporting every call to `metrics` and logging when
/// CloudStack refuses the keys or accepts them again ([`crate::credentials`]).
pub fn cloudstack_client(
    config: &CloudConfig,
    metrics: Arc<Metrics>,
) -> Result<cloudstack::Client, ConnectError> {
    let mut client_config = client_config(config);
    client_config.observer = Some(Arc::new(crate::credentials::CloudObserver::new(metrics)));
    cloudstack::Client::new(client_config).map_err(ConnectError::CloudStack)
}

/// The client settings `config` asks for (no observer).
pub(crate) fn client_config(config: &CloudConfig) -> cloudstack::ClientConfig {
    let mut client_config = cloudstack::ClientConfig::new(
        config.api_url.clone(),
        config.api_key.clone(),
        config.secret_key.clone(),
    );
    client_config.project_id = config.project_id.clone();
    client_config.ssl_no_verify = config.ssl_no_verify;
    client_config.ca_file = config.ca_file.clone();
    client_config.requests_per_second = config.requests_per_second;
    if let Some(timeout) = config.job_timeout {
        client_config.job_timeout = timeout;
    }
    client_config
}

/// The configured `version`, else the one `listCapabilities` reports (any account may ask).
pub async fn server_version(
    config: &CloudConfig,
    client: &cloudstack::Client,
) -> Result<cloudstack::ServerVersion, ConnectError> {
    if let Some(text) = &config.version {
        return text.parse().map_err(|error| ConnectError::Version {
            text: text.clone(),
            reason: format!("{error}"),
        });
    }
    client
        .server_version()
        .await
        .map_err(|source| ConnectError::DetectVersion {
            url: config.api_url.clone(),
            source,
        })
}

/// Checks that the cloud-config's `project-id` and `zone`, when set, name a project and a
/// zone this account can see: a wrong value would otherwise show as an empty VM list, and
/// every node lookup would answer "no such VM".
///
/// The project is looked up with `listProjects id=…` (a user sees only the projects it is
/// a member of); the zone with `listZones`, matched by name (as the Go provider's
/// cloud-config writes it) or by id. Both lists are small; matching here, not with a
/// `name` filter, keeps the check right on servers that ignore an unknown parameter.
pub async fn check_scope(
    config: &CloudConfig,
    client: &cloudstack::Client,
) -> Result<(), ConnectError> {
    if let Some(project_id) = &config.project_id {
        let request = cloudstack::ListProjects {
            id: Some(project_id.clone()),
            ..Default::default()
        };
        let projects = match client.list_projects(&request).await {
            Ok(projects) => projects,
            // A malformed or unknown id is refused with 431 (invalid parameter value).
            Err(cloudstack::Error::Api {
                errorcode: cloudstack::PARAM_ERROR,
                errortext,
                ..
            }) => {
                return Err(ConnectError::Scope {
                    key: "project-id",
                    reason: format!("{project_id:?} is not a project: {errortext}"),
                });
            }
            Err(source) => {
                return Err(ConnectError::CheckScope {
                    key: "project-id",
                    source,
                });
            }
        };
        let found = projects.iter().any(|project| {
            project
                .id
                .as_deref()
                .is_some_and(|id| id.eq_ignore_ascii_case(project_id))
        });
        if !found {
            return Err(ConnectError::Scope {
                key: "project-id",
                reason: format!(
                    "no project with id {project_id:?} is visible to this account (listProjects)"
                ),
            });
        }
    }
    if let Some(zone) = &config.zone {
        let zones = client
            .list_zones(&cloudstack::ListZones::default())
            .await
            .map_err(|source| ConnectError::CheckScope {
                key: "zone",
                source,
            })?;
        let found = zones.iter().any(|candidate| {
            candidate.name.as_deref() == Some(zone.as_str())
                || candidate
                    .id
                    .as_deref()
                    .is_some_and(|id| id.eq_ignore_ascii_case(zone))
        });
        if !found {
            let mut names: Vec<&str> = zones.iter().filter_map(|z| z.name.as_deref()).collect();
            names.sort_unstable();
            return Err(ConnectError::Scope {
                key: "zone",
                reason: format!(
                    "no zone named {zone:?} (zones this account sees: {})",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ),
            });
        }
    }
    Ok(())
}

/// `--kubeconfig` (with `--master` overriding its server), else `--master` alone, else the
/// in-cluster configuration or `$KUBECONFIG` / `~/.kube/config`.
pub async fn kube_client(args: &ManagerArgs) -> Result<kube::Client, ConnectError> {
    let invalid_master = |master: &str, error: &dyn std::fmt::Display| {
        ConnectError::Kube(format!("invalid --master {master:?}: {error}"))
    };
    let mut config = match (&args.kubeconfig, &args.master) {
        (Some(path), _) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path).map_err(|error| {
                ConnectError::Kube(format!(
                    "cannot read kubeconfig {}: {error}",
                    path.display()
                ))
            })?;
            kube::Config::from_custom_kubeconfig(
                kubeconfig,
                &kube::config::KubeConfigOptions::default(),
            )
            .await
            .map_err(|error| {
                ConnectError::Kube(format!("invalid kubeconfig {}: {error}", path.display()))
            })?
        }
        (None, Some(master)) => kube::Config::new(
            master
                .parse()
                .map_err(|error| invalid_master(master, &error))?,
        ),
        (None, None) => kube::Config::infer().await.map_err(|error| {
            ConnectError::Kube(format!("cannot find a Kubernetes configuration: {error}"))
        })?,
    };
    if let Some(master) = &args.master {
        config.cluster_url = master
            .parse()
            .map_err(|error| invalid_master(master, &error))?;
    }
    kube::Client::try_from(config)
        .map_err(|error| ConnectError::Kube(format!("cannot build the Kubernetes client: {error}")))
}

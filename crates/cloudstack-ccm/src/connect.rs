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

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
}

/// A CloudStack client for `config`, reporting every call to `metrics`.
pub fn cloudstack_client(
    config: &CloudConfig,
    metrics: Arc<Metrics>,
) -> Result<cloudstack::Client, ConnectError> {
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
    client_config.observer = Some(metrics);
    cloudstack::Client::new(client_config).map_err(ConnectError::CloudStack)
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

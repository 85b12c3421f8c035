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

/// The oldest CloudStack release the controller supports: the version assumed when the
/// server shows none (a hardened server hiding it from a role that may not call
/// `listApis`) and the cloud-config sets none. Every version gate is then off.
pub const OLDEST_SUPPORTED: (u32, u32, u32) = (4, 15, 0);

/// Where the server version the controller works with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSource {
    /// The cloud-config's `version`.
    Config,
    /// `listCapabilities` → `cloudstackversion`.
    Capabilities,
    /// The `cloud-stack-version` attribute of an XML reply.
    XmlReply,
    /// The newest `since` of `listApis`: the server is at least this release.
    ApiListing,
    /// Nothing showed it: [`OLDEST_SUPPORTED`].
    Assumed,
}

impl std::fmt::Display for VersionSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            VersionSource::Config => "set by the cloud-config",
            VersionSource::Capabilities => "detected with listCapabilities",
            VersionSource::XmlReply => "read from an XML reply (cloud-stack-version)",
            VersionSource::ApiListing => {
                "at least this release, from listApis (the server hides its version)"
            }
            VersionSource::Assumed => {
                "assumed: the oldest release supported (the server hides its version from these keys; set version in the cloud-config)"
            }
        })
    }
}

/// The server version and where it came from.
#[derive(Debug, Clone)]
pub struct DetectedVersion {
    /// The version the controller gates features on.
    pub version: cloudstack::ServerVersion,
    /// Where it came from.
    pub source: VersionSource,
    /// The `listCapabilities` answer read on the way, if it was (its API rate limit, …).
    pub capabilities: Option<cloudstack::Capabilities>,
}

/// One attempt at what start-up needs of CloudStack: what the keys may call
/// (`listApis`, where the role allows it), the server version ([`server_version`]) and the
/// cloud-config's scope ([`check_scope`]). A command the keys' role refuses never stops
/// it: the version falls back as [`server_version`] says, an unverifiable scope is used as
/// given. Only a CloudStack that cannot be asked (down, failing, refusing the keys) or a
/// cloud-config it says is wrong fails it.
pub async fn contact_cloudstack(
    config: &CloudConfig,
    client: &cloudstack::Client,
) -> Result<DetectedVersion, ConnectError> {
    let version = learn_server(config, client).await?;
    check_scope(config, client).await?;
    Ok(version)
}

/// What the keys may call ([`discover_access`]) and the server version
/// ([`server_version`]): what `plan`, `orphans` and the demo learn before they start.
pub async fn learn_server(
    config: &CloudConfig,
    client: &cloudstack::Client,
) -> Result<DetectedVersion, ConnectError> {
    match discover_access(client).await {
        Ok(listing) => server_version(config, client, listing.as_ref()).await,
        // A configured version needs no call: the start goes on, and what the keys may
        // call is learnt from refusals (new keys ask listApis again).
        Err(error)
            if config.version.is_some()
                && !matches!(error, cloudstack::Error::Certificate { .. }) =>
        {
            tracing::debug!(%error, "cannot read listApis now");
            server_version(config, client, None).await
        }
        Err(source) => Err(ConnectError::DetectVersion {
            url: config.api_url.clone(),
            source,
        }),
    }
}

/// `listApis`: what the keys' role allows, remembered by the client. `Ok(None)` when the
/// role may not call it (what the keys may call is then learnt from the first refusal of
/// each command) or its answer cannot be read; the error when CloudStack cannot be asked
/// now (down, failing, refusing the keys, a certificate the trust refuses).
pub async fn discover_access(
    client: &cloudstack::Client,
) -> Result<Option<cloudstack::ApiListing>, cloudstack::Error> {
    let listing = match client.discover_api_access().await {
        Ok(Some(listing)) => {
            tracing::info!(
                commands = listing.commands.len(),
                "listApis: the role of the cloud-config keys allows {} commands",
                listing.commands.len()
            );
            Some(listing)
        }
        Ok(None) => {
            tracing::info!(
                "the role of the cloud-config keys may not call listApis: what they may call is learnt from the first refusal of each command"
            );
            None
        }
        Err(error) if unreachable(&error) => return Err(error),
        Err(error) => {
            tracing::warn!(%error, "cannot read listApis; what the keys may call is learnt from refusals");
            None
        }
    };
    Ok(listing)
}

/// Whether `error` says CloudStack could not be asked at all (no answer, a server failure,
/// refused keys), as opposed to an answer about this one command.
fn unreachable(error: &cloudstack::Error) -> bool {
    error.is_refused_credentials()
        || matches!(
            error,
            cloudstack::Error::Transport { .. } | cloudstack::Error::Certificate { .. }
        )
        || (error.is_retryable() && !error.is_command_refused())
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
) -> Result<Option<DetectedVersion>, ConnectError> {
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

/// The server version: the cloud-config's `version` when set; else `listCapabilities`'
/// `cloudstackversion` where the keys may call it and the server shows it; else the
/// `cloud-stack-version` of an XML reply; else the newest `since` of `listApis`
/// (`listing`); else [`OLDEST_SUPPORTED`]. Never waits for a version: only a CloudStack
/// that cannot be asked fails it.
pub async fn server_version(
    config: &CloudConfig,
    client: &cloudstack::Client,
    listing: Option<&cloudstack::ApiListing>,
) -> Result<DetectedVersion, ConnectError> {
    let mut capabilities = None;
    let detected = |version, source, capabilities| {
        Ok(DetectedVersion {
            version,
            source,
            capabilities,
        })
    };
    if let Some(text) = &config.version {
        let version = text.parse().map_err(|error| ConnectError::Version {
            text: text.clone(),
            reason: format!("{error}"),
        })?;
        return detected(version, VersionSource::Config, None);
    }
    let failed = |source: cloudstack::Error| ConnectError::DetectVersion {
        url: config.api_url.clone(),
        source,
    };
    if client.may_call("listCapabilities") {
        match client.list_capabilities().await {
            Ok(read) => {
                if let Some(version) = read.version() {
                    return detected(version, VersionSource::Capabilities, Some(read));
                }
                tracing::info!(
                    "listCapabilities shows no cloudstackversion (expose.cloudstack.version.api.list.capabilities is off)"
                );
                capabilities = Some(read);
            }
            Err(source) if unreachable(&source) => return Err(failed(source)),
            Err(error) => tracing::info!(%error, "listCapabilities gives no version"),
        }
    }
    match client.server_version_from_xml().await {
        Ok(Some(version)) => return detected(version, VersionSource::XmlReply, capabilities),
        Ok(None) => tracing::info!(
            "XML replies show no cloud-stack-version (expose.cloudstack.version.api.xml.response is off)"
        ),
        Err(source) if unreachable(&source) => return Err(failed(source)),
        Err(error) => tracing::info!(%error, "no XML reply to read the version from"),
    }
    if let Some(version) = listing.and_then(|listing| listing.newest_since.clone()) {
        return detected(version, VersionSource::ApiListing, capabilities);
    }
    let (major, minor, patch) = OLDEST_SUPPORTED;
    detected(
        cloudstack::ServerVersion::new(major, minor, patch),
        VersionSource::Assumed,
        capabilities,
    )
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
            Err(error) if error.is_project_refused() => {
                return Err(ConnectError::Scope {
                    key: "project-id",
                    reason: format!("the keys are not a member of project {project_id:?}: {error}"),
                });
            }
            Err(error) if error.is_command_refused() => {
                unverified("project-id", project_id, "listProjects");
                Vec::new()
            }
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
        let found = !client.may_call("listProjects")
            || projects.iter().any(|project| {
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
        let zones = match client.list_zones(&cloudstack::ListZones::default()).await {
            Ok(zones) => zones,
            Err(error) if error.is_command_refused() => {
                unverified("zone", zone, "listZones");
                return Ok(());
            }
            Err(source) => {
                return Err(ConnectError::CheckScope {
                    key: "zone",
                    source,
                });
            }
        };
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

/// Says that the cloud-config `key` is used as given: the keys' role may not call
/// `command`, which would have checked it.
fn unverified(key: &str, value: &str, command: &str) {
    tracing::warn!(
        key,
        "cloud-config {key} {value:?} cannot be verified: the role of the keys may not call {command}; it is used as given"
    );
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

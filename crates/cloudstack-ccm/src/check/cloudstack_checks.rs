//! The CloudStack checks: the endpoint and the keys, what the keys may call, the version,
//! the cloud-config's project and zone, the API rate limit.

use super::{Check, Group, Status};
use crate::cloud::key_access::Feature;
use crate::config::CloudConfig;
use crate::connect::{self, ConnectError, VersionSource};

/// What the CloudStack group found, and what the other groups need of it.
pub(super) struct CloudChecks {
    /// The checks.
    pub group: Group,
    /// The server version, when CloudStack could be asked.
    pub version: Option<cloudstack::ServerVersion>,
    /// Whether CloudStack answered with these keys.
    pub reachable: bool,
}

/// Read-only commands asked, where `listApis` is refused, to learn whether the role allows
/// a feature (a 432 says no; any other answer, yes): one read per feature, never a
/// mutating command.
const PROBES: [(Feature, &str); 4] = [
    (Feature::OwnershipTags, "listTags"),
    (Feature::TlsTermination, "listSslCerts"),
    (Feature::InternalLoadBalancer, "listLoadBalancers"),
    (Feature::StaticRoutes, "listStaticRoutes"),
];

/// Runs the CloudStack checks with `client`.
pub(super) async fn check(config: &CloudConfig, client: &cloudstack::Client) -> CloudChecks {
    let mut checks = Vec::new();
    // listApis answers (the keys are verified) or is refused before the signature is
    // looked at: then one read the role allows says whether the keys are accepted.
    let reached = match connect::discover_access(client).await {
        Ok(Some(listing)) => Ok(Some(listing)),
        Ok(None) => client.verify_keys().await.map(|()| None),
        Err(error) => Err(error),
    };
    let listing = match reached {
        Ok(listing) => listing,
        Err(error) => {
            return CloudChecks {
                group: Group {
                    name: "CloudStack",
                    checks: vec![unreachable_check(config, &error)],
                },
                version: None,
                reachable: false,
            };
        }
    };
    checks.push(Check::new(
        "endpoint and keys",
        Status::Ok,
        format!("{} answers and accepts the keys", config.api_url),
    ));
    checks.push(match &listing {
        Some(listing) => Check::new(
            "what the keys may call",
            Status::Ok,
            format!(
                "listApis: the role allows {} commands",
                listing.commands.len()
            ),
        ),
        None => {
            for (_, command) in PROBES {
                let _ = client.call(command, cloudstack::Params::new()).await;
            }
            Check::new(
                "what the keys may call",
                Status::Warn,
                "the role may not call listApis: refusals were learnt by probing read-only commands (create and delete commands cannot be probed without changing anything)",
            )
            .hint("grant the role listApis so that nothing is ever refused by surprise")
            .doc("docs/keys.md")
        }
    });
    let refused = client.refused_commands();
    if !refused.is_empty() {
        checks.push(
            Check::new(
                "refused commands",
                Status::Warn,
                format!(
                    "the role refuses {}",
                    refused.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
            )
            .hint("see the feature table below for what each takes away")
            .doc("docs/keys.md"),
        );
    }
    let (version, capabilities) = match connect::server_version(config, client, listing.as_ref())
        .await
    {
        Ok(detected) => {
            checks.push(version_check(&detected));
            (Some(detected.version), detected.capabilities)
        }
        Err(error) => {
            checks.push(
                Check::new("version", Status::Fail, error.to_string()).doc("docs/configuration.md"),
            );
            (None, None)
        }
    };
    checks.extend(scope_checks(config, client).await);
    checks.push(rate_limit_check(client, capabilities).await);
    CloudChecks {
        group: Group {
            name: "CloudStack",
            checks,
        },
        version,
        reachable: true,
    }
}

/// The check of an endpoint that did not answer, or refused the keys.
fn unreachable_check(config: &CloudConfig, error: &cloudstack::Error) -> Check {
    let url = &config.api_url;
    match error {
        cloudstack::Error::Certificate { detail, .. } => Check::new(
            "endpoint and keys",
            Status::Fail,
            format!("TLS to {url} failed: {detail}"),
        )
        .hint("the certificate must be for the host of api-url; put the CA that signed it in ca-file (or, for a test, ssl-no-verify = true)")
        .doc("docs/configuration.md"),
        error if error.is_refused_credentials() => Check::new(
            "endpoint and keys",
            Status::Fail,
            format!("{url} refuses the keys (401 unable to verify user credentials)"),
        )
        .hint("check api-key and secret-key (the account's current keys) and the clock of this machine")
        .doc("docs/troubleshooting.md"),
        error => Check::new(
            "endpoint and keys",
            Status::Fail,
            format!("{url} does not answer: {error}"),
        )
        .hint("check api-url (…/client/api) and that this machine reaches it")
        .doc("docs/configuration.md"),
    }
}

/// The version line.
fn version_check(detected: &connect::DetectedVersion) -> Check {
    let detail = format!("CloudStack {} {}", detected.version, detected.source);
    match detected.source {
        VersionSource::Assumed | VersionSource::ApiListing => Check::new("version", Status::Warn, detail)
            .hint("set version in the cloud-config to the server's release: version-dependent features follow it")
            .doc("docs/configuration.md"),
        _ => Check::new("version", Status::Ok, detail),
    }
}

/// The `project-id` and `zone` lines.
async fn scope_checks(config: &CloudConfig, client: &cloudstack::Client) -> Vec<Check> {
    let mut checks = Vec::new();
    let scope = connect::check_scope(config, client).await;
    let unverified = |key: &str, command: &str| {
        Check::new(
            key,
            Status::Warn,
            format!(
                "cannot be verified: the keys' role may not call {command}; it is used as given"
            ),
        )
        .doc("docs/keys.md")
    };
    match scope {
        Err(ConnectError::Scope { key, reason }) => checks.push(
            Check::new(key, Status::Fail, reason)
                .hint(format!("correct {key} in the cloud-config"))
                .doc("docs/configuration.md"),
        ),
        Err(error) => checks.push(Check::new(
            "project-id and zone",
            Status::Fail,
            error.to_string(),
        )),
        Ok(()) => {
            if let Some(project) = &config.project_id {
                checks.push(if client.may_call("listProjects") {
                    Check::new(
                        "project-id",
                        Status::Ok,
                        format!("project {project} is visible"),
                    )
                } else {
                    unverified("project-id", "listProjects")
                });
            }
            if let Some(zone) = &config.zone {
                checks.push(if client.may_call("listZones") {
                    Check::new("zone", Status::Ok, format!("zone {zone} is visible"))
                } else {
                    unverified("zone", "listZones")
                });
            }
        }
    }
    checks
}

/// The API rate limit, where the server advertises one (`listCapabilities`: the answer
/// the version was read from, else asked once).
async fn rate_limit_check(
    client: &cloudstack::Client,
    read: Option<cloudstack::Capabilities>,
) -> Check {
    if read.is_none() && !client.may_call("listCapabilities") {
        return Check::new(
            "API rate limit",
            Status::Skip,
            "not known: the keys' role may not call listCapabilities",
        );
    }
    let capabilities = match read {
        Some(read) => Ok(read),
        None => client.list_capabilities().await,
    };
    match capabilities {
        Ok(capabilities) => match (capabilities.apilimitmax, capabilities.apilimitinterval) {
            (Some(max), Some(interval)) => Check::new(
                "API rate limit",
                Status::Ok,
                format!(
                    "{max} calls per {interval} s per account (the controller paces itself; --concurrent-service-syncs lowers its bursts)"
                ),
            ),
            _ => Check::new("API rate limit", Status::Ok, "none advertised"),
        },
        Err(error) => Check::new("API rate limit", Status::Skip, error.to_string()),
    }
}

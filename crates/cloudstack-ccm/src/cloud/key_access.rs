//! What the CloudStack keys may call, feature by feature.
//!
//! A key's role may refuse any command (432; the project keys CloudStack Kubernetes Service
//! hands a project's cluster allow 31 APIs). The client learns what the keys may call
//! (`listApis`, else the first refusal of each command: [`cloudstack::Client::may_call`]);
//! this module says which of the controller's features need which commands, so each
//! feature is served, degraded with a Warning naming the refused command, or refused — the
//! same answer for the controller, the dry run and the log line of a first refusal.
//! Deleting what the controller made never needs a command of a feature listed here but
//! [`Feature::OwnershipTags`] (tags go with their object) and the feature's own cleanup,
//! which is skipped, and said, when refused.

use std::collections::BTreeMap;
use std::fmt;

/// A feature of the controller that needs CloudStack commands a role may refuse. The
/// commands every load balancer needs (addresses, rules, members, firewall rules, ACL items,
/// VMs, networks, jobs) are not listed: without them there is nothing to degrade to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// The server version from `listCapabilities` (else an XML reply, `listApis`, the
    /// cloud-config's `version`, or the oldest release supported).
    VersionDetection,
    /// Checking at start-up that the cloud-config's `project-id` and `zone` are visible.
    ScopeCheck,
    /// The identity of the keys' account, for log lines.
    AccountName,
    /// Ownership tags on what the controller creates (orphan search; crash safety also
    /// rests on the Service's records and the deterministic rule names).
    OwnershipTags,
    /// Stickiness policies (`cloudstack-load-balancer-stickiness-method-name`).
    Stickiness,
    /// Health-check policies (`cloudstack-load-balancer-health-check-*`).
    HealthCheck,
    /// TLS termination (`cloudstack-load-balancer-tls-*`).
    TlsTermination,
    /// Internal load balancers on VPC tiers (`cloudstack-load-balancer-internal`).
    InternalLoadBalancer,
    /// Routing firewall rules of ROUTED networks (`cloudstack-load-balancer-routed-firewall`).
    RoutingFirewall,
    /// VPC static routes for pod CIDRs (the route controller).
    StaticRoutes,
}

impl Feature {
    /// Every feature, in order.
    pub const ALL: [Feature; 10] = [
        Feature::VersionDetection,
        Feature::ScopeCheck,
        Feature::AccountName,
        Feature::OwnershipTags,
        Feature::Stickiness,
        Feature::HealthCheck,
        Feature::TlsTermination,
        Feature::InternalLoadBalancer,
        Feature::RoutingFirewall,
        Feature::StaticRoutes,
    ];

    /// The CloudStack commands the feature sends, as CloudStack spells them.
    pub fn commands(self) -> &'static [&'static str] {
        match self {
            Feature::VersionDetection => &["listCapabilities"],
            Feature::ScopeCheck => &["listProjects", "listZones"],
            Feature::AccountName => &["listAccounts"],
            Feature::OwnershipTags => &["createTags", "deleteTags", "listTags"],
            Feature::Stickiness => &[
                "createLBStickinessPolicy",
                "listLBStickinessPolicies",
                "deleteLBStickinessPolicy",
            ],
            Feature::HealthCheck => &[
                "createLBHealthCheckPolicy",
                "listLBHealthCheckPolicies",
                "deleteLBHealthCheckPolicy",
            ],
            Feature::TlsTermination => &[
                "uploadSslCert",
                "listSslCerts",
                "deleteSslCert",
                "assignCertToLoadBalancer",
                "removeCertFromLoadBalancer",
            ],
            Feature::InternalLoadBalancer => &[
                "createLoadBalancer",
                "listLoadBalancers",
                "deleteLoadBalancer",
            ],
            Feature::RoutingFirewall => &[
                "createRoutingFirewallRule",
                "listRoutingFirewallRules",
                "deleteRoutingFirewallRule",
            ],
            Feature::StaticRoutes => {
                &["listStaticRoutes", "createStaticRoute", "deleteStaticRoute"]
            }
        }
    }

    /// What the feature is, for a person (log lines, Events, `plan`).
    pub fn describe(self) -> &'static str {
        match self {
            Feature::VersionDetection => "detecting the CloudStack version",
            Feature::ScopeCheck => "checking the cloud-config's project-id and zone",
            Feature::AccountName => "naming the keys' account in log lines",
            Feature::OwnershipTags => "ownership tags on the objects the controller creates",
            Feature::Stickiness => "stickiness policies",
            Feature::HealthCheck => "health-check policies",
            Feature::TlsTermination => "TLS termination",
            Feature::InternalLoadBalancer => "internal load balancers",
            Feature::RoutingFirewall => "routing firewall rules of ROUTED networks",
            Feature::StaticRoutes => "VPC static routes for pod CIDRs",
        }
    }

    /// The Service annotation (or its prefix) that asks for the feature, if one does.
    pub fn annotation(self) -> Option<&'static str> {
        match self {
            Feature::Stickiness => {
                Some("service.beta.kubernetes.io/cloudstack-load-balancer-stickiness-method-name")
            }
            Feature::HealthCheck => {
                Some("service.beta.kubernetes.io/cloudstack-load-balancer-health-check-*")
            }
            Feature::TlsTermination => {
                Some("service.beta.kubernetes.io/cloudstack-load-balancer-tls-*")
            }
            Feature::InternalLoadBalancer => {
                Some("service.beta.kubernetes.io/cloudstack-load-balancer-internal")
            }
            Feature::RoutingFirewall => {
                Some("service.beta.kubernetes.io/cloudstack-load-balancer-routed-firewall")
            }
            _ => None,
        }
    }

    /// Whether the controller works around the feature's absence (a plan without it, the
    /// version or scope from elsewhere), so a retry after its first refusal succeeds; else
    /// what needs it cannot be done until the role allows it.
    pub fn is_planned_around(self) -> bool {
        !matches!(
            self,
            Feature::InternalLoadBalancer | Feature::RoutingFirewall | Feature::StaticRoutes
        )
    }

    /// The features that send `command` (any case).
    pub fn needing(command: &str) -> Vec<Feature> {
        Feature::ALL
            .into_iter()
            .filter(|feature| {
                feature
                    .commands()
                    .iter()
                    .any(|c| c.eq_ignore_ascii_case(command))
            })
            .collect()
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// Which features the keys may not use, and the first refused command of each: plain
/// data, taken from the client when a plan is made, so the planner stays pure.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyFeatures {
    refused: BTreeMap<Feature, &'static str>,
}

impl KeyFeatures {
    /// Every feature available (what the planner's tests and an admin key see).
    pub fn all() -> KeyFeatures {
        KeyFeatures::default()
    }

    /// What `client`'s keys may use, as far as it knows now.
    pub fn of(client: &cloudstack::Client) -> KeyFeatures {
        KeyFeatures::from_fn(|command| client.may_call(command))
    }

    /// The features whose commands `may_call` all allows.
    pub fn from_fn(may_call: impl Fn(&str) -> bool) -> KeyFeatures {
        let refused = Feature::ALL
            .into_iter()
            .filter_map(|feature| {
                let command = feature.commands().iter().find(|c| !may_call(c))?;
                Some((feature, *command))
            })
            .collect();
        KeyFeatures { refused }
    }

    /// The command that keeps `feature` from the keys, if one does.
    pub fn refused(&self, feature: Feature) -> Option<&'static str> {
        self.refused.get(&feature).copied()
    }

    /// Whether the keys may use `feature`.
    pub fn allows(&self, feature: Feature) -> bool {
        self.refused(feature).is_none()
    }

    /// The features refused, each with its first refused command.
    pub fn refused_features(&self) -> impl Iterator<Item = (Feature, &'static str)> + '_ {
        self.refused
            .iter()
            .map(|(feature, command)| (*feature, *command))
    }

    /// The sentence a Warning and the Service's condition carry for `feature`: the refused
    /// command, what it takes away, and the annotation that asked for it.
    pub fn refusal_text(&self, feature: Feature) -> Option<String> {
        let command = self.refused(feature)?;
        Some(refusal_text(feature, command))
    }
}

/// See [`KeyFeatures::refusal_text`].
pub fn refusal_text(feature: Feature, command: &str) -> String {
    let asked = feature
        .annotation()
        .map(|annotation| format!(" (asked by {annotation})"))
        .unwrap_or_default();
    format!(
        "the CloudStack keys' role may not call {command}: no {}{asked}; grant the role {command} to have it (see docs/keys.md)",
        feature.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_command_names_its_features() {
        assert_eq!(Feature::needing("listsslcerts"), [Feature::TlsTermination]);
        assert_eq!(Feature::needing("createTags"), [Feature::OwnershipTags]);
        assert!(Feature::needing("createLoadBalancerRule").is_empty());
        for feature in Feature::ALL {
            assert!(!feature.commands().is_empty(), "{feature:?}");
        }
    }

    #[test]
    fn the_first_refused_command_decides() {
        let refused = ["listSslCerts", "createTags", "deleteTags"];
        let features = KeyFeatures::from_fn(|command| !refused.contains(&command));
        assert_eq!(
            features.refused(Feature::TlsTermination),
            Some("listSslCerts")
        );
        assert_eq!(features.refused(Feature::OwnershipTags), Some("createTags"));
        assert!(features.allows(Feature::Stickiness));
        let text = features.refusal_text(Feature::TlsTermination).unwrap();
        assert!(text.contains("listSslCerts"), "{text}");
        assert!(
            text.contains("cloudstack-load-balancer-tls-"),
            "names the annotation: {text}"
        );
        assert!(KeyFeatures::all().allows(Feature::TlsTermination));
    }
}

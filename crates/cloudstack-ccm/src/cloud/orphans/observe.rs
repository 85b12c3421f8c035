//! What the orphan pass reads: everything tagged for a cluster, listed or taken from the
//! service controller's account view.

use super::*;
use crate::cloud::loadbalancer::vocabulary::INTERNAL_SCHEME;

/// Lists what is tagged for `cluster`. Read this before the Services and Nodes
/// ([`Owners`]): an object tagged for a Service created meanwhile is then never taken for
/// an orphan.
pub(crate) async fn observe(
    client: &cloudstack::Client,
    cluster: &str,
    routing: RoutingFirewall,
) -> Result<Tagged, cloudstack::Error> {
    Ok(Tagged {
        rules: client
            .list_load_balancer_rules(&ListLoadBalancerRules {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        firewall_rules: client
            .list_firewall_rules(&ListFirewallRules {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        ips: client
            .list_public_ip_addresses(&ListPublicIpAddresses {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        ..observe_beyond_the_view(client, cluster, routing).await?
    })
}

/// Whether the server has routing firewall rules (CloudStack 4.20+): older servers do not
/// know `listRoutingFirewallRules`, and answer it with a 401 that reads as refused keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoutingFirewall {
    /// List them.
    Listed,
    /// The server has none.
    Absent,
}

impl RoutingFirewall {
    /// What a server of `version` has.
    pub fn of(version: &cloudstack::ServerVersion) -> RoutingFirewall {
        let server = crate::cloud::loadbalancer::capabilities::ServerFeatures::for_version(
            version.major(),
            version.minor(),
            version.patch(),
        );
        if server.routing_firewall {
            RoutingFirewall::Listed
        } else {
            RoutingFirewall::Absent
        }
    }
}

/// [`observe`], with the load-balancer rules, firewall rules and public IPs tagged for
/// `cluster` taken from `view` (the service controller's account view holds every one of
/// them), so a pass right after the view was read lists them no second time.
pub(crate) async fn observe_with_view(
    client: &cloudstack::Client,
    cluster: &str,
    view: &AccountView,
    routing: RoutingFirewall,
) -> Result<Tagged, cloudstack::Error> {
    let of_cluster = |tags: &[Tag]| tag_value(tags, TAG_CLUSTER) == Some(cluster);
    Ok(Tagged {
        rules: view
            .rules
            .iter()
            .filter(|rule| of_cluster(&rule.tags))
            .map(|rule| (**rule).clone())
            .collect(),
        firewall_rules: view
            .firewall_rules
            .iter()
            .filter(|rule| of_cluster(&rule.tags))
            .map(|rule| (**rule).clone())
            .collect(),
        ips: view
            .ips
            .iter()
            .filter(|ip| of_cluster(&ip.tags))
            .map(|ip| (**ip).clone())
            .collect(),
        ..observe_beyond_the_view(client, cluster, routing).await?
    })
}

/// What [`observe`] lists that is not in the account view: internal load-balancer rules,
/// ACL items, static routes, SSL certificates and routing firewall rules. A list the keys'
/// role refuses is not looked for, and said so in [`Tagged::not_looked_for`].
async fn observe_beyond_the_view(
    client: &cloudstack::Client,
    cluster: &str,
    routing: RoutingFirewall,
) -> Result<Tagged, cloudstack::Error> {
    let mut not_looked_for = Vec::new();
    let routing_firewall_rules = match routing {
        RoutingFirewall::Listed => unless_refused(
            "routing firewall rules",
            &mut not_looked_for,
            client
                .list_routing_firewall_rules(&cloudstack::ListRoutingFirewallRules {
                    listall: Some(true),
                    tags: cluster_filter(cluster),
                    ..Default::default()
                })
                .await,
        )?,
        RoutingFirewall::Absent => Vec::new(),
    };
    let internal_rules = unless_refused(
        "internal load-balancer rules",
        &mut not_looked_for,
        client
            .list_load_balancers(&cloudstack::ListLoadBalancers {
                listall: Some(true),
                scheme: Some(INTERNAL_SCHEME.to_string()),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await,
    )?;
    let acl_items = unless_refused(
        "network ACL items",
        &mut not_looked_for,
        client
            .list_network_acls(&ListNetworkAcls {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await,
    )?;
    let routes = unless_refused(
        "static routes",
        &mut not_looked_for,
        client
            .list_static_routes(&ListStaticRoutes {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await,
    )?;
    let certificates = unless_refused(
        "SSL certificates",
        &mut not_looked_for,
        client
            .list_ssl_certs(&cloudstack::ListSslCerts::default())
            .await,
    )?;
    if !client.may_call("listTags") || !client.may_call("createTags") {
        not_looked_for.push(NotLookedFor {
            kind: "anything untagged (the controller cannot tag what it creates)",
            command: "createTags".into(),
        });
    }
    Ok(Tagged {
        routing_firewall_rules,
        internal_rules,
        acl_items,
        routes,
        certificates,
        cluster: cluster.to_string(),
        not_looked_for,
        ..Tagged::default()
    })
}

/// The items of a list, or none when the keys' role refuses it (noted in `not_looked_for`
/// under `kind`).
fn unless_refused<T>(
    kind: &'static str,
    not_looked_for: &mut Vec<NotLookedFor>,
    listed: Result<Vec<T>, cloudstack::Error>,
) -> Result<Vec<T>, cloudstack::Error> {
    match listed {
        Err(error) if error.is_command_refused() => {
            not_looked_for.push(NotLookedFor {
                kind,
                command: error.command().unwrap_or_default().to_string(),
            });
            Ok(Vec::new())
        }
        other => other,
    }
}

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
/// ACL items, static routes, SSL certificates and routing firewall rules.
async fn observe_beyond_the_view(
    client: &cloudstack::Client,
    cluster: &str,
    routing: RoutingFirewall,
) -> Result<Tagged, cloudstack::Error> {
    let routing_firewall_rules = match routing {
        RoutingFirewall::Listed => {
            client
                .list_routing_firewall_rules(&cloudstack::ListRoutingFirewallRules {
                    listall: Some(true),
                    tags: cluster_filter(cluster),
                    ..Default::default()
                })
                .await?
        }
        RoutingFirewall::Absent => Vec::new(),
    };
    Ok(Tagged {
        routing_firewall_rules,
        internal_rules: client
            .list_load_balancers(&cloudstack::ListLoadBalancers {
                listall: Some(true),
                scheme: Some(INTERNAL_SCHEME.to_string()),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        acl_items: client
            .list_network_acls(&ListNetworkAcls {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        routes: client
            .list_static_routes(&ListStaticRoutes {
                listall: Some(true),
                tags: cluster_filter(cluster),
                ..Default::default()
            })
            .await?,
        certificates: client
            .list_ssl_certs(&cloudstack::ListSslCerts::default())
            .await?,
        cluster: cluster.to_string(),
        ..Tagged::default()
    })
}

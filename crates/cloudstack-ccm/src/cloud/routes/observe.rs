//! Reads the static routes (`listStaticRoutes`, every page, everything the account may see)
//! and the VPC of each network (`listNetworks`).

use std::collections::BTreeMap;

use cloudstack::{ListNetworks, ListStaticRoutes, tag_value};

use super::ObservedRoute;
use crate::cloud::tags::{TAG_CLUSTER, TAG_NODE};

/// Every static route the account sees.
pub async fn routes(client: &cloudstack::Client) -> Result<Vec<ObservedRoute>, cloudstack::Error> {
    let request = ListStaticRoutes {
        listall: Some(true),
        ..Default::default()
    };
    let listed = client.list_static_routes(&request).await?;
    Ok(listed
        .into_iter()
        .filter_map(|route| {
            Some(ObservedRoute {
                cluster: tag_value(&route.tags, TAG_CLUSTER).map(str::to_owned),
                node: tag_value(&route.tags, TAG_NODE).map(str::to_owned),
                id: route.id?,
                vpc_id: route.vpcid.unwrap_or_default(),
                cidr: route.cidr.unwrap_or_default(),
                next_hop: route.nexthop.filter(|h| !h.is_empty()),
            })
        })
        .collect())
}

/// The VPC of every network the account sees (`None` for an isolated network).
pub(crate) async fn network_vpcs(
    client: &cloudstack::Client,
) -> Result<BTreeMap<String, Option<String>>, cloudstack::Error> {
    let request = ListNetworks {
        listall: Some(true),
        ..Default::default()
    };
    Ok(client
        .list_networks(&request)
        .await?
        .into_iter()
        .filter_map(|network| {
            let vpc = network.vpcid.filter(|v| !v.is_empty());
            Some((network.id?.to_ascii_lowercase(), vpc))
        })
        .collect())
}

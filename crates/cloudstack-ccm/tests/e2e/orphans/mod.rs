//! Orphans end to end: what the service controller creates carries ownership tags
//! (firewall rules included); objects tagged for the cluster whose Service or Node is gone
//! are listed with why and deleted, while addresses the user brought or may have kept stay.
//!
//! This module holds the helpers the tests share; [`removed`] holds the tests of what is
//! found and deleted, [`kept`] those of what must stay.

mod kept;
mod removed;

use crate::common;

use crate::services::support::*;
use cloudstack::{CreateStaticRoute, CreateTags};
use cloudstack_ccm::cloud::cidr::Cidr;
use cloudstack_ccm::orphans::Scope;
use kube::api::{Patch, PatchParams};

const CLUSTER: &str = "kubernetes";
const GONE_UID: &str = "6f1c4c1e-0000-4000-8000-00000000dead";

/// This cluster's orphans, the Nodes listed, with `cluster_cidrs` as `--cluster-cidr`, on
/// the harness's CloudStack version (routing firewall rules from 4.20).
fn scope<'a>(h: &common::Harness, cluster_cidrs: &'a [Cidr]) -> Scope<'a> {
    Scope {
        cluster: CLUSTER,
        node_names: None,
        routing_firewall: cloudstack_ccm::cloud::orphans::RoutingFirewall::of(
            &h.ctx.server_version,
        ),
        cluster_cidrs,
    }
}

/// Stops `controller`, then removes Service `name`'s finalizer and deletes it: no cleanup
/// runs.
async fn force_delete_while_down(controller: OwnController, t: &LbTest, name: &str) {
    controller.stop().await;
    t.services()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    t.delete(name).await;
    t.wait_gone(name).await;
}

fn tags_of(h: &common::Harness, id: &str) -> Vec<(String, String)> {
    h.sim.with_state(|s| {
        let mut tags: Vec<_> = s
            .tags
            .iter()
            .filter(|t| t.resource_id == id)
            .map(|t| (t.key.clone(), t.value.clone()))
            .collect();
        tags.sort();
        tags
    })
}

/// Puts `tags` on CloudStack object `id` of type `kind`.
async fn tag(
    client: &cloudstack::Client,
    id: String,
    kind: &str,
    tags: Vec<(&'static str, &'static str)>,
) {
    client
        .create_tags(&CreateTags {
            resourceids: vec![id],
            resourcetype: kind.into(),
            tags: tags
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            customer: None,
        })
        .await
        .unwrap()
}

/// A static route of VPC `vpc` to `nexthop`, tagged as the cluster's route of Node `node`,
/// as the route controller makes them; returns its id.
async fn node_route(
    client: &cloudstack::Client,
    vpc: &str,
    cidr: &str,
    nexthop: &str,
    node: &'static str,
) -> String {
    let id = client
        .create_static_route(&CreateStaticRoute {
            cidr: cidr.into(),
            vpcid: Some(vpc.to_string()),
            nexthop: Some(nexthop.into()),
            gatewayid: None,
        })
        .await
        .unwrap()
        .id
        .unwrap();
    tag(
        client,
        id.clone(),
        "StaticRoute",
        vec![
            ("cloudstack-ccm/cluster", CLUSTER),
            ("cloudstack-ccm/node", node),
        ],
    )
    .await;
    id
}

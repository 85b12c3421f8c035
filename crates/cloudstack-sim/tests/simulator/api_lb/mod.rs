//! Public IPs and load-balancer rules through the client crate, including the create-phase
//! errors (port conflicts, UDP on the Virtual Router, port 8081) and version gates.
//!
//! This module holds the helpers; [`addresses`] the tests of public IPs (and what goes with
//! an address), [`rules`] those of load-balancer rules.

mod addresses;
mod rules;

use crate::common;

use cloudstack::{AssociateIpAddress, CreateLoadBalancerRule};
use cloudstack_sim::SimServer;
use common::{client, id_of};

async fn ip_on(sim: &SimServer, network: &str) -> String {
    let ip = client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .expect("associate");
    ip.id.expect("ip id")
}

fn rule(ip: &str, name: &str, protocol: &str, port: u32) -> CreateLoadBalancerRule {
    CreateLoadBalancerRule {
        name: name.into(),
        algorithm: "roundrobin".into(),
        privateport: 30000 + port,
        publicport: port,
        publicipid: Some(ip.into()),
        protocol: Some(protocol.into()),
        openfirewall: Some(false),
        ..Default::default()
    }
}

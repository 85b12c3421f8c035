//! Which tier a VPC public address serves. A VPC address is associated with the VPC only;
//! its first load-balancer or port-forwarding rule associates it with the tier the rule
//! names (`LoadBalancingRulesManagerImpl.createPublicLoadBalancerRule`,
//! `RulesManagerImpl.createPortForwardingRule`: `associateIPToGuestNetwork`), and from then
//! on every rule on it is for that tier.

use crate::common;

use cloudstack::{AssociateIpAddress, ListPublicIpAddresses};
use cloudstack_sim::{NetworkSpec, Scenario, SimServer};
use common::{api_error, client, id_of, start};

/// The small scenario plus `tier2` in `vpc1`, VM `app-1` in `tier1` and VM `web-1` in
/// `tier2`.
fn scenario() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.networks.push(NetworkSpec {
        id: None,
        name: "tier2".into(),
        zone: "zone1".into(),
        cidr: "10.100.2.0/24".into(),
        vpc: Some("vpc1".into()),
        acl: Some("tier1-acl".into()),
        lb_provider: Default::default(),
        account: Some("alice".into()),
        project: None,
    });
    scenario.add_vms("tier1", "app-", 1);
    scenario.add_vms("tier2", "web-", 1);
    scenario
}

/// A fresh address of `vpc1`, associated with no tier.
async fn vpc_address(sim: &SimServer) -> String {
    let ip = client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            vpcid: Some(id_of(sim, "vpcs", "vpc1")),
            ..Default::default()
        })
        .await
        .expect("associate with the VPC");
    assert_eq!(ip.associatednetworkid, None);
    ip.id.expect("ip id")
}

/// The tier the address is associated with now.
async fn tier_of(sim: &SimServer, ip: &str) -> Option<String> {
    let listed = client(sim, "alice")
        .list_public_ip_addresses(&ListPublicIpAddresses {
            id: Some(ip.into()),
            ..Default::default()
        })
        .await
        .expect("list the address");
    assert_eq!(listed.len(), 1);
    listed[0].associatednetworkid.clone()
}

fn forward(ip: &str, vm: &str, tier: &str, port: u32) -> cloudstack::Params {
    cloudstack::Params::new()
        .set("ipaddressid", ip)
        .set("virtualmachineid", vm)
        .set("networkid", tier)
        .set("protocol", "tcp")
        .set("publicport", port)
        .set("privateport", port)
}

/// `CreatePortForwardingRuleCmd`: `openfirewall=true` is refused on a VPC address, and an
/// address associated with no network needs `networkid` naming a tier of its VPC.
#[tokio::test]
async fn port_forwarding_on_a_vpc_address_needs_a_tier_of_its_vpc() {
    let sim = start(scenario()).await;
    let alice = client(&sim, "alice");
    let app = id_of(&sim, "vms", "app-1");
    let ip = vpc_address(&sim).await;
    let cases = [
        (
            forward(&ip, &app, &id_of(&sim, "networks", "tier1"), 22).set("openfirewall", true),
            "Can't have openFirewall=true when IP address belongs to VPC".to_owned(),
        ),
        (
            forward(&ip, &app, &id_of(&sim, "networks", "net-vr"), 22),
            format!(
                "Ip address {} is not assigned to the network {}",
                sim.with_state(|s| s.ip(&ip).unwrap().address.clone()),
                id_of(&sim, "networks", "net-vr")
            ),
        ),
        (
            cloudstack::Params::new()
                .set("ipaddressid", &ip)
                .set("virtualmachineid", &app)
                .set("protocol", "tcp")
                .set("publicport", 22)
                .set("privateport", 22),
            format!(
                "Unable to create port forwarding rule for the ipAddress id={ip} as ip is not associated with any network and no networkId is passed in"
            ),
        ),
    ];
    for (params, expected) in cases {
        let (status, _, cs, text) = api_error(
            alice
                .call_async("createPortForwardingRule", params)
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (status, cs, text.as_str()),
            (431, Some(4350), expected.as_str())
        );
    }
    assert_eq!(tier_of(&sim, &ip).await, None);
}

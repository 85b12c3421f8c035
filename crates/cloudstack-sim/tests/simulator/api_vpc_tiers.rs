//! Which tier a VPC public address serves. A VPC address is associated with the VPC only;
//! its first load-balancer or port-forwarding rule associates it with the tier the rule
//! names (`LoadBalancingRulesManagerImpl.createPublicLoadBalancerRule`,
//! `RulesManagerImpl.createPortForwardingRule`: `associateIPToGuestNetwork`), and from then
//! on every rule on it is for that tier, whatever its `networkid` says. When the last rule on it goes and is applied, the
//! address leaves the tier (`unassignIPFromVpcNetwork`: `isIpAllocatedToVpc` counts static
//! NAT and every rule row on the address), free for a rule on another tier.

use crate::common;

use cloudstack::{
    AssociateIpAddress, CreateLoadBalancerRule, DeleteLoadBalancerRule, ListPublicIpAddresses,
};
use cloudstack_sim::{Faults, NetworkSpec, Scenario, SimServer};
use common::{api_error, client, id_of, job_error, start};

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
        ..Default::default()
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

fn balancer(ip: &str, tier: &str, port: u32) -> CreateLoadBalancerRule {
    CreateLoadBalancerRule {
        name: format!("v-tcp-{port}"),
        algorithm: "roundrobin".into(),
        privateport: 30000 + port,
        publicport: port,
        publicipid: Some(ip.into()),
        networkid: Some(tier.into()),
        ..Default::default()
    }
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

/// The rule kinds that hold an address on its tier, and the deletions that free it: a
/// load-balancer rule binds the address to tier1, so a forwarding rule to a tier2 VM is
/// refused ("Vm doesn't belong to network associated with ipAddress": the address's
/// network wins over `networkid`) and a load-balancer rule naming tier2 is for tier1; a
/// forwarding rule to a tier1 VM keeps the address on
/// tier1 after the load-balancer rule is deleted; deleting that last rule frees it, and a
/// rule for tier2 then associates it with tier2. Expunging the VM of the address's last
/// rule frees it too (`revokePortForwardingRulesForVm` applies the revoked rules).
#[tokio::test]
async fn a_vpc_address_leaves_its_tier_with_its_last_rule() {
    let sim = start(scenario()).await;
    let alice = client(&sim, "alice");
    let (tier1, tier2) = (
        id_of(&sim, "networks", "tier1"),
        id_of(&sim, "networks", "tier2"),
    );
    let (app, web) = (id_of(&sim, "vms", "app-1"), id_of(&sim, "vms", "web-1"));
    let ip = vpc_address(&sim).await;

    let lb = alice
        .create_load_balancer_rule(&balancer(&ip, &tier1, 80))
        .await
        .expect("the first rule associates the address with tier1")
        .id
        .unwrap();
    assert_eq!(tier_of(&sim, &ip).await.as_deref(), Some(tier1.as_str()));
    let (status, _, cs, text) = api_error(
        alice
            .call_async("createPortForwardingRule", forward(&ip, &web, &tier2, 22))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, cs, text.as_str()),
        (
            431,
            Some(4350),
            "Vm doesn't belong to network associated with ipAddress"
        ),
        "the address serves tier1 only"
    );
    let elsewhere = alice
        .create_load_balancer_rule(&balancer(&ip, &tier2, 81))
        .await
        .expect("a load-balancer rule naming tier2");
    assert_eq!(
        elsewhere.networkid.as_deref(),
        Some(tier1.as_str()),
        "is for tier1, the address's network (createPublicLoadBalancer)"
    );
    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule {
            id: elsewhere.id.unwrap(),
        })
        .await
        .unwrap();
    assert_eq!(
        tier_of(&sim, &ip).await.as_deref(),
        Some(tier1.as_str()),
        "not the last rule: the address stays on tier1"
    );
    let pf = alice
        .call_async("createPortForwardingRule", forward(&ip, &app, &tier1, 2222))
        .await
        .expect("a forwarding rule to a tier1 VM");
    let pf = pf["portforwardingrule"]["id"].as_str().unwrap().to_owned();

    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: lb })
        .await
        .unwrap();
    assert_eq!(
        tier_of(&sim, &ip).await.as_deref(),
        Some(tier1.as_str()),
        "the forwarding rule still holds the address on tier1"
    );
    alice
        .call_async(
            "deletePortForwardingRule",
            cloudstack::Params::new().set("id", &pf),
        )
        .await
        .unwrap();
    assert_eq!(
        tier_of(&sim, &ip).await,
        None,
        "the last rule gone, the address is the VPC's again"
    );

    let web_rule = alice
        .call_async("createPortForwardingRule", forward(&ip, &web, &tier2, 22))
        .await
        .expect("a rule for tier2 on the same address");
    assert_eq!(
        web_rule["portforwardingrule"]["networkid"].as_str(),
        Some(tier2.as_str())
    );
    assert_eq!(tier_of(&sim, &ip).await.as_deref(), Some(tier2.as_str()));

    assert!(sim.remove_vm(&web));
    assert_eq!(
        tier_of(&sim, &ip).await,
        None,
        "expunging the VM revokes its rule and frees the address"
    );
    alice
        .create_load_balancer_rule(&balancer(&ip, &tier1, 80))
        .await
        .expect("tier1 again");
    assert_eq!(tier_of(&sim, &ip).await.as_deref(), Some(tier1.as_str()));
}

/// A create whose job fails is undone differently by the two commands:
/// `CreatePortForwardingRuleCmd.execute` revokes and applies the rule
/// (`revokePortForwardingRule(id, true)`), which frees the address, while
/// `CreateLoadBalancerRuleCmd.execute` removes the rule without applying anything
/// (`deleteLoadBalancerRule(id, false)`), so the address stays on the tier its create
/// associated it with.
#[tokio::test]
async fn a_failed_create_job_frees_the_address_only_for_port_forwarding() {
    let sim = start(scenario()).await;
    let alice = client(&sim, "alice");
    let tier1 = id_of(&sim, "networks", "tier1");
    let app = id_of(&sim, "vms", "app-1");
    let failing = || Faults {
        job_failure_rate: 1.0,
        ..Faults::default()
    };

    let ip = vpc_address(&sim).await;
    sim.set_faults(failing());
    let (code, _) = job_error(
        alice
            .call_async("createPortForwardingRule", forward(&ip, &app, &tier1, 2222))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 530);
    sim.set_faults(Faults::default());
    assert!(sim.with_state(|s| s.pf_rules.is_empty()));
    assert_eq!(tier_of(&sim, &ip).await, None);

    let ip = vpc_address(&sim).await;
    sim.set_faults(failing());
    let (code, _) = job_error(
        alice
            .create_load_balancer_rule(&balancer(&ip, &tier1, 80))
            .await
            .unwrap_err(),
    );
    assert_eq!(code, 530);
    sim.set_faults(Faults::default());
    assert!(sim.with_state(|s| s.lb_rules.is_empty()));
    assert_eq!(
        tier_of(&sim, &ip).await.as_deref(),
        Some(tier1.as_str()),
        "a failed load-balancer create leaves the address on its tier"
    );
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

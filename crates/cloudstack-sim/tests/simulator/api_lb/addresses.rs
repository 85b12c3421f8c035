//! Public IPs: associating, listing and releasing them, pool exhaustion, and the rules
//! (load-balancer and firewall) that go with a released address.

use crate::common;

use cloudstack::{
    AssociateIpAddress, DeleteLoadBalancerRule, DisassociateIpAddress, ListFirewallRules,
    ListLoadBalancerRules, ListPublicIpAddresses,
};
use cloudstack_sim::Scenario;
use common::{api_error, client, id_of, job_error, start};

use super::{ip_on, rule};

#[tokio::test]
async fn associate_list_and_disassociate_addresses() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let network = id_of(&sim, "networks", "net-vr");
    let start_reply = alice
        .associate_ip_address_begin(&AssociateIpAddress {
            networkid: Some(network.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    let ip_id = start_reply
        .id
        .clone()
        .expect("create-type reply carries the new id at once");
    let ip = alice
        .associate_ip_address_finish(&start_reply)
        .await
        .unwrap();
    assert_eq!(ip.id.as_deref(), Some(ip_id.as_str()));
    assert_eq!(ip.associatednetworkid.as_deref(), Some(network.as_str()));
    let address = ip.ipaddress.clone().unwrap();

    let listed = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            ipaddress: Some(address.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].is_allocated() && listed[0].state.as_deref() == Some("Allocated"));
    let mine = alice
        .list_public_ip_addresses(&ListPublicIpAddresses::default())
        .await
        .unwrap();
    assert_eq!(
        mine.len(),
        4,
        "allocatedonly defaults to true: 3 source NAT + the new one"
    );
    let free = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            ipaddress: Some("203.0.113.150".into()),
            allocatedonly: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        free.len() == 1 && !free[0].is_allocated(),
        "free addresses show with allocatedonly=false"
    );

    // a specific address owned by someone else cannot be taken
    let bob_net_err = client(&sim, "bob")
        .associate_ip_address(&AssociateIpAddress {
            zoneid: Some(id_of(&sim, "zones", "zone1")),
            ipaddress: Some(address.clone()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(bob_net_err).0, 431);
    let none = alice
        .associate_ip_address(&AssociateIpAddress::default())
        .await
        .unwrap_err();
    assert!(
        api_error(none)
            .3
            .starts_with("Unable to figure out zone to assign IP to")
    );

    // DisassociateIPAddrCmd (since 4.19): `id` is optional; with neither `id` nor
    // `ipaddress`, `getIpAddressId`/`getEntityOwnerId` — reached from
    // `ParamProcessWorker.doAccessChecks` — throws InvalidParameterValueException: 431 cs
    // 4350, and the address stays.
    let neither = alice
        .call("disassociateIpAddress", cloudstack::Params::new())
        .await
        .unwrap_err();
    assert_eq!(
        api_error(neither),
        (
            431,
            431,
            Some(4350),
            "Please specify either IP address or IP address ID".into()
        )
    );
    let both = alice
        .call(
            "disassociateIpAddress",
            cloudstack::Params::new()
                .set("id", ip_id.as_str())
                .set("ipaddress", address.as_str()),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_error(both),
        (
            431,
            431,
            Some(4350),
            "id parameter is mutually exclusive with ipaddress parameter".into()
        )
    );
    let still = sim.with_state(|s| s.ip(&ip_id).map(|ip| ip.state.clone()));
    assert_eq!(still.as_deref(), Some("Allocated"), "the address stays");
    // the address alone is enough
    alice
        .call_async(
            "disassociateIpAddress",
            cloudstack::Params::new().set("ipaddress", address.as_str()),
        )
        .await
        .expect("released by its address");
    let after = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            ipaddress: Some(address),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(after.is_empty());
    // NetworkServiceImpl.releaseIpAddressInternal: an address that is not allocated is
    // released already — the job succeeds (a retried release is done, not an error).
    alice
        .disassociate_ip_address(&DisassociateIpAddress {
            id: ip_id.clone(),
            ..Default::default()
        })
        .await
        .expect("releasing a released address succeeds");
}

#[tokio::test]
async fn pool_exhaustion_is_533() {
    let mut scenario = Scenario::small();
    scenario.zones[0].public_ip_range = None;
    scenario.zones[0].public_ips = (1..=5).map(|i| format!("198.51.100.{i}")).collect();
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let network = id_of(&sim, "networks", "net-vr");
    let request = AssociateIpAddress {
        networkid: Some(network),
        ..Default::default()
    };
    alice.associate_ip_address(&request).await.unwrap();
    alice.associate_ip_address(&request).await.unwrap();
    let (status, _, cs, _) = api_error(alice.associate_ip_address(&request).await.unwrap_err());
    assert_eq!((status, cs), (533, Some(4320)));
}

#[tokio::test]
async fn releasing_an_address_removes_its_rules_and_source_nat_stays() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let mut request = rule(&ip, "r-tcp-80", "tcp", 80);
    request.openfirewall = Some(true);
    alice.create_load_balancer_rule(&request).await.unwrap();
    assert_eq!(
        alice
            .list_firewall_rules(&ListFirewallRules::default())
            .await
            .unwrap()
            .len(),
        1
    );
    alice
        .disassociate_ip_address(&DisassociateIpAddress {
            id: ip,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        alice
            .list_load_balancer_rules(&ListLoadBalancerRules::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        alice
            .list_firewall_rules(&ListFirewallRules::default())
            .await
            .unwrap()
            .is_empty()
    );
    let source_nat = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            issourcenat: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let err = alice
        .disassociate_ip_address(&DisassociateIpAddress {
            id: source_nat[0]
                .id
                .clone()
                .expect("the source-NAT address has an id"),
            ..Default::default()
        })
        .await
        .unwrap_err();
    // The source-NAT check runs inside the job (IllegalArgumentException → 530).
    assert_eq!(
        job_error(err),
        (
            530,
            "ip address is used for source nat purposes and can not be disassociated.".into()
        ),
        "source NAT addresses cannot be released"
    );
}

/// `openfirewall=true` (`createPublicLoadBalancer` → `FirewallManagerImpl.createRuleForAllCidrs`)
/// opens a firewall rule 0.0.0.0/0 on the public port that `listFirewallRules` shows; it goes
/// with its LB rule (`DeleteLoadBalancerRuleCmd.execute`: `revokeRelatedFirewallRule`, then
/// `deleteLoadBalancerRule`) and with the address (`disassociateIpAddress`).
#[tokio::test]
async fn openfirewall_rules_go_with_their_lb_rule_and_address() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let mut request = rule(&ip, "o-tcp-80", "tcp", 80);
    request.openfirewall = Some(true);
    let created = alice.create_load_balancer_rule(&request).await.unwrap();
    let opened = alice
        .list_firewall_rules(&ListFirewallRules {
            ipaddressid: Some(ip.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(opened.len(), 1);
    assert_eq!(
        (
            opened[0].protocol.as_deref(),
            opened[0].startport,
            opened[0].endport,
            opened[0].cidrlist.as_deref(),
            opened[0].state.as_deref()
        ),
        (
            Some("tcp"),
            Some(80),
            Some(80),
            Some("0.0.0.0/0"),
            Some("Active")
        )
    );
    let firewall_id = opened[0].id.clone().unwrap();
    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule {
            id: created.id.clone().unwrap(),
        })
        .await
        .unwrap();
    let (status, _, _, _) = api_error(
        alice
            .list_firewall_rules(&ListFirewallRules {
                id: Some(firewall_id),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        status, 431,
        "the opened firewall rule is deleted with its LB rule"
    );

    let mut second = rule(&ip, "o-tcp-443", "tcp", 443);
    second.openfirewall = Some(true);
    alice.create_load_balancer_rule(&second).await.unwrap();
    assert_eq!(
        alice
            .list_firewall_rules(&ListFirewallRules::default())
            .await
            .unwrap()
            .len(),
        1
    );
    alice
        .disassociate_ip_address(&DisassociateIpAddress {
            id: ip.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(sim.with_state(|s| s.lb_rules.is_empty() && s.firewall_rules.is_empty()));
}

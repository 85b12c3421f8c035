//! Load-balancer rules: their lifecycle with members and firewall, the create-phase errors,
//! version gates, VPC tiers, and other accounts' rules.

use crate::common;

use cloudstack::{
    AssignToLoadBalancerRule, AssociateIpAddress, DeleteLoadBalancerRule, ListFirewallRules,
    ListLoadBalancerRuleInstances, ListLoadBalancerRules, ListPublicIpAddresses,
    RemoveFromLoadBalancerRule, UpdateLoadBalancerRule,
};
use cloudstack_sim::{Scenario, Version};
use common::{api_error, client, id_of, job_error, start};

use super::{ip_on, rule};

#[tokio::test]
async fn lb_rule_lifecycle_with_members_and_firewall() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let mut request = rule(&ip, "a1b2-tcp-80", "tcp", 80);
    request.openfirewall = None;
    request.cidrlist = vec!["10.0.0.0/8".into(), "192.168.1.0/24".into()];
    request.description = Some("svc ns/name ~x".into());
    let created = alice.create_load_balancer_rule(&request).await.unwrap();
    let rule_id = created.id.clone().unwrap();
    assert_eq!(
        (created.publicport, created.privateport),
        (Some(80), Some(30080))
    );
    assert_eq!(
        created.cidrlist.as_deref(),
        Some("10.0.0.0/8 192.168.1.0/24"),
        "stored space-separated"
    );
    let firewall = alice
        .list_firewall_rules(&ListFirewallRules {
            ipaddressid: Some(ip.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        firewall.len(),
        1,
        "openfirewall defaults to true outside VPCs"
    );
    assert_eq!(
        (firewall[0].startport, firewall[0].cidrlist.as_deref()),
        (Some(80), Some("0.0.0.0/0"))
    );

    let by_name = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            name: Some("a1b2-tcp-80".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_name.len(), 1);
    assert_eq!(
        by_name[0].state.as_deref(),
        Some("Add"),
        "not applied until a member is mapped"
    );
    assert!(
        alice
            .list_load_balancer_rules(&ListLoadBalancerRules {
                name: Some("a1b2".into()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty(),
        "name is exact"
    );
    let by_keyword = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            keyword: Some("ns/name".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_keyword.len(), 1, "keyword also matches the description");

    let vm_ids: Vec<String> = sim.with_state(|s| s.vms.iter().map(|v| v.id.clone()).collect());
    alice
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule_id.clone(),
            virtualmachineids: vm_ids[..2].to_vec(),
            vmidipmap: vec![(vm_ids[2].clone(), "10.1.1.12".into())],
        })
        .await
        .unwrap();
    let members = alice
        .list_load_balancer_rule_instances(&ListLoadBalancerRuleInstances {
            id: rule_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(members.len(), 3);
    let with_ips = alice
        .call(
            "listLoadBalancerRuleInstances",
            cloudstack::Params::new()
                .set("id", &rule_id)
                .set("lbvmips", true),
        )
        .await
        .unwrap();
    assert_eq!(
        with_ips["lbrulevmidip"][0]["lbvmipaddresses"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let again = alice
        .assign_to_load_balancer_rule(&AssignToLoadBalancerRule {
            id: rule_id.clone(),
            virtualmachineids: vm_ids[..1].to_vec(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    // assignToLoadBalancer's "already mapped" InvalidParameterValueException is a
    // CloudRuntimeException that AssignToLoadBalancerRuleCmd.execute answers as 530.
    assert_eq!(
        job_error(again),
        (530, "Failed to assign load balancer rule".into())
    );
    alice
        .remove_from_load_balancer_rule(&RemoveFromLoadBalancerRule {
            id: rule_id.clone(),
            virtualmachineids: vm_ids[..1].to_vec(),
            ..Default::default()
        })
        .await
        .unwrap();
    let not_applied = alice
        .list_load_balancer_rule_instances(&ListLoadBalancerRuleInstances {
            id: rule_id.clone(),
            applied: Some(false),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        not_applied
            .iter()
            .filter_map(|v| v.id.clone())
            .collect::<Vec<_>>(),
        vm_ids[..1].to_vec()
    );

    alice
        .update_load_balancer_rule(&UpdateLoadBalancerRule {
            id: rule_id.clone(),
            algorithm: Some("leastconn".into()),
            cidrlist: vec!["0.0.0.0/0".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let updated = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule_id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (
            updated[0].algorithm.as_deref(),
            updated[0].cidrlist.as_deref()
        ),
        (Some("leastconn"), Some("0.0.0.0/0"))
    );

    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: rule_id })
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
            .is_empty(),
        "the opened firewall rule goes with it"
    );
}

#[tokio::test]
async fn create_phase_errors_come_back_at_once() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    alice
        .create_load_balancer_rule(&rule(&ip, "r-tcp-80", "tcp", 80))
        .await
        .unwrap();
    sim.reset_counts();

    let conflict = alice
        .create_load_balancer_rule(&rule(&ip, "r-tcp-proxy-80", "tcp-proxy", 80))
        .await
        .unwrap_err();
    let (status, code, cs, text) = api_error(conflict);
    // `CreateLoadBalancerRuleCmd.create` rethrows the `NetworkRuleConflictException` as a
    // `ServerApiException` without its cause: `cserrorcode` 9999, not 4360.
    assert_eq!((status, code, cs), (537, 537, Some(9999)));
    assert!(
        text.starts_with("The range specified, 80-80, conflicts with rule"),
        "{text}"
    );

    let udp = alice
        .create_load_balancer_rule(&rule(&ip, "r-udp-53", "udp", 53))
        .await
        .unwrap_err();
    let (status, _, cs, text) = api_error(udp);
    assert_eq!(
        (status, cs, text.as_str()),
        (
            431,
            Some(9999),
            "LB service provider cannot support this rule"
        )
    );
    let stats_port = alice
        .create_load_balancer_rule(&rule(&ip, "r-tcp-8081", "tcp", 8081))
        .await
        .unwrap_err();
    assert_eq!(
        api_error(stats_port).3,
        "LB service provider cannot support this rule"
    );
    let mut bad = rule(&ip, "r-bad", "tcp", 81);
    bad.algorithm = "random".into();
    assert_eq!(
        api_error(alice.create_load_balancer_rule(&bad).await.unwrap_err()).3,
        "Invalid algorithm: random"
    );
    let mut bad_cidr = rule(&ip, "r-bad", "tcp", 82);
    bad_cidr.cidrlist = vec!["10.0.0.0/33".into()];
    assert_eq!(
        api_error(
            alice
                .create_load_balancer_rule(&bad_cidr)
                .await
                .unwrap_err()
        )
        .3,
        "CIDR [10.0.0.0/33] is invalid."
    );
    assert!(
        sim.call_log().iter().all(|c| c.job_id.is_none()),
        "no job was started for a rejected create"
    );
    let udp_on_netscaler = ip_on(&sim, "net-ns").await;
    alice
        .create_load_balancer_rule(&rule(&udp_on_netscaler, "r-udp-53", "udp", 53))
        .await
        .expect("NetScaler takes UDP");
}

#[tokio::test]
async fn version_gates_udp_and_cidrlist() {
    let mut scenario = Scenario::small();
    scenario.version = Version::parse("4.14").unwrap();
    let old = start(scenario.clone()).await;
    let ip = ip_on(&old, "net-vr").await;
    let mut udp = rule(&ip, "r-udp-53", "udp", 53);
    udp.cidrlist = vec!["10.0.0.0/8".into()];
    let created = client(&old, "alice")
        .create_load_balancer_rule(&udp)
        .await
        .expect("UDP accepted before 4.15");
    assert_eq!(
        created.cidrlist.as_deref(),
        Some(""),
        "cidrlist ignored before 4.18"
    );

    scenario.version = Version::parse("4.19").unwrap();
    let sim = start(scenario).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let mut r = rule(&ip, "r-tcp-80", "tcp", 80);
    r.cidrlist = vec!["10.0.0.0/8".into()];
    let id = alice
        .create_load_balancer_rule(&r)
        .await
        .unwrap()
        .id
        .unwrap();
    alice
        .update_load_balancer_rule(&UpdateLoadBalancerRule {
            id: id.clone(),
            cidrlist: vec!["0.0.0.0/0".into()],
            ..Default::default()
        })
        .await
        .unwrap();
    let after = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(id),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        after[0].cidrlist.as_deref(),
        Some("10.0.0.0/8"),
        "updating cidrlist needs 4.22"
    );
}

#[tokio::test]
async fn vpc_rules_need_networkid_and_refuse_openfirewall() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let vpc = id_of(&sim, "vpcs", "vpc1");
    let tier = id_of(&sim, "networks", "tier1");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            vpcid: Some(vpc.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ip.vpcid.as_deref(), Some(vpc.as_str()));
    let ip = ip.id.unwrap();
    let mut r = rule(&ip, "v-tcp-80", "tcp", 80);
    r.openfirewall = None;
    assert_eq!(
        api_error(alice.create_load_balancer_rule(&r).await.unwrap_err()).0,
        431,
        "networkid needed for a VPC address"
    );
    let net_vr = id_of(&sim, "networks", "net-vr");
    r.networkid = Some(net_vr.clone());
    let address = sim.with_state(|s| s.ip(&ip).unwrap().address.clone());
    assert_eq!(
        api_error(alice.create_load_balancer_rule(&r).await.unwrap_err()).3,
        format!("Ip address {address} is not assigned to the network {net_vr}"),
        "a network outside the address's VPC"
    );
    r.networkid = Some(tier.clone());
    r.openfirewall = Some(true);
    let err = api_error(alice.create_load_balancer_rule(&r).await.unwrap_err()).3;
    assert_eq!(
        err,
        "Can't have openFirewall=true when IP address belongs to VPC"
    );
    r.openfirewall = None;
    let created = alice.create_load_balancer_rule(&r).await.unwrap();
    assert_eq!(created.networkid.as_deref(), Some(tier.as_str()));
    // The address is associated with the tier now: `createPublicLoadBalancer` puts every
    // further rule on the tier, whatever `networkid` says.
    let mut elsewhere = rule(&ip, "v-tcp-81", "tcp", 81);
    elsewhere.networkid = Some(id_of(&sim, "networks", "net-vr"));
    let on_tier = alice.create_load_balancer_rule(&elsewhere).await.unwrap();
    assert_eq!(on_tier.networkid.as_deref(), Some(tier.as_str()));
    assert!(
        alice
            .list_firewall_rules(&ListFirewallRules::default())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn other_accounts_cannot_touch_rules() {
    let sim = start(Scenario::small()).await;
    let ip = ip_on(&sim, "net-vr").await;
    let err = client(&sim, "bob")
        .create_load_balancer_rule(&rule(&ip, "x-tcp-80", "tcp", 80))
        .await
        .unwrap_err();
    assert_eq!(api_error(err).0, 531);
    assert!(
        client(&sim, "bob")
            .list_public_ip_addresses(&ListPublicIpAddresses {
                listall: Some(true),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty()
    );
}

//! Firewall rules, network ACLs, tags and LB policies through the client crate.

use crate::common;

use cloudstack::{
    AssociateIpAddress, CreateFirewallRule, CreateLbHealthCheckPolicy, CreateLbStickinessPolicy,
    CreateLoadBalancerRule, CreateNetworkAcl, CreateTags, DeleteFirewallRule,
    DeleteLbHealthCheckPolicy, DeleteLbStickinessPolicy, DeleteNetworkAcl, DeleteTags,
    ListFirewallRules, ListLbHealthCheckPolicies, ListLbStickinessPolicies, ListLoadBalancerRules,
    ListNetworkAclLists, ListNetworkAcls, ListPublicIpAddresses, ListTags, ListVirtualMachines,
};
use cloudstack_sim::{Scenario, SimServer};
use common::{api_error, client, id_of, start};

async fn ip_on(sim: &SimServer, network: &str) -> String {
    client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap()
}

async fn lb_rule(sim: &SimServer, network: &str) -> String {
    let ip = ip_on(sim, network).await;
    let request = CreateLoadBalancerRule {
        name: "r-tcp-80".into(),
        algorithm: "source".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: Some(ip),
        openfirewall: Some(false),
        ..Default::default()
    };
    client(sim, "alice")
        .create_load_balancer_rule(&request)
        .await
        .unwrap()
        .id
        .unwrap()
}

#[tokio::test]
async fn firewall_rules_with_integer_ports_comma_cidrs_and_conflicts() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let request = CreateFirewallRule {
        ipaddressid: ip.clone(),
        protocol: "tcp".into(),
        startport: Some(80),
        endport: Some(90),
        cidrlist: vec!["10.0.0.0/8".into(), "192.168.0.0/16".into()],
        ..Default::default()
    };
    let rule = alice.create_firewall_rule(&request).await.unwrap();
    assert_eq!((rule.startport, rule.endport), (Some(80), Some(90)));
    assert_eq!(rule.cidrlist.as_deref(), Some("10.0.0.0/8,192.168.0.0/16"));
    // A conflict needs a source CIDR both rules list (FirewallManagerImpl.detectConflictingCidrs).
    let overlap = CreateFirewallRule {
        startport: Some(85),
        endport: Some(85),
        cidrlist: vec!["192.168.0.0/16".into()],
        ..request.clone()
    };
    let (status, _, cs, text) = api_error(alice.create_firewall_rule(&overlap).await.unwrap_err());
    assert_eq!((status, cs), (537, Some(4360)));
    assert!(text.contains("conflicts with rule"), "{text}");
    alice
        .create_firewall_rule(&CreateFirewallRule {
            protocol: "udp".into(),
            ..overlap.clone()
        })
        .await
        .expect("other protocol");
    let bad = CreateFirewallRule {
        cidrlist: vec!["10.0.0.0/99".into()],
        startport: Some(100),
        ..request.clone()
    };
    assert_eq!(
        api_error(alice.create_firewall_rule(&bad).await.unwrap_err()).3,
        "Source CIDRs formatting error 10.0.0.0/99"
    );
    let listed = alice
        .list_firewall_rules(&ListFirewallRules {
            ipaddressid: Some(ip),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 2);
    alice
        .delete_firewall_rule(&DeleteFirewallRule {
            id: rule.id.unwrap(),
        })
        .await
        .unwrap();
    assert_eq!(
        alice
            .list_firewall_rules(&ListFirewallRules::default())
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn network_acls_with_string_ports_and_immutable_defaults() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let lists = alice
        .list_network_acl_lists(&ListNetworkAclLists::default())
        .await
        .unwrap();
    let names: Vec<&str> = lists.iter().filter_map(|l| l.name.as_deref()).collect();
    assert!(
        names.contains(&"default_allow")
            && names.contains(&"default_deny")
            && names.contains(&"tier1-acl")
    );
    let tier = id_of(&sim, "networks", "tier1");
    let item = alice
        .create_network_acl(&CreateNetworkAcl {
            protocol: "tcp".into(),
            networkid: Some(tier.clone()),
            startport: Some(443),
            traffictype: Some("ingress".into()),
            action: Some("allow".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        (item.startport, item.endport, item.number),
        (Some(443), Some(443), Some(1))
    );
    assert_eq!(
        (item.traffictype.as_deref(), item.action.as_deref()),
        (Some("Ingress"), Some("Allow"))
    );
    let raw = alice
        .call(
            "listNetworkACLs",
            cloudstack::Params::new().set("networkid", &tier),
        )
        .await
        .unwrap();
    assert_eq!(
        raw["networkacl"][0]["startport"], "443",
        "ACL ports are strings on the wire"
    );
    let default_allow = lists
        .iter()
        .find(|l| l.is_builtin())
        .unwrap()
        .id
        .clone()
        .unwrap();
    let err = alice
        .create_network_acl(&CreateNetworkAcl {
            protocol: "tcp".into(),
            aclid: Some(default_allow),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(err).3, "Default ACL cannot be modified");
    let bad = alice
        .create_network_acl(&CreateNetworkAcl {
            protocol: "tcp".into(),
            networkid: Some(tier.clone()),
            traffictype: Some("sideways".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(bad).3, "Invalid traffic type sideways");
    alice
        .delete_network_acl(&DeleteNetworkAcl {
            id: item.id.unwrap(),
        })
        .await
        .unwrap();
    assert!(
        alice
            .list_network_acls(&ListNetworkAcls {
                networkid: Some(tier),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn tags_on_every_ownership_marker_type() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let rule = lb_rule(&sim, "net-vr").await;
    let ip = alice
        .list_load_balancer_rules(&ListLoadBalancerRules::default())
        .await
        .unwrap()[0]
        .publicipid
        .clone()
        .unwrap();
    let vm = sim.with_state(|s| s.vms[0].id.clone());
    let marker = vec![("cloudstack-ccm/cluster".to_owned(), "kubernetes".to_owned())];
    for (kind, id) in [
        ("LoadBalancer", &rule),
        ("PublicIpAddress", &ip),
        ("UserVm", &vm),
    ] {
        alice
            .create_tags(&CreateTags {
                resourceids: vec![id.clone()],
                resourcetype: kind.into(),
                tags: marker.clone(),
                customer: None,
            })
            .await
            .unwrap();
    }
    let tagged = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            tags: marker.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tagged.len(), 1);
    assert_eq!(
        cloudstack::tag_value(&tagged[0].tags, "cloudstack-ccm/cluster"),
        Some("kubernetes")
    );
    let ips = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            tags: marker.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ips.len(), 1);
    let vms = alice
        .list_virtual_machines(&ListVirtualMachines {
            tags: marker.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(vms.len(), 1);
    let tags = alice
        .list_tags(&ListTags {
            key: Some("cloudstack-ccm/cluster".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tags.len(), 3);
    let duplicate = alice
        .create_tags(&CreateTags {
            resourceids: vec![rule.clone()],
            resourcetype: "LoadBalancer".into(),
            tags: marker.clone(),
            customer: None,
        })
        .await
        .unwrap_err();
    // The unique key of resource_tags (resource, type, key) refuses the row, and
    // `TaggedResourceManagerImpl.createTags` says so as a `CloudRuntimeException`: 530.
    let (code, text) = common::job_error(duplicate);
    assert_eq!(code, 530);
    let key = &marker[0].0;
    assert_eq!(
        text,
        format!("tag {key} already on LoadBalancer with id {rule}")
    );
    alice
        .delete_tags(&DeleteTags {
            resourceids: vec![rule.clone()],
            resourcetype: "LoadBalancer".into(),
            tags: vec![],
        })
        .await
        .unwrap();
    assert_eq!(
        alice.list_tags(&ListTags::default()).await.unwrap().len(),
        2
    );
    let bob = client(&sim, "bob")
        .create_tags(&CreateTags {
            resourceids: vec![rule],
            resourcetype: "LoadBalancer".into(),
            tags: marker,
            customer: None,
        })
        .await
        .unwrap_err();
    // TaggedResourceManagerImpl.checkResourceAccessible in the job: PermissionDenied → 530.
    assert_eq!(common::job_error(bob).0, 530);
}

#[tokio::test]
async fn health_checks_only_where_the_provider_has_them() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let vr_rule = lb_rule(&sim, "net-vr").await;
    let err = alice
        .create_lb_health_check_policy(&CreateLbHealthCheckPolicy {
            lbruleid: vr_rule.clone(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    let (status, _, _, text) = api_error(err);
    assert_eq!(status, 430);
    assert!(
        text.contains("HealthCheck Policy is not supported by LB Provider"),
        "{text}"
    );

    let ns_rule = lb_rule(&sim, "net-ns").await;
    let policy = alice
        .create_lb_health_check_policy(&CreateLbHealthCheckPolicy {
            lbruleid: ns_rule.clone(),
            pingpath: Some("/healthz".into()),
            intervaltime: Some(5),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        policy.healthcheckpolicy[0].pingpath.as_deref(),
        Some("/healthz")
    );
    let listed = alice
        .list_lb_health_check_policies(&ListLbHealthCheckPolicies {
            lbruleid: Some(ns_rule),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed[0].healthcheckpolicy.len(), 1);
    let id = listed[0].healthcheckpolicy[0].id.clone().unwrap();
    alice
        .delete_lb_health_check_policy(&DeleteLbHealthCheckPolicy { id })
        .await
        .unwrap();

    let sticky = alice
        .create_lb_stickiness_policy(&CreateLbStickinessPolicy {
            lbruleid: vr_rule.clone(),
            name: "sticky".into(),
            methodname: "SourceBased".into(),
            param: vec![("expire".into(), "30m".into())],
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        sticky.stickinesspolicy[0].methodname.as_deref(),
        Some("SourceBased")
    );
    let bad = alice
        .create_lb_stickiness_policy(&CreateLbStickinessPolicy {
            lbruleid: vr_rule.clone(),
            name: "x".into(),
            methodname: "Magic".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(api_error(bad).0, 431);
    let listed = alice
        .list_lb_stickiness_policies(&ListLbStickinessPolicies {
            lbruleid: Some(vr_rule),
            ..Default::default()
        })
        .await
        .unwrap();
    alice
        .delete_lb_stickiness_policy(&DeleteLbStickinessPolicy {
            id: listed[0].stickinesspolicy[0].id.clone().unwrap(),
        })
        .await
        .unwrap();
}

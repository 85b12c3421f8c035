//! List scoping and list filters as the server applies them: project resources only with
//! `projectid` (`AccountManagerImpl.buildACLSearchParameters`), whatever `id`, `ipaddressid`
//! or `publicipid` say; filter ids resolved before the command runs, so an unknown or
//! deleted id is a 431 (`ParamProcessWorker.translateUuidToInternalId`).

use crate::common;

use cloudstack::{
    AssociateIpAddress, CreateFirewallRule, CreateLoadBalancerRule, CreateTags, DeleteFirewallRule,
    DeleteLoadBalancerRule, DisassociateIpAddress, ListFirewallRules, ListLoadBalancerRules,
    ListPublicIpAddresses, ListTags, ListVirtualMachines,
};
use cloudstack_sim::{NetworkSpec, Scenario, SimServer};
use common::{api_error, client, id_of, start};

/// The small scenario plus a network owned by project `proj1` (alice is a member).
fn scenario() -> Scenario {
    let mut scenario = Scenario::small();
    scenario.networks.push(NetworkSpec {
        id: None,
        name: "proj-net".into(),
        zone: "zone1".into(),
        cidr: "10.9.0.0/24".into(),
        vpc: None,
        acl: None,
        lb_provider: Default::default(),
        account: None,
        project: Some("proj1".into()),
        ..Default::default()
    });
    scenario
}

/// A project address on `proj-net` with an LB rule, a firewall rule and a tag on the rule.
async fn project_resources(sim: &SimServer, project: &str) -> (String, String, String) {
    let alice = client(sim, "alice");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", "proj-net")),
            projectid: Some(project.into()),
            ..Default::default()
        })
        .await
        .expect("associate in the project")
        .id
        .expect("ip id");
    let rule = alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "p-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip.clone()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .expect("rule")
        .id
        .expect("rule id");
    let firewall = alice
        .create_firewall_rule(&CreateFirewallRule {
            ipaddressid: ip.clone(),
            protocol: "tcp".into(),
            startport: Some(80),
            endport: Some(80),
            ..Default::default()
        })
        .await
        .expect("firewall rule")
        .id
        .expect("firewall id");
    alice
        .create_tags(&CreateTags {
            resourceids: vec![rule.clone()],
            resourcetype: "LoadBalancer".into(),
            tags: vec![("owner".into(), "svc".into())],
            ..Default::default()
        })
        .await
        .expect("tag");
    (ip, rule, firewall)
}

/// `buildACLSearchParameters`: for a normal user without `projectid` the only permitted
/// account is the caller's own, so lists by `id`, `publicipid`, `ipaddressid` or
/// `resourceid` never return project resources — even to a project member. With
/// `projectid` they do. A root admin listing by `id` sees the resource whoever owns it.
#[tokio::test]
async fn project_resources_need_projectid_even_by_id() {
    let sim = start(scenario()).await;
    let project = id_of(&sim, "projects", "proj1");
    let (ip, rule, firewall) = project_resources(&sim, &project).await;
    let alice = client(&sim, "alice");

    let ips = alice
        .list_public_ip_addresses(&ListPublicIpAddresses {
            id: Some(ip.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        ips.is_empty(),
        "project address listed by id without projectid"
    );
    let rules = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        rules.is_empty(),
        "project LB rule listed by id without projectid"
    );
    let by_ip = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            publicipid: Some(ip.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        by_ip.is_empty(),
        "project LB rule listed by publicipid without projectid"
    );
    for filter in [
        ListFirewallRules {
            id: Some(firewall.clone()),
            ..Default::default()
        },
        ListFirewallRules {
            ipaddressid: Some(ip.clone()),
            ..Default::default()
        },
        ListFirewallRules {
            networkid: Some(id_of(&sim, "networks", "proj-net")),
            ..Default::default()
        },
    ] {
        assert!(
            alice.list_firewall_rules(&filter).await.unwrap().is_empty(),
            "project firewall rule listed without projectid: {filter:?}"
        );
    }
    let tags = alice
        .list_tags(&ListTags {
            resourceid: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        tags.is_empty(),
        "project tag listed by resourceid without projectid"
    );

    // With projectid every one of them is there.
    let in_project = alice
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule.clone()),
            projectid: Some(project.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(in_project.len(), 1);
    let fw = alice
        .list_firewall_rules(&ListFirewallRules {
            ipaddressid: Some(ip.clone()),
            projectid: Some(project.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(fw.len(), 1);
    let tags = alice
        .list_tags(&ListTags {
            resourceid: Some(rule.clone()),
            projectid: Some(project.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(tags.len(), 1);

    // A root admin listing by id: no permitted account, no project criteria.
    let admin = client(&sim, "admin");
    let seen = admin
        .list_load_balancer_rules(&ListLoadBalancerRules {
            id: Some(rule.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(seen.len(), 1);
    // … but listall alone skips project resources.
    let all = admin
        .list_load_balancer_rules(&ListLoadBalancerRules {
            listall: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(all.is_empty());
}

/// A filter id that names nothing fails parameter processing with the 431 every UUID
/// parameter gets — for an id never used and for rows the server deletes (LB and firewall
/// rules). An expunged VM's row stays, so listing it by id is an empty answer, not an error.
/// `listFirewallRules ipaddressid=` of a released address is 431 "not ready for firewall
/// rules yet" (`FirewallManagerImpl.listFirewallRules`: `IPAddressVO.readyToUse`).
#[tokio::test]
async fn unknown_or_deleted_filter_ids_are_431() {
    let sim = start(scenario()).await;
    let alice = client(&sim, "alice");
    let unknown = "0b1d2c3e-0000-4000-8000-00000000ffff";
    let (status, code, cs, text) = api_error(
        alice
            .list_load_balancer_rules(&ListLoadBalancerRules {
                id: Some(unknown.into()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (431, 431, Some(9999)));
    assert_eq!(
        text,
        format!(
            "Unable to execute API command listloadbalancerrules due to invalid value. Invalid parameter id value={unknown} due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class."
        )
    );

    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(&sim, "networks", "net-vr")),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    let rule = alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "a-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip.clone()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    let firewall = alice
        .create_firewall_rule(&CreateFirewallRule {
            ipaddressid: ip.clone(),
            protocol: "tcp".into(),
            startport: Some(80),
            endport: Some(80),
            ..Default::default()
        })
        .await
        .unwrap()
        .id
        .unwrap();
    alice
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: rule.clone() })
        .await
        .unwrap();
    alice
        .delete_firewall_rule(&DeleteFirewallRule {
            id: firewall.clone(),
        })
        .await
        .unwrap();
    let (status, _, _, text) = api_error(
        alice
            .list_load_balancer_rules(&ListLoadBalancerRules {
                id: Some(rule.clone()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert!(
        text.contains(&format!("Invalid parameter id value={rule}")),
        "{text}"
    );
    let (status, _, _, text) = api_error(
        alice
            .list_firewall_rules(&ListFirewallRules {
                id: Some(firewall.clone()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert!(
        text.contains(&format!("Invalid parameter id value={firewall}")),
        "{text}"
    );

    alice
        .disassociate_ip_address(&DisassociateIpAddress {
            id: ip.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    let (status, code, cs, text) = api_error(
        alice
            .list_firewall_rules(&ListFirewallRules {
                ipaddressid: Some(ip.clone()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (431, 431, Some(4350)));
    assert_eq!(
        text,
        format!("Ip address id={ip} not ready for firewall rules yet")
    );
    // The address row itself stays (a pool address), so listing it by id is no error.
    assert!(
        alice
            .list_public_ip_addresses(&ListPublicIpAddresses {
                id: Some(ip.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty()
    );

    let vm = id_of(&sim, "vms", "node-1");
    assert!(sim.remove_vm(&vm));
    assert!(
        alice
            .list_virtual_machines(&ListVirtualMachines {
                id: Some(vm),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty(),
        "an expunged VM's id resolves and lists nothing"
    );
}

//! Network-rule conflicts as `FirewallManagerImpl.detectRulesConflict` decides them, checked
//! in the create phase (synchronous 537, or 431 for ICMP duplicates).

use crate::common;

use cloudstack::{AssociateIpAddress, CreateFirewallRule, CreateLoadBalancerRule};
use cloudstack_sim::{Scenario, SimServer};
use common::{api_error, client, id_of, start};

async fn ip_on(sim: &SimServer, network: &str) -> String {
    client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .expect("associate")
        .id
        .expect("ip id")
}

fn firewall(
    ip: &str,
    protocol: &str,
    ports: Option<(u32, u32)>,
    cidrs: &[&str],
) -> CreateFirewallRule {
    CreateFirewallRule {
        ipaddressid: ip.into(),
        protocol: protocol.into(),
        startport: ports.map(|p| p.0),
        endport: ports.map(|p| p.1),
        cidrlist: cidrs.iter().map(|c| (*c).to_owned()).collect(),
        ..Default::default()
    }
}

fn lb(
    ip: &str,
    name: &str,
    protocol: &str,
    port: u32,
    open_firewall: bool,
) -> CreateLoadBalancerRule {
    CreateLoadBalancerRule {
        name: name.into(),
        algorithm: "roundrobin".into(),
        privateport: 30000 + port,
        publicport: port,
        publicipid: Some(ip.into()),
        protocol: Some(protocol.into()),
        openfirewall: Some(open_firewall),
        ..Default::default()
    }
}

/// Firewall against firewall: a conflict needs the same protocol, overlapping ports and a
/// source CIDR string both lists contain (`detectConflictingCidrs` compares strings, so
/// overlapping networks written differently do not conflict).
#[tokio::test]
async fn firewall_rules_conflict_only_on_a_shared_cidr() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let first = alice
        .create_firewall_rule(&firewall(&ip, "tcp", Some((80, 80)), &["10.0.0.0/8"]))
        .await
        .expect("first rule")
        .id
        .expect("id");
    for (what, rule) in [
        (
            "disjoint CIDR",
            firewall(&ip, "tcp", Some((80, 80)), &["192.168.0.0/16"]),
        ),
        (
            "overlapping network, other string",
            firewall(&ip, "tcp", Some((80, 80)), &["10.1.0.0/16"]),
        ),
        (
            "same CIDR, other protocol",
            firewall(&ip, "udp", Some((80, 80)), &["10.0.0.0/8"]),
        ),
        (
            "same CIDR, other ports",
            firewall(&ip, "tcp", Some((81, 90)), &["10.0.0.0/8"]),
        ),
    ] {
        alice
            .create_firewall_rule(&rule)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let (status, code, cs, text) = api_error(
        alice
            .create_firewall_rule(&firewall(
                &ip,
                "tcp",
                Some((70, 80)),
                &["172.16.0.0/12", "10.0.0.0/8"],
            ))
            .await
            .unwrap_err(),
    );
    assert_eq!((status, code, cs), (537, 537, Some(4360)));
    assert_eq!(
        text,
        format!("The range specified, 70-80, conflicts with rule {first} which has 80-80")
    );

    alice
        .create_firewall_rule(&firewall(&ip, "tcp", None, &["0.0.0.0/0"]))
        .await
        .expect("tcp without ports");
    let (status, _, _, text) = api_error(
        alice
            .create_firewall_rule(&firewall(&ip, "tcp", None, &["0.0.0.0/0"]))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 537);
    assert_eq!(
        text,
        "There is already a firewall rule specified with protocol = tcp and no ports"
    );

    let mut ping = firewall(&ip, "icmp", None, &["0.0.0.0/0"]);
    ping.icmptype = Some(8);
    ping.icmpcode = Some(0);
    let ping_id = alice
        .create_firewall_rule(&ping)
        .await
        .expect("icmp")
        .id
        .expect("id");
    let (status, code, cs, text) = api_error(alice.create_firewall_rule(&ping).await.unwrap_err());
    assert_eq!((status, code, cs), (431, 431, Some(4350)));
    assert_eq!(
        text,
        format!("New rule conflicts with existing rule id={ping_id}")
    );
    ping.icmptype = Some(0);
    alice
        .create_firewall_rule(&ping)
        .await
        .expect("another ICMP type");
}

/// Load balancing against the rest: two LB rules on one port conflict whatever their
/// protocols (tcp and udp included, 537); an LB rule and a firewall rule never conflict
/// (`oneOfRulesIsFirewall`), except through the firewall rule `openfirewall=true` creates
/// (0.0.0.0/0 on the public port), which meets an identical firewall rule.
#[tokio::test]
async fn load_balancer_rules_against_lb_and_firewall_rules() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-ns").await;
    let tcp = alice
        .create_load_balancer_rule(&lb(&ip, "a-tcp-53", "tcp", 53, false))
        .await
        .expect("tcp rule")
        .id
        .expect("id");
    let (status, code, cs, text) = api_error(
        alice
            .create_load_balancer_rule(&lb(&ip, "a-udp-53", "udp", 53, false))
            .await
            .unwrap_err(),
    );
    // `CreateLoadBalancerRuleCmd.create` rethrows the conflict without its cause: 9999.
    assert_eq!((status, code, cs), (537, 537, Some(9999)));
    assert_eq!(
        text,
        format!("The range specified, 53-53, conflicts with rule {tcp} which has 53-53")
    );

    let vr_ip = ip_on(&sim, "net-vr").await;
    alice
        .create_firewall_rule(&firewall(&vr_ip, "tcp", Some((80, 80)), &["0.0.0.0/0"]))
        .await
        .expect("firewall rule");
    alice
        .create_load_balancer_rule(&lb(&vr_ip, "a-tcp-80", "tcp", 80, false))
        .await
        .expect("an LB rule does not conflict with a firewall rule");
    alice
        .create_firewall_rule(&firewall(&vr_ip, "tcp", Some((443, 443)), &["10.0.0.0/8"]))
        .await
        .expect("firewall rule on 443");
    alice
        .create_load_balancer_rule(&lb(&vr_ip, "a-tcp-443", "tcp", 443, true))
        .await
        .expect("the opened 0.0.0.0/0 rule shares no CIDR with 10.0.0.0/8");
    alice
        .create_firewall_rule(&firewall(&vr_ip, "tcp", Some((8443, 8443)), &["0.0.0.0/0"]))
        .await
        .expect("firewall rule on 8443");
    let (status, _, _, text) = api_error(
        alice
            .create_load_balancer_rule(&lb(&vr_ip, "a-tcp-8443", "tcp", 8443, true))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 537);
    assert!(
        text.starts_with("The range specified, 8443-8443, conflicts with rule "),
        "{text}"
    );
    assert!(
        sim.with_state(|s| !s.lb_rules.iter().any(|r| r.name == "a-tcp-8443")),
        "the refused rule is not stored"
    );
}

fn forward(ip: &str, vm: &str, protocol: &str, port: u32) -> cloudstack::Params {
    cloudstack::Params::new()
        .set("ipaddressid", ip)
        .set("virtualmachineid", vm)
        .set("protocol", protocol)
        .set("publicport", port)
        .set("privateport", port)
}

/// Load balancing against port forwarding (`detectRulesConflict`): an LB rule and a
/// port-forwarding rule on one port conflict whatever their protocols; two port-forwarding
/// rules only with the same protocol (`allowPf`). A VM's forwarding rules go when it is
/// expunged (`cleanupVmResources` → `revokePortForwardingRulesForVm`).
#[tokio::test]
async fn load_balancer_and_port_forwarding_rules_on_one_port() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    let ip = ip_on(&sim, "net-vr").await;
    let vm = id_of(&sim, "vms", "node-1");
    let pf = alice
        .call_async("createPortForwardingRule", forward(&ip, &vm, "tcp", 8080))
        .await
        .expect("port forwarding tcp 8080");
    let pf_id = pf["portforwardingrule"]["id"].as_str().unwrap().to_owned();
    assert_eq!(pf["portforwardingrule"]["state"], "Active");
    assert_eq!(pf["portforwardingrule"]["publicport"], "8080");
    alice
        .call_async("createPortForwardingRule", forward(&ip, &vm, "udp", 8080))
        .await
        .expect("the same port with another protocol is allowed between forwarding rules");
    let (status, _, _, text) = api_error(
        alice
            .call_async("createPortForwardingRule", forward(&ip, &vm, "tcp", 8080))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 537);
    assert_eq!(
        text,
        format!("The range specified, 8080-8080, conflicts with rule {pf_id} which has 8080-8080")
    );
    let (status, code, cs, _) = api_error(
        alice
            .create_load_balancer_rule(&lb(&ip, "a-tcp-8080", "tcp", 8080, false))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, code, cs),
        (537, 537, Some(9999)),
        "LB vs port forwarding"
    );

    let lb_rule = alice
        .create_load_balancer_rule(&lb(&ip, "a-tcp-9000", "tcp", 9000, false))
        .await
        .expect("LB on 9000")
        .id
        .expect("id");
    let (status, _, _, text) = api_error(
        alice
            .call_async("createPortForwardingRule", forward(&ip, &vm, "udp", 9000))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 537, "port forwarding vs LB, other protocol");
    assert_eq!(
        text,
        format!(
            "The range specified, 9000-9000, conflicts with rule {lb_rule} which has 9000-9000"
        )
    );

    let listed = alice
        .call(
            "listPortForwardingRules",
            cloudstack::Params::new().set("ipaddressid", &ip),
        )
        .await
        .unwrap();
    assert_eq!(listed["count"], 2);
    assert!(sim.remove_vm(&vm));
    assert!(
        sim.with_state(|s| s.pf_rules.is_empty()),
        "expunge revokes the VM's forwarding rules"
    );
    assert!(
        sim.with_state(|s| s.firewall_rules.is_empty()),
        "and the firewall rules their openfirewall created"
    );
}

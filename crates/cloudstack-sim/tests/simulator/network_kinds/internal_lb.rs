//! The VPC Internal Load Balancer on `tier-ilb` (`LbProvider::InternalLbVm`):
//! `createLoadBalancer`/`listLoadBalancers`/`deleteLoadBalancer` as
//! `ApplicationLoadBalancerManagerImpl` runs them, members and tags shared with public rules,
//! and the scheme refusals of `isLbServiceSupportedInNetwork`.

use super::{capabilities, common, listed, services, vpc_address};

use cloudstack::{CreateLoadBalancerRule, Params};
use cloudstack_sim::{
    KINDS_INTERNAL_LB_TIER, KINDS_INTERNAL_LB_VPC, KINDS_NETRIS_TIER, SMALL_NETWORK, SMALL_TIER,
    Scenario, SimServer,
};
use common::{api_error, client, id_of, start};
use serde_json::Value;

fn internal(tier: &str, name: &str, port: u16, ip: Option<&str>) -> Params {
    let params = Params::new()
        .set("name", name)
        .set("networkid", tier)
        .set("sourceipaddressnetworkid", tier)
        .set("sourceport", port.to_string())
        .set("instanceport", (30000 + port).to_string())
        .set("algorithm", "roundrobin")
        .set("scheme", "Internal");
    match ip {
        Some(ip) => params.set("sourceipaddress", ip),
        None => params,
    }
}

/// `createLoadBalancer` through its job; the job result's `loadbalancer`.
async fn create(sim: &SimServer, params: Params) -> Value {
    let reply = client(sim, "alice")
        .call_async("createLoadBalancer", params)
        .await
        .expect("createLoadBalancer");
    reply["loadbalancer"].clone()
}

async fn list(sim: &SimServer, params: Params) -> Vec<Value> {
    let reply = client(sim, "alice")
        .call("listLoadBalancers", params)
        .await
        .expect("listLoadBalancers");
    reply["loadbalancer"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The tier's offering and services: Lb by InternalLbVm with `InternalLoadBalancerElement`'s
/// capabilities, the rest by the VPC Virtual Router — and, as `internalLbOffProviders` has
/// them (`NetworkOrchestrator.configure`), no PortForwarding and no StaticNat.
#[tokio::test]
async fn the_internal_lb_tier_lists_lb_by_internal_lb_vm() {
    let sim = start(Scenario::network_kinds()).await;
    let tier = listed(&sim, KINDS_INTERNAL_LB_TIER).await;
    assert_eq!(
        tier["networkofferingname"],
        "DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB"
    );
    let router = "VpcVirtualRouter";
    let expected: Vec<(String, String)> = [
        ("Lb", "InternalLbVm"),
        ("SourceNat", router),
        ("Dhcp", router),
        ("Dns", router),
        ("UserData", router),
        ("NetworkACL", router),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(services(&tier), expected);
    let caps = capabilities(&tier, "Lb");
    let names: Vec<&str> = caps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "SupportedLBIsolation",
            "SupportedLbAlgorithms",
            "LbSchemes",
            "SupportedStickinessMethods",
            "SupportedProtocols"
        ]
    );
    assert!(caps.contains(&("LbSchemes".into(), "Internal".into())));
    assert!(caps.contains(&("SupportedProtocols".into(), "tcp, udp".into())));
}

/// Two rules on one auto-acquired address (the second by `sourceipaddress`), an overlapping
/// port refused with 537, members shown as `loadbalancerinstance`, tags, and the rules
/// absent from `listLoadBalancerRules`; deleting both frees the address.
#[tokio::test]
async fn internal_rules_share_an_address_take_members_and_tags_and_free_it() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let tier = id_of(&sim, "networks", KINDS_INTERNAL_LB_TIER);
    let first = create(&sim, internal(&tier, "ilb-http", 80, None)).await;
    let address = first["sourceipaddress"]
        .as_str()
        .expect("an address")
        .to_owned();
    assert_eq!(address, "10.220.1.2", "the lowest free guest address");
    assert_eq!(first["sourceipaddressnetworkid"], tier.as_str());
    assert_eq!(first["loadbalancerrule"][0]["state"], "Add");
    assert_eq!(first["loadbalancerrule"][0]["sourceport"], 80);
    assert_eq!(first["loadbalancerrule"][0]["instanceport"], 30080);
    let second = create(&sim, internal(&tier, "ilb-https", 443, Some(&address))).await;
    assert_eq!(second["sourceipaddress"], address.as_str());

    let (status, _, cs, text) = api_error(
        alice
            .call_async(
                "createLoadBalancer",
                internal(&tier, "ilb-clash", 443, Some(&address)),
            )
            .await
            .unwrap_err(),
    );
    let second_id = second["id"].as_str().unwrap();
    assert_eq!(
        (status, cs, text),
        (
            537,
            Some(9999),
            format!(
                "The range specified, 443-443, conflicts with rule {second_id} which has 443-443"
            )
        )
    );

    let rules = alice
        .call(
            "listLoadBalancerRules",
            Params::new().set("listall", "true"),
        )
        .await
        .expect("listLoadBalancerRules");
    assert!(rules.get("loadbalancerrule").is_none(), "{rules}");

    // Members: the rule's network's NIC address of each VM.
    let first_id = first["id"].as_str().unwrap().to_owned();
    let vm = id_of(&sim, "vms", "vm-ilb");
    alice
        .call_async(
            "assignToLoadBalancerRule",
            Params::new()
                .set("id", &first_id)
                .set("virtualmachineids", &vm),
        )
        .await
        .expect("assign");
    let shown = list(&sim, Params::new().set("id", &first_id)).await;
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0]["loadbalancerinstance"][0]["id"], vm.as_str());
    assert_eq!(
        shown[0]["loadbalancerinstance"][0]["ipaddress"],
        "10.220.1.10"
    );
    assert_eq!(shown[0]["loadbalancerrule"][0]["state"], "Active");
    assert_eq!(sim.with_state(|s| s.internal_lb_vms.len()), 1);

    // Tags of type LoadBalancer.
    alice
        .call_async(
            "createTags",
            Params::new()
                .set("resourcetype", "LoadBalancer")
                .set("resourceids", &first_id)
                .set("tags[0].key", "svc")
                .set("tags[0].value", "web"),
        )
        .await
        .expect("createTags");
    let tagged = list(
        &sim,
        Params::new()
            .set("tags[0].key", "svc")
            .set("tags[0].value", "web"),
    )
    .await;
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0]["id"], first_id.as_str());
    assert_eq!(tagged[0]["tags"][0]["key"], "svc");
    assert_eq!(
        list(&sim, Params::new().set("scheme", "internal"))
            .await
            .len(),
        2
    );

    alice
        .call_async(
            "removeFromLoadBalancerRule",
            Params::new()
                .set("id", &first_id)
                .set("virtualmachineids", &vm),
        )
        .await
        .expect("remove");
    let shown = list(&sim, Params::new().set("id", &first_id)).await;
    assert_eq!(shown[0]["loadbalancerinstance"], Value::Array(vec![]));
    assert_eq!(shown[0]["loadbalancerrule"][0]["state"], "Add");
    // The InternalLbVm stays while a rule of its address does: its HAProxy still refuses
    // the statistics port.
    assert_eq!(sim.with_state(|s| s.internal_lb_vms.len()), 1);
    let (status, _, _, text) = api_error(
        alice
            .call_async(
                "createLoadBalancer",
                internal(&tier, "ilb-stats", 8081, Some(&address)),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, text.as_str()),
        (431, "LB service provider cannot support this rule")
    );

    for id in [first_id.as_str(), second_id] {
        alice
            .call_async("deleteLoadBalancer", Params::new().set("id", id))
            .await
            .expect("deleteLoadBalancer");
    }
    assert!(sim.with_state(|s| s.internal_lb_rules.is_empty()));
    assert!(
        sim.with_state(|s| s.internal_lb_vms.is_empty()),
        "the InternalLbVm goes with the last rule of its address"
    );
    assert!(sim.with_state(|s| s.tags.iter().all(|t| t.resource_id != first_id)));
    // The address is free again: the next rule gets it.
    let again = create(&sim, internal(&tier, "ilb-again", 80, None)).await;
    assert_eq!(again["sourceipaddress"], address.as_str());
}

/// `isLbServiceSupportedInNetwork`: a public rule on the internal-LB tier is refused
/// (scheme Public, 431, cs 9999) and an internal one on a tier whose offering has public LB
/// (scheme Internal, 431, cs 4350); a bad scheme, an address outside the CIDR and a NIC's
/// address are refused; an unknown `deleteLoadBalancer` id is the parameter 431.
#[tokio::test]
async fn schemes_addresses_and_ids_are_checked() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let tier = id_of(&sim, "networks", KINDS_INTERNAL_LB_TIER);
    let ip = vpc_address(&sim, KINDS_INTERNAL_LB_VPC).await;
    let (status, _, cs, text) = api_error(
        alice
            .create_load_balancer_rule(&CreateLoadBalancerRule {
                name: "web".into(),
                algorithm: "roundrobin".into(),
                privateport: 30080,
                publicport: 80,
                publicipid: Some(ip),
                networkid: Some(tier.clone()),
                ..Default::default()
            })
            .await
            .unwrap_err(),
    );
    assert_eq!((status, cs), (431, Some(9999)));
    assert!(
        text.starts_with(
            "Scheme Public is not supported by the network offering NetworkOffering {"
        ) && text
            .contains("\"name\":\"DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB\""),
        "{text}"
    );
    assert!(sim.with_state(|s| s.lb_rules.is_empty()));

    let netris = id_of(&sim, "networks", KINDS_NETRIS_TIER);
    let (status, _, cs, text) = api_error(
        alice
            .call_async("createLoadBalancer", internal(&netris, "x", 80, None))
            .await
            .unwrap_err(),
    );
    assert_eq!((status, cs), (431, Some(4350)));
    assert!(
        text.starts_with(
            "Scheme Internal is not supported by the network offering NetworkOffering {"
        ),
        "{text}"
    );
    for (network, offering) in [
        (
            SMALL_NETWORK,
            "DefaultIsolatedNetworkOfferingWithSourceNatService",
        ),
        (SMALL_TIER, "DefaultIsolatedNetworkOfferingForVpcNetworks\""),
    ] {
        let id = id_of(&sim, "networks", network);
        let (status, _, _, text) = api_error(
            alice
                .call_async("createLoadBalancer", internal(&id, "x", 80, None))
                .await
                .unwrap_err(),
        );
        assert_eq!(status, 431);
        assert!(text.contains(offering), "{text}");
    }

    let refusals = [
        (
            internal(&tier, "x", 80, None).set("scheme", "Public"),
            "Invalid value for scheme. Supported value is internal".to_owned(),
        ),
        (
            internal(&tier, "x", 80, Some("10.9.9.9")),
            "The requested IP is not in the network's CIDR subnet.".to_owned(),
        ),
        (
            internal(&tier, "x", 80, None).set("algorithm", "random"),
            "Invalid algorithm: random".to_owned(),
        ),
    ];
    for (params, expected) in refusals {
        let (status, _, _, text) = api_error(
            alice
                .call_async("createLoadBalancer", params)
                .await
                .unwrap_err(),
        );
        assert_eq!((status, text), (431, expected));
    }
    // A NIC's address cannot be acquired: 533 (cs 9999).
    let (status, _, cs, text) = api_error(
        alice
            .call_async(
                "createLoadBalancer",
                internal(&tier, "x", 80, Some("10.220.1.10")),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((status, cs), (533, Some(9999)));
    assert!(
        text.starts_with("Unable to acquire IP address for network Network {"),
        "{text}"
    );
    assert!(sim.with_state(|s| s.internal_lb_rules.is_empty()));

    // The listing's required parameters come first.
    let (status, _, _, text) = api_error(
        alice
            .call_async(
                "createLoadBalancer",
                Params::new()
                    .set("name", "x")
                    .set("networkid", &tier)
                    .set("sourceport", "80")
                    .set("instanceport", "30080")
                    .set("algorithm", "roundrobin")
                    .set("scheme", "Internal"),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, text.as_str()),
        (
            431,
            "Unable to execute API command createloadbalancer due to missing parameter sourceipaddressnetworkid"
        )
    );
    let gone = "00000000-0000-4000-8000-000000000999";
    let (status, _, _, text) = api_error(
        alice
            .call_async("deleteLoadBalancer", Params::new().set("id", gone))
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 431);
    assert!(
        text.contains("Invalid parameter id value=00000000-0000-4000-8000-000000000999"),
        "{text}"
    );
    let (status, _, _, text) = api_error(
        alice
            .call("listLoadBalancers", Params::new().set("scheme", "Public"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, text.as_str()),
        (431, "Invalid value for scheme. Supported value is internal")
    );
}

/// `Scenario::add_vms` works on the internal-LB tier.
#[tokio::test]
async fn add_vms_fills_the_internal_lb_tier() {
    let mut scenario = Scenario::network_kinds();
    let names = scenario.add_vms(KINDS_INTERNAL_LB_TIER, "ilb-node-", 2);
    assert_eq!(names, ["ilb-node-1", "ilb-node-2"]);
    let sim = start(scenario).await;
    let addresses: Vec<String> = sim.with_state(|s| {
        s.vms
            .iter()
            .filter(|vm| vm.name.starts_with("ilb-node-"))
            .map(|vm| vm.nics[0].ipv4.clone())
            .collect()
    });
    assert_eq!(addresses, ["10.220.1.11", "10.220.1.12"]);
}

/// `deleteLoadBalancer` on a public rule: `deleteLoadBalancerRule(id, true)` without
/// revoking the rule's `openfirewall` firewall rule first, so the rule is left revoked and
/// the job fails; `deleteLoadBalancerRule` (the command) deletes it.
#[tokio::test]
async fn delete_load_balancer_leaves_a_public_rule_with_its_firewall_rule_revoked() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let ip = alice
        .associate_ip_address(&cloudstack::AssociateIpAddress {
            networkid: Some(id_of(&sim, "networks", SMALL_NETWORK)),
            ..Default::default()
        })
        .await
        .expect("address")
        .id
        .expect("id");
    let rule = alice
        .create_load_balancer_rule(&CreateLoadBalancerRule {
            name: "web-tcp-80".into(),
            algorithm: "roundrobin".into(),
            privateport: 30080,
            publicport: 80,
            publicipid: Some(ip),
            openfirewall: Some(true),
            ..Default::default()
        })
        .await
        .expect("rule")
        .id
        .expect("id");
    let (code, text) = common::job_error(
        alice
            .call_async("deleteLoadBalancer", Params::new().set("id", &rule))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text),
        (530, format!("Unable to remove load balancer rule {rule}"))
    );
    let state = sim.with_state(|s| s.lb_rule(&rule).map(|r| r.state.clone()));
    assert_eq!(state.as_deref(), Some("Deleting"));
    alice
        .call_async("deleteLoadBalancerRule", Params::new().set("id", &rule))
        .await
        .expect("deleteLoadBalancerRule");
    assert!(sim.with_state(|s| s.lb_rule(&rule).is_none()));
}

//! Routing firewall rules of a ROUTED isolated network (`CreateRoutingFirewallRuleCmd`,
//! `ListRoutingFirewallRulesCmd`, `DeleteRoutingFirewallRuleCmd`,
//! `RoutedIpv4ManagerImpl.createRoutingFirewallRule`).

use super::common;

use cloudstack::{Client, Params};
use cloudstack_sim::{
    KINDS_ROUTED_NETWORK, KINDS_ROUTED_TIER, KINDS_SHARED_NETWORK, Scenario, SimServer, Version,
};
use common::{api_error, client, id_of, start};
use serde_json::{Value, json};

fn rule(sim: &SimServer, network: &str) -> Params {
    Params::new()
        .set("networkid", id_of(sim, "networks", network))
        .set("protocol", "tcp")
}

async fn list(alice: &Client, params: Params) -> Vec<Value> {
    let reply = alice
        .call("listRoutingFirewallRules", params)
        .await
        .expect("listRoutingFirewallRules");
    reply["firewallrule"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The create answers `{id, jobid}`; the job applies the rule and returns it as a
/// `firewallrule` with `destcidrlist`; tags on it use resource type `FirewallRule`; the list
/// filters and pages; the delete job removes it and its tags.
#[tokio::test]
async fn a_routing_rule_is_created_listed_tagged_and_deleted() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let network = id_of(&sim, "networks", KINDS_ROUTED_NETWORK);
    let started = alice
        .start_async(
            "createRoutingFirewallRule",
            rule(&sim, KINDS_ROUTED_NETWORK)
                .set("startport", 80)
                .set("endport", 443)
                .set("cidrlist", "198.51.100.0/24,192.0.2.0/24")
                .set("destcidrlist", "10.1.10.10/32"),
        )
        .await
        .expect("created");
    let id = started.id.clone().expect("the rule's id");
    let result = alice
        .wait_job("createRoutingFirewallRule", &started.jobid)
        .await
        .expect("applied");
    let applied = &result["firewallrule"];
    assert_eq!(applied["id"], id.as_str());
    assert_eq!(applied["state"], "Active");
    assert_eq!(applied["networkid"], network.as_str());
    assert_eq!(applied["cidrlist"], "198.51.100.0/24,192.0.2.0/24");
    assert_eq!(applied["destcidrlist"], "10.1.10.10/32");
    assert_eq!(
        (applied["startport"].clone(), applied["endport"].clone()),
        (json!(80), json!(443))
    );
    assert_eq!(applied["traffictype"], "Ingress");
    assert!(applied.get("ipaddressid").is_none());

    let icmp = alice
        .call_async(
            "createRoutingFirewallRule",
            rule(&sim, KINDS_ROUTED_NETWORK).set("protocol", "1"),
        )
        .await
        .expect("ICMP by protocol number");
    assert_eq!(icmp["firewallrule"]["protocol"], "icmp");
    assert_eq!(icmp["firewallrule"]["icmptype"], -1);
    assert_eq!(icmp["firewallrule"]["destcidrlist"], "0.0.0.0/0");

    alice
        .call_async(
            "createTags",
            Params::new()
                .set("resourceids", &id)
                .set("resourcetype", "FirewallRule")
                .set("tags[0].key", "owner")
                .set("tags[0].value", "ccm"),
        )
        .await
        .expect("tagged as a FirewallRule");
    let tagged = list(
        &alice,
        Params::new()
            .set("networkid", &network)
            .set("tags[0].key", "owner")
            .set("tags[0].value", "ccm"),
    )
    .await;
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0]["tags"][0]["resourcetype"], "FirewallRule");
    assert_eq!(
        list(&alice, Params::new().set("networkid", &network))
            .await
            .len(),
        2
    );
    let second_page = list(
        &alice,
        Params::new()
            .set("networkid", &network)
            .set("page", 2)
            .set("pagesize", 1),
    )
    .await;
    assert_eq!(second_page.len(), 1);
    assert!(
        list(&alice, Params::new().set("traffictype", "Egress"))
            .await
            .is_empty()
    );
    let (status, _, _, text) = api_error(
        alice
            .call(
                "listRoutingFirewallRules",
                Params::new().set("traffictype", "ingress"),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, text.as_str()),
        (
            431,
            "No enum constant com.cloud.network.rules.FirewallRule.TrafficType.ingress"
        )
    );
    assert!(
        list(&client(&sim, "bob"), Params::new()).await.is_empty(),
        "another account sees none"
    );

    alice
        .call_async("deleteRoutingFirewallRule", Params::new().set("id", &id))
        .await
        .expect("deleted");
    let left = list(&alice, Params::new().set("networkid", &network)).await;
    assert_eq!(left.len(), 1);
    assert_ne!(left[0]["id"], id.as_str());
    assert!(
        !sim.dump()["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["resource_id"] == id.as_str()),
        "its tags went with it"
    );
    // As for deleteFirewallRule: parameter processing resolves the id first.
    let (status, _, cs, text) = api_error(
        alice
            .start_async("deleteRoutingFirewallRule", Params::new().set("id", &id))
            .await
            .unwrap_err(),
    );
    assert_eq!((status, cs), (431, Some(9999)));
    assert!(
        text.contains(&format!("Invalid parameter id value={id}")),
        "{text}"
    );
}

/// The create phase's refusals, each a 431 from `RoutedIpv4ManagerImpl
/// .createRoutingFirewallRule` (or the command's getters), in the server's words.
#[tokio::test]
async fn invalid_routing_rules_are_refused_in_the_create_phase() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let base = || rule(&sim, KINDS_ROUTED_NETWORK);
    for (params, expected) in [
        (
            base().set("cidrlist", "fd00::/64"),
            "Invalid source IPv4 CIDR: fd00::/64",
        ),
        (
            base().set("destcidrlist", "10.1.10.10"),
            "Invalid destination IPv4 CIDR: 10.1.10.10",
        ),
        (
            base().set("startport", 443).set("endport", 80),
            "Start port can't be bigger than end port",
        ),
        (
            base().set("startport", 70000),
            "publicPort is an invalid value: 70000",
        ),
        (base().set("protocol", "47"), "Protocol 47 not supported"),
        (
            base().set("protocol", "all"),
            "Protocol all is not supported in zone",
        ),
        (
            base().set("traffictype", "sideways"),
            "Invalid traffic type sideways",
        ),
        (
            base().set("icmptype", 8),
            "Can specify icmpCode and icmpType for ICMP protocol only",
        ),
        (
            base().set("protocol", "icmp").set("startport", 22),
            "Can't specify start/end port when protocol is ICMP",
        ),
    ] {
        let (status, _, cs, text) = api_error(
            alice
                .start_async("createRoutingFirewallRule", params)
                .await
                .unwrap_err(),
        );
        assert_eq!((status, cs, text.as_str()), (431, Some(4350), expected));
    }
    alice
        .call_async(
            "createRoutingFirewallRule",
            base().set("protocol", "all").set("traffictype", "egress"),
        )
        .await
        .expect("`all` is an egress protocol (SupportedEgressProtocols)");
    assert!(
        sim.dump()["routing_firewall_rules"]
            .as_array()
            .unwrap()
            .len()
            == 1
    );
}

/// `detectRulesConflict` among the network's rules of one traffic type: the same protocol
/// with overlapping ports, source and destination CIDRs → 537 (cs 9999, rethrown by the
/// create phase); another destination does not conflict.
#[tokio::test]
async fn overlapping_routing_rules_conflict() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let web = |dest: &str| {
        rule(&sim, KINDS_ROUTED_NETWORK)
            .set("startport", 80)
            .set("destcidrlist", dest)
    };
    let first = alice
        .call_async("createRoutingFirewallRule", web("10.1.10.10/32"))
        .await
        .expect("first");
    let first_id = first["firewallrule"]["id"].as_str().unwrap().to_owned();
    let (status, _, cs, text) = api_error(
        alice
            .start_async("createRoutingFirewallRule", web("10.1.10.10/32"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, cs, text),
        (
            537,
            Some(9999),
            format!("The range specified, 80-80, conflicts with rule {first_id} which has 80-80")
        )
    );
    alice
        .call_async("createRoutingFirewallRule", web("10.1.10.11/32"))
        .await
        .expect("another destination");
}

/// The service reads the network's Firewall capabilities: a network without the Firewall
/// service (a ROUTED tier — ACL items filter it — or a shared network) is refused with
/// `UnsupportedServiceException` (530, cs 4390; its text for a root admin only); another
/// account's network with 531. The mode itself is not checked.
#[tokio::test]
async fn networks_without_the_firewall_service_or_access_are_refused() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    for network in [KINDS_ROUTED_TIER, KINDS_SHARED_NETWORK] {
        let (status, _, cs, text) = api_error(
            alice
                .start_async("createRoutingFirewallRule", rule(&sim, network))
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (status, cs, text.as_str()),
            (
                530,
                Some(4390),
                "Internal error executing command, please contact your system administrator"
            )
        );
    }
    let (_, _, _, text) = api_error(
        client(&sim, "admin")
            .start_async("createRoutingFirewallRule", rule(&sim, KINDS_ROUTED_TIER))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        text,
        format!(
            "Service Firewall is not supported in the network id={}",
            id_of(&sim, "networks", KINDS_ROUTED_TIER)
        )
    );
    let (status, ..) = api_error(
        client(&sim, "bob")
            .start_async(
                "createRoutingFirewallRule",
                rule(&sim, KINDS_ROUTED_NETWORK),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 531);
    alice
        .call_async("createRoutingFirewallRule", rule(&sim, "net-vr"))
        .await
        .expect("a NATTED isolated network has the Firewall service too");
}

/// The commands exist from 4.20: before, they are unknown (401).
#[tokio::test]
async fn routing_firewall_commands_arrive_with_4_20() {
    let mut scenario = Scenario::network_kinds();
    scenario.version = Version::parse("4.19").unwrap();
    let sim = start(scenario).await;
    let (status, ..) = api_error(
        client(&sim, "alice")
            .call("listRoutingFirewallRules", Params::new())
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 401);
}

/// `FirewallManagerImpl.validateFirewallRule`: a plain firewall rule on the router address
/// of a ROUTED network is a `CloudRuntimeException` (530 cs 4250) pointing to the routing
/// firewall API — a text `ApiServer.handleRequest` shows a root admin only: a user key gets
/// the generic text.
#[tokio::test]
async fn a_plain_firewall_rule_on_a_routed_network_is_refused() {
    let sim = start(Scenario::network_kinds()).await;
    let network = id_of(&sim, "networks", KINDS_ROUTED_NETWORK);
    let ip_id = sim.with_state(|s| {
        s.ips
            .iter()
            .find(|ip| ip.source_nat && ip.network_id.as_deref() == Some(network.as_str()))
            .map(|ip| ip.id.clone())
            .expect("the router's address")
    });
    let request = || {
        Params::new()
            .set("ipaddressid", &ip_id)
            .set("protocol", "tcp")
            .set("startport", "80")
    };
    let err = client(&sim, "alice")
        .call_async("createFirewallRule", request())
        .await
        .unwrap_err();
    let (status, _, cs, text) = api_error(err);
    assert_eq!(
        (status, cs, text.as_str()),
        (
            530,
            Some(4250),
            "Internal error executing command, please contact your system administrator"
        )
    );
    let err = client(&sim, "admin")
        .call_async("createFirewallRule", request())
        .await
        .unwrap_err();
    assert_eq!(
        api_error(err).3,
        "Unable to create routing firewall rule. Please use routing firewall API instead."
    );
    assert!(sim.with_state(|s| s.firewall_rules.is_empty()));
}

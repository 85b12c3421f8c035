//! Load-balancer rules on the network kinds: refused where the network has no Lb service
//! (ROUTED), and NSX's and Netris's providers as `LoadBalancingRulesManagerImpl` treats
//! them (no health checks, no certificates, stickiness stored, Netris update refusals).

use super::{common, ip_state, vpc_address};

use cloudstack::{AssignCertToLoadBalancer, CreateLoadBalancerRule, Params, Secret, UploadSslCert};
use cloudstack_sim::{
    KINDS_NETRIS_TIER, KINDS_NETRIS_VPC, KINDS_NSX_NETWORK, KINDS_ROUTED_NETWORK,
    KINDS_ROUTED_TIER, KINDS_ROUTED_VPC, Scenario, SimServer,
};
use common::{api_error, client, id_of, job_error, start};

const SOURCE_NAT_REFUSAL: &str = "In zone of type Advanced ip address can be associated only to the network of guest type Isolated with the SourceNat enabled";

fn balancer(ip: &str, network: Option<&str>, protocol: &str) -> CreateLoadBalancerRule {
    CreateLoadBalancerRule {
        name: format!("web-{protocol}"),
        algorithm: "roundrobin".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: Some(ip.into()),
        networkid: network.map(str::to_owned),
        protocol: Some(protocol.into()),
        openfirewall: Some(false),
        ..Default::default()
    }
}

/// A rule on the Netris tier, through a new address of its VPC.
async fn netris_rule(sim: &SimServer, protocol: &str) -> (String, String) {
    let ip = vpc_address(sim, KINDS_NETRIS_VPC).await;
    let tier = id_of(sim, "networks", KINDS_NETRIS_TIER);
    let rule = client(sim, "alice")
        .create_load_balancer_rule(&balancer(&ip, Some(&tier), protocol))
        .await
        .expect("the rule is created");
    (rule.id.expect("rule id"), rule.protocol.unwrap_or_default())
}

/// A VPC address's first rule naming a ROUTED tier: `createPublicLoadBalancerRule` →
/// `associateIPToGuestNetwork` finds no SourceNat there (431, cs 9999 from the create
/// phase's rethrow); the address stays with its VPC, on no tier. A port-forwarding rule
/// meets the same refusal (`RulesManagerImpl.createPortForwardingRule`, cs 4350).
#[tokio::test]
async fn a_rule_naming_a_routed_tier_is_refused_and_the_address_stays_with_its_vpc() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let ip = vpc_address(&sim, KINDS_ROUTED_VPC).await;
    let tier = id_of(&sim, "networks", KINDS_ROUTED_TIER);
    let (status, _, cs, text) = api_error(
        alice
            .create_load_balancer_rule(&balancer(&ip, Some(&tier), "tcp"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, cs, text.as_str()),
        (431, Some(9999), SOURCE_NAT_REFUSAL)
    );
    let forward = Params::new()
        .set("ipaddressid", &ip)
        .set("virtualmachineid", id_of(&sim, "vms", "vm-tier-routed"))
        .set("networkid", &tier)
        .set("protocol", "tcp")
        .set("publicport", 22)
        .set("privateport", 22);
    let (status, _, cs, text) = api_error(
        alice
            .start_async("createPortForwardingRule", forward)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, cs, text.as_str()),
        (431, Some(4350), SOURCE_NAT_REFUSAL)
    );
    let dump = sim.dump();
    let address = dump["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == ip.as_str())
        .unwrap();
    assert_eq!(address["network_id"], serde_json::Value::Null);
    assert_eq!(address["state"], "Allocated");
    assert!(dump["lb_rules"].as_array().unwrap().is_empty());
    assert!(dump["pf_rules"].as_array().unwrap().is_empty());
}

/// The only public address of a ROUTED isolated network is its router's, flagged source
/// NAT: `checkIpForService` finds no Lb provider for it, `createPublicLoadBalancerRule`
/// swallows that and fails with a `CloudRuntimeException` — 530, its text for a root admin
/// only.
#[tokio::test]
async fn a_rule_on_the_routers_address_of_a_routed_network_is_an_internal_error() {
    let sim = start(Scenario::network_kinds()).await;
    let network = id_of(&sim, "networks", KINDS_ROUTED_NETWORK);
    let router_ip = sim.dump()["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["network_id"] == network.as_str() && i["source_nat"] == true)
        .and_then(|i| i["id"].as_str())
        .expect("the router's address")
        .to_owned();
    let (status, _, cs, text) = api_error(
        client(&sim, "alice")
            .create_load_balancer_rule(&balancer(&router_ip, None, "tcp"))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, cs, text.as_str()),
        (
            530,
            Some(4250),
            "Internal error executing command, please contact your system administrator"
        )
    );
    let (_, _, _, admin_text) = api_error(
        client(&sim, "admin")
            .create_load_balancer_rule(&balancer(&router_ip, None, "tcp"))
            .await
            .unwrap_err(),
    );
    assert_eq!(admin_text, "Failed to create load balancer rule: web-tcp");
    assert!(sim.dump()["lb_rules"].as_array().unwrap().is_empty());
}

/// NSX and Netris have no `HealthCheckPolicy` capability: `createLBHealthCheckPolicy` is
/// refused exactly as on the Virtual Router (`validateHealthCheck`).
#[tokio::test]
async fn health_checks_are_refused_on_nsx_and_netris_as_on_the_virtual_router() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let (netris, _) = netris_rule(&sim, "tcp").await;
    for rule in [
        common::lb_rule_on(&sim, KINDS_NSX_NETWORK, "tcp", 80).await,
        netris,
        common::lb_rule_on(&sim, "net-vr", "tcp", 80).await,
    ] {
        let (status, _, cs, text) = api_error(
            alice
                .start_async(
                    "createLBHealthCheckPolicy",
                    Params::new()
                        .set("lbruleid", &rule)
                        .set("pingpath", "/healthz"),
                )
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (status, cs, text),
            (
                430,
                Some(4350),
                format!(
                    "Failed to create HealthCheck policy: Validation Failed (HealthCheck Policy is not supported by LB Provider for the LB rule id :{rule})"
                )
            )
        );
    }
}

/// NSX and Netris advertise the HAProxy stickiness methods: a policy is created and listed
/// (and never reaches their devices).
#[tokio::test]
async fn stickiness_policies_are_stored_on_nsx_and_netris() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let (netris, _) = netris_rule(&sim, "tcp").await;
    for rule in [
        common::lb_rule_on(&sim, KINDS_NSX_NETWORK, "tcp", 80).await,
        netris,
    ] {
        alice
            .call_async(
                "createLBStickinessPolicy",
                Params::new()
                    .set("lbruleid", &rule)
                    .set("name", "sticky")
                    .set("methodname", "SourceBased"),
            )
            .await
            .expect("the policy is created");
        let listed = alice
            .call(
                "listLBStickinessPolicies",
                Params::new().set("lbruleid", &rule),
            )
            .await
            .unwrap();
        let policy = &listed["stickinesspolicies"][0]["stickinesspolicy"][0];
        assert_eq!(policy["methodname"], "SourceBased");
        assert_eq!(policy["state"], "Active");
    }
}

/// No `SslTermination` on NSX or Netris: `assignCertToLoadBalancer` fails in the job as for
/// any provider without it.
#[tokio::test]
async fn certificates_are_refused_on_nsx_and_netris() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let cert = alice
        .upload_ssl_cert(&UploadSslCert {
            certificate: include_str!("../../fixtures/ssl/leaf-a-cert.pem").into(),
            privatekey: Secret::new(include_str!("../../fixtures/ssl/leaf-a-key.pem")),
            name: "shop".into(),
            ..Default::default()
        })
        .await
        .expect("upload");
    let (netris, _) = netris_rule(&sim, "ssl").await;
    for rule in [
        common::lb_rule_on(&sim, KINDS_NSX_NETWORK, "ssl", 80).await,
        netris,
    ] {
        let (code, text) = job_error(
            alice
                .assign_cert_to_load_balancer(&AssignCertToLoadBalancer {
                    lbruleid: rule,
                    certid: cert.id.clone().unwrap(),
                    forced: None,
                })
                .await
                .unwrap_err(),
        );
        assert_eq!(
            (code, text.as_str()),
            (431, "Ssl termination not supported by the loadbalancer")
        );
    }
}

/// UDP needs no refusal on NSX or Netris (`validateLBRule` accepts every rule; the Virtual
/// Router refuses it). The rule lists the protocol asked for: the response shows its
/// `lbProtocol`; only the Netris device would serve it as TCP (`getProtocol()`).
#[tokio::test]
async fn udp_rules_are_created_on_nsx_and_netris() {
    let sim = start(Scenario::network_kinds()).await;
    let (_, protocol) = netris_rule(&sim, "udp").await;
    assert_eq!(protocol, "udp");
    let nsx = common::lb_rule_on(&sim, KINDS_NSX_NETWORK, "udp", 80).await;
    let listed = client(&sim, "alice")
        .call("listLoadBalancerRules", Params::new().set("id", &nsx))
        .await
        .unwrap();
    assert_eq!(listed["loadbalancerrule"][0]["protocol"], "udp");
}

/// `updateLoadBalancerRule` on a Netris network (`validateInputsForExternalNetworkProvider`,
/// in the job): any `algorithm` and `protocol=tcp-proxy` are refused with 431, the rule
/// unchanged; other changes pass. NSX takes an algorithm change.
#[tokio::test]
async fn netris_refuses_algorithm_and_tcp_proxy_updates_in_the_job() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let (rule, _) = netris_rule(&sim, "tcp").await;
    let update = |params: Params| {
        let alice = alice.clone();
        let rule = rule.clone();
        async move {
            alice
                .call_async("updateLoadBalancerRule", params.set("id", rule))
                .await
        }
    };
    for (params, expected) in [
        (
            Params::new().set("algorithm", "roundrobin"),
            "Algorithm: roundrobin specified for Netris Provider is not supported.",
        ),
        (
            Params::new().set("algorithm", "leastconn"),
            "Algorithm: leastconn specified for Netris Provider is not supported.",
        ),
        (
            Params::new().set("protocol", "TCP-Proxy"),
            "TCP Proxy protocol is not supported for Netris Provider.",
        ),
    ] {
        let (code, text) = job_error(update(params).await.unwrap_err());
        assert_eq!((code, text.as_str()), (431, expected));
    }
    let updated = update(Params::new().set("name", "renamed").set("protocol", "udp"))
        .await
        .expect("a name and protocol change passes");
    assert_eq!(updated["loadbalancer"]["name"], "renamed");
    assert_eq!(updated["loadbalancer"]["algorithm"], "roundrobin");
    assert_eq!(updated["loadbalancer"]["protocol"], "udp");

    let nsx = common::lb_rule_on(&sim, KINDS_NSX_NETWORK, "tcp", 80).await;
    let changed = alice
        .call_async(
            "updateLoadBalancerRule",
            Params::new().set("id", &nsx).set("algorithm", "leastconn"),
        )
        .await
        .expect("NSX takes the algorithm");
    assert_eq!(changed["loadbalancer"]["algorithm"], "leastconn");
}

/// The Netris tier's rule associated its VPC address with the tier, as on any tier.
#[tokio::test]
async fn a_netris_rule_associates_its_vpc_address_with_the_tier() {
    let sim = start(Scenario::network_kinds()).await;
    let ip = vpc_address(&sim, KINDS_NETRIS_VPC).await;
    let tier = id_of(&sim, "networks", KINDS_NETRIS_TIER);
    client(&sim, "alice")
        .create_load_balancer_rule(&balancer(&ip, Some(&tier), "tcp"))
        .await
        .expect("the rule");
    let address = sim.dump()["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["id"] == ip.as_str())
        .cloned()
        .unwrap();
    assert_eq!(address["network_id"], tier.as_str());
    assert_eq!(ip_state(&sim, &ip), "Allocated");
}

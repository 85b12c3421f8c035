//! The network kinds of `Scenario::network_kinds` — ROUTED (isolated and VPC tier), shared,
//! NSX and Netris — as `listNetworks` shows them, and what CloudStack refuses on them:
//! public addresses here, load-balancer rules in [`lb`], routing firewall rules in
//! [`routing_firewall`].

mod internal_lb;
mod lb;
mod routing_firewall;

use crate::common;

use cloudstack::{AssociateIpAddress, Params};
use cloudstack_sim::{
    KINDS_NETRIS_TIER, KINDS_NSX_NETWORK, KINDS_ROUTED_NETWORK, KINDS_ROUTED_TIER,
    KINDS_ROUTED_VPC, KINDS_SHARED_NETWORK, Scenario, SimServer,
};
use common::{api_error, client, id_of, job_error, start};
use serde_json::Value;

/// A network as alice lists it.
async fn listed(sim: &SimServer, name: &str) -> Value {
    let reply = client(sim, "alice")
        .call(
            "listNetworks",
            Params::new().set("id", id_of(sim, "networks", name)),
        )
        .await
        .expect("listNetworks");
    let items = reply["network"].as_array().expect("a network list");
    assert_eq!(items.len(), 1, "{reply}");
    items[0].clone()
}

/// `(service name, provider name)` of every entry of `service[]`.
fn services(network: &Value) -> Vec<(String, String)> {
    network["service"]
        .as_array()
        .expect("service[]")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["provider"][0]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The capabilities of one service as `name → value`.
fn capabilities(network: &Value, service: &str) -> Vec<(String, String)> {
    let entry = network["service"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == service)
        .unwrap_or_else(|| panic!("no {service} in {network}"));
    entry["capability"]
        .as_array()
        .map(|caps| {
            caps.iter()
                .map(|c| {
                    (
                        c["name"].as_str().unwrap().to_owned(),
                        c["value"].as_str().unwrap().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect()
}

/// The address of the source-NAT public address of a network or VPC, from the state.
fn source_nat_address(sim: &SimServer, field: &str, id: &str) -> String {
    sim.dump()["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ip| ip["source_nat"] == true && ip[field] == id)
        .and_then(|ip| ip["address"].as_str())
        .unwrap_or_else(|| panic!("no source-NAT address with {field}={id}"))
        .to_owned()
}

/// The state of a public address, from the state.
fn ip_state(sim: &SimServer, id: &str) -> String {
    sim.dump()["ips"]
        .as_array()
        .unwrap()
        .iter()
        .find(|ip| ip["id"] == id)
        .and_then(|ip| ip["state"].as_str())
        .expect("the address exists")
        .to_owned()
}

/// A fresh address of a VPC, associated with no tier.
async fn vpc_address(sim: &SimServer, vpc: &str) -> String {
    let ip = client(sim, "alice")
        .associate_ip_address(&AssociateIpAddress {
            vpcid: Some(id_of(sim, "vpcs", vpc)),
            ..Default::default()
        })
        .await
        .expect("associate with the VPC");
    ip.id.expect("ip id")
}

/// ROUTED networks (`NetworkResponse.ipv4Routing`/`ipv4Routes`): static routing of the
/// subnet to the router's public address — the network's source-NAT address, the VPC's for
/// a tier — and only the services ROUTED mode allows.
#[tokio::test]
async fn routed_networks_show_their_routes_and_no_nat_or_lb_service() {
    let sim = start(Scenario::network_kinds()).await;
    let routed = listed(&sim, KINDS_ROUTED_NETWORK).await;
    assert_eq!(routed["type"], "Isolated");
    assert_eq!(routed["ip4routing"], "Static");
    let gateway = source_nat_address(
        &sim,
        "network_id",
        &id_of(&sim, "networks", KINDS_ROUTED_NETWORK),
    );
    assert_eq!(
        routed["ip4routes"],
        serde_json::json!([{"subnet": "10.1.10.0/24", "gateway": gateway}])
    );
    assert_eq!(
        services(&routed),
        pairs(&[
            ("Dhcp", "VirtualRouter"),
            ("Dns", "VirtualRouter"),
            ("UserData", "VirtualRouter"),
            ("Firewall", "VirtualRouter"),
        ])
    );

    let tier = listed(&sim, KINDS_ROUTED_TIER).await;
    assert_eq!(tier["ip4routing"], "Static");
    let vpc_gateway = source_nat_address(&sim, "vpc_id", &id_of(&sim, "vpcs", KINDS_ROUTED_VPC));
    assert_eq!(
        tier["ip4routes"],
        serde_json::json!([{"subnet": "10.200.1.0/24", "gateway": vpc_gateway}])
    );
    assert_eq!(
        services(&tier),
        pairs(&[
            ("Dhcp", "VpcVirtualRouter"),
            ("Dns", "VpcVirtualRouter"),
            ("UserData", "VpcVirtualRouter"),
            ("NetworkACL", "VpcVirtualRouter"),
        ])
    );

    let natted = listed(&sim, "net-vr").await;
    assert!(natted.get("ip4routing").is_none() && natted.get("ip4routes").is_none());
}

/// A shared network (`DefaultSharedNetworkOffering`): `type: Shared`, Dhcp, Dns and
/// UserData only; `listNetworks type=` filters by guest type; its VM's NIC is `Shared`.
#[tokio::test]
async fn a_shared_network_has_no_lb_firewall_or_nat() {
    let sim = start(Scenario::network_kinds()).await;
    let shared = listed(&sim, KINDS_SHARED_NETWORK).await;
    assert_eq!(shared["type"], "Shared");
    assert_eq!(
        shared["networkofferingname"],
        "DefaultSharedNetworkOffering"
    );
    assert_eq!(
        services(&shared),
        pairs(&[
            ("Dhcp", "VirtualRouter"),
            ("Dns", "VirtualRouter"),
            ("UserData", "VirtualRouter"),
        ])
    );
    let alice = client(&sim, "alice");
    let only_shared = alice
        .call("listNetworks", Params::new().set("type", "Shared"))
        .await
        .unwrap();
    let names: Vec<&str> = only_shared["network"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, [KINDS_SHARED_NETWORK]);
    let vms = alice
        .call(
            "listVirtualMachines",
            Params::new().set("id", id_of(&sim, "vms", "vm-shared")),
        )
        .await
        .unwrap();
    assert_eq!(vms["virtualmachine"][0]["nic"][0]["type"], "Shared");
    assert_eq!(
        vms["virtualmachine"][0]["nic"][0]["ipaddress"],
        "10.1.20.10"
    );
}

/// NSX and Netris (`NsxElement`/`NetrisElement.initCapabilities`): Lb with exactly their
/// capabilities — no HealthCheckPolicy, no SslTermination — and the NAT services and the
/// Firewall (isolated) or NetworkACL (tier) service by the same provider.
#[tokio::test]
async fn nsx_and_netris_networks_advertise_their_elements_capabilities() {
    let sim = start(Scenario::network_kinds()).await;
    let stickiness = capabilities(&listed(&sim, "net-vr").await, "Lb")
        .into_iter()
        .find(|(n, _)| n == "SupportedStickinessMethods")
        .expect("the Virtual Router's stickiness methods")
        .1;
    let nsx = listed(&sim, KINDS_NSX_NETWORK).await;
    assert_eq!(
        services(&nsx),
        pairs(&[
            ("Lb", "Nsx"),
            ("SourceNat", "Nsx"),
            ("PortForwarding", "Nsx"),
            ("StaticNat", "Nsx"),
            ("Dhcp", "VirtualRouter"),
            ("Dns", "VirtualRouter"),
            ("UserData", "VirtualRouter"),
            ("Firewall", "Nsx"),
        ])
    );
    let expected = |extra: &[(&str, &str)]| {
        let mut caps = pairs(&[
            ("SupportedLBIsolation", "dedicated"),
            ("SupportedLbAlgorithms", "roundrobin,leastconn"),
            ("LbSchemes", "Internal,Public"),
            ("SupportedStickinessMethods", stickiness.as_str()),
            ("SupportedProtocols", "tcp, udp"),
        ]);
        caps.extend(pairs(extra));
        caps
    };
    assert_eq!(capabilities(&nsx, "Lb"), expected(&[]));
    assert_eq!(nsx["networkofferingname"], "DefaultNATNSXNetworkOffering");

    let netris = listed(&sim, KINDS_NETRIS_TIER).await;
    let providers = services(&netris);
    assert!(providers.contains(&("Lb".into(), "Netris".into())));
    assert!(providers.contains(&("NetworkACL".into(), "Netris".into())));
    assert!(!providers.iter().any(|(s, _)| s == "Firewall"));
    assert_eq!(
        capabilities(&netris, "Lb"),
        expected(&[
            (
                "AutoScaleCounters",
                r#"[{"methodname":"CPU","paramlist":[]},{"methodname":"MEMORY","paramlist":[]}]"#
            ),
            ("VmAutoScaling", "true"),
        ])
    );
}

/// `associateIpAddress networkid=<ROUTED isolated network>`: accepted ({id, jobid}), the
/// job fails in `IpAddressManagerImpl.associateIPToGuestNetwork` (no SourceNat) and the
/// address is free again.
#[tokio::test]
async fn an_address_for_a_routed_network_fails_in_the_job_and_is_released() {
    let sim = start(Scenario::network_kinds()).await;
    let alice = client(&sim, "alice");
    let started = alice
        .start_async(
            "associateIpAddress",
            Params::new().set("networkid", id_of(&sim, "networks", KINDS_ROUTED_NETWORK)),
        )
        .await
        .expect("the call is accepted");
    let ip = started.id.expect("the address id");
    let (code, text) = job_error(
        alice
            .wait_job("associateIpAddress", &started.jobid)
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (code, text.as_str()),
        (
            431,
            "In zone of type Advanced ip address can be associated only to the network of guest type Isolated with the SourceNat enabled"
        )
    );
    assert_eq!(ip_state(&sim, &ip), "Free");
}

/// `associateIpAddress networkid=<shared network without services>`: refused by
/// `NetworkServiceImpl.allocateIP` before anything is allocated (synchronous 431).
#[tokio::test]
async fn an_address_for_a_shared_network_is_refused_at_once() {
    let sim = start(Scenario::network_kinds()).await;
    let allocated = |sim: &SimServer| {
        sim.dump()["ips"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|ip| ip["state"] != "Free")
            .count()
    };
    let before = allocated(&sim);
    let (status, errorcode, cs, text) = api_error(
        client(&sim, "alice")
            .start_async(
                "associateIpAddress",
                Params::new().set("networkid", id_of(&sim, "networks", KINDS_SHARED_NETWORK)),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, errorcode, cs, text.as_str()),
        (
            431,
            431,
            Some(4350),
            "Associate IP address can only be called on the shared networks in the advanced zone with Firewall/Source Nat/Static Nat/Port Forwarding/Load balancing services enabled"
        )
    );
    assert_eq!(allocated(&sim), before, "nothing allocated");
    assert!(sim.dump()["jobs"].as_array().unwrap().is_empty(), "no job");
}

/// A scenario file names the new kinds; combinations no offering allows are refused.
#[test]
fn scenario_files_name_modes_guest_types_and_providers() {
    let base = r#"
        [[account]]
        name = "alice"
        api_key = "k"
        secret_key = "s"
        [[zone]]
        name = "z"
        public_ips = ["203.0.113.1", "203.0.113.2"]
    "#;
    let scenario = Scenario::from_toml(&format!(
        r#"{base}
        [[network]]
        name = "routed"
        zone = "z"
        cidr = "10.0.1.0/24"
        network_mode = "ROUTED"
        lb_provider = "Nsx"
        [[network]]
        name = "shared"
        zone = "z"
        cidr = "10.0.2.0/24"
        guest_type = "Shared"
        [[network]]
        name = "plain"
        zone = "z"
        cidr = "10.0.3.0/24"
        lb_provider = "Netris"
    "#
    ))
    .expect("parses");
    let state = cloudstack_sim::state::State::from_scenario(&scenario).expect("builds");
    let by_name = |n: &str| state.networks.iter().find(|x| x.name == n).unwrap();
    assert!(by_name("routed").is_routed());
    assert!(by_name("shared").is_shared());
    assert!(!by_name("plain").is_routed() && !by_name("plain").is_shared());
    assert_eq!(
        state.ips.iter().filter(|ip| ip.source_nat).count(),
        2,
        "the ROUTED and the NATTED isolated network hold a router address; the shared none"
    );
    let refused = Scenario::from_toml(&format!(
        r#"{base}
        [[network]]
        name = "bad"
        zone = "z"
        cidr = "10.0.4.0/24"
        guest_type = "Shared"
        lb_provider = "Netscaler"
    "#
    ))
    .map(|s| cloudstack_sim::state::State::from_scenario(&s).map(|_| ()));
    let text = refused.expect("parses").unwrap_err().to_string();
    assert!(
        text.contains("a Shared network has no Lb service"),
        "{text}"
    );
}

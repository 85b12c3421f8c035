//! Plan unit tests: no network, the plan is data.

use serde_json::{Value, json};

use super::*;
use crate::cloud::loadbalancer::annotations as ann;
use crate::cloud::loadbalancer::capabilities::{NetworkFacts, NetworkService};
use crate::cloud::loadbalancer::observe::{ForeignRule, ObservedIp, ObservedStickiness};
use crate::cloud::loadbalancer::spec::SpecOptions;
use crate::cloud::loadbalancer::vocabulary::StickinessMethod;

const UID: &str = "6a1f0b2c-3d4e-4f50-8a9b-0c1d2e3f4a5b";
const LB: &str = "a6a1f0b2c3d4e4f508a9b0c1d2e3f4a5";
const NET: &str = "net-1";
const IP_ID: &str = "ip-1";

fn spec(annotations: Value, ports: &[(&str, u16, u16)], extra: Value) -> LbSpec {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(p, port, node)| json!({"protocol": p, "port": port, "nodePort": node}))
        .collect();
    let mut svc = json!({
        "metadata": {"name": "web", "namespace": "shop", "uid": UID, "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": ports}
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        svc["spec"][k] = v;
    }
    let svc = serde_json::from_value(svc).expect("Service JSON");
    LbSpec::from_service(
        &svc,
        &SpecOptions {
            cluster_name: "prod".into(),
            load_balancer_class: None,
        },
    )
    .expect("valid spec")
}

fn simple(ports: &[(&str, u16, u16)]) -> LbSpec {
    spec(json!({}), ports, json!({}))
}

fn lb_service(protocols: &str, health: bool, provider: &str) -> NetworkService {
    let mut caps = vec![
        ("SupportedLbAlgorithms".to_string(), "roundrobin,leastconn,source".to_string()),
        ("SupportedProtocols".to_string(), protocols.to_string()),
        (
            "SupportedStickinessMethods".to_string(),
            r#"[{"methodname":"LbCookie"},{"methodname":"AppCookie"},{"methodname":"SourceBased"}]"#.to_string(),
        ),
    ];
    if health {
        caps.push(("HealthCheckPolicy".into(), "true".into()));
    }
    NetworkService {
        name: "Lb".into(),
        capabilities: caps,
        providers: vec![provider.into()],
    }
}

fn ctx_with(facts: NetworkFacts, version: (u32, u32, u32)) -> PlanContext {
    let server = ServerFeatures::for_version(version.0, version.1, version.2);
    PlanContext {
        network: NetworkCapabilities::from_facts(&facts, &server),
        server,
        cluster_name: "prod".into(),
    }
}

/// An isolated Virtual Router network.
fn isolated(version: (u32, u32, u32)) -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "iso".into(),
        services: vec![
            lb_service("tcp, udp, tcp-proxy", false, "VirtualRouter"),
            NetworkService {
                name: "Firewall".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, version)
}

/// A NetScaler-like isolated network (UDP and health checks).
fn netscaler() -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "ns".into(),
        services: vec![
            lb_service("tcp,udp", true, "Netscaler"),
            NetworkService {
                name: "Firewall".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 20, 0))
}

/// A VPC tier with an ACL list of this name.
fn vpc(acl_name: &str) -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "tier".into(),
        vpc_id: Some("vpc-1".into()),
        acl_id: Some("acl-1".into()),
        acl_name: Some(acl_name.into()),
        services: vec![
            lb_service("tcp, udp, tcp-proxy", false, "VpcVirtualRouter"),
            NetworkService {
                name: "NetworkACL".into(),
                ..Default::default()
            },
        ],
    };
    ctx_with(facts, (4, 19, 0))
}

fn backends(vms: &[&str]) -> Backends {
    Backends {
        network_id: NET.into(),
        vm_ids: std::sync::Arc::new(vms.iter().map(|v| v.to_string()).collect()),
        ..Backends::default()
    }
}

fn our_ip() -> ObservedIp {
    ObservedIp {
        id: IP_ID.into(),
        address: "203.0.113.5".parse().unwrap(),
        ownership: IpOwnership::Ours,
        associated_network_id: Some(NET.into()),
        vpc_id: None,
        is_source_nat: false,
        is_static_nat: false,
        tags: [(TAG_ASSOCIATED.to_string(), "true".to_string())].into(),
    }
}

fn owner_tags() -> Tags {
    [
        (TAG_CLUSTER.to_string(), "prod".to_string()),
        (TAG_SERVICE_UID.to_string(), UID.to_string()),
    ]
    .into()
}

fn observed_rule(
    name: &str,
    protocol: LbProtocol,
    port: u16,
    node_port: u16,
    members: &[&str],
) -> ObservedRule {
    ObservedRule {
        id: format!("rule-{name}"),
        name: name.into(),
        protocol,
        public_port: port,
        private_port: node_port,
        algorithm: Algorithm::RoundRobin,
        cidrs: Vec::new(),
        public_ip_id: IP_ID.into(),
        network_id: Some(NET.into()),
        members: Arc::new(members.iter().map(|m| m.to_string()).collect()),
        tags: owner_tags(),
        health_checks: Vec::new(),
        stickiness: Vec::new(),
        health_checks_unknown: false,
        stickiness_unknown: false,
    }
}

fn fw(port: u16, cidrs: &[&str]) -> ObservedFirewallRule {
    ObservedFirewallRule {
        id: format!("fw-{port}"),
        protocol: IpProtocol::Tcp,
        start_port: port,
        end_port: port,
        cidrs: cidrs.iter().map(|c| Cidr::parse(c).unwrap()).collect(),
        tags: Tags::new(),
    }
}

/// What CloudStack holds after the spec was applied on an isolated network.
fn applied(spec: &LbSpec, vms: &[&str]) -> ObservedLb {
    ObservedLb {
        ip: Some(our_ip()),
        rules: spec
            .rules
            .iter()
            .map(|r| observed_rule(&r.name, r.protocol, r.public_port, r.node_port, vms))
            .collect(),
        firewall_rules: spec
            .rules
            .iter()
            .map(|r| fw(r.public_port, &["0.0.0.0/0"]))
            .collect(),
        ..Default::default()
    }
}

fn kinds(plan: &Plan) -> Vec<Vec<&'static str>> {
    plan.phases
        .iter()
        .map(|p| {
            p.steps
                .iter()
                .map(|s| match s {
                    Step::AssociateIp { .. } => "associate",
                    Step::AdoptClaimedIp { .. } => "adopt",
                    Step::CreateRule { .. } => "create-rule",
                    Step::UpdateRule { .. } => "update-rule",
                    Step::DeleteRule { .. } => "delete-rule",
                    Step::AssignMembers { .. } => "assign",
                    Step::RemoveMembers { .. } => "remove",
                    Step::CreateFirewallRule { .. } => "create-fw",
                    Step::DeleteFirewallRule { .. } => "delete-fw",
                    Step::CreateAclItem { .. } => "create-acl",
                    Step::DeleteAclItem { .. } => "delete-acl",
                    Step::CreateHealthCheck { .. } => "create-hc",
                    Step::DeleteHealthCheck { .. } => "delete-hc",
                    Step::CreateStickiness { .. } => "create-st",
                    Step::DeleteStickiness { .. } => "delete-st",
                    Step::TagResources { .. } => "tag",
                    Step::UntagResources { .. } => "untag",
                    Step::ReleaseIp { .. } => "release",
                    Step::UploadCertificate { .. } => "upload-cert",
                    Step::AssignCertificate { .. } => "assign-cert",
                    Step::RemoveCertificate { .. } => "remove-cert",
                    Step::DeleteCertificate { .. } => "delete-cert",
                })
                .collect()
        })
        .collect()
}

#[path = "plan_tls_tests.rs"]
mod tls;

const THREE_PORTS: [(&str, u16, u16); 3] = [
    ("TCP", 80, 30080),
    ("TCP", 443, 30443),
    ("TCP", 8080, 30880),
];

#[test]
fn fresh_create_on_an_isolated_network_uses_openfirewall() {
    for n in 1..=3 {
        let s = simple(&THREE_PORTS[..n]);
        let eligible = backends(&["vm1", "vm2"]);
        let p = plan(&s, &ObservedLb::default(), &eligible, &isolated((4, 18, 0))).unwrap();
        let mut phase2 = vec!["create-rule"; n];
        phase2.push("tag");
        let mut phase3 = vec!["assign"; n];
        phase3.push("tag");
        assert_eq!(
            kinds(&p),
            vec![vec!["associate"], phase2, phase3],
            "{n} ports"
        );
        assert_eq!(p.job_count(), 2 * n + 3, "{n} ports");
        assert!(p.warnings.is_empty());
        let Step::CreateRule {
            open_firewall,
            ip,
            cidrs,
            network_id,
            ..
        } = &p.phases[1].steps[0]
        else {
            panic!("{p}")
        };
        assert!(*open_firewall);
        assert_eq!(ip, &IpRef::Associated);
        assert!(cidrs.is_empty());
        assert_eq!(network_id, NET);
        let Step::AssignMembers { vm_ids, .. } = &p.phases[2].steps[0] else {
            panic!("{p}")
        };
        assert_eq!(vm_ids, &vec!["vm1".to_string(), "vm2".to_string()]);
        assert!(
            matches!(vm_ids, VmIds::Eligible(set) if Arc::ptr_eq(set, &eligible.vm_ids)),
            "a new rule gets the eligible set itself, not a copy"
        );
    }
}

#[test]
fn fresh_create_with_source_ranges_adds_firewall_rules() {
    let s = spec(
        json!({}),
        &THREE_PORTS[..2],
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]}),
    );
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["associate"],
            vec![
                "create-rule",
                "create-rule",
                "create-fw",
                "create-fw",
                "tag"
            ],
            vec!["assign", "assign", "tag"]
        ]
    );
    let Step::CreateFirewallRule {
        protocol,
        port,
        cidrs,
        ..
    } = &p.phases[1].steps[2]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (*protocol, *port, cidrs.clone()),
        (
            IpProtocol::Tcp,
            80,
            vec![Cidr::parse("10.0.0.0/8").unwrap()]
        )
    );
}

#[test]
fn fresh_create_on_a_vpc_tier_uses_acl_items() {
    let s = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &THREE_PORTS[..2],
        json!({}),
    );
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &vpc("web-acl"),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["associate"],
            vec![
                "create-rule",
                "create-rule",
                "create-acl",
                "create-acl",
                "tag"
            ],
            vec!["assign", "assign", "tag"]
        ]
    );
    assert_eq!(
        p.phases[0].steps[0],
        Step::AssociateIp {
            target: AssociateTarget::Vpc("vpc-1".into()),
            address: None
        }
    );
    let Step::CreateRule {
        open_firewall,
        protocol,
        ..
    } = &p.phases[1].steps[0]
    else {
        panic!("{p}")
    };
    assert!(!open_firewall);
    assert_eq!(*protocol, LbProtocol::TcpProxy);
    let Step::CreateAclItem {
        acl_id,
        protocol,
        port,
        reason,
        ..
    } = &p.phases[1].steps[2]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (acl_id.as_str(), *protocol, *port),
        ("acl-1", IpProtocol::Tcp, 80)
    );
    assert_eq!(
        reason,
        &format!("Managed by the CloudStack Kubernetes Provider for {LB}")
    );
}

#[test]
fn default_acl_lists_are_skipped_with_a_warning() {
    for list in ["default_allow", "default_deny"] {
        let s = simple(&THREE_PORTS[..1]);
        let p = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &vpc(list)).unwrap();
        assert!(
            !p.steps().any(|s| matches!(s, Step::CreateAclItem { .. })),
            "{p}"
        );
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains(list), "{:?}", p.warnings);
    }
}

#[test]
fn nothing_to_do_when_observed_equals_desired() {
    let vms = ["vm1", "vm2"];
    for ctx in [isolated((4, 18, 0)), isolated((4, 22, 0)), netscaler()] {
        for n in 1..=3 {
            let s = simple(&THREE_PORTS[..n]);
            let p = plan(&s, &applied(&s, &vms), &backends(&vms), &ctx).unwrap();
            assert!(p.is_empty(), "{p}");
            assert_eq!(p.to_string(), "no changes\n");
        }
    }
}

#[test]
fn proxy_protocol_toggle_renames_the_rule_in_place() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);
    let p = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p), vec![vec!["update-rule"]]);
    assert_eq!(
        p.phases[0].steps[0],
        Step::UpdateRule {
            id: format!("rule-{LB}-tcp-80"),
            name: format!("{LB}-tcp-80"),
            new_name: Some(format!("{LB}-tcp-proxy-80")),
            protocol: Some(LbProtocol::TcpProxy),
            algorithm: None,
            cidrs: None,
        }
    );
    // And back.
    let observed = applied(&after, &["vm1"]);
    let p = plan(
        &before,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p), vec![vec!["update-rule"]]);
}

#[test]
fn toggle_with_a_new_node_port_deletes_before_it_creates() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &[("TCP", 80, 31111)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);
    let p = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule {
        name,
        private_port,
        open_firewall,
        ip,
        ..
    } = &p.phases[2].steps[0]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (name.as_str(), *private_port, *open_firewall),
        (format!("{LB}-tcp-proxy-80").as_str(), 31111, true)
    );
    assert_eq!(
        ip,
        &IpRef::Existing {
            id: IP_ID.into(),
            address: "203.0.113.5".parse().unwrap()
        }
    );
}

#[test]
fn protocol_family_change_frees_the_port_first() {
    let before = simple(&[("TCP", 53, 30053)]);
    let after = simple(&[("UDP", 53, 30053)]);
    let p = plan(
        &after,
        &applied(&before, &["vm1"]),
        &backends(&["vm1"]),
        &netscaler(),
    )
    .unwrap();
    // `openfirewall` opens TCP only, so the new udp rule gets its own firewall rule; the
    // tcp firewall rule of the old rule goes before the old rule (which may have made it).
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule", "create-fw"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule { open_firewall, .. } = &p.phases[2].steps[0] else {
        panic!("{p}")
    };
    assert!(!*open_firewall);
}

#[test]
fn rule_cidrlist_change_recreates_on_4_18_and_updates_on_4_22() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({(ann::SOURCE_CIDRS.key): "10.0.0.0/8"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let observed = applied(&before, &["vm1"]);

    let old = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&old),
        vec![
            vec!["delete-fw"],
            vec!["delete-rule"],
            vec!["create-rule"],
            vec!["assign", "tag"]
        ]
    );
    let Step::CreateRule { cidrs, .. } = &old.phases[2].steps[0] else {
        panic!("{old}")
    };
    assert_eq!(cidrs, &vec![Cidr::parse("10.0.0.0/8").unwrap()]);

    let new = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 22, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&new), vec![vec!["update-rule"]]);
    let Step::UpdateRule {
        cidrs, new_name, ..
    } = &new.phases[0].steps[0]
    else {
        panic!("{new}")
    };
    assert_eq!(cidrs, &Some(vec![Cidr::parse("10.0.0.0/8").unwrap()]));
    assert_eq!(new_name, &None);

    // Before 4.18 the rule has no cidrlist: nothing changes, a warning says so.
    let older = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 17, 0)),
    )
    .unwrap();
    assert!(older.is_empty(), "{older}");
    assert_eq!(older.warnings.len(), 1);
}

#[test]
fn firewall_source_range_change_replaces_the_firewall_rule() {
    let before = simple(&[("TCP", 80, 30080)]);
    let after = spec(
        json!({}),
        &[("TCP", 80, 30080)],
        json!({"loadBalancerSourceRanges": ["192.0.2.0/24"]}),
    );
    let p = plan(
        &after,
        &applied(&before, &["vm1"]),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p), vec![vec!["delete-fw"], vec!["create-fw"]]);
}

#[test]
fn udp_is_refused_on_the_virtual_router_and_accepted_on_netscaler() {
    let s = simple(&[("TCP", 80, 30080), ("UDP", 53, 30053)]);
    let err = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "port 53: protocol udp is not supported by the load balancer of network iso (net-1) (provider VirtualRouter)"
    );
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &netscaler(),
    )
    .unwrap();
    let protocols: Vec<_> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateRule { protocol, .. } => Some(*protocol),
            _ => None,
        })
        .collect();
    assert_eq!(protocols, vec![LbProtocol::Tcp, LbProtocol::Udp]);
    // `openfirewall` opens TCP only: the UDP port gets its own firewall rule.
    let opened: Vec<_> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateRule {
                protocol,
                open_firewall,
                ..
            } => Some((*protocol, *open_firewall)),
            _ => None,
        })
        .collect();
    assert_eq!(
        opened,
        vec![(LbProtocol::Tcp, true), (LbProtocol::Udp, false)]
    );
    let firewall: Vec<_> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateFirewallRule { protocol, port, .. } => Some((*protocol, *port)),
            _ => None,
        })
        .collect();
    assert_eq!(firewall, vec![(IpProtocol::Udp, 53)]);
}

#[test]
fn members_are_added_and_removed_in_one_call_each() {
    let s = simple(&THREE_PORTS[..2]);
    let observed = applied(&s, &["vm1", "vm2"]);
    let p = plan(
        &s,
        &observed,
        &backends(&["vm2", "vm3", "vm4"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![vec!["assign", "remove", "assign", "remove"]]
    );
    let Step::AssignMembers { rule, vm_ids } = &p.phases[0].steps[0] else {
        panic!("{p}")
    };
    assert_eq!(
        rule,
        &RuleRef::Existing {
            id: format!("rule-{LB}-tcp-80"),
            name: format!("{LB}-tcp-80")
        }
    );
    assert_eq!(vm_ids, &vec!["vm3".to_string(), "vm4".to_string()]);
    let Step::RemoveMembers { vm_ids, .. } = &p.phases[0].steps[1] else {
        panic!("{p}")
    };
    assert_eq!(vm_ids, &vec!["vm1".to_string()]);
}

#[test]
fn removed_port_is_deleted_after_the_wanted_rules_stand() {
    let before = simple(&THREE_PORTS[..2]);
    let after = simple(&[("TCP", 80, 30080), ("TCP", 9090, 30990)]);
    let p = plan(
        &after,
        &applied(&before, &["vm1"]),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(
        kinds(&p),
        vec![
            vec!["create-rule", "delete-fw"],
            vec!["assign", "delete-rule", "tag"]
        ]
    );
}

#[test]
fn delete_releases_only_our_unshared_ip_without_keep_ip() {
    let s = simple(&THREE_PORTS[..2]);
    let ctx = isolated((4, 18, 0));
    let observed = applied(&s, &["vm1"]);
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw", "delete-fw"],
            vec!["delete-rule", "delete-rule"],
            vec!["release"]
        ]
    );

    let keep = spec(
        json!({(ann::KEEP_IP.key): "true"}),
        &THREE_PORTS[..2],
        json!({}),
    );
    let p = plan_delete(&keep.delete_spec(), &observed, &ctx);
    assert_eq!(
        kinds(&p),
        vec![
            vec!["delete-fw", "delete-fw"],
            vec!["delete-rule", "delete-rule"],
            vec!["untag"]
        ]
    );
    assert!(p.warnings[0].contains("keep-ip"));

    let mut shared = observed.clone();
    shared.foreign_rules.push(ForeignRule {
        id: "r9".into(),
        name: "other-tcp-22".into(),
        public_port: 22,
    });
    let p = plan_delete(&s.delete_spec(), &shared, &ctx);
    assert!(
        !p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );

    // An untagged address the Service requested is the user's.
    let mut user_ip = observed.clone();
    if let Some(ip) = user_ip.ip.as_mut() {
        ip.tags.clear();
    }
    let requested = spec(
        json!({}),
        &THREE_PORTS[..2],
        json!({"loadBalancerIP": "203.0.113.5"}),
    );
    let p = plan_delete(&requested.delete_spec(), &user_ip, &ctx);
    assert!(
        !p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
    // The Go CCM's annotation marks it as associated by the controller.
    let go = spec(
        json!({(ann::IP_ASSOCIATED_BY_CONTROLLER.key): "true"}),
        &THREE_PORTS[..2],
        json!({}),
    );
    let p = plan_delete(&go.delete_spec(), &user_ip, &ctx);
    assert!(
        p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
}

#[test]
fn go_ccm_load_balancer_is_adopted_unchanged() {
    let s = simple(&THREE_PORTS);
    let mut observed = applied(&s, &["vm1", "vm2"]);
    // The Go CCM leaves no tags, no cidrlist before 4.18 / 0.0.0.0/0 after.
    for r in &mut observed.rules {
        r.tags.clear();
        r.cidrs = vec![Cidr::ANY_V4];
    }
    if let Some(ip) = observed.ip.as_mut() {
        ip.tags.clear();
    }
    for ctx in [isolated((4, 18, 0)), isolated((4, 22, 0))] {
        let p = plan(&s, &observed, &backends(&["vm1", "vm2"]), &ctx).unwrap();
        // The rules get our tags; the address the Go CCM associated too (released on
        // delete, as the Go CCM would).
        assert_eq!(kinds(&p), vec![vec!["tag", "tag"]], "{p}");
        let Step::TagResources {
            resource_type,
            resources,
            ..
        } = &p.phases[0].steps[0]
        else {
            panic!("{p}")
        };
        assert_eq!(*resource_type, TagResourceType::LoadBalancer);
        assert_eq!(resources.len(), 3);
    }
}

#[test]
fn leaseweb_rules_are_adopted_under_their_names() {
    let s = simple(&THREE_PORTS[..2]);
    let mut observed = applied(&s, &["vm1"]);
    for r in &mut observed.rules {
        r.name = r.name.replace(LB, "K8s_svc_prod_shop_web");
    }
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    assert!(p.is_empty(), "{p}");
}

#[test]
fn two_services_share_an_ip_on_different_ports() {
    let requested = json!({(ann::ADDRESS.key): "203.0.113.5"});
    let b = spec(requested.clone(), &[("TCP", 443, 30443)], json!({}));
    let observed = ObservedLb {
        ip: Some(our_ip()),
        foreign_rules: vec![ForeignRule {
            id: "ra".into(),
            name: "aother-tcp-80".into(),
            public_port: 80,
        }],
        firewall_rules: vec![fw(80, &["0.0.0.0/0"])],
        ..Default::default()
    };
    let p = plan(&b, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    assert_eq!(kinds(&p), vec![vec!["create-rule"], vec!["assign", "tag"]]);
    assert!(
        !p.steps()
            .any(|s| matches!(s, Step::DeleteFirewallRule { .. }))
    );

    let clash = spec(requested, &[("TCP", 80, 30081)], json!({}));
    let err = plan(
        &clash,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap_err();
    assert!(
        matches!(err, PlanError::PortTaken { port: 80, .. }),
        "{err}"
    );
}

#[test]
fn requested_ip_cases() {
    let req = json!({(ann::ADDRESS.key): "203.0.113.5"});
    let s = spec(req.clone(), &[("TCP", 80, 30080)], json!({}));
    let ctx = isolated((4, 18, 0));
    let with_ip = |ip: ObservedIp| ObservedLb {
        ip: Some(ip),
        ..Default::default()
    };

    let free = ObservedIp {
        ownership: IpOwnership::Free,
        associated_network_id: None,
        tags: Tags::new(),
        ..our_ip()
    };
    let p = plan(&s, &with_ip(free), &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps[0],
        Step::AssociateIp {
            target: AssociateTarget::Network(NET.into()),
            address: Some("203.0.113.5".parse().unwrap())
        }
    );

    let p = plan(&s, &with_ip(our_ip()), &backends(&["vm1"]), &ctx).unwrap();
    assert!(
        !p.steps().any(|s| matches!(s, Step::AssociateIp { .. })),
        "{p}"
    );

    let others = ObservedIp {
        ownership: IpOwnership::OtherAccount("acme".into()),
        ..our_ip()
    };
    let err = plan(&s, &with_ip(others), &backends(&["vm1"]), &ctx).unwrap_err();
    assert_eq!(
        err.to_string(),
        "IP 203.0.113.5 is allocated to another account (acme)"
    );

    let elsewhere = ObservedIp {
        associated_network_id: Some("net-9".into()),
        ..our_ip()
    };
    let err = plan(&s, &with_ip(elsewhere), &backends(&["vm1"]), &ctx).unwrap_err();
    assert!(matches!(err, PlanError::IpOnOtherNetwork { .. }), "{err}");

    let err = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &ctx).unwrap_err();
    assert!(
        matches!(err, PlanError::RequestedIpNotFound { .. }),
        "{err}"
    );

    let moved = spec(
        json!({(ann::ADDRESS.key): "203.0.113.77"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let err = plan(
        &moved,
        &applied(&moved, &["vm1"]),
        &backends(&["vm1"]),
        &ctx,
    )
    .unwrap_err();
    assert!(matches!(err, PlanError::RequestedIpChanged { .. }), "{err}");
}

#[test]
fn claimed_ip_is_adopted_associated_again_or_released() {
    let claim = json!({(ann::IP_CLAIM.key): "203.0.113.5"});
    let s = spec(claim.clone(), &[("TCP", 80, 30080)], json!({}));
    let ctx = isolated((4, 18, 0));
    let with_ip = |ip: ObservedIp| ObservedLb {
        ip: Some(ip),
        ..Default::default()
    };
    // Associated before a crash, id never recorded: adopted, recorded, tagged.
    let leaked = ObservedIp {
        tags: Tags::new(),
        ..our_ip()
    };
    let p = plan(&s, &with_ip(leaked.clone()), &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps[0],
        Step::AdoptClaimedIp {
            target: AssociateTarget::Network(NET.into()),
            id: IP_ID.into(),
            address: "203.0.113.5".parse().unwrap(),
        }
    );
    assert!(
        p.steps().any(|s| matches!(
            s,
            Step::CreateRule {
                ip: IpRef::Associated,
                ..
            }
        )),
        "{p}"
    );
    assert!(
        p.steps().any(|s| matches!(s,
            Step::TagResources { resources, .. } if resources == &[ResourceRef::AssociatedIp])),
        "{p}"
    );
    // Still free: associated again with the claimed address.
    let free = ObservedIp {
        ownership: IpOwnership::Free,
        associated_network_id: None,
        tags: Tags::new(),
        ..our_ip()
    };
    let p = plan(&s, &with_ip(free), &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps[0],
        Step::AssociateIp {
            target: AssociateTarget::Network(NET.into()),
            address: Some("203.0.113.5".parse().unwrap())
        }
    );
    // Held by someone else (observation drops it): a new address is claimed.
    let p = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps[0],
        Step::AssociateIp {
            target: AssociateTarget::Network(NET.into()),
            address: None
        }
    );
    // Once the id is recorded the claim plays no part.
    let mut recorded_ann = claim.clone();
    recorded_ann[ann::IP_ID.key] = json!("6f2e3c1a-9b7d-4e8f-a0b1-c2d3e4f5a6b7");
    let recorded = spec(recorded_ann, &[("TCP", 80, 30080)], json!({}));
    assert_eq!(recorded.pending_claim(), None);
    let p = plan(
        &recorded,
        &with_ip(leaked.clone()),
        &backends(&["vm1"]),
        &ctx,
    )
    .unwrap();
    assert!(
        !p.steps().any(|s| matches!(s, Step::AdoptClaimedIp { .. })),
        "{p}"
    );
    // A requested address wins over a claim.
    let mut requested_ann = claim;
    requested_ann[ann::ADDRESS.key] = json!("203.0.113.5");
    let requested = spec(requested_ann, &[("TCP", 80, 30080)], json!({}));
    assert_eq!(requested.pending_claim(), None);
    let p = plan_delete(&requested.delete_spec(), &with_ip(leaked.clone()), &ctx);
    assert!(p.is_empty(), "a user's untagged address is kept: {p}");

    // Deleted before the id was recorded: the claimed address allocated to us goes.
    let p = plan_delete(&s.delete_spec(), &with_ip(leaked), &ctx);
    assert_eq!(kinds(&p), vec![vec!["release"]]);
}

#[test]
fn health_checks_only_where_supported() {
    let explicit = spec(
        json!({(ann::HEALTH_CHECK_PATH.key): "/ready"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let err = plan(
        &explicit,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap_err();
    assert!(
        matches!(err, PlanError::HealthCheckUnsupported { .. }),
        "{err}"
    );

    // externalTrafficPolicy: Local implies no check: CloudStack's policy would probe the
    // node port, not healthCheckNodePort.
    let local = spec(
        json!({}),
        &[("TCP", 80, 30080)],
        json!({"externalTrafficPolicy": "Local", "healthCheckNodePort": 32000}),
    );
    for ctx in [isolated((4, 18, 0)), netscaler()] {
        let p = plan(&local, &ObservedLb::default(), &backends(&["vm1"]), &ctx).unwrap();
        assert!(
            !p.steps()
                .any(|s| matches!(s, Step::CreateHealthCheck { .. })),
            "{p}"
        );
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    }

    let p = plan(
        &explicit,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &netscaler(),
    )
    .unwrap();
    assert_eq!(kinds(&p)[2], vec!["assign", "create-hc", "tag"]);

    // Never on UDP, even when asked for: the check is HTTP.
    let mixed = spec(
        json!({(ann::HEALTH_CHECK_PATH.key): "/ready"}),
        &[("TCP", 80, 30080), ("UDP", 53, 30053)],
        json!({}),
    );
    let p = plan(
        &mixed,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &netscaler(),
    )
    .unwrap();
    let checked: Vec<&RuleRef> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateHealthCheck { rule, .. } => Some(rule),
            _ => None,
        })
        .collect();
    assert_eq!(checked.len(), 1, "{p}");
    assert!(format!("{:?}", checked[0]).contains("tcp-80"), "{p}");
    assert!(
        p.warnings.iter().any(|w| w.contains("UDP port 53")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn stickiness_is_created_and_replaced() {
    let s = spec(
        json!({(ann::STICKINESS_METHOD.key): "SourceBased", (ann::STICKINESS_PARAMS.key): "expire=30m"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let ctx = isolated((4, 18, 0));
    let mut observed = applied(&s, &["vm1"]);
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    // The rule is tagged: its policies are read again even without the annotation.
    assert_eq!(kinds(&p), vec![vec!["create-st", "tag"]]);
    assert!(p.steps().any(|s| matches!(s,
        Step::TagResources { tags, .. } if tags.keys().eq([TAG_STICKINESS]))));
    observed.rules[0]
        .tags
        .insert(TAG_STICKINESS.to_string(), "true".to_string());

    observed.rules[0].stickiness.push(ObservedStickiness {
        id: "st1".into(),
        name: "old".into(),
        method: Some(StickinessMethod::SourceBased),
        params: [("expire".to_string(), "10m".to_string())].into(),
        description: POLICY_DESCRIPTION.into(),
    });
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(kinds(&p), vec![vec!["delete-st"], vec!["create-st"]]);

    observed.rules[0].stickiness[0].params = [("expire".to_string(), "30m".to_string())].into();
    assert!(
        plan(&s, &observed, &backends(&["vm1"]), &ctx)
            .unwrap()
            .is_empty()
    );

    // Annotation removed: our policy goes; a hand-made one would stay.
    let plain = simple(&[("TCP", 80, 30080)]);
    let p = plan(&plain, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(kinds(&p), vec![vec!["delete-st"]]);
    observed.rules[0].stickiness[0].description = "by hand".into();
    assert!(
        plan(&plain, &observed, &backends(&["vm1"]), &ctx)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn algorithm_change_is_an_update() {
    let s = spec(
        json!({}),
        &[("TCP", 80, 30080)],
        json!({"sessionAffinity": "ClientIP"}),
    );
    let observed = applied(&simple(&[("TCP", 80, 30080)]), &["vm1"]);
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    let Step::UpdateRule {
        algorithm,
        new_name,
        ..
    } = &p.phases[0].steps[0]
    else {
        panic!("{p}")
    };
    assert_eq!(
        (*algorithm, new_name.clone()),
        (Some(Algorithm::Source), None)
    );
}

#[test]
fn plan_prints_readably() {
    let s = spec(
        json!({}),
        &THREE_PORTS[..1],
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]}),
    );
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    let text = p.to_string();
    let want = format!(
        "phase 1:\n  - associate a new IP with network {NET}\n\
         phase 2:\n  - create rule {LB}-tcp-80: the new IP:80 -> node port 30080 (tcp, roundrobin)\n\
         \x20 - open firewall tcp the new IP:80 from 10.0.0.0/8\n\
         \x20 - tag PublicIpAddress the new IP: cloudstack-ccm/associated=true,cloudstack-ccm/cluster=prod\n\
         phase 3:\n  - assign vm1 to rule {LB}-tcp-80\n\
         \x20 - tag LoadBalancer {LB}-tcp-80: cloudstack-ccm/cluster=prod,cloudstack-ccm/service-uid={UID}\n"
    );
    assert_eq!(text, want);
}

#[test]
fn firewall_rules_of_deleted_rules_go_first() {
    // Delete: each firewall rule before the rule of its port (the rule would take a
    // firewall rule `openfirewall` made with it, and a later delete of it would fail).
    let s = simple(&THREE_PORTS[..2]);
    let observed = applied(&s, &["vm1"]);
    let p = plan_delete(&s.delete_spec(), &observed, &isolated((4, 18, 0)));
    let phase_of = |wanted: fn(&Step) -> bool| {
        p.phases
            .iter()
            .position(|phase| phase.steps.iter().any(wanted))
            .expect("step planned")
    };
    assert!(
        phase_of(|s| matches!(s, Step::DeleteFirewallRule { .. }))
            < phase_of(|s| matches!(s, Step::DeleteRule { .. })),
        "{p}"
    );
    // A port no longer wanted: its firewall rule goes in the phase before its rule.
    let after = simple(&THREE_PORTS[..1]);
    let p = plan(
        &after,
        &observed,
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    let fw_phase = p
        .phases
        .iter()
        .position(|phase| {
            phase
                .steps
                .iter()
                .any(|s| matches!(s, Step::DeleteFirewallRule { .. }))
        })
        .expect("firewall rule deleted");
    let rule_phase = p
        .phases
        .iter()
        .position(|phase| {
            phase
                .steps
                .iter()
                .any(|s| matches!(s, Step::DeleteRule { .. }))
        })
        .expect("rule deleted");
    assert_eq!(fw_phase + 1, rule_phase, "{p}");
}

#[test]
fn keep_ip_hands_the_address_to_the_user() {
    let keep = spec(
        json!({(ann::KEEP_IP.key): "true"}),
        &THREE_PORTS[..1],
        json!({}),
    );
    let observed = applied(&keep, &["vm1"]);
    let p = plan_delete(&keep.delete_spec(), &observed, &isolated((4, 18, 0)));
    let untag = p
        .steps()
        .find_map(|s| match s {
            Step::UntagResources {
                resources, keys, ..
            } => Some((resources.clone(), keys.clone())),
            _ => None,
        })
        .expect("ownership tag removed");
    assert_eq!(
        untag,
        (vec![IP_ID.to_string()], vec![TAG_ASSOCIATED.to_string()])
    );
    assert!(
        !p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
}

#[test]
fn policies_the_role_may_not_list_are_left_alone_where_the_controller_made_one() {
    let ctx = netscaler();
    let sticky = spec(
        json!({(ann::STICKINESS_METHOD.key): "SourceBased"}),
        &THREE_PORTS[..1],
        json!({}),
    );
    let mut observed = applied(&sticky, &["vm1"]);
    let creates = |observed: &ObservedLb| {
        plan(&sticky, observed, &backends(&["vm1"]), &ctx)
            .unwrap()
            .steps()
            .filter(|s| matches!(s, Step::CreateStickiness { .. }))
            .count()
    };
    // The list was refused and the rule says the controller gave it a policy: unknown,
    // so nothing is created on top of it.
    observed.rules[0].stickiness_unknown = true;
    observed.rules[0]
        .tags
        .insert(TAG_STICKINESS.to_string(), "true".to_string());
    assert_eq!(creates(&observed), 0);
    // Refused, but the controller never made one: it makes it.
    observed.rules[0].tags.remove(TAG_STICKINESS);
    assert_eq!(creates(&observed), 1);
}

#[test]
fn an_address_the_controller_associated_is_marked_while_its_service_keeps_it() {
    let ctx = isolated((4, 18, 0));
    let keep = spec(
        json!({(ann::KEEP_IP.key): "true"}),
        &THREE_PORTS[..1],
        json!({}),
    );
    let mut observed = applied(&keep, &["vm1"]);
    let p = plan(&keep, &observed, &backends(&["vm1"]), &ctx).unwrap();
    let steps: Vec<&Step> = p.steps().collect();
    assert!(
        matches!(steps.as_slice(), [Step::TagResources { resource_type: TagResourceType::PublicIpAddress, tags, .. }]
            if tags.get(TAG_KEEP_IP).map(String::as_str) == Some("true")),
        "{p}"
    );
    // Marked: nothing to do while the Service keeps it.
    let mut ip = our_ip();
    ip.tags.insert(TAG_KEEP_IP.to_string(), "true".to_string());
    observed.ip = Some(ip);
    assert!(
        plan(&keep, &observed, &backends(&["vm1"]), &ctx)
            .unwrap()
            .is_empty()
    );
    // The Service no longer keeps it: the mark goes.
    let plain = simple(&THREE_PORTS[..1]);
    let p = plan(&plain, &observed, &backends(&["vm1"]), &ctx).unwrap();
    let steps: Vec<&Step> = p.steps().collect();
    assert!(
        matches!(steps.as_slice(), [Step::UntagResources { keys, .. }] if keys == &[TAG_KEEP_IP.to_string()]),
        "{p}"
    );
    // An address the user brought is never marked.
    let brought = spec(
        json!({(ann::KEEP_IP.key): "true"}),
        &THREE_PORTS[..1],
        json!({"loadBalancerIP": "203.0.113.5"}),
    );
    observed.ip = Some(ObservedIp {
        tags: Tags::new(),
        ..our_ip()
    });
    let p = plan(&brought, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert!(p.is_empty(), "{p}");
}

#[test]
fn an_address_the_go_provider_associated_is_adopted_and_released() {
    let s = simple(&THREE_PORTS[..1]);
    let mut observed = applied(&s, &["vm1"]);
    for r in &mut observed.rules {
        r.tags.clear();
    }
    if let Some(ip) = observed.ip.as_mut() {
        ip.tags.clear();
    }
    // Not requested, no id recorded: the Go provider associated it.
    assert!(s.delete_spec().associated_by_predecessor(&observed));
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    assert!(
        p.steps().any(|s| matches!(s,
            Step::TagResources { resource_type: TagResourceType::PublicIpAddress, tags, .. }
                if tags.get(TAG_ASSOCIATED).map(String::as_str) == Some("true"))),
        "{p}"
    );
    let p = plan_delete(&s.delete_spec(), &observed, &isolated((4, 18, 0)));
    assert!(
        p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
    // Requested through spec.loadBalancerIP without its annotation: the user's.
    let requested = spec(
        json!({}),
        &THREE_PORTS[..1],
        json!({"loadBalancerIP": "203.0.113.5"}),
    );
    assert!(!requested.delete_spec().associated_by_predecessor(&observed));
    let p = plan_delete(&requested.delete_spec(), &observed, &isolated((4, 18, 0)));
    assert!(
        !p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
}

#[test]
fn leaseweb_addresses_are_released_unless_kept() {
    // The fork records the IP id (`-id`) and releases the address of its rules on delete
    // unless `-keep-ip`, requested or not.
    let annotations = json!({(ann::ADDRESS.key): "203.0.113.5", (ann::IP_ID.key): "5d1e3c4b-0a9f-4e8d-9c7b-6a5f4e3d2c1b"});
    let s = spec(annotations.clone(), &THREE_PORTS[..1], json!({}));
    let mut observed = applied(&s, &["vm1"]);
    for r in &mut observed.rules {
        r.name = r.name.replace(LB, "K8s_svc_prod_shop_web");
        r.tags.clear();
    }
    if let Some(ip) = observed.ip.as_mut() {
        ip.tags.clear();
    }
    let ctx = isolated((4, 18, 0));
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert!(
        p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
    let mut kept = annotations;
    kept[ann::KEEP_IP.key] = json!("true");
    let k = spec(kept, &THREE_PORTS[..1], json!({}));
    let p = plan_delete(&k.delete_spec(), &observed, &ctx);
    assert!(
        !p.steps().any(|s| matches!(s, Step::ReleaseIp { .. })),
        "{p}"
    );
}

#[test]
fn the_go_providers_acl_item_is_the_services_unless_shared() {
    let s = simple(&[("TCP", 80, 30080)]);
    let mut observed = applied(&s, &["vm1"]);
    observed.firewall_rules.clear();
    if let Some(ip) = observed.ip.as_mut() {
        ip.vpc_id = Some("vpc-1".into());
    }
    let go_item = ObservedAclItem {
        id: "acl-80".into(),
        acl_id: "acl-1".into(),
        protocol: IpProtocol::Tcp,
        start_port: 80,
        end_port: 80,
        cidrs: vec![Cidr::ANY_V4],
        allow: true,
        reason: String::new(),
        tags: Tags::new(),
    };
    observed.acl_items.push(go_item.clone());
    let ctx = vpc("web-acl");
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert!(
        p.steps()
            .any(|s| matches!(s, Step::DeleteAclItem { id, .. } if id == "acl-80")),
        "{p}"
    );
    // Source ranges: replaced by the Service's own item.
    let ranged = spec(
        json!({}),
        &[("TCP", 80, 30080)],
        json!({"loadBalancerSourceRanges": ["198.51.100.0/24"]}),
    );
    let p = plan(&ranged, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert!(
        p.steps().any(|s| matches!(s, Step::DeleteAclItem { .. })),
        "{p}"
    );
    assert!(
        p.steps().any(|s| matches!(s, Step::CreateAclItem { .. })),
        "{p}"
    );
    // Another load balancer on a tier of the same list uses port 80: the item stays.
    observed.acl_ports_of_others.insert((IpProtocol::Tcp, 80));
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert!(
        !p.steps().any(|s| matches!(s, Step::DeleteAclItem { .. })),
        "{p}"
    );
}

#[test]
fn a_firewall_rule_openfirewall_made_goes_with_its_rule() {
    let s = simple(&THREE_PORTS[..1]);
    let ctx = isolated((4, 18, 0));
    // Created with openfirewall=true: tagged so.
    let created = plan(
        &s,
        &ObservedLb {
            ip: Some(our_ip()),
            ..Default::default()
        },
        &backends(&["vm1"]),
        &ctx,
    )
    .unwrap();
    assert!(
        created.steps().any(|s| matches!(s,
            Step::TagResources { resource_type: TagResourceType::LoadBalancer, tags, .. }
                if tags.contains_key(TAG_OPEN_FIREWALL))),
        "{created}"
    );
    let mut observed = applied(&s, &["vm1"]);
    observed.rules[0]
        .tags
        .insert(TAG_OPEN_FIREWALL.to_string(), "true".to_string());
    // Deleted: no deleteFirewallRule of its own.
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert_eq!(kinds(&p), vec![vec!["delete-rule"], vec!["release"]]);
    // Source ranges: the firewall rule is replaced and the rule loses the tag.
    let ranged = spec(
        json!({}),
        &THREE_PORTS[..1],
        json!({"loadBalancerSourceRanges": ["198.51.100.0/24"]}),
    );
    let p = plan(&ranged, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        kinds(&p),
        vec![vec!["delete-fw", "untag"], vec!["create-fw"]],
        "{p}"
    );
}

#[test]
fn unreadable_access_keeps_what_cloudstack_shows_applied() {
    let recorded = |key: &str, value: &str| json!({(ann::IP_ID.key): "0a1b2c3d-0000-4000-8000-000000000001", (key): value});
    let ctx = isolated((4, 22, 0));
    // Source ranges: the firewall rules stay, a new port gets the same ranges.
    let kept = spec(
        recorded(ann::K8S_SOURCE_RANGES.key, "198.51.100.0/240"),
        &[("TCP", 80, 30080), ("TCP", 443, 30443)],
        json!({}),
    );
    assert!(kept.keep_source_ranges);
    let mut observed = applied(&simple(&[("TCP", 80, 30080)]), &["vm1"]);
    observed.firewall_rules = vec![fw(80, &["198.51.100.0/24"])];
    let p = plan(&kept, &observed, &backends(&["vm1"]), &ctx).unwrap();
    let opened: Vec<(u16, Vec<String>)> = p
        .steps()
        .filter_map(|s| match s {
            Step::CreateFirewallRule { port, cidrs, .. } => {
                Some((*port, cidrs.iter().map(Cidr::to_string).collect()))
            }
            Step::DeleteFirewallRule { .. } => panic!("nothing applied is removed: {p}"),
            Step::CreateRule { open_firewall, .. } => {
                assert!(!open_firewall, "never opened to everyone: {p}");
                None
            }
            _ => None,
        })
        .collect();
    assert_eq!(opened, vec![(443, vec!["198.51.100.0/24".to_string()])]);
    // Nothing applied to keep: refused, nothing opened.
    let err = plan(&kept, &ObservedLb::default(), &backends(&["vm1"]), &ctx).unwrap_err();
    assert!(matches!(err, PlanError::LastAppliedUnknown { .. }), "{err}");

    // Source CIDRs: the rules keep their cidrlist.
    let cidrs = spec(
        recorded(ann::SOURCE_CIDRS.key, "everyone"),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let mut observed = applied(&simple(&[("TCP", 80, 30080)]), &["vm1"]);
    observed.rules[0].cidrs = vec![Cidr::parse("10.0.0.0/8").unwrap()];
    let p = plan(&cidrs, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert!(p.is_empty(), "{p}");
}

#[path = "plan_members_tests.rs"]
mod members;

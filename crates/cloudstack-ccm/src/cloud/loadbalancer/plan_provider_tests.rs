//! Plan unit tests of networks whose provider or mode changes what a Service gets: ROUTED
//! and shared networks (no load balancer), NSX and Netris (what they advertise and do not do).

use super::*;

/// The Lb service NSX and Netris advertise (`NsxElement` / `NetrisElement.initCapabilities`).
fn nsx_or_netris_lb(provider: &str) -> NetworkService {
    NetworkService {
        name: "Lb".into(),
        capabilities: vec![
            ("SupportedLbAlgorithms".into(), "roundrobin,leastconn".into()),
            ("SupportedProtocols".into(), "tcp, udp".into()),
            (
                "SupportedStickinessMethods".into(),
                r#"[{"methodname":"LbCookie"},{"methodname":"AppCookie"},{"methodname":"SourceBased"}]"#.into(),
            ),
            ("LbSchemes".into(), "Internal,Public".into()),
        ],
        providers: vec![provider.into()],
    }
}

/// An isolated NSX network.
fn nsx() -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "nsx".into(),
        services: vec![
            nsx_or_netris_lb("Nsx"),
            NetworkService {
                name: "Firewall".into(),
                providers: vec!["Nsx".into()],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 22, 0))
}

/// A Netris VPC tier with a custom ACL list.
fn netris() -> PlanContext {
    let facts = NetworkFacts {
        id: NET.into(),
        name: "netris".into(),
        vpc_id: Some("vpc-1".into()),
        acl_id: Some("acl-1".into()),
        acl_name: Some("k8s".into()),
        services: vec![
            nsx_or_netris_lb("Netris"),
            NetworkService {
                name: "NetworkACL".into(),
                providers: vec!["Netris".into()],
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 22, 0))
}

fn count(plan: &Plan, kind: &str) -> usize {
    kinds(plan).iter().flatten().filter(|k| **k == kind).count()
}

#[test]
fn routed_and_shared_networks_have_no_load_balancer_and_say_why() {
    for (routed, shared, word) in [(true, false, "ROUTED"), (false, true, "shared")] {
        let facts = NetworkFacts {
            id: NET.into(),
            name: "n".into(),
            routed,
            shared,
            services: vec![NetworkService {
                name: "Dhcp".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let err = plan(
            &simple(&[("TCP", 80, 30080)]),
            &ObservedLb::default(),
            &backends(&["vm1"]),
            &ctx_with(facts, (4, 22, 0)),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, PlanError::NoLoadBalancing { .. })
                && text.contains(word)
                && text.contains("loadBalancerClass"),
            "{text}"
        );
    }
}

#[test]
fn nsx_serves_a_health_checked_service_without_the_policy_and_moves_cidrs_to_the_firewall() {
    let s = spec(
        json!({
            (ann::HEALTH_CHECK_PATH.key): "/ready",
            (ann::STICKINESS_METHOD.key): "SourceBased",
            (ann::SOURCE_CIDRS.key): "10.0.0.0/8",
        }),
        &[("TCP", 80, 30080), ("UDP", 53, 30053)],
        json!({}),
    );
    let p = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &nsx()).expect("served");
    assert_eq!(count(&p, "create-rule"), 2, "{p}");
    assert_eq!(count(&p, "create-hc") + count(&p, "create-st"), 0, "{p}");
    for step in p.phases.iter().flat_map(|ph| &ph.steps) {
        if let Step::CreateRule {
            cidrs,
            open_firewall,
            ..
        } = step
        {
            assert!(cidrs.is_empty() && !open_firewall, "{step:?}");
        }
        if let Step::CreateFirewallRule { cidrs, .. } = step {
            assert_eq!(cidrs, &vec![Cidr::parse("10.0.0.0/8").unwrap()]);
        }
    }
    assert_eq!(count(&p, "create-fw"), 2, "{p}");
    let warnings = p.warnings.join("\n");
    assert!(
        warnings.contains("health check not applied: NSX monitors")
            && warnings.contains("stickiness not applied")
            && warnings.contains("source CIDRs applied through firewall rules"),
        "{warnings}"
    );
}

#[test]
fn netris_gets_no_udp_rule_no_proxy_protocol_and_keeps_a_rules_algorithm() {
    let s = spec(
        json!({(ann::PROXY_PROTOCOL.key): "true"}),
        &[("TCP", 80, 30080), ("UDP", 53, 30053)],
        json!({"loadBalancerSourceRanges": ["192.0.2.0/24"]}),
    );
    let p = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &netris()).expect("served");
    let created: Vec<(LbProtocol, u16, Vec<Cidr>)> = p
        .phases
        .iter()
        .flat_map(|ph| &ph.steps)
        .filter_map(|step| match step {
            Step::CreateRule {
                protocol,
                public_port,
                cidrs,
                ..
            } => Some((*protocol, *public_port, cidrs.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        created,
        vec![(
            LbProtocol::Tcp,
            80,
            vec![Cidr::parse("192.0.2.0/24").unwrap()]
        )],
        "TCP only, plain TCP, source ranges in the cidrlist"
    );
    let warnings = p.warnings.join("\n");
    assert!(
        warnings.contains("port(s) 53: UDP is not served by Netris")
            && warnings.contains("PROXY protocol not applied"),
        "{warnings}"
    );

    // A rule made with roundrobin, the Service now asks for leastconn: no update with an
    // algorithm (Netris refuses it), a Warning instead.
    let tcp = spec(
        json!({(ann::ALGORITHM.key): "leastconn"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let mut observed = applied(&simple(&[("TCP", 80, 30080)]), &["vm1"]);
    observed.firewall_rules.clear();
    observed.ip = Some(ObservedIp {
        vpc_id: Some("vpc-1".into()),
        ..our_ip()
    });
    let p = plan(&tcp, &observed, &backends(&["vm1"]), &netris()).expect("served");
    assert_eq!(count(&p, "update-rule"), 0, "{p}");
    assert!(
        p.warnings
            .join("\n")
            .contains("algorithm leastconn not applied")
    );
}

#[test]
fn netris_never_builds_on_the_source_nat_address() {
    let mut observed = ObservedLb {
        ip: Some(ObservedIp {
            is_source_nat: true,
            vpc_id: Some("vpc-1".into()),
            ..our_ip()
        }),
        ..Default::default()
    };
    observed.rules.clear();
    let err = plan(
        &simple(&[("TCP", 80, 30080)]),
        &observed,
        &backends(&["vm1"]),
        &netris(),
    )
    .unwrap_err();
    assert!(
        matches!(err, PlanError::AddressNotDedicated { .. }),
        "{err}"
    );
}

#[test]
fn the_routing_firewall_companion_keeps_one_rule_per_port_and_address() {
    let spec = RoutedFirewallSpec {
        service_uid: UID.into(),
        network_id: NET.into(),
        target: RoutedTarget::Isolated,
        addresses: vec!["10.1.10.200".parse().unwrap()],
        ports: vec![(IpProtocol::Tcp, 80), (IpProtocol::Udp, 53)],
        sources: vec![Cidr::ANY_V4],
    };
    let created = plan_routed_firewall(Some(&spec), &[], &[], "prod");
    assert_eq!(kinds(&created), vec![vec!["create-routing-fw"; 2]]);
    assert_eq!(
        created.ownership.get(TAG_SERVICE_UID).map(String::as_str),
        Some(UID)
    );
    let observed = |id: &str, port: u16, destination: &str| ObservedRoutingRule {
        id: id.into(),
        network_id: NET.into(),
        protocol: if port == 53 {
            IpProtocol::Udp
        } else {
            IpProtocol::Tcp
        },
        port,
        destinations: [Cidr::parse(destination).unwrap()].into(),
        sources: [Cidr::ANY_V4].into(),
    };
    let standing = [
        observed("r1", 80, "10.1.10.200/32"),
        observed("r2", 53, "10.1.10.200/32"),
    ];
    assert!(plan_routed_firewall(Some(&spec), &standing, &[], "prod").is_empty());
    // The address moved: the old rules go first, then the new ones are made.
    let moved = RoutedFirewallSpec {
        addresses: vec!["10.1.10.201".parse().unwrap()],
        ..spec.clone()
    };
    assert_eq!(
        kinds(&plan_routed_firewall(Some(&moved), &standing, &[], "prod")),
        vec![vec!["delete-routing-fw"; 2], vec!["create-routing-fw"; 2]]
    );
    // No spec: everything of the Service goes.
    assert_eq!(
        kinds(&plan_routed_firewall(None, &standing, &[], "prod")),
        vec![vec!["delete-routing-fw"; 2]]
    );
}

#[test]
fn on_a_routed_tier_the_companion_keeps_one_acl_item_per_port() {
    let spec = RoutedFirewallSpec {
        service_uid: UID.into(),
        network_id: NET.into(),
        target: RoutedTarget::Tier {
            acl_id: "acl-1".into(),
        },
        addresses: vec!["10.200.1.200".parse().unwrap()],
        ports: vec![(IpProtocol::Tcp, 80), (IpProtocol::Udp, 53)],
        sources: vec![Cidr::parse("192.0.2.0/24").unwrap()],
    };
    let plan = plan_routed_firewall(Some(&spec), &[], &[], "prod");
    assert_eq!(kinds(&plan), vec![vec!["create-acl"; 2]]);
    let item =
        |id: &str, port: u16, cidr: &str| crate::cloud::loadbalancer::observe::ObservedAclItem {
            id: id.into(),
            acl_id: "acl-1".into(),
            protocol: if port == 53 {
                IpProtocol::Udp
            } else {
                IpProtocol::Tcp
            },
            start_port: port,
            end_port: port,
            cidrs: vec![Cidr::parse(cidr).unwrap()],
            allow: true,
            reason: String::new(),
            tags: Tags::new(),
        };
    let standing = [
        item("i1", 80, "192.0.2.0/24"),
        item("i2", 53, "192.0.2.0/24"),
    ];
    assert!(plan_routed_firewall(Some(&spec), &[], &standing, "prod").is_empty());
    let wider = [item("i1", 80, "0.0.0.0/0"), item("i2", 53, "192.0.2.0/24")];
    assert_eq!(
        kinds(&plan_routed_firewall(Some(&spec), &[], &wider, "prod")),
        vec![vec!["delete-acl"], vec!["create-acl"]]
    );
    assert_eq!(
        kinds(&plan_routed_firewall(None, &[], &standing, "prod")),
        vec![vec!["delete-acl"; 2]]
    );
}

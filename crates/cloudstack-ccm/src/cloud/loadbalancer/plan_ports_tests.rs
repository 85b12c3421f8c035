//! Plan unit tests of opening the ports: openfirewall, firewall rules, ACL items and
//! their ordering around rule deletions.

use super::*;

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
            address: None,
            replacing: None,
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

#[test]
fn acl_items_made_for_the_service_go_with_it_even_when_its_rules_never_stood() {
    // The items were made, then every rule was refused: nothing of the Service but its
    // tagged items (and an untagged item of the Go CCM's, which stays: no rule of the
    // Service names its port).
    let s = simple(&[("TCP", 80, 30080), ("TCP", 443, 30443)]);
    let item = |id: &str, port: u16, tags: Tags| ObservedAclItem {
        id: id.into(),
        acl_id: "acl-1".into(),
        protocol: IpProtocol::Tcp,
        start_port: port,
        end_port: port,
        cidrs: vec![Cidr::ANY_V4],
        allow: true,
        reason: String::new(),
        tags,
    };
    let ours: Tags = [(TAG_SERVICE_UID.to_string(), UID.to_string())].into();
    let observed = ObservedLb {
        acl_items: vec![
            item("acl-80", 80, ours.clone()),
            item("acl-443", 443, ours),
            item("acl-8080", 8080, Tags::new()),
        ],
        ..Default::default()
    };
    let p = plan_delete(&s.delete_spec(), &observed, &vpc("web-acl"));
    let deleted: Vec<&str> = p
        .steps()
        .filter_map(|s| match s {
            Step::DeleteAclItem { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, ["acl-80", "acl-443"], "{p}");
}

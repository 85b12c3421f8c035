//! Plan unit tests of the public IP: requested, claimed, shared, kept and released
//! addresses.

use super::*;

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
            address: Some("203.0.113.5".parse().unwrap()),
            replacing: None,
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
            address: Some("203.0.113.5".parse().unwrap()),
            replacing: None,
        }
    );
    // Held by someone else (observation drops it): a new address is claimed.
    let p = plan(&s, &ObservedLb::default(), &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps[0],
        Step::AssociateIp {
            target: AssociateTarget::Network(NET.into()),
            address: None,
            replacing: None,
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

    // Deleted before the id was recorded: the claimed address allocated to us goes,
    // once taken (it may be another Service's that was just associated).
    let p = plan_delete(&s.delete_spec(), &with_ip(leaked), &ctx);
    assert_eq!(kinds(&p), vec![vec!["tag"], vec!["release"]]);
    assert!(
        matches!(&p.phases[0].steps[0], Step::TagResources { tags, .. }
            if tags.get(TAG_SERVICE_UID).map(String::as_str) == Some(UID)),
        "{p}"
    );
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

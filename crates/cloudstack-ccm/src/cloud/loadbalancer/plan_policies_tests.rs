//! Plan unit tests of health-check and stickiness policies.

use super::*;

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

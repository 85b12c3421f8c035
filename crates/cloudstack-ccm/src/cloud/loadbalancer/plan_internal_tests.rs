//! Plan unit tests of internal load balancers (CloudStack's Internal LB on a VPC tier).

use super::*;
use crate::cloud::loadbalancer::observe::ObservedInternalRule;

const ADDRESS: &str = "10.220.1.4";

/// A VPC tier whose offering has the internal scheme only (`InternalLoadBalancerElement`
/// capabilities).
fn internal_tier() -> PlanContext {
    let mut lb = lb_service("tcp, udp", false, "InternalLbVm");
    lb.capabilities
        .push(("LbSchemes".into(), "Internal".into()));
    let facts = NetworkFacts {
        id: NET.into(),
        name: "tier-ilb".into(),
        vpc_id: Some("vpc-1".into()),
        acl_id: Some("acl-1".into()),
        acl_name: Some("tier-ilb-acl".into()),
        services: vec![
            lb,
            NetworkService {
                name: "NetworkACL".into(),
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    ctx_with(facts, (4, 22, 0))
}

fn internal(ports: &[(&str, u16, u16)], extra: Value) -> LbSpec {
    spec(json!({ ann::INTERNAL.key: "true" }), ports, extra)
}

fn observed(port: u16, node_port: u16, members: &[&str]) -> ObservedInternalRule {
    ObservedInternalRule {
        id: format!("ilb-{port}"),
        name: format!("{LB}-tcp-{port}"),
        address: Some(ADDRESS.parse().unwrap()),
        source_port: port,
        instance_port: node_port,
        algorithm: Some(Algorithm::RoundRobin),
        members: members.iter().map(|m| m.to_string()).collect(),
        tags: [
            (TAG_CLUSTER.to_string(), "prod".to_string()),
            (TAG_SERVICE_UID.to_string(), UID.to_string()),
        ]
        .into(),
    }
}

#[test]
fn a_new_internal_load_balancer_gets_its_address_with_the_first_rule() {
    let spec = internal(&[("TCP", 5432, 31432), ("TCP", 6432, 31433)], json!({}));
    let plan = plan_internal(&spec, &[], &backends(&["vm1", "vm2"]), &internal_tier()).unwrap();
    let text = plan.to_string();
    let want = format!(
        "phase 1:\n  - create internal rule {LB}-tcp-5432 on tier {NET}: a free address:5432 -> node port 31432 (roundrobin)\n\
         phase 2:\n  - create internal rule {LB}-tcp-6432 on tier {NET}: the address of the first rule:6432 -> node port 31433 (roundrobin)\n\
         phase 3:\n  - assign vm1,vm2 to rule {LB}-tcp-5432\n\
         \x20 - assign vm1,vm2 to rule {LB}-tcp-6432\n\
         \x20 - tag LoadBalancer {LB}-tcp-5432,{LB}-tcp-6432: cloudstack-ccm/cluster=prod,cloudstack-ccm/service-uid={UID}\n\
         warning: ACL list tier-ilb-acl of tier tier-ilb (net-1): the controller opens no ACL items for internal rules; the list must admit TCP port(s) 5432, 6432 from the tiers that use them\n"
    );
    assert_eq!(text, want);
}

#[test]
fn an_internal_load_balancer_in_place_changes_only_its_members() {
    let spec = internal(&[("TCP", 5432, 31432)], json!({}));
    let listed = [observed(5432, 31432, &["vm1", "vm3"])];
    let plan = plan_internal(&spec, &listed, &backends(&["vm1", "vm2"]), &internal_tier()).unwrap();
    let steps: Vec<String> = plan.steps().map(|s| s.to_string()).collect();
    assert_eq!(
        steps,
        [
            format!("assign vm2 to rule {LB}-tcp-5432"),
            format!("remove vm3 from rule {LB}-tcp-5432"),
        ]
    );
    let unchanged = [observed(5432, 31432, &["vm1", "vm2"])];
    assert!(
        plan_internal(
            &spec,
            &unchanged,
            &backends(&["vm1", "vm2"]),
            &internal_tier()
        )
        .unwrap()
        .is_empty()
    );
}

#[test]
fn a_changed_node_port_recreates_the_rule_on_the_same_address_after_deleting_it() {
    let spec = internal(&[("TCP", 5432, 30001)], json!({}));
    let listed = [observed(5432, 31432, &["vm1"])];
    let plan = plan_internal(&spec, &listed, &backends(&["vm1"]), &internal_tier()).unwrap();
    let phases: Vec<Vec<String>> = plan
        .phases
        .iter()
        .map(|p| p.steps.iter().map(|s| s.to_string()).collect())
        .collect();
    assert_eq!(phases[0], [format!("delete internal rule {LB}-tcp-5432")]);
    assert_eq!(
        phases[1],
        [format!(
            "create internal rule {LB}-tcp-5432 on tier {NET}: {ADDRESS}:5432 -> node port 30001 (roundrobin)"
        )]
    );
}

#[test]
fn a_removed_port_is_deleted_once_the_others_stand_and_an_added_one_shares_the_address() {
    let spec = internal(&[("TCP", 5432, 31432), ("TCP", 8080, 31080)], json!({}));
    let listed = [
        observed(5432, 31432, &["vm1"]),
        observed(9000, 31900, &["vm1"]),
    ];
    let plan = plan_internal(&spec, &listed, &backends(&["vm1"]), &internal_tier()).unwrap();
    let last = plan
        .phases
        .last()
        .unwrap()
        .steps
        .iter()
        .map(|s| s.to_string());
    assert!(
        last.clone()
            .any(|s| s == format!("delete internal rule {LB}-tcp-9000"))
    );
    assert!(plan.steps().any(|s| matches!(s,
        Step::CreateInternalRule { source_port: 8080, address: InternalAddress::Known(a), .. }
            if a.to_string() == ADDRESS)));
}

#[test]
fn the_requested_address_is_used_and_a_move_builds_the_new_rules_before_deleting_the_old() {
    let spec = internal(
        &[("TCP", 5432, 31432)],
        json!({"loadBalancerIP": "10.220.1.50"}),
    );
    let plan = plan_internal(&spec, &[], &backends(&["vm1"]), &internal_tier()).unwrap();
    assert!(plan.steps().any(|s| matches!(s,
        Step::CreateInternalRule { address: InternalAddress::Known(a), .. }
            if a.to_string() == "10.220.1.50")));
    let moved = plan_internal(
        &spec,
        &[observed(5432, 31432, &["vm1"])],
        &backends(&["vm1"]),
        &internal_tier(),
    )
    .unwrap();
    let phase_of = |text: &str| {
        moved
            .phases
            .iter()
            .position(|p| p.steps.iter().any(|s| s.to_string().contains(text)))
            .unwrap_or_else(|| panic!("{text} in {moved}"))
    };
    let created = phase_of("10.220.1.50:5432");
    let members = phase_of(&format!("assign vm1 to rule {LB}-tcp-5432"));
    let deleted = phase_of(&format!("delete internal rule {LB}-tcp-5432"));
    assert!(created < deleted && members <= deleted, "{moved}");
}

#[test]
fn a_network_without_the_internal_scheme_is_refused_naming_what_it_offers() {
    let spec = internal(&[("TCP", 5432, 31432)], json!({}));
    let err = plan_internal(&spec, &[], &backends(&["vm1"]), &vpc("custom")).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PlanError::NoInternalLoadBalancing { .. }));
    assert!(
        text.contains("tier (net-1)") && text.contains("public load-balancer scheme only"),
        "{text}"
    );
    let err = plan_internal(&spec, &[], &backends(&["vm1"]), &isolated((4, 22, 0))).unwrap_err();
    assert!(err.to_string().contains("not a VPC tier"), "{err}");
}

#[test]
fn a_public_service_on_an_internal_only_tier_is_refused_before_any_call() {
    let spec = simple(&[("TCP", 80, 30080)]);
    let err = plan(
        &spec,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &internal_tier(),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PlanError::NoLoadBalancing { .. }), "{text}");
    assert!(
        text.contains("tier-ilb (net-1)")
            && text.contains("internal load-balancer scheme only")
            && text.contains(ann::INTERNAL.key),
        "{text}"
    );
}

#[test]
fn what_the_internal_load_balancer_cannot_do_is_a_warning_and_udp_ports_are_left_out() {
    let spec = spec(
        json!({
            ann::INTERNAL.key: "true",
            ann::HEALTH_CHECK_PATH.key: "/healthz",
            ann::PROXY_PROTOCOL.key: "true",
        }),
        &[("TCP", 53, 30053), ("UDP", 54, 30054)],
        json!({"loadBalancerSourceRanges": ["10.0.0.0/8"]}),
    );
    assert_eq!(spec.rules.len(), 1);
    assert_eq!(spec.rules[0].protocol, LbProtocol::Tcp);
    assert!(spec.health_check.is_none() && !spec.proxy_protocol);
    let warnings = spec.warnings.join("\n");
    for what in [
        "UDP port(s) 54",
        "loadBalancerSourceRanges",
        "health check",
        ann::PROXY_PROTOCOL.key,
    ] {
        assert!(warnings.contains(what), "{what} in {warnings}");
    }
}

#[test]
fn deleting_an_internal_load_balancer_deletes_every_rule_in_one_phase() {
    let listed = [observed(5432, 31432, &["vm1"]), observed(6432, 31433, &[])];
    let plan = plan_internal_delete(&listed);
    assert_eq!(plan.phases.len(), 1);
    assert_eq!(plan.job_count(), 2);
    assert!(plan_internal_delete(&[]).is_empty());
}

#[test]
fn a_tier_whose_acl_list_is_not_default_allow_gets_a_warning_naming_the_ports() {
    let spec = internal(&[("TCP", 5432, 31432), ("TCP", 6432, 31433)], json!({}));
    let plan = plan_internal(&spec, &[], &backends(&["vm1"]), &internal_tier()).unwrap();
    let warnings = plan.warnings.join("\n");
    assert!(
        warnings.contains("ACL list tier-ilb-acl of tier tier-ilb (net-1)")
            && warnings.contains("TCP port(s) 5432, 6432"),
        "{warnings}"
    );
}

#[test]
fn the_internal_load_balancers_statistics_port_is_refused_before_any_call() {
    let spec = internal(&[("TCP", 8081, 31081)], json!({}));
    let err = plan_internal(&spec, &[], &backends(&["vm1"]), &internal_tier()).unwrap_err();
    assert!(
        matches!(err, PlanError::PortReserved { port: 8081, ref provider, .. } if provider == "InternalLbVm"),
        "{err}"
    );
}

//! Plan unit tests of taking the public IP: the Service's UID tag goes on an address it
//! finds allocated before anything is built on it, on one it associates together with its
//! rules, and a Service leaves an address another Service took.

use super::*;
use crate::cloud::loadbalancer::observe::TakenIp;

/// Another Service's UID.
const OTHER_UID: &str = "0b9e8d7c-6b5a-4f3e-9d2c-1b0a9f8e7d6c";
/// The id of the address recorded on the Service (annotation values are UUIDs).
const RECORDED: &str = "5f0c7a3e-1d2b-4c5a-8e9f-0a1b2c3d4e5f";

/// A Service that recorded address [`RECORDED`] as associated by the controller.
fn recorded() -> LbSpec {
    spec(
        json!({
            (ann::IP_ID.key): RECORDED,
            (ann::IP_ASSOCIATED_BY_CONTROLLER.key): "true",
        }),
        &[("TCP", 80, 30080)],
        json!({}),
    )
}

/// What `spec` stands on, on address [`RECORDED`] tagged with `tags`.
fn standing(spec: &LbSpec, tags: Tags) -> ObservedLb {
    let mut observed = applied(spec, &["vm1"]);
    for rule in &mut observed.rules {
        rule.public_ip_id = RECORDED.into();
    }
    observed.ip = Some(ObservedIp {
        id: RECORDED.into(),
        tags,
        ..our_ip()
    });
    observed
}

fn ip_tags(pairs: &[(&str, &str)]) -> Tags {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn a_new_address_is_taken_while_its_rules_are_created() {
    let s = simple(&[("TCP", 80, 30080)]);
    let p = plan(
        &s,
        &ObservedLb::default(),
        &backends(&["vm1"]),
        &isolated((4, 18, 0)),
    )
    .unwrap();
    assert_eq!(kinds(&p)[1], vec!["create-rule", "tag"], "{p}");
    assert_eq!(
        p.phases[1].steps[1],
        Step::TagResources {
            resource_type: TagResourceType::PublicIpAddress,
            resources: vec![ResourceRef::AssociatedIp],
            tags: ip_tags(&[
                (TAG_ASSOCIATED, "true"),
                (TAG_CLUSTER, "prod"),
                (TAG_SERVICE_UID, UID),
            ]),
        },
        "in the phase of the rules: a free address costs no job's time before them\n{p}"
    );
}

#[test]
fn a_recorded_address_not_yet_tagged_for_the_service_is_taken_first_and_only_once() {
    let s = recorded();
    let ctx = isolated((4, 18, 0));
    // Recorded, then stopped before its tags (or tagged by an older release).
    let observed = standing(&s, ip_tags(&[(TAG_ASSOCIATED, "true")]));
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps,
        vec![Step::TagResources {
            resource_type: TagResourceType::PublicIpAddress,
            resources: vec![ResourceRef::Existing(RECORDED.into())],
            tags: ip_tags(&[(TAG_CLUSTER, "prod"), (TAG_SERVICE_UID, UID)]),
        }],
        "only the tags it lacks:\n{p}"
    );
    // Tagged for the Service: nothing to do, no call.
    let observed = standing(
        &s,
        ip_tags(&[
            (TAG_ASSOCIATED, "true"),
            (TAG_CLUSTER, "prod"),
            (TAG_SERVICE_UID, UID),
        ]),
    );
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert!(p.is_empty(), "{p}");
}

#[test]
fn an_address_another_service_took_is_left_to_it_and_a_new_one_claimed() {
    let s = recorded();
    let ctx = isolated((4, 18, 0));
    let rule = &s.rules[0];
    // The observation hands the address over as taken, with the rule that stood on it.
    let observed = ObservedLb {
        taken_ip: Some(TakenIp {
            id: RECORDED.into(),
            address: "203.0.113.5".parse().unwrap(),
            owner_uid: OTHER_UID.into(),
            own_rules: vec![(format!("rule-{}", rule.name), rule.name.clone())],
        }),
        ..Default::default()
    };
    let p = plan(&s, &observed, &backends(&["vm1"]), &ctx).unwrap();
    assert_eq!(
        p.phases[0].steps,
        vec![
            Step::AssociateIp {
                target: AssociateTarget::Network(NET.into()),
                address: None,
                replacing: Some(RECORDED.into()),
            },
            Step::DeleteRule {
                id: format!("rule-{}", rule.name),
                name: rule.name.clone(),
            },
        ],
        "{p}"
    );
    assert!(
        !p.steps()
            .any(|step| matches!(step, Step::ReleaseIp { .. } | Step::UntagResources { .. })),
        "the other Service's address is neither released nor untagged:\n{p}"
    );
    assert!(p.steps().any(|step| matches!(step,
        Step::TagResources { resources, .. } if resources == &[ResourceRef::AssociatedIp])));

    // Deleted before it moved: its rules go, the address stays the other's.
    let p = plan_delete(&s.delete_spec(), &observed, &ctx);
    assert_eq!(kinds(&p), vec![vec!["delete-rule"]], "{p}");
}

#[test]
fn a_claimed_address_already_tagged_for_the_service_is_adopted_without_tagging_it_again() {
    let s = spec(
        json!({(ann::IP_CLAIM.key): "203.0.113.5"}),
        &[("TCP", 80, 30080)],
        json!({}),
    );
    let observed = ObservedLb {
        ip: Some(ObservedIp {
            tags: ip_tags(&[
                (TAG_ASSOCIATED, "true"),
                (TAG_CLUSTER, "prod"),
                (TAG_SERVICE_UID, UID),
            ]),
            ..our_ip()
        }),
        ..Default::default()
    };
    let p = plan(&s, &observed, &backends(&["vm1"]), &isolated((4, 18, 0))).unwrap();
    assert_eq!(kinds(&p)[0], vec!["adopt"]);
    assert!(
        !p.steps().any(|step| matches!(
            step,
            Step::TagResources {
                resource_type: TagResourceType::PublicIpAddress,
                ..
            }
        )),
        "{p}"
    );
}

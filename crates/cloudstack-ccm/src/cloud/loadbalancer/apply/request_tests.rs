//! Unit tests of what each step sends: the requests, with the ids earlier phases produced.

use super::*;

fn done() -> Applied {
    let mut done = Applied {
        associated_ip: Some(("ip-1".into(), "203.0.113.5".parse().expect("address"))),
        ..Applied::default()
    };
    done.created_rules
        .insert("aabc-tcp-80".into(), "rule-9".into());
    done
}

fn created(name: &str) -> RuleRef {
    RuleRef::Created { name: name.into() }
}

fn existing(id: &str) -> RuleRef {
    RuleRef::Existing {
        id: id.into(),
        name: "x".into(),
    }
}

#[test]
fn references_resolve_from_earlier_phases() {
    let assign = |rule| Step::AssignMembers {
        rule,
        vm_ids: vec!["vm-1".into()].into(),
    };
    let to_created = request(&assign(created("aabc-tcp-80")), &done()).expect("resolved");
    assert_eq!(
        to_created.call,
        Call::Job(Queued::of(&AssignToLoadBalancerRule {
            id: "rule-9".into(),
            virtualmachineids: vec!["vm-1".into()],
            ..Default::default()
        }))
    );
    assert_eq!(to_created.touches, None, "a created rule is new anyway");
    let to_existing = request(&assign(existing("rule-1")), &done()).expect("resolved");
    assert_eq!(
        to_existing.touches.as_deref(),
        Some("rule-1"),
        "existing rules are marked touched"
    );
    let err = request(&assign(created("aabc-tcp-81")), &done()).expect_err("not created");
    assert!(
        err.to_string().contains("aabc-tcp-81 was not created"),
        "{err}"
    );
}

#[test]
fn new_rules_stand_on_the_associated_ip() {
    let step = Step::TagResources {
        resource_type: super::super::super::plan::TagResourceType::PublicIpAddress,
        resources: vec![ResourceRef::AssociatedIp],
        tags: Default::default(),
    };
    let Call::CreateTags(tags) = request(&step, &done()).expect("resolved").call else {
        panic!("tags are sent directly");
    };
    assert_eq!(tags.resourceids, vec!["ip-1".to_string()]);
    let nothing_yet = Applied::default();
    let err = request(&step, &nothing_yet).expect_err("nothing associated yet");
    assert!(err.to_string().contains("no IP was associated"), "{err}");
}

#[test]
fn each_kind_of_step_is_sent_its_way() {
    let delete = Step::DeleteRule {
        id: "r1".into(),
        name: "n".into(),
    };
    let sent = request(&delete, &Applied::default()).expect("no reference");
    assert_eq!(
        sent.call,
        Call::Delete(Queued::of(&DeleteLoadBalancerRule { id: "r1".into() }))
    );
    assert_eq!(sent.touches.as_deref(), Some("r1"));
    let remove = Step::RemoveMembers {
        rule: existing("rule-1"),
        vm_ids: vec!["vm-2".into()],
    };
    assert_eq!(
        request(&remove, &Applied::default())
            .expect("resolved")
            .call,
        Call::RemoveMembers {
            rule_id: "rule-1".into(),
            vm_ids: vec!["vm-2".into()],
        }
    );
    let release = Step::ReleaseIp {
        id: "ip-1".into(),
        address: "203.0.113.5".parse().expect("address"),
    };
    let Call::Delete(call) = request(&release, &Applied::default()).expect("sent").call else {
        panic!("a release is a delete");
    };
    assert_eq!(call.command, "disassociateIpAddress");
}

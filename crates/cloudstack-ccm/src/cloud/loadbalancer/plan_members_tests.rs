//! Plan unit tests of per-rule members (`externalTrafficPolicy: Local`) and of members
//! the inventory no longer lists.

use super::*;
use crate::cloud::loadbalancer::members::RuleMembers;

#[test]
fn local_rules_get_their_own_members_and_an_empty_port_keeps_its_members() {
    let s = simple(&[("TCP", 80, 30080), ("TCP", 443, 30443)]);
    let observed = applied(&s, &["vm1", "vm2", "vm3"]);
    let mut b = backends(&["vm1", "vm2", "vm3"]);
    b.per_rule = [
        ((IpProtocol::Tcp, 80), RuleMembers::Vms(vm_set(&["vm2"]))),
        ((IpProtocol::Tcp, 443), RuleMembers::Keep),
    ]
    .into();
    let p = plan(&s, &observed, &b, &isolated((4, 18, 0))).unwrap();
    assert_eq!(kinds(&p), vec![vec!["remove"]], "{p}");
    let Step::RemoveMembers { rule, vm_ids } = &p.phases[0].steps[0] else {
        panic!("{p}")
    };
    assert!(matches!(rule, RuleRef::Existing { name, .. } if *name == format!("{LB}-tcp-80")));
    assert_eq!(vm_ids, &vec!["vm1".to_string(), "vm3".to_string()]);
}

#[test]
fn a_new_local_rule_gets_only_the_nodes_with_endpoints() {
    let s = simple(&[("TCP", 80, 30080)]);
    let mut b = backends(&["vm1", "vm2", "vm3"]);
    b.per_rule = [((IpProtocol::Tcp, 80), RuleMembers::Vms(vm_set(&["vm3"])))].into();
    let p = plan(&s, &ObservedLb::default(), &b, &isolated((4, 18, 0))).unwrap();
    let assigned: Vec<&Step> = p
        .steps()
        .filter(|s| matches!(s, Step::AssignMembers { .. }))
        .collect();
    let [Step::AssignMembers { vm_ids, .. }] = assigned.as_slice() else {
        panic!("{p}")
    };
    assert_eq!(vm_ids.iter().cloned().collect::<Vec<_>>(), ["vm3"]);
}

#[test]
fn a_member_the_inventory_no_longer_lists_is_not_removed_by_a_call() {
    let s = simple(&[("TCP", 80, 30080)]);
    let observed = applied(&s, &["vm1", "vm2", "expunged"]);
    let mut b = backends(&["vm1", "vm2"]);
    b.gone = ["expunged".to_string()].into();
    let p = plan(&s, &observed, &b, &isolated((4, 18, 0))).unwrap();
    assert!(p.is_empty(), "{p}");
    // Without the inventory's word, it is removed as any other member.
    b.gone.clear();
    let p = plan(&s, &observed, &b, &isolated((4, 18, 0))).unwrap();
    assert_eq!(kinds(&p), vec![vec!["remove"]], "{p}");
}

#[test]
fn removal_candidates_are_unwanted_members_and_gone_ones_those_not_listed() {
    use crate::cloud::inventory::{ListedVms, VmRecord};
    use crate::cloud::loadbalancer::members::{gone_among, removal_candidates};
    let s = simple(&[("TCP", 80, 30080), ("TCP", 443, 30443)]);
    let observed = applied(&s, &["vm1", "vm2", "vm3"]);
    let vm_ids: BTreeSet<String> = ["vm1".to_string()].into();
    // Port 443 keeps its members: none of them is a candidate because of it.
    let per_rule = [((IpProtocol::Tcp, 443), RuleMembers::Keep)].into();
    let candidates = removal_candidates(&observed, &vm_ids, &per_rule);
    assert_eq!(candidates, ["vm2".to_string(), "vm3".to_string()].into());
    let listed = ListedVms::from_records(vec![VmRecord {
        id: "vm2".into(),
        ..VmRecord::default()
    }]);
    assert_eq!(
        gone_among(candidates.clone(), &listed),
        ["vm3".to_string()].into()
    );
    assert!(
        gone_among(candidates, &ListedVms::default()).is_empty(),
        "an inventory never listed says nothing is gone"
    );
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

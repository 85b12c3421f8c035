//! Engine unit tests: how plans are told apart for Events, and the shared backends memo.

use super::*;
use crate::cloud::loadbalancer::plan::{Phase, RuleRef};

fn prepared(steps: Vec<Step>) -> Prepared {
    let phases = if steps.is_empty() {
        Vec::new()
    } else {
        vec![Phase { steps }]
    };
    Prepared {
        plan: Plan {
            phases,
            ..Plan::default()
        },
        observation: Observation::Public(Box::default()),
        network_id: "net".into(),
        zone_id: None,
    }
}

#[test]
fn member_only_plans_are_told_apart_for_events() {
    let rule = RuleRef::Existing {
        id: "r".into(),
        name: "n".into(),
    };
    assert_eq!(prepared(Vec::new()).change(), Change::None);
    let members = vec![
        Step::AssignMembers {
            rule: rule.clone(),
            vm_ids: vec!["vm".into()].into(),
        },
        Step::RemoveMembers {
            rule,
            vm_ids: vec!["old".into()],
        },
    ];
    assert_eq!(prepared(members).change(), Change::MembersOnly);
    let delete = vec![Step::DeleteRule {
        id: "r".into(),
        name: "n".into(),
    }];
    assert_eq!(prepared(delete).change(), Change::Other);
}

/// A VM source whose VMs are all on network `net-1`, counting its lists.
struct OneNetwork(std::sync::atomic::AtomicUsize);

impl crate::cloud::inventory::VmSource for OneNetwork {
    fn list_vms(
        &self,
    ) -> futures::future::BoxFuture<
        '_,
        Result<Vec<crate::cloud::inventory::VmRecord>, crate::cloud::inventory::InventoryError>,
    > {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok((1..=3)
                .map(|i| crate::cloud::inventory::VmRecord {
                    id: format!("00000000-0000-0000-0000-00000000000{i}"),
                    name: format!("node-{i}"),
                    network_id: Some("net-1".into()),
                    ..Default::default()
                })
                .collect())
        })
    }
}

#[tokio::test]
async fn services_of_the_same_eligible_nodes_share_one_set_of_vm_ids() {
    let source = Arc::new(OneNetwork(Default::default()));
    let inventory = Arc::new(Inventory::new(source.clone(), Default::default()));
    let client = cloudstack::Client::new(cloudstack::ClientConfig::new(
        "http://127.0.0.1:9/client/api",
        "key",
        "secret",
    ))
    .expect("client");
    let engine = Engine::new(
        client,
        inventory,
        EngineSettings {
            cluster_name: "c".into(),
            server: ServerFeatures::for_version(4, 22, 0),
            view_max_age: Duration::from_secs(60),
            details_max_age: Duration::from_secs(60),
        },
    );
    let nodes = |n: usize| {
        Arc::new(
            (1..=n)
                .map(|i| {
                    (
                        format!("node-{i}"),
                        format!("external-cloudstack://00000000-0000-0000-0000-00000000000{i}"),
                    )
                })
                .collect::<Vec<_>>(),
        )
    };
    let eligible = nodes(3);
    let first = engine.resolve_backends(&eligible, None).await.unwrap();
    let second = engine.resolve_backends(&eligible, None).await.unwrap();
    assert_eq!(first.backends.network_id, "net-1");
    assert_eq!(first.backends.vm_ids.len(), 3);
    assert!(
        Arc::ptr_eq(&first.backends.vm_ids, &second.backends.vm_ids),
        "one set for every Service of the same eligible Nodes"
    );
    // Other eligible Nodes: resolved again, from the same inventory view.
    let fewer = engine.resolve_backends(&nodes(2), None).await.unwrap();
    assert_eq!(fewer.backends.vm_ids.len(), 2);
    assert_eq!(source.0.load(Ordering::SeqCst), 1, "one VM list in all");
}

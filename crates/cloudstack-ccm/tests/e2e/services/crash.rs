//! Crash safety of the IP lifecycle: the public IP id is on the Service before its
//! association finishes, so a controller killed right then leaks nothing: the next one
//! finds the IP by id and finishes the load balancer with it. Before that, the address is
//! claimed on the Service, so a controller killed between CloudStack accepting the
//! association and the id being recorded leaks nothing either: the next one adopts the
//! claimed address, associates it again when it is still free, claims another when
//! someone else holds it, and releases it when the Service was deleted meanwhile.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack::AssociateIpAddress;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_ccm::controllers::service;
use cloudstack_sim::state::Owner;
use cloudstack_sim::{SMALL_NETWORK, Scenario};

const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
const RESYNC: Duration = Duration::from_secs(100);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_during_ip_association_leaks_nothing() {
    if common::skip_in_remote_mode("slows the simulator's jobs and reads its state") {
        return;
    }
    let t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    t.h.sim.set_job_duration(Duration::from_millis(400));
    let allocated = || {
        t.h.sim.with_state(|s| {
            s.ips
                .iter()
                .filter(|ip| ip.owner.is_some() && !ip.source_nat)
                .count()
        })
    };
    let before = allocated();

    let first = OwnController::start(&t, RESYNC);
    t.create(&lb_service("crashy", &[("TCP", 80, 30080)])).await;
    let service = t
        .wait_for("crashy", "has its IP id recorded", |s| {
            annotation(s, annotations::IP_ID.key).is_some()
        })
        .await;
    // Killed while the association job still runs (it takes 400 ms).
    first.kill();
    let recorded = annotation(&service, annotations::IP_ID.key)
        .expect("recorded")
        .to_string();
    assert!(
        ingress_ip(&service).is_none(),
        "killed before the load balancer was done"
    );

    t.h.sim.set_job_duration(Duration::from_millis(2));
    let second = OwnController::start(&t, RESYNC);
    let address = t.wait_for_ip("crashy").await;
    assert_eq!(
        ip_id_of(&t.h, &address),
        recorded,
        "the recorded IP is used"
    );
    let rules = t
        .wait_rules("crashy", "exist", |r| {
            r.len() == 1 && r[0].members.len() == 3
        })
        .await;
    assert_eq!(rules[0].ip_id, recorded);
    assert_eq!(allocated(), before + 1, "exactly one IP for the Service");

    t.delete("crashy").await;
    t.wait_gone("crashy").await;
    assert_eq!(allocated(), before, "released on delete");
    tokio::time::timeout(common::WAIT, second.stop())
        .await
        .expect("stops");
    t.stop().await;
}

/// What a controller killed right after `associateIpAddress` leaves behind: the address
/// claimed on the Service and allocated to the account by `account`, but no id recorded.
async fn associate_by(t: &LbTest, account: &str) -> (String, String) {
    let request = AssociateIpAddress {
        networkid: (account == common::ACCOUNT).then(|| t.network_id(SMALL_NETWORK)),
        zoneid: (account != common::ACCOUNT).then(|| zone_of_network(t)),
        ..Default::default()
    };
    let ip = t
        .client_of(account)
        .associate_ip_address(&request)
        .await
        .expect("associate");
    (ip.ipaddress.expect("address"), ip.id.expect("id"))
}

/// The zone of the Nodes' network.
fn zone_of_network(t: &LbTest) -> String {
    t.h.sim.with_state(|s| {
        s.networks
            .iter()
            .find(|n| n.name == SMALL_NETWORK)
            .map(|n| n.zone_id.clone())
            .expect("network exists")
    })
}

/// The addresses (not source NAT) allocated to `account`.
fn owned_by(t: &LbTest, account: &str) -> Vec<String> {
    t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .filter(|ip| !ip.source_nat)
            .filter(|ip| ip.owner == Some(Owner::Account(account.to_string())))
            .map(|ip| ip.address.clone())
            .collect()
    })
}

/// A Service whose address `address` was claimed by an earlier controller.
fn claimed(name: &str, address: &str) -> k8s_openapi::api::core::v1::Service {
    with_annotations(
        lb_service(name, &[("TCP", 80, 30080)]),
        &[(annotations::IP_CLAIM.key, address)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_address_is_adopted_associated_replaced_or_released_after_a_kill() {
    if common::skip_in_remote_mode("needs a second simulator account and the simulator's state") {
        return;
    }
    let mut t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    let before = owned_by(&t, common::ACCOUNT);

    // Associated, never recorded: adopted.
    let (leaked, leaked_id) = associate_by(&t, common::ACCOUNT).await;
    t.create(&claimed("adopted", &leaked)).await;
    // Still free: associated with that very address (the last free one: associating
    // without an address, as below, takes the first).
    let zone = zone_of_network(&t);
    let free = t.h.sim.with_state(|s| {
        s.ips
            .iter()
            .rev()
            .find(|ip| ip.owner.is_none() && ip.state == "Free" && ip.zone_id == zone)
            .map(|ip| ip.address.clone())
            .expect("a free address")
    });
    t.create(&claimed("free", &free)).await;
    // Held by another account: replaced by a new claim.
    let (theirs, _) = associate_by(&t, "bob").await;
    t.create(&claimed("taken", &theirs)).await;
    // Deleted before the controller came back: the claimed address is released.
    let (orphan, orphan_id) = associate_by(&t, common::ACCOUNT).await;
    let mut gone = claimed("gone", &orphan);
    gone.metadata.finalizers = Some(vec![service::finalizer::FINALIZER.to_string()]);
    t.create(&gone).await;
    t.delete("gone").await;

    t.start_controller(RESYNC);
    t.wait_gone("gone").await;
    assert_eq!(
        ip_state(&t.h, &orphan_id).as_deref(),
        Some("Free"),
        "released"
    );

    assert_eq!(t.wait_for_ip("adopted").await, leaked);
    let adopted = t.get("adopted").await.expect("exists");
    assert_eq!(
        annotation(&adopted, annotations::IP_ID.key),
        Some(leaked_id.as_str())
    );
    assert_eq!(
        annotation(&adopted, annotations::IP_ASSOCIATED_BY_CONTROLLER.key),
        Some("true"),
        "adopted as associated by the controller, so it is released on delete"
    );
    assert_eq!(t.wait_for_ip("free").await, free);

    let replaced = t.wait_for_ip("taken").await;
    assert_ne!(replaced, theirs, "another account's address is never used");
    let taken = t.get("taken").await.expect("exists");
    assert_eq!(
        annotation(&taken, annotations::IP_CLAIM.key),
        Some(replaced.as_str())
    );

    // A fresh Service claims its address before it is associated.
    t.create(&lb_service("fresh", &[("TCP", 80, 30080)])).await;
    let fresh_ip = t.wait_for_ip("fresh").await;
    let fresh = t.get("fresh").await.expect("exists");
    assert_eq!(
        annotation(&fresh, annotations::IP_CLAIM.key),
        Some(fresh_ip.as_str())
    );

    let mut expected = before.clone();
    expected.extend([
        leaked.clone(),
        free.clone(),
        replaced.clone(),
        fresh_ip.clone(),
    ]);
    expected.sort();
    let mut now = owned_by(&t, common::ACCOUNT);
    now.sort();
    assert_eq!(now, expected, "one address per Service, nothing else");

    for name in ["adopted", "free", "taken", "fresh"] {
        t.delete(name).await;
        t.wait_gone(name).await;
    }
    let mut after = owned_by(&t, common::ACCOUNT);
    after.sort();
    let mut before = before;
    before.sort();
    assert_eq!(after, before, "every address released on delete");
    assert!(
        owned_by(&t, "bob").contains(&theirs),
        "the other account's address stays"
    );
    t.stop().await;
}

//! A lost leader lease drops the service controller where it stands, in the middle of a
//! plan; the next term starts it again on the same caches (as `main` does). What the
//! dropped plan was changing must not be trusted from the cache: the next term reads
//! that rule's members again instead of asking CloudStack for a change it already made.

use crate::common;

use std::time::Duration;

use super::support::*;
use cloudstack_ccm::controllers::{service, shutdown_channel};
use cloudstack_sim::Scenario;

const RESYNC: Duration = Duration::from_secs(100);

/// The service controller of one term, on `caches` kept across terms.
fn term(
    t: &LbTest,
    caches: &cloudstack_ccm::controllers::Caches,
) -> (
    cloudstack_ccm::controllers::ShutdownTrigger,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (trigger, shutdown) = shutdown_channel();
    let task = tokio::spawn(service::run_with(
        t.h.ctx.clone(),
        fast_settings(RESYNC),
        caches.clone(),
        shutdown,
    ));
    (trigger, task)
}

fn calls_of(t: &LbTest, command: &str) -> u64 {
    t.h.sim.call_counts().get(command).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_dropped_with_the_lease_is_read_again_in_the_next_term_not_repeated() {
    if common::skip_in_remote_mode("slows the simulator's jobs and reads its call log") {
        return;
    }
    let t = LbTest::prepare(Scenario::small(), &["node-1", "node-2"], RESYNC).await;
    let caches = t.h.new_caches();
    let (_first_trigger, first) = term(&t, &caches);
    t.create(&lb_service("kept", &[("TCP", 80, 30080)])).await;
    t.wait_for_ip("kept").await;
    t.wait_rules("kept", "have both nodes", |rules| {
        rules.len() == 1 && rules[0].members.len() == 2
    })
    .await;

    // A third Node: the rule gets a member; the term ends while that job runs.
    t.h.sim.set_job_duration(Duration::from_millis(600));
    let assigned = calls_of(&t, "assignToLoadBalancerRule");
    add_node(&t.h, "node-3").await;
    common::eventually("the member to be asked for", t.h.wait(), || async {
        (calls_of(&t, "assignToLoadBalancerRule") > assigned).then_some(())
    })
    .await;
    first.abort();
    let _ = first.await;
    t.wait_rules("kept", "have the third node (the job ran on)", |rules| {
        rules[0].members.len() == 3
    })
    .await;

    // The next term, on the same caches.
    t.h.sim.set_job_duration(Duration::from_millis(2));
    let since = sim_now_ms();
    let (second_trigger, second) = term(&t, &caches);
    // Its first reconcile of every Service runs as soon as the Node cache is ready.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        failing_calls(&t.h, since),
        Vec::<String>::new(),
        "no change made twice"
    );
    assert_eq!(
        calls_of(&t, "assignToLoadBalancerRule"),
        assigned + 1,
        "the member is not asked for again"
    );
    assert!(
        !reasons(&t, "kept").contains(&"SyncLoadBalancerFailed".to_string()),
        "{:?}",
        reasons(&t, "kept")
    );
    second_trigger.trigger();
    second.await.expect("no panic").expect("stops cleanly");
    t.stop().await;
}

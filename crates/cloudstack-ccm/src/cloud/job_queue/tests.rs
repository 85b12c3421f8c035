//! The job queue's tests: ordering, places in flight, pacing.

use super::*;
use futures::FutureExt;

/// The pacing of `place`'s job of `command`, as `QueuedJob::wait` builds it with the
/// client's defaults (1 s `job_poll_max`, 50 ms `job_poll_initial`), nothing learnt by
/// the client.
fn pacing_of(place: &JobPlace, command: &str) -> QueuePacing {
    QueuePacing {
        queue: place.queue.clone(),
        seq: place.seq,
        command: command.into(),
        behind_timeout: Duration::from_secs(1),
        fallback: BackoffPacing::new(Duration::from_millis(50), Duration::from_secs(1)),
        client_run_time: None,
        after_due: None,
        last_poll: None,
    }
}

#[tokio::test]
async fn places_go_to_the_oldest_plan_first() {
    let queues = NetworkQueues::default();
    let first = queues.enter("net-a");
    let second = queues.enter("net-a");
    let a = first.queue.take_place(first.ticket).await;
    let b = second.queue.take_place(second.ticket).await;
    // Both places are taken: a third job of either plan waits.
    let mut later = Box::pin(second.queue.take_place(second.ticket));
    let mut earlier = Box::pin(first.queue.take_place(first.ticket));
    assert!(later.as_mut().now_or_never().is_none(), "queue is full");
    assert!(earlier.as_mut().now_or_never().is_none(), "queue is full");
    drop(a);
    let place = earlier.await;
    assert!(
        later.as_mut().now_or_never().is_none(),
        "the older plan took the freed place"
    );
    drop(place);
    drop(b);
    assert!(later.await.seq > 0);
}

#[tokio::test]
async fn networks_do_not_share_places() {
    let queues = NetworkQueues::default();
    let a = queues.enter("net-a");
    let b = queues.enter("net-b");
    let _one = a.queue.take_place(a.ticket).await;
    let _two = a.queue.take_place(a.ticket).await;
    assert!(
        b.queue.take_place(b.ticket).now_or_never().is_some(),
        "another network has its own places"
    );
}

#[tokio::test]
async fn a_waiter_that_gives_up_leaves_no_trace() {
    let queues = NetworkQueues::default();
    let first = queues.enter("net");
    let second = queues.enter("net");
    let one = first.queue.take_place(first.ticket).await;
    let two = first.queue.take_place(first.ticket).await;
    assert!(
        first
            .queue
            .take_place(first.ticket)
            .now_or_never()
            .is_none(),
        "full"
    );
    drop((one, two));
    assert!(
        second
            .queue
            .take_place(second.ticket)
            .now_or_never()
            .is_some(),
        "the abandoned waiter of the older plan does not block the younger one"
    );
}

#[tokio::test(start_paused = true)]
async fn the_head_is_polled_when_it_should_end_and_the_next_behind_it() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    let head = plan.queue.take_place(plan.ticket).await;
    head.mark_submitted();
    let next = plan.queue.take_place(plan.ticket).await;
    next.mark_submitted();
    plan.queue
        .lock()
        .run_times
        .insert("createLoadBalancerRule".into(), Duration::from_secs(1));
    let pacing = |place: &JobPlace| pacing_of(place, "createLoadBalancerRule");
    let started = Instant::now();
    pacing(&head).wait().await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(1250),
        "head with a job behind it: a quarter of a run time after its due time"
    );
    let mut behind = pacing(&next);
    let mut behind_wait = Box::pin(behind.wait());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        behind_wait.as_mut().now_or_never().is_none(),
        "behind: waits for the head"
    );
    head.finished("createLoadBalancerRule", None);
    drop(head);
    assert_eq!(
        plan.queue.lock().typical_run_time("createLoadBalancerRule"),
        Some(Duration::from_secs(1)),
        "a head found finished by a poll put late on purpose teaches nothing"
    );
    behind_wait.await;
    // The head ended at about its typical time (1 s); the next job, alone now, is polled
    // when it should end, one run time later.
    assert_eq!(started.elapsed(), Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn a_head_alone_is_polled_when_it_should_end_and_teaches_its_run_time() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    let head = plan.queue.take_place(plan.ticket).await;
    head.mark_submitted();
    plan.queue
        .lock()
        .run_times
        .insert("assignToLoadBalancerRule".into(), Duration::from_secs(1));
    let mut pacing = pacing_of(&head, "assignToLoadBalancerRule");
    let started = Instant::now();
    pacing.wait().await;
    assert_eq!(started.elapsed(), Duration::from_secs(1), "its due time");
    head.finished("assignToLoadBalancerRule", None);
    assert_eq!(
        plan.queue
            .lock()
            .typical_run_time("assignToLoadBalancerRule"),
        Some(Duration::from_millis(970)),
        "found finished at its due time: a little less is learnt (0.7 × 1 s + 0.3 × 0.9 s)"
    );
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_found_the_head_running_places_its_end() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    let head = plan.queue.take_place(plan.ticket).await;
    head.mark_submitted();
    let submitted = Instant::now();
    let running = submitted + Duration::from_millis(900);
    plan.queue.lock().in_flight[0].running_at = Some(running);
    head.finished(
        "associateIpAddress",
        Some(running + Duration::from_millis(100)),
    );
    let state = plan.queue.lock();
    assert_eq!(
        state.previous_end,
        Some(submitted + Duration::from_millis(950)),
        "between the poll that saw it running and the one that saw it done"
    );
    assert_eq!(
        state.typical_run_time("associateIpAddress"),
        Some(Duration::from_millis(950))
    );
    assert_eq!(
        state.typical_run_time("createLoadBalancerRule"),
        Some(Duration::from_millis(950)),
        "a command not seen yet is first guessed like the others"
    );
    assert!(state.in_flight.is_empty(), "its place is free");
}

#[tokio::test(start_paused = true)]
async fn a_job_behind_one_that_never_ends_is_polled_anyway() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    let _stuck = plan.queue.take_place(plan.ticket).await;
    let next = plan.queue.take_place(plan.ticket).await;
    let mut pacing = pacing_of(&next, "assignToLoadBalancerRule");
    let started = Instant::now();
    pacing.wait().await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(1),
        "nothing learnt: after job_poll_max"
    );
    plan.queue
        .lock()
        .run_times
        .insert("assignToLoadBalancerRule".into(), Duration::from_secs(2));
    let started = Instant::now();
    pacing.wait().await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(6),
        "2 s jobs: after three run times, not every job_poll_max"
    );
}

#[tokio::test]
async fn what_a_network_taught_guides_the_jobs_waited_for_outside_the_queues() {
    let mut scenario = cloudstack_sim::Scenario::small();
    scenario.settings.job_duration_ms = 300;
    let (sim, client) = crate::cloud::loadbalancer::simulated_cloud(scenario).await;
    let network = sim.with_state(|state| {
        state
            .networks
            .iter()
            .find(|n| n.name == cloudstack_sim::SMALL_NETWORK)
            .expect("network")
            .id
            .clone()
    });
    assert_eq!(client.typical_job_run_time("createTags"), None);
    let queues = NetworkQueues::default();
    queues
        .enter(&network)
        .run(
            &client,
            "associateIpAddress",
            Params::new().set("networkid", &network),
        )
        .await
        .expect("associated");
    let learnt = client
        .typical_job_run_time("createTags")
        .expect("learnt from the network's job");
    assert!(
        learnt >= Duration::from_millis(150) && learnt <= Duration::from_millis(700),
        "a 300 ms job: {learnt:?}"
    );
}

#[tokio::test]
async fn a_job_is_submitted_only_once_the_jobs_ahead_of_it_are() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    let ahead = plan.queue.take_place(plan.ticket).await;
    let behind = plan.queue.take_place(plan.ticket).await;
    let mut turn = Box::pin(behind.wait_for_the_jobs_ahead_to_be_submitted());
    assert!(
        turn.as_mut().now_or_never().is_none(),
        "the job ahead is not yet at CloudStack"
    );
    ahead.mark_submitted();
    assert!(turn.as_mut().now_or_never().is_some(), "now it is");
    drop(turn);
    drop(ahead);
    drop(behind);
    // A job ahead that gave up before it was submitted holds nothing back.
    let next = plan.queue.take_place(plan.ticket).await;
    let last = plan.queue.take_place(plan.ticket).await;
    drop(next);
    assert!(
        last.wait_for_the_jobs_ahead_to_be_submitted()
            .now_or_never()
            .is_some()
    );
}

/// An older and a younger plan on one network, `command` typically running `run_time`
/// there: the older plan's job runs (submitted), the younger's holds the second place.
async fn both_places_taken(
    queues: &NetworkQueues,
    command: &str,
    run_time: Duration,
) -> (PlanTicket, PlanTicket, JobPlace, JobPlace) {
    let older = queues.enter("net");
    let younger = queues.enter("net");
    older
        .queue
        .lock()
        .run_times
        .insert(command.into(), run_time);
    let first = older.queue.take_place(older.ticket).await;
    first.mark_submitted();
    let behind = younger.queue.take_place(younger.ticket).await;
    (older, younger, first, behind)
}

#[tokio::test(start_paused = true)]
async fn the_place_a_finished_job_frees_is_kept_for_its_plan_for_a_while() {
    let queues = NetworkQueues::default();
    let (older, younger, first, _behind) =
        both_places_taken(&queues, "createLoadBalancerRule", Duration::from_secs(1)).await;
    let mut younger_wait = Box::pin(younger.queue.take_place(younger.ticket));
    assert!(younger_wait.as_mut().now_or_never().is_none(), "full");
    first.finished("createLoadBalancerRule", None);
    drop(first);
    assert!(
        younger_wait.as_mut().now_or_never().is_none(),
        "the freed place is kept for the older plan"
    );
    let next = older
        .queue
        .take_place(older.ticket)
        .now_or_never()
        .expect("the older plan takes its place at once");
    next.finished("createLoadBalancerRule", None);
    drop(next);
    // Kept again; the younger plan gets it when the hand-over ends: half the typical run
    // time, 0.7 s now (0.7 × 1 s + 0.3 × the first job, found finished at once).
    let started = Instant::now();
    younger_wait.await;
    assert_eq!(started.elapsed(), Duration::from_millis(350));
}

#[tokio::test]
async fn a_plan_that_ended_keeps_no_place() {
    let queues = NetworkQueues::default();
    let (older, younger, first, _behind) =
        both_places_taken(&queues, "assignToLoadBalancerRule", Duration::from_secs(60)).await;
    let mut younger_wait = Box::pin(younger.queue.take_place(younger.ticket));
    assert!(younger_wait.as_mut().now_or_never().is_none(), "full");
    first.finished("assignToLoadBalancerRule", None);
    drop(first);
    assert!(younger_wait.as_mut().now_or_never().is_none(), "kept");
    drop(older);
    assert!(
        younger_wait.as_mut().now_or_never().is_some(),
        "the older plan ended: the place is free"
    );
}

#[tokio::test(start_paused = true)]
async fn after_a_head_found_finished_late_the_next_is_polled_when_it_should_end() {
    let queues = NetworkQueues::default();
    let plan = queues.enter("net");
    plan.queue
        .lock()
        .run_times
        .insert("createLoadBalancerRule".into(), Duration::from_secs(1));
    let pacing = |place: &JobPlace| pacing_of(place, "createLoadBalancerRule");
    let first = plan.queue.take_place(plan.ticket).await;
    first.mark_submitted();
    let second = plan.queue.take_place(plan.ticket).await;
    second.mark_submitted();
    let started = Instant::now();
    pacing(&first).wait().await;
    assert_eq!(
        started.elapsed(),
        Duration::from_millis(1250),
        "late: followed"
    );
    first.finished("createLoadBalancerRule", None);
    drop(first);
    let third = plan.queue.take_place(plan.ticket).await;
    third.mark_submitted();
    // The second is followed too, but its start (the first's end) is only assumed.
    pacing(&second).wait().await;
    assert_eq!(
        started.elapsed(),
        Duration::from_secs(2),
        "at the assumed start (1 s) plus one run time, not a quarter later"
    );
    drop(third);
}

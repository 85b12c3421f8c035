//! Leader election against the fake API server over HTTP: one leader at a time, hand-over
//! on release and on expiry, `leaseTransitions`, 409 races, and stepping down then
//! campaigning again (the elector lives on; terms say whether another replica led between).

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cloudstack_ccm::controllers::{Shutdown, shutdown_channel};
use cloudstack_ccm::leader::{
    Attempt, ElectionState, LeaderElector, LeaderStatus, LeaseConfig, Outcome, Term,
};
use fake_apiserver::{FakeApiServer, Fault, Verb};
use serde_json::Value;

const NAMESPACE: &str = "kube-system";
const NAME: &str = "cloud-controller-manager";
const WAIT: Duration = Duration::from_secs(10);

async fn server() -> FakeApiServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    FakeApiServer::start()
        .await
        .expect("fake API server starts")
}

fn config(identity: &str, lease: Duration, renew: Duration) -> LeaseConfig {
    LeaseConfig {
        lease_duration: lease,
        renew_deadline: renew,
        retry_period: Duration::from_millis(200),
        ..LeaseConfig::new(NAMESPACE, NAME, identity)
    }
}

fn elector(server: &FakeApiServer, config: LeaseConfig) -> (LeaderElector, LeaderStatus) {
    let status = LeaderStatus::new();
    let elector = LeaderElector::new(
        server.kube_client().expect("client"),
        config,
        status.clone(),
    );
    (elector, status)
}

fn lease(server: &FakeApiServer) -> Value {
    server
        .get("leases", Some(NAMESPACE), NAME)
        .expect("lease exists")
}

fn holder(server: &FakeApiServer) -> String {
    lease(server)["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn transitions(server: &FakeApiServer) -> i64 {
    lease(server)["spec"]["leaseTransitions"]
        .as_i64()
        .unwrap_or(0)
}

/// A replica under test: its elector runs in a task; `acted` turns true when its
/// controllers future starts, `terms` lists the terms it was given and `acting` is true
/// while its controllers future lives (it is dropped when the lease is lost).
struct Replica {
    status: LeaderStatus,
    acted: Arc<AtomicBool>,
    terms: Arc<Mutex<Vec<Term>>>,
    acting: Arc<AtomicBool>,
    trigger: cloudstack_ccm::controllers::ShutdownTrigger,
    task: tokio::task::JoinHandle<Outcome<&'static str>>,
}

/// Sets a flag while alive and clears it when dropped (with the future holding it).
struct Alive(Arc<AtomicBool>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

fn start(server: &FakeApiServer, config: LeaseConfig) -> Replica {
    start_with(server.kube_client().expect("client"), config)
}

/// [`start`] with its own client (e.g. through an endpoint that can be cut off).
fn start_with(client: kube::Client, config: LeaseConfig) -> Replica {
    let status = LeaderStatus::new();
    let elector = LeaderElector::new(client, config, status.clone());
    let (trigger, shutdown) = shutdown_channel();
    let acted = Arc::new(AtomicBool::new(false));
    let acting = Arc::new(AtomicBool::new(false));
    let terms = Arc::new(Mutex::new(Vec::new()));
    let (flag, alive, given) = (acted.clone(), acting.clone(), terms.clone());
    let controllers_shutdown: Shutdown = shutdown.clone();
    let task = tokio::spawn(async move {
        let lead = move |term: Term| {
            let (flag, alive, given) = (flag.clone(), alive.clone(), given.clone());
            let controllers_shutdown = controllers_shutdown.clone();
            async move {
                flag.store(true, Ordering::SeqCst);
                alive.store(true, Ordering::SeqCst);
                given.lock().unwrap().push(term);
                let _alive = Alive(alive);
                controllers_shutdown.wait().await;
                "stopped"
            }
        };
        elector
            .run(lead, async move { shutdown.wait().await })
            .await
    });
    Replica {
        status,
        acted,
        terms,
        acting,
        trigger,
        task,
    }
}

async fn wait_state(status: &LeaderStatus, state: ElectionState) {
    tokio::time::timeout(WAIT, status.wait_for(|s| s == state))
        .await
        .unwrap_or_else(|_| panic!("state {state:?} not reached; now {:?}", status.state()));
}

#[tokio::test]
async fn only_one_leads_and_the_standby_takes_over_after_a_graceful_stop() {
    let server = server().await;
    let lease_duration = Duration::from_secs(5);
    let a = start(
        &server,
        config("replica-a", lease_duration, Duration::from_secs(4)),
    );
    wait_state(&a.status, ElectionState::Leading).await;
    let b = start(
        &server,
        config("replica-b", lease_duration, Duration::from_secs(4)),
    );
    wait_state(&b.status, ElectionState::Standby).await;

    // Several renewals later, still exactly one leader.
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(a.acted.load(Ordering::SeqCst));
    assert!(!b.acted.load(Ordering::SeqCst), "the standby must not act");
    assert_eq!(b.status.state(), ElectionState::Standby);
    assert_eq!(holder(&server), "replica-a");
    assert_eq!(transitions(&server), 0);

    a.trigger.trigger();
    let outcome = tokio::time::timeout(WAIT, a.task)
        .await
        .expect("A stops")
        .expect("A task");
    assert!(
        matches!(outcome, Outcome::Finished("stopped")),
        "{outcome:?}"
    );
    let released = std::time::Instant::now();

    wait_state(&b.status, ElectionState::Leading).await;
    // A released lease is taken at the next retry, well before the 5 s lease would expire.
    assert!(
        released.elapsed() < Duration::from_secs(3),
        "took {:?}",
        released.elapsed()
    );
    assert!(b.acted.load(Ordering::SeqCst));
    assert_eq!(holder(&server), "replica-b");
    assert_eq!(transitions(&server), 1);

    b.trigger.trigger();
    tokio::time::timeout(WAIT, b.task).await.unwrap().unwrap();
    assert_eq!(holder(&server), "", "released on graceful shutdown");
    assert_eq!(lease(&server)["spec"]["leaseDurationSeconds"], 1);
}

#[tokio::test]
async fn a_killed_leader_is_replaced_only_after_the_lease_expires() {
    let server = server().await;
    let lease_duration = Duration::from_secs(2);
    let a = start(
        &server,
        config("replica-a", lease_duration, Duration::from_millis(1500)),
    );
    wait_state(&a.status, ElectionState::Leading).await;
    let b = start(
        &server,
        config("replica-b", lease_duration, Duration::from_millis(1500)),
    );
    wait_state(&b.status, ElectionState::Standby).await;

    a.task.abort(); // killed: no release
    let killed = std::time::Instant::now();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(holder(&server), "replica-a", "the lease is still valid");
    assert!(!b.acted.load(Ordering::SeqCst));

    wait_state(&b.status, ElectionState::Leading).await;
    assert!(
        killed.elapsed() >= Duration::from_millis(1500),
        "took over before expiry: {:?}",
        killed.elapsed()
    );
    assert_eq!(holder(&server), "replica-b");
    assert_eq!(transitions(&server), 1);
    assert!(b.acted.load(Ordering::SeqCst));
    b.trigger.trigger();
    tokio::time::timeout(WAIT, b.task).await.unwrap().unwrap();
}

#[tokio::test]
async fn stale_resource_version_and_create_races_are_conflicts() {
    let server = server().await;
    let lease_duration = Duration::from_secs(2);
    let (mut a, _) = elector(
        &server,
        config("replica-a", lease_duration, Duration::from_millis(1500)),
    );
    let (mut b, _) = elector(
        &server,
        config("replica-b", lease_duration, Duration::from_millis(1500)),
    );

    // Both see no Lease; the first create wins, the second gets 409 AlreadyExists.
    let seen_by_a = a.fetch().await.unwrap();
    let seen_by_b = b.fetch().await.unwrap();
    assert!(seen_by_a.is_none() && seen_by_b.is_none());
    assert_eq!(a.try_claim(seen_by_a).await.unwrap(), Attempt::Held);
    assert_eq!(b.try_claim(seen_by_b).await.unwrap(), Attempt::Conflict);
    assert_eq!(
        b.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("replica-a".into())
    );

    // A releases; both read the free Lease; B writes first, so A's copy is stale → 409.
    a.release().await.unwrap();
    let stale = a.fetch().await.unwrap();
    assert_eq!(b.try_acquire_or_renew().await.unwrap(), Attempt::Held);
    assert_eq!(a.try_claim(stale).await.unwrap(), Attempt::Conflict);
    assert_eq!(holder(&server), "replica-b");
    assert_eq!(transitions(&server), 1);
    assert_eq!(
        a.try_acquire_or_renew().await.unwrap(),
        Attempt::HeldBy("replica-b".into())
    );
}

#[tokio::test]
async fn renewal_failing_past_the_deadline_stops_acting_then_leads_again_in_a_continued_term() {
    let server = server().await;
    let renew_deadline = Duration::from_millis(1500);
    let a = start(
        &server,
        config("replica-a", Duration::from_secs(2), renew_deadline),
    );
    wait_state(&a.status, ElectionState::Leading).await;
    assert!(a.acting.load(Ordering::SeqCst));
    let cut = std::time::Instant::now();
    server.set_faults(vec![
        Fault::error(500).on(Verb::Get, "leases.coordination.k8s.io"),
    ]);

    // Stepping down drops the leading future and stands by; the elector lives on.
    wait_state(&a.status, ElectionState::Standby).await;
    let stepped_down = cut.elapsed();
    assert!(
        !a.acting.load(Ordering::SeqCst),
        "the leading future is dropped when leadership is lost"
    );
    assert!(
        stepped_down < Duration::from_secs(2),
        "stepped down {stepped_down:?} after the cut, within the 2 s lease"
    );
    assert!(
        !a.task.is_finished(),
        "a lost lease does not end the elector"
    );
    assert_eq!(
        holder(&server),
        "replica-a",
        "a replica that lost the lease does not touch it"
    );

    // The API answers again: the same replica leads again, in a term continuing the first.
    server.clear_faults();
    wait_state(&a.status, ElectionState::Leading).await;
    tokio::time::timeout(WAIT, async {
        while !a.acting.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the controllers run again");
    let terms = a.terms.lock().unwrap().clone();
    assert_eq!(
        terms,
        vec![
            Term {
                number: 1,
                continued: false
            },
            Term {
                number: 2,
                continued: true
            }
        ]
    );
    assert_eq!(transitions(&server), 0, "no hand-over happened");
    a.trigger.trigger();
    let outcome = tokio::time::timeout(WAIT, a.task).await.unwrap().unwrap();
    assert!(
        matches!(outcome, Outcome::Finished("stopped")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_leader_that_lost_the_lease_to_another_stands_by_and_its_next_term_is_not_continued() {
    let server = server().await;
    let lease_duration = Duration::from_secs(2);
    let endpoint = server.open_endpoint().await.expect("a second endpoint");
    let mut partitioned = kube::Config::new(endpoint.url().parse().expect("a URL"));
    partitioned.read_timeout = Some(Duration::from_secs(1));
    let a = start_with(
        kube::Client::try_from(partitioned).expect("client"),
        config("replica-a", lease_duration, Duration::from_millis(1500)),
    );
    wait_state(&a.status, ElectionState::Leading).await;
    let b = start(
        &server,
        config("replica-b", lease_duration, Duration::from_millis(1500)),
    );
    wait_state(&b.status, ElectionState::Standby).await;
    // A is cut off from the API server; B takes the lease once it expires.
    endpoint.stop().await;
    wait_state(&a.status, ElectionState::Standby).await;
    assert!(!a.acting.load(Ordering::SeqCst));
    wait_state(&b.status, ElectionState::Leading).await;
    endpoint.resume().await;
    assert_eq!(holder(&server), "replica-b");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(a.status.state(), ElectionState::Standby, "A stands by");
    assert!(!a.acting.load(Ordering::SeqCst));

    // B stops gracefully; A leads again, in a term that does not continue its first.
    b.trigger.trigger();
    tokio::time::timeout(WAIT, b.task).await.unwrap().unwrap();
    wait_state(&a.status, ElectionState::Leading).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let terms = a.terms.lock().unwrap().clone();
    assert_eq!(terms.len(), 2, "{terms:?}");
    assert!(!terms[1].continued, "{terms:?}");
    a.trigger.trigger();
    tokio::time::timeout(WAIT, a.task).await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_while_standing_by_returns_without_acting() {
    let server = server().await;
    let a = start(
        &server,
        config(
            "replica-a",
            Duration::from_secs(2),
            Duration::from_millis(1500),
        ),
    );
    wait_state(&a.status, ElectionState::Leading).await;
    let b = start(
        &server,
        config(
            "replica-b",
            Duration::from_secs(2),
            Duration::from_millis(1500),
        ),
    );
    wait_state(&b.status, ElectionState::Standby).await;
    b.trigger.trigger();
    let outcome = tokio::time::timeout(WAIT, b.task).await.unwrap().unwrap();
    assert!(matches!(outcome, Outcome::ShutdownWhileStandby));
    assert!(!b.acted.load(Ordering::SeqCst));
    assert_eq!(holder(&server), "replica-a");
    a.trigger.trigger();
    tokio::time::timeout(WAIT, a.task).await.unwrap().unwrap();
}

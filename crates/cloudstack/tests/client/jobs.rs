//! Async jobs: start replies, polling, success, failure and timeout.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloudstack::{CallObserver, CallOutcome, Error, requests::*};
use serde_json::{Value, json};
use support::{TestServer, envelope};

/// Records observer reports.
#[derive(Default)]
struct Reports {
    calls: Mutex<Vec<(String, String)>>,
    jobs: Mutex<Vec<(String, bool)>>,
}

impl CallObserver for Reports {
    fn on_call(&self, command: &str, outcome: &CallOutcome, _latency: Duration) {
        self.calls
            .lock()
            .unwrap()
            .push((command.to_owned(), outcome.label()));
    }
    fn on_job(&self, command: &str, succeeded: bool, _duration: Duration) {
        self.jobs
            .lock()
            .unwrap()
            .push((command.to_owned(), succeeded));
    }
}

/// A server whose `createLoadBalancerRule` starts job `job-1`, which stays pending for
/// `pending_polls` polls and then ends with `outcome`.
fn lb_job_server(
    pending_polls: usize,
    outcome: Value,
) -> impl Fn(&support::Recorded, usize) -> (u16, Value) {
    move |request, nth| match request.command.as_str() {
        "createLoadBalancerRule" => envelope(
            "createLoadBalancerRule",
            json!({"id": "lb-1", "jobid": "job-1"}),
        ),
        "queryAsyncJobResult" => {
            assert_eq!(request.params["jobid"], "job-1");
            assert_eq!(request.method, "GET");
            if nth < pending_polls {
                envelope(
                    "queryAsyncJobResult",
                    json!({"jobid": "job-1", "jobstatus": 0, "jobprocstatus": 0, "jobresultcode": 0}),
                )
            } else {
                let mut job = outcome.clone();
                job["jobid"] = json!("job-1");
                envelope("queryAsyncJobResult", job)
            }
        }
        other => panic!("unexpected command {other}"),
    }
}

fn lb_request() -> CreateLoadBalancerRule {
    CreateLoadBalancerRule {
        name: "a1b2-tcp-80".into(),
        algorithm: "roundrobin".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: Some("ip-1".into()),
        protocol: Some("tcp".into()),
        openfirewall: Some(false),
        cidrlist: vec!["10.0.0.0/8".into(), "192.168.1.0/24".into()],
        ..Default::default()
    }
}

#[tokio::test]
async fn successful_create_returns_the_object_after_polling() {
    let success = json!({
        "jobstatus": 1, "jobresultcode": 0, "jobresulttype": "object",
        "jobresult": {"loadbalancer": {"id": "lb-1", "name": "a1b2-tcp-80", "publicport": "80", "privateport": "30080", "cidrlist": "10.0.0.0/8 192.168.1.0/24", "state": "Add"}}
    });
    let server = TestServer::start(lb_job_server(3, success)).await;
    let reports = Arc::new(Reports::default());
    let mut config = server.config();
    config.observer = Some(reports.clone());
    let client = cloudstack::Client::new(config).unwrap();
    let rule = client
        .create_load_balancer_rule(&lb_request())
        .await
        .unwrap();
    assert_eq!(rule.id.as_deref(), Some("lb-1"));
    assert_eq!((rule.publicport, rule.privateport), (Some(80), Some(30080)));
    assert_eq!(rule.cidrs(), ["10.0.0.0/8", "192.168.1.0/24"]);
    assert_eq!(server.requests_of("queryAsyncJobResult").len(), 4);

    let create = &server.requests_of("createLoadBalancerRule")[0];
    assert_eq!(create.method, "POST");
    assert_eq!(create.params["cidrlist"], "10.0.0.0/8,192.168.1.0/24");
    assert_eq!(create.params["openfirewall"], "false");
    assert_eq!(create.params["privateport"], "30080");

    assert_eq!(
        *reports.jobs.lock().unwrap(),
        [("createLoadBalancerRule".to_owned(), true)]
    );
    let calls = reports.calls.lock().unwrap();
    assert_eq!(calls.len(), 5);
    assert!(calls.iter().all(|(_, outcome)| outcome == "ok"));
}

#[tokio::test]
async fn begin_returns_the_new_id_before_the_job_ends() {
    let server = TestServer::start(lb_job_server(
        0,
        json!({"jobstatus": 1, "jobresult": {"loadbalancer": {"id": "lb-1"}}}),
    ))
    .await;
    let client = server.client();
    let start = client
        .create_load_balancer_rule_begin(&lb_request())
        .await
        .unwrap();
    assert_eq!(
        start,
        cloudstack::AsyncStart {
            id: Some("lb-1".into()),
            jobid: "job-1".into()
        }
    );
    assert!(server.requests_of("queryAsyncJobResult").is_empty());
    let rule = client
        .create_load_balancer_rule_finish(&start)
        .await
        .unwrap();
    assert_eq!(rule.id.as_deref(), Some("lb-1"));
}

#[tokio::test]
async fn failed_job_carries_the_job_error() {
    let failure = json!({
        "jobstatus": 2, "jobresultcode": 530, "jobresulttype": "object",
        "jobresult": {"errorcode": 530, "errortext": "Failed to create load balancer rule: a1b2-tcp-80"}
    });
    let server = TestServer::start(lb_job_server(1, failure)).await;
    let client = server.client();
    let error = client
        .create_load_balancer_rule(&lb_request())
        .await
        .unwrap_err();
    // A job that failed its checks ended early: it teaches no run time.
    assert_eq!(client.typical_job_run_time("createLoadBalancerRule"), None);
    match &error {
        Error::JobFailed {
            command,
            jobid,
            errorcode,
            errortext,
        } => {
            assert_eq!(
                (command.as_str(), jobid.as_str(), *errorcode),
                ("createLoadBalancerRule", "job-1", 530)
            );
            assert!(errortext.contains("Failed to create"), "{errortext}");
        }
        other => panic!("expected a job failure, got {other:?}"),
    }
    assert_eq!(error.code(), Some(530));
}

#[tokio::test]
async fn failed_job_not_found_is_recognised() {
    let failure = json!({"jobstatus": 2, "jobresultcode": 431, "jobresult": {"errorcode": 431, "errortext": "Unable to find load balancer rule lb-9"}});
    let server = TestServer::start(lb_job_server(0, failure)).await;
    let error = server
        .client()
        .create_load_balancer_rule(&lb_request())
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
}

#[tokio::test]
async fn job_that_never_finishes_times_out() {
    let server = TestServer::start(lb_job_server(usize::MAX, json!({}))).await;
    let reports = Arc::new(Reports::default());
    let mut config = server.config();
    config.job_timeout = Duration::from_millis(150);
    config.observer = Some(reports.clone());
    let client = cloudstack::Client::new(config).unwrap();
    let error = tokio::time::timeout(
        Duration::from_secs(10),
        client.create_load_balancer_rule(&lb_request()),
    )
    .await
    .expect("the client's own job timeout ends the wait")
    .unwrap_err();
    match &error {
        Error::JobTimeout {
            command,
            jobid,
            timeout,
        } => {
            assert_eq!(
                (command.as_str(), jobid.as_str(), *timeout),
                (
                    "createLoadBalancerRule",
                    "job-1",
                    Duration::from_millis(150)
                )
            );
        }
        other => panic!("expected a job timeout, got {other:?}"),
    }
    assert!(
        server.requests_of("queryAsyncJobResult").len() >= 2,
        "polled more than once"
    );
    assert_eq!(
        *reports.jobs.lock().unwrap(),
        [("createLoadBalancerRule".to_owned(), false)]
    );
}

#[tokio::test]
async fn plain_async_commands_accept_numeric_job_ids() {
    let server = TestServer::start(|request, _| match request.command.as_str() {
        "deleteLoadBalancerRule" => envelope("deleteLoadBalancerRule", json!({"jobid": 17342})),
        "queryAsyncJobResult" => {
            assert_eq!(request.params["jobid"], "17342");
            envelope(
                "queryAsyncJobResult",
                json!({"jobid": 17342, "jobstatus": 1, "jobresult": {"success": true}}),
            )
        }
        other => panic!("unexpected command {other}"),
    })
    .await;
    server
        .client()
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: "lb-1".into() })
        .await
        .unwrap();
    assert_eq!(
        server.requests_of("deleteLoadBalancerRule")[0].method,
        "POST"
    );
}

/// Counts the polls it allows, without waiting.
struct CountingPacing(Arc<Mutex<Vec<u32>>>);

impl cloudstack::JobPacing for CountingPacing {
    fn before_poll(&mut self, attempt: u32) -> futures::future::BoxFuture<'_, ()> {
        self.0.lock().unwrap().push(attempt);
        Box::pin(async {})
    }
}

#[tokio::test]
async fn a_caller_paces_the_polls_and_can_poll_once() {
    let success = json!({"jobstatus": 1, "jobresult": {"loadbalancer": {"id": "lb-1"}}});
    let server = TestServer::start(lb_job_server(2, success)).await;
    let client = server.client();
    let start = client
        .create_load_balancer_rule_begin(&lb_request())
        .await
        .unwrap();
    let pending = client
        .poll_job_once("createLoadBalancerRule", &start.jobid)
        .await
        .unwrap();
    assert_eq!(pending, None, "one poll of a running job: not finished");
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let mut pacing = CountingPacing(attempts.clone());
    let result = client
        .wait_job_paced("createLoadBalancerRule", &start.jobid, &mut pacing)
        .await
        .unwrap();
    let rule: cloudstack::LoadBalancerRule =
        cloudstack::job_object("createLoadBalancerRule", result, "loadbalancer").unwrap();
    assert_eq!(rule.id.as_deref(), Some("lb-1"));
    assert_eq!(
        *attempts.lock().unwrap(),
        [0, 1],
        "the pacing is asked before every poll"
    );
    assert_eq!(server.requests_of("queryAsyncJobResult").len(), 3);
}

/// A server whose `createLoadBalancerRule` jobs each run `run_time` from their start.
fn timed_job_server(
    run_time: Duration,
) -> impl Fn(&support::Recorded, usize) -> (u16, Value) + Send + Sync + 'static {
    let started: Arc<Mutex<Vec<std::time::Instant>>> = Arc::default();
    move |request, _nth| match request.command.as_str() {
        "createLoadBalancerRule" => {
            let mut started = started.lock().unwrap();
            started.push(std::time::Instant::now());
            let jobid = format!("job-{}", started.len() - 1);
            envelope(
                "createLoadBalancerRule",
                json!({"id": "lb-1", "jobid": jobid}),
            )
        }
        "queryAsyncJobResult" => {
            let jobid = request.params["jobid"].clone();
            let nth: usize = jobid.trim_start_matches("job-").parse().unwrap();
            let since = started.lock().unwrap()[nth].elapsed();
            let status = if since >= run_time { 1 } else { 0 };
            envelope(
                "queryAsyncJobResult",
                json!({"jobid": jobid, "jobstatus": status, "jobresultcode": 0,
                       "jobresult": {"loadbalancer": {"id": "lb-1"}}}),
            )
        }
        other => panic!("unexpected command {other}"),
    }
}

#[tokio::test]
async fn polls_come_when_the_command_typically_ends() {
    let server = TestServer::start(timed_job_server(Duration::from_millis(400))).await;
    let mut config = server.config();
    config.job_poll_initial = Duration::from_millis(20);
    config.job_poll_max = Duration::from_secs(1);
    let client = cloudstack::Client::new(config).unwrap();
    assert_eq!(client.typical_job_run_time("createLoadBalancerRule"), None);
    let mut polls = Vec::new();
    for _ in 0..4 {
        let before = server.requests_of("queryAsyncJobResult").len();
        client
            .create_load_balancer_rule(&lb_request())
            .await
            .unwrap();
        polls.push(server.requests_of("queryAsyncJobResult").len() - before);
    }
    println!("polls per job: {polls:?}");
    // Nothing known: the backoff from 20 ms polls a 400 ms job six times or so. Then the
    // first poll is due when the command typically ends: a poll or two, three at most
    // while the estimate settles.
    assert!(polls[0] >= 5, "backoff polls of the first job: {polls:?}");
    assert!(
        polls[1..].iter().all(|&n| n <= 3) && polls[3] <= 2,
        "polls per job once a run time is learnt: {polls:?}"
    );
    let learnt = client
        .typical_job_run_time("createLoadBalancerRule")
        .expect("learnt");
    assert!(
        learnt >= Duration::from_millis(250) && learnt <= Duration::from_millis(600),
        "typical run time {learnt:?} near the jobs' 400 ms"
    );
    // A command not seen yet takes the run time learnt last.
    assert_eq!(
        client.typical_job_run_time("assignToLoadBalancerRule"),
        Some(learnt)
    );
}

#[tokio::test]
async fn a_job_waited_for_late_is_polled_once_and_teaches_nothing() {
    let server = TestServer::start(timed_job_server(Duration::from_millis(200))).await;
    let mut config = server.config();
    config.job_poll_initial = Duration::from_millis(20);
    let client = cloudstack::Client::new(config).unwrap();
    client.learn_job_run_time("createLoadBalancerRule", Duration::from_millis(200));
    let submitted = tokio::time::Instant::now();
    let start = client
        .start_async(
            "createLoadBalancerRule",
            cloudstack::Request::to_params(&lb_request()),
        )
        .await
        .unwrap();
    // Other work of the caller's ran meanwhile, well past the job's end.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let before = server.requests_of("queryAsyncJobResult").len();
    client
        .wait_job_put_off("createLoadBalancerRule", &start.jobid, submitted)
        .await
        .unwrap();
    assert_eq!(
        server.requests_of("queryAsyncJobResult").len() - before,
        1,
        "polled at once, found finished"
    );
    assert_eq!(
        client.typical_job_run_time("createLoadBalancerRule"),
        Some(Duration::from_millis(200)),
        "a wait put off says nothing of how long the job ran"
    );
}

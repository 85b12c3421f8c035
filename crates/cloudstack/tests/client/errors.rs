//! Error envelopes and retry behaviour against a real HTTP server.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cloudstack::{Error, Params, requests::DeleteLoadBalancerRule, requests::ListZones};
use serde_json::json;
use support::{TestServer, envelope, error_envelope};

/// A 401 for the keys is [`Error::CredentialsRefused`]; later calls are held (not sent)
/// but for one probe per probe interval.
#[tokio::test]
async fn bad_signature_is_a_refusal_and_later_calls_are_held() {
    let server = TestServer::start(|_, _| envelope("listZones", json!({}))).await;
    let mut config = server.config();
    config.secret_key = "wrong-secret".into();
    config.credentials_probe_interval = std::time::Duration::from_millis(300);
    let sent = Arc::new(SentCalls::default());
    config.observer = Some(sent.clone());
    let client = cloudstack::Client::new(config).unwrap();
    let error = client.list_zones(&ListZones::default()).await.unwrap_err();
    match &error {
        Error::CredentialsRefused {
            command,
            reply: Some(reply),
        } => {
            assert_eq!(command, "listZones");
            assert_eq!(
                reply.code(),
                Some(401),
                "the server's reply is kept: {reply}"
            );
            assert!(reply.text().unwrap().contains("unable to verify"));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert!(error.is_refused_credentials() && !error.is_retryable());
    assert!(error.to_string().contains("401"), "{error}");
    assert!(!error.to_string().contains("wrong-secret"));
    assert!(!error.to_string().contains(support::API_KEY));
    assert!(client.credentials_refused());
    for _ in 0..10 {
        let held = client.list_zones(&ListZones::default()).await.unwrap_err();
        assert!(held.is_refused_credentials());
    }
    assert_eq!(sent.0.load(Ordering::SeqCst), 1, "held calls are not sent");
    tokio::time::sleep(std::time::Duration::from_millis(350)).await;
    for _ in 0..10 {
        let _ = client.list_zones(&ListZones::default()).await;
    }
    assert_eq!(sent.0.load(Ordering::SeqCst), 2, "one probe per interval");
}

/// Counts the HTTP calls a client sends.
#[derive(Default)]
struct SentCalls(AtomicUsize);

impl cloudstack::CallObserver for SentCalls {
    fn on_call(&self, _: &str, _: &cloudstack::CallOutcome, _: std::time::Duration) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn on_job(&self, _: &str, _: bool, _: std::time::Duration) {}
}

#[tokio::test]
async fn entity_not_found_431_is_not_found_and_not_retried() {
    let text = "Unable to execute API command listzones due to invalid value. Invalid parameter id value=nope due to incorrect long value format, or entity does not exist or due to incorrect parameter annotation for the field in api cmd class.";
    let server = TestServer::start(move |_, _| error_envelope("listZones", 431, 4350, text)).await;
    let error = server
        .client()
        .list_zones(&ListZones {
            id: Some("nope".into()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(error.is_not_found(), "{error}");
    assert_eq!(error.code(), Some(431));
    assert_eq!(
        server.requests_of("listZones").len(),
        1,
        "a parameter error must not be retried"
    );
}

#[tokio::test]
async fn rule_conflict_537_keeps_all_fields() {
    let text = "The range specified, 80-80, conflicts with rule 4214 which has 80-80";
    let server =
        TestServer::start(move |_, _| error_envelope("createLoadBalancerRule", 537, 4360, text))
            .await;
    let request = cloudstack::CreateLoadBalancerRule {
        name: "a1-tcp-80".into(),
        algorithm: "roundrobin".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: Some("ip-1".into()),
        ..Default::default()
    };
    let error = server
        .client()
        .create_load_balancer_rule(&request)
        .await
        .unwrap_err();
    assert!(error.is_rule_conflict());
    match error {
        Error::Api {
            command,
            http_status,
            errorcode,
            cserrorcode,
            errortext,
        } => {
            assert_eq!(command, "createLoadBalancerRule");
            assert_eq!(
                (http_status, errorcode, cserrorcode),
                (537, 537, Some(4360))
            );
            assert_eq!(errortext, text);
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    assert_eq!(server.requests_of("createLoadBalancerRule").len(), 1);
}

#[tokio::test]
async fn throttled_read_is_retried_after_the_announced_delay() {
    let server = TestServer::start(|_, nth| {
        if nth < 2 {
            let text = if nth == 0 {
                "The given user has reached his/her account api limit, please retry after [30] ms."
            } else {
                "The given user has reached his/her account api limit, please retry after 30 ms."
            };
            error_envelope("listZones", 429, 9999, text)
        } else {
            envelope(
                "listZones",
                json!({"count": 1, "zone": [{"id": "z1", "name": "zone1"}]}),
            )
        }
    })
    .await;
    let zones = server
        .client()
        .list_zones(&ListZones::default())
        .await
        .unwrap();
    assert_eq!(zones.len(), 1);
    assert_eq!(zones[0].name.as_deref(), Some("zone1"));
    assert_eq!(server.requests_of("listZones").len(), 3);
}

#[tokio::test]
async fn throttle_error_reports_retry_after_when_retries_run_out() {
    let server = TestServer::start(|_, _| {
        error_envelope("listZones", 429, 9999, "… please retry after [40] ms.")
    })
    .await;
    let mut config = server.config();
    config.max_retries = 1;
    let client = cloudstack::Client::new(config).unwrap();
    let error = client.call("listZones", Params::new()).await.unwrap_err();
    assert!(error.is_throttled());
    assert_eq!(
        error.retry_after(),
        Some(std::time::Duration::from_millis(40))
    );
    assert_eq!(
        server.requests_of("listZones").len(),
        2,
        "one try plus one retry"
    );
}

#[tokio::test]
async fn server_errors_on_reads_are_retried() {
    let server = TestServer::start(|_, nth| match nth {
        0 => (503, json!({"html": "service unavailable"})),
        1 => error_envelope("listZones", 530, 4250, "Internal error executing command"),
        _ => envelope("listZones", json!({})),
    })
    .await;
    let zones = server
        .client()
        .list_zones(&ListZones::default())
        .await
        .unwrap();
    assert!(zones.is_empty());
    assert_eq!(server.requests_of("listZones").len(), 3);
}

#[tokio::test]
async fn mutating_calls_are_never_retried() {
    let server = TestServer::start(|_, _| {
        error_envelope("deleteLoadBalancerRule", 530, 4250, "Internal error")
    })
    .await;
    let error = server
        .client()
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: "lb-1".into() })
        .await
        .unwrap_err();
    assert_eq!(error.code(), Some(530));
    assert!(error.is_retryable(), "the error itself is transient …");
    assert_eq!(
        server.requests_of("deleteLoadBalancerRule").len(),
        1,
        "… but a mutation is sent once"
    );
}

#[tokio::test]
async fn throttled_mutation_is_retried_because_it_never_ran() {
    let server = TestServer::start(|request, nth| match request.command.as_str() {
        "deleteLoadBalancerRule" if nth == 0 => error_envelope(
            "deleteLoadBalancerRule",
            429,
            9999,
            "The given user has reached his/her account api limit, please retry after [10] ms.",
        ),
        "deleteLoadBalancerRule" => envelope("deleteLoadBalancerRule", json!({"jobid": "j1"})),
        _ => envelope(
            "queryAsyncJobResult",
            json!({"jobid": "j1", "jobstatus": 1, "jobresult": {"success": true}}),
        ),
    })
    .await;
    server
        .client()
        .delete_load_balancer_rule(&DeleteLoadBalancerRule { id: "lb-1".into() })
        .await
        .unwrap();
    assert_eq!(server.requests_of("deleteLoadBalancerRule").len(), 2);
}

#[tokio::test]
async fn connection_errors_on_reads_are_retried_then_reported_as_transport() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Bind and drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let calls = Arc::new(AtomicUsize::new(0));
    let observed = calls.clone();
    struct Counter(Arc<AtomicUsize>);
    impl cloudstack::CallObserver for Counter {
        fn on_call(
            &self,
            command: &str,
            outcome: &cloudstack::CallOutcome,
            _: std::time::Duration,
        ) {
            assert_eq!(
                (command, outcome.label().as_str()),
                ("listZones", "transport")
            );
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn on_job(&self, _: &str, _: bool, _: std::time::Duration) {}
    }
    let mut config = cloudstack::ClientConfig::new(
        format!("http://127.0.0.1:{port}/client/api"),
        support::API_KEY,
        support::SECRET_KEY,
    );
    config.max_retries = 2;
    config.retry_backoff_initial = std::time::Duration::from_millis(1);
    config.observer = Some(Arc::new(Counter(observed)));
    let client = cloudstack::Client::new(config).unwrap();
    let error = client.list_zones(&ListZones::default()).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error:?}");
    let text = error.to_string();
    assert!(text.starts_with("listZones: transport error"), "{text}");
    assert!(
        !text.contains(support::API_KEY) && !text.contains("signature="),
        "{text}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3, "one try plus two retries");
}

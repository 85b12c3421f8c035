//! `/healthz`, `/readyz` and `/metrics` over real HTTP on 127.0.0.1:0.

use std::sync::Arc;
use std::time::Duration;

use cloudstack_ccm::controllers::shutdown_channel;
use cloudstack_ccm::leader::{ElectionState, LeaderStatus};
use cloudstack_ccm::metrics::Metrics;
use cloudstack_ccm::server::{self, Readiness, ServerState};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `GET path` with HTTP/1.1 and returns (status code, content type, body).
async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(5), stream.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a full response");
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (status, content_type, body.to_owned())
}

#[tokio::test]
async fn health_readiness_and_metrics_over_http() {
    let metrics = Arc::new(Metrics::new());
    let status = LeaderStatus::new().with_metrics(metrics.clone());
    let readiness = Readiness::new(status.clone());
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (trigger, shutdown) = shutdown_channel();
    let state = ServerState {
        metrics: metrics.clone(),
        readiness: readiness.clone(),
    };
    let task = tokio::spawn(server::serve(listener, state, async move {
        shutdown.wait().await
    }));

    assert_eq!(get(addr, "/healthz").await.0, 200);
    let (code, _, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "not ready before the lease is read");
    assert!(body.contains("lease has not been read"), "{body}");

    status.set(ElectionState::Standby);
    assert_eq!(
        get(addr, "/readyz").await.0,
        200,
        "a standby replica is ready"
    );

    status.set(ElectionState::Leading);
    let (code, _, body) = get(addr, "/readyz").await;
    assert_eq!(code, 503, "leading without synced caches");
    assert!(body.contains("caches"), "{body}");
    readiness.mark_synced();
    assert_eq!(get(addr, "/readyz").await.0, 200);

    metrics.reconcile("node", "ok");
    let (code, content_type, body) = get(addr, "/metrics").await;
    assert_eq!(code, 200);
    assert!(
        content_type.starts_with("application/openmetrics-text"),
        "{content_type}"
    );
    assert!(body.contains("cloudstack_ccm_leader 1"), "{body}");
    assert!(
        body.contains("cloudstack_ccm_reconciles_total{controller=\"node\",result=\"ok\"} 1"),
        "{body}"
    );

    assert_eq!(get(addr, "/nope").await.0, 404);
    trigger.trigger();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

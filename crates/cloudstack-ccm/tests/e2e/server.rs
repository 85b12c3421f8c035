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

/// One `cloudstack-ccm` process; killed when dropped.
struct Replica {
    child: std::process::Child,
    addr: std::net::SocketAddr,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    /// Starts a replica on a free port and learns the port from its JSON log (no race
    /// with other processes picking ports).
    async fn start(
        kubeconfig: &std::path::Path,
        cloud_config: &std::path::Path,
        log: &std::path::Path,
    ) -> Replica {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_cloudstack-ccm"))
            .args([
                "--cloud-provider=external-cloudstack",
                &format!("--cloud-config={}", cloud_config.display()),
                "--leader-elect=true",
                &format!("--kubeconfig={}", kubeconfig.display()),
                "--bind-address=127.0.0.1",
                "--secure-port=0",
                "--insecure-plain-http",
                "--log-format=json",
                "--leader-elect-lease-duration=5s",
                "--leader-elect-renew-deadline=4s",
                "--leader-elect-retry-period=200ms",
            ])
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("the binary starts");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let addr = loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let address = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .find_map(|entry| entry["fields"]["address"].as_str().map(str::to_owned));
            if let Some(address) = address {
                break address.parse().expect("a socket address");
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no address logged:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        Replica { child, addr }
    }

    /// Polls `/metrics` until a sample line starts with `line`.
    async fn wait_metric(&self, line: &str) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            if tokio::net::TcpStream::connect(self.addr).await.is_ok() {
                let (_, _, body) = get(self.addr, "/metrics").await;
                if body.lines().any(|sample| sample.starts_with(line)) {
                    return body;
                }
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{line:?} never appeared on {}",
                self.addr
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends SIGTERM and waits for a successful exit.
    async fn terminate(&mut self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        assert!(status.unwrap().success());
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "graceful shutdown exits 0: {status}");
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "did not exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn lease_holder(api: &fake_apiserver::FakeApiServer) -> Option<(String, i64)> {
    let lease = api
        .get("leases", Some("kube-system"), "cloud-controller-manager")
        .ok()?;
    let holder = lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    Some((
        holder,
        lease["spec"]["leaseTransitions"].as_i64().unwrap_or(0),
    ))
}

#[tokio::test]
async fn two_binaries_one_leader_and_hand_over_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = cloudstack_sim::SimServer::start(cloudstack_sim::Scenario::small())
        .await
        .unwrap();
    let api = fake_apiserver::FakeApiServer::start().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    api.write_kubeconfig(&kubeconfig).unwrap();
    let (key, secret) = sim.credentials("alice").unwrap();
    let cloud_config = dir.path().join("cloud-config");
    std::fs::write(
        &cloud_config,
        format!(
            "[Global]\napi-url = {}\napi-key = {}\nsecret-key = {}\n",
            sim.api_url(),
            key.expose(),
            secret.expose()
        ),
    )
    .unwrap();

    let mut first = Replica::start(&kubeconfig, &cloud_config, &dir.path().join("first.log")).await;
    let metrics = first.wait_metric("cloudstack_ccm_leader 1").await;
    assert!(
        metrics
            .contains("cloudstack_api_calls_total{command=\"listCapabilities\",result=\"ok\"} 1"),
        "the version is detected with listCapabilities through the metrics observer:\n{metrics}"
    );
    let (first_identity, transitions) = lease_holder(&api).expect("the lease exists");
    assert_eq!(transitions, 0);

    let second = Replica::start(&kubeconfig, &cloud_config, &dir.path().join("second.log")).await;
    second
        .wait_metric("cloudstack_ccm_cloudstack_api_calls_total{command=\"listCapabilities\"")
        .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    second.wait_metric("cloudstack_ccm_leader 0").await;
    assert_eq!(
        get(second.addr, "/readyz").await.0,
        200,
        "a standby replica is ready"
    );
    assert_eq!(
        lease_holder(&api).unwrap().0,
        first_identity,
        "the first replica keeps the lease"
    );
    assert_eq!(sim.call_counts().get("listCapabilities"), Some(&2));

    first.terminate().await;
    let stopped = std::time::Instant::now();
    second.wait_metric("cloudstack_ccm_leader 1").await;
    // The lease was released: taken over well before the 5 s lease could expire.
    assert!(
        stopped.elapsed() < Duration::from_millis(4500),
        "took {:?}",
        stopped.elapsed()
    );
    let (second_identity, transitions) = lease_holder(&api).unwrap();
    let logs = || {
        let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
        format!(
            "first:\n{}\nsecond:\n{}",
            read("first.log"),
            read("second.log")
        )
    };
    assert_ne!(second_identity, first_identity);
    assert_eq!(transitions, 1, "{second_identity:?} {}", logs());
}

/// Whether the server closed `stream` (EOF or reset) within `within`.
async fn closed_within(stream: &mut tokio::net::TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(within, stream.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_capped_and_closed_and_healthz_still_answers() {
    let metrics = Arc::new(Metrics::new());
    let readiness = Readiness::new(LeaderStatus::new());
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_trigger, shutdown) = shutdown_channel();
    let state = ServerState { metrics, readiness };
    // The defaults the binary runs with: 64 connections, 5 s per request header.
    tokio::spawn(server::serve(listener, state, async move {
        shutdown.wait().await
    }));

    const IDLE: usize = 200;
    let mut idle = Vec::new();
    for _ in 0..IDLE {
        idle.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
    }
    // Connections beyond the cap are closed at once (well before the header timeout).
    let mut refused = 0;
    let mut held = Vec::new();
    for mut stream in idle {
        if closed_within(&mut stream, Duration::from_millis(20)).await {
            refused += 1;
        } else {
            held.push(stream);
        }
    }
    println!("{refused} of {IDLE} idle connections closed at once");
    assert!(refused >= IDLE - 64, "{refused} closed of {IDLE}");

    // /healthz gets through within a generous bound: at the latest when the idle ones
    // time out.
    let started = std::time::Instant::now();
    let answered = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let attempt = tokio::time::timeout(Duration::from_secs(2), async {
                let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
                let request =
                    format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
                stream.write_all(request.as_bytes()).await.ok()?;
                let mut response = String::new();
                stream.read_to_string(&mut response).await.ok()?;
                response.starts_with("HTTP/1.1 200").then_some(())
            })
            .await;
            if let Ok(Some(())) = attempt {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(answered.is_ok(), "/healthz did not answer");
    println!("/healthz answered after {:?}", started.elapsed());

    // The idle connections that were held are closed after the header timeout.
    for stream in &mut held {
        assert!(
            closed_within(stream, Duration::from_secs(20)).await,
            "an idle connection stays open"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_connections_does_not_starve_the_controllers() {
    if crate::common::skip_in_remote_mode("serves the health port in the test process") {
        return;
    }
    let mut h = crate::common::Harness::start_with(Default::default()).await;
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = ServerState {
        metrics: h.ctx.metrics.clone(),
        readiness: Readiness::new(LeaderStatus::new()),
    };
    let (_trigger, shutdown) = shutdown_channel();
    tokio::spawn(server::serve(listener, state, async move {
        shutdown.wait().await
    }));
    // Far more idle connections than the server keeps: it holds 64 at most, so the
    // process keeps file descriptors and tasks for its controllers.
    let mut idle = Vec::new();
    for _ in 0..500 {
        if let Ok(stream) = tokio::net::TcpStream::connect(addr).await {
            idle.push(stream);
        }
    }
    h.spawn(cloudstack_ccm::controllers::node::run);
    h.create_node(crate::common::TestNode::new("node-1")).await;
    h.wait_for_node(
        "node-1",
        "initialised while the health port is flooded",
        |n| !crate::common::has_taint(n, crate::common::UNINITIALIZED_TAINT),
    )
    .await;
    drop(idle);
    h.stop().await;
}

#[tokio::test]
async fn a_kept_alive_connection_idle_between_requests_is_closed() {
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (_trigger, shutdown) = shutdown_channel();
    let state = ServerState {
        metrics: Arc::new(Metrics::new()),
        readiness: Readiness::new(LeaderStatus::new()),
    };
    let limits = server::ServerLimits {
        max_connections: 4,
        header_read_timeout: Duration::from_millis(300),
    };
    tokio::spawn(server::serve_with(listener, state, limits, async move {
        shutdown.wait().await
    }));
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    // Kept alive, then idle: closed after the header timeout (bounded generously).
    let started = std::time::Instant::now();
    assert!(closed_within(&mut stream, Duration::from_secs(10)).await);
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "not before the timeout"
    );
}

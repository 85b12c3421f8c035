//! The secure port over real HTTPS against the fake API server with RBAC: `/healthz` open
//! to everyone, `/metrics` only to a token the API server vouches for (TokenReview) and
//! whose role grants `get` on it (SubjectAccessReview), reviews cached, 503 when the API
//! server cannot answer; the given certificate served and replaced on disk without a
//! restart; a self-signed one for the host's names otherwise; the binary serving HTTPS by
//! default and plain HTTP with `--insecure-plain-http`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloudstack_ccm::cli::Cli;
use cloudstack_ccm::cli::serving::ServingArgs;
use cloudstack_ccm::controllers::shutdown_channel;
use cloudstack_ccm::leader::LeaderStatus;
use cloudstack_ccm::metrics::Metrics;
use cloudstack_ccm::server::{self, Readiness, Security, ServerLimits, ServerState};
use fake_apiserver::{FakeApiServer, Fault, Verb};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The serving flags parsed from `flags` (the defaults for none).
fn serving_args(flags: &[&str]) -> ServingArgs {
    let args = std::iter::once("cloudstack-ccm")
        .chain(flags.iter().copied())
        .map(std::ffi::OsString::from);
    Cli::parse_with_warnings(args).unwrap().cli.manager.serving
}

/// Accepts any server certificate and keeps the one presented.
#[derive(Debug)]
struct Capture {
    seen: Mutex<Option<CertificateDer<'static>>>,
    provider: rustls::crypto::CryptoProvider,
}

impl ServerCertVerifier for Capture {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.seen.lock().unwrap() = Some(end_entity.clone().into_owned());
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// One answer over HTTPS: status, body, and the certificate the server presented.
struct Answer {
    status: u16,
    body: String,
    cert: CertificateDer<'static>,
}

/// `GET path` over HTTPS (any certificate accepted), with `token` as bearer token.
async fn https_get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    https_get_as(addr, path, token, None)
        .await
        .unwrap_or_else(|| panic!("no answer to {path}"))
}

/// A client certificate chain and its key.
type ClientIdentity = (
    Vec<CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// `GET path` over HTTPS, presenting `identity` when given; `None` when the connection
/// fails (a refused handshake).
async fn https_get_as(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    identity: Option<ClientIdentity>,
) -> Option<Answer> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let capture = Arc::new(Capture {
        seen: Mutex::new(None),
        provider: rustls::crypto::ring::default_provider(),
    });
    let builder = rustls::ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(capture.clone());
    let config = match identity {
        Some((chain, key)) => builder.with_client_auth_cert(chain, key).unwrap(),
        None => builder.with_no_client_auth(),
    };
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .ok()?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{authorization}Connection: close\r\n\r\n"
    );
    tls.write_all(request.as_bytes()).await.ok()?;
    let mut response = Vec::new();
    // A server may close without close_notify: keep what arrived.
    let _ = tokio::time::timeout(Duration::from_secs(15), tls.read_to_end(&mut response)).await;
    let response = String::from_utf8_lossy(&response).into_owned();
    let (head, body) = response.split_once("\r\n\r\n")?;
    let status = head.split(' ').nth(1)?.parse().ok()?;
    let cert = capture.seen.lock().unwrap().clone().expect("a certificate");
    Some(Answer {
        status,
        body: body.to_owned(),
        cert,
    })
}

/// An API server with RBAC on; the ServiceAccount `kube-system/ccm` may delegate
/// (`system:auth-delegator`), `monitoring/prometheus` may get `/metrics`,
/// `monitoring/nobody` may not. Returns the server and the controller's client.
async fn delegating_api() -> (FakeApiServer, kube::Client) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let api = FakeApiServer::start_with_rbac().await.unwrap();
    api.create(
        "namespaces",
        None,
        json!({ "metadata": { "name": "monitoring" } }),
    )
    .unwrap();
    for (namespace, name) in [
        ("kube-system", "ccm"),
        ("monitoring", "prometheus"),
        ("monitoring", "nobody"),
    ] {
        api.create(
            "serviceaccounts",
            Some(namespace),
            json!({ "metadata": { "name": name } }),
        )
        .unwrap();
    }
    let bind = |name: &str, role: &str, namespace: &str, account: &str| {
        api.create(
            "clusterrolebindings",
            None,
            json!({
                "metadata": { "name": name },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
                "subjects": [{ "kind": "ServiceAccount", "name": account, "namespace": namespace }],
            }),
        )
        .unwrap();
    };
    bind(
        "ccm-delegator",
        "system:auth-delegator",
        "kube-system",
        "ccm",
    );
    api.create(
        "clusterroles",
        None,
        json!({ "metadata": { "name": "metrics-reader" }, "rules": [{ "nonResourceURLs": ["/metrics"], "verbs": ["get"] }] }),
    )
    .unwrap();
    bind("prometheus", "metrics-reader", "monitoring", "prometheus");
    let token = api.service_account_token("kube-system", "ccm").unwrap();
    let client = api.kube_client_with_token(&token).unwrap();
    (api, client)
}

/// A secure server on 127.0.0.1:0 with `flags`; returns its address and metrics.
async fn start_secure(client: &kube::Client, flags: &[&str]) -> (SocketAddr, Arc<Metrics>) {
    let args = serving_args(flags);
    let security = Security::from_args(&args, "127.0.0.1".parse().unwrap(), client)
        .await
        .expect("secure serving starts");
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Arc::new(Metrics::new());
    let state = ServerState {
        metrics: metrics.clone(),
        readiness: Readiness::new(LeaderStatus::new()),
    };
    let (trigger, shutdown) = shutdown_channel();
    tokio::spawn(server::serve_secured(
        listener,
        state,
        ServerLimits::default(),
        security,
        async move { shutdown.wait().await },
    ));
    // The server lives as long as the test.
    std::mem::forget(trigger);
    (addr, metrics)
}

fn reviews(api: &FakeApiServer) -> (u64, u64) {
    (
        api.request_count(Verb::Create, "tokenreviews.authentication.k8s.io"),
        api.request_count(Verb::Create, "subjectaccessreviews.authorization.k8s.io"),
    )
}

#[tokio::test]
async fn metrics_need_a_token_the_api_server_vouches_for_and_a_grant() {
    let (api, client) = delegating_api().await;
    let (addr, metrics) = start_secure(&client, &[]).await;
    metrics.reconcile("node", "ok");

    for path in ["/healthz", "/livez"] {
        assert_eq!(https_get(addr, path, None).await.status, 200, "{path}");
    }
    assert_eq!(
        reviews(&api),
        (0, 0),
        "always-allowed paths ask nothing of the API server"
    );

    // Anonymous, as the framework handles it: authorised as system:anonymous, refused.
    let anonymous = https_get(addr, "/metrics", None).await;
    assert_eq!(anonymous.status, 403, "{}", anonymous.body);
    assert!(
        anonymous
            .body
            .contains(r#"forbidden: User \"system:anonymous\" cannot get path \"/metrics\""#),
        "{}",
        anonymous.body
    );

    let forged = "not-a-token-anyone-issued";
    let refused = https_get(addr, "/metrics", Some(forged)).await;
    assert_eq!(refused.status, 401);
    assert!(refused.body.contains("Unauthorized"), "{}", refused.body);
    assert!(!refused.body.contains(forged), "the token is not echoed");

    let nobody = api.service_account_token("monitoring", "nobody").unwrap();
    let denied = https_get(addr, "/metrics", Some(&nobody)).await;
    assert_eq!(denied.status, 403);
    assert!(
        denied
            .body
            .contains("system:serviceaccount:monitoring:nobody")
            && !denied.body.contains(&nobody),
        "{}",
        denied.body
    );

    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();
    let scraped = https_get(addr, "/metrics", Some(&prometheus)).await;
    assert_eq!(scraped.status, 200, "{}", scraped.body);
    assert!(
        scraped
            .body
            .contains("cloudstack_ccm_reconciles_total{controller=\"node\",result=\"ok\"} 1"),
        "{}",
        scraped.body
    );

    // Within the cache's time, scrapes cost the API server nothing more.
    let before = reviews(&api);
    for _ in 0..5 {
        assert_eq!(
            https_get(addr, "/metrics", Some(&prometheus)).await.status,
            200
        );
    }
    assert_eq!(reviews(&api), before, "cached reviews");
    println!(
        "(TokenReviews, SubjectAccessReviews) for the first /metrics request of 4 callers: {before:?}; for 5 more scrapes: none"
    );
}

#[tokio::test]
async fn the_api_server_away_makes_metrics_answer_503_never_allow() {
    let (api, client) = delegating_api().await;
    let (addr, _) = start_secure(&client, &[]).await;
    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();

    api.set_faults(vec![
        Fault::error(500).on(Verb::Create, "tokenreviews.authentication.k8s.io"),
    ]);
    let answer = https_get(addr, "/metrics", Some(&prometheus)).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert!(!answer.body.contains(&prometheus));
    assert_eq!(
        https_get(addr, "/healthz", None).await.status,
        200,
        "probes do not depend on the API server"
    );

    // Authenticated, but the access review fails: 503 as well.
    api.set_faults(vec![
        Fault::error(500).on(Verb::Create, "subjectaccessreviews.authorization.k8s.io"),
    ]);
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        503
    );
    // Errors are not cached: the API server back, the scrape succeeds.
    api.clear_faults();
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        200
    );

    // The API server gone altogether: a new caller gets 503, within the review timeout.
    let other = api.service_account_token("monitoring", "nobody").unwrap();
    drop(api);
    let started = std::time::Instant::now();
    let answer = https_get(addr, "/metrics", Some(&other)).await;
    assert_eq!(answer.status, 503, "{}", answer.body);
    println!("503 after {:?} with the API server gone", started.elapsed());
}

/// A certificate for `name` and its key, as PEM.
fn pair(name: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

fn der_of(pem: &str) -> CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

fn write_pair(dir: &Path, (cert, key): &(String, String)) {
    std::fs::write(dir.join("tls.crt"), cert).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
}

#[tokio::test]
async fn the_given_certificate_is_served_and_replaced_on_disk_without_a_restart() {
    let (_api, client) = delegating_api().await;
    let dir = tempfile::tempdir().unwrap();
    let first = pair("ccm.example");
    write_pair(dir.path(), &first);
    let cert_flag = format!("--tls-cert-file={}", dir.path().join("tls.crt").display());
    let key_flag = format!(
        "--tls-private-key-file={}",
        dir.path().join("tls.key").display()
    );
    let (addr, _) = start_secure(&client, &[&cert_flag, &key_flag]).await;
    assert_eq!(
        https_get(addr, "/healthz", None).await.cert,
        der_of(&first.0)
    );

    let second = pair("ccm.example");
    write_pair(dir.path(), &second);
    let started = std::time::Instant::now();
    loop {
        if https_get(addr, "/healthz", None).await.cert == der_of(&second.0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the new certificate is never served"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "the replaced certificate served after {:?}",
        started.elapsed()
    );

    // A broken replacement keeps the working one.
    std::fs::write(dir.path().join("tls.key"), "not a key").unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        https_get(addr, "/healthz", None).await.cert,
        der_of(&second.0)
    );
}

#[tokio::test]
async fn without_a_certificate_a_self_signed_one_names_the_host_and_is_kept_in_cert_dir() {
    let (_api, client) = delegating_api().await;
    let dir = tempfile::tempdir().unwrap();
    let cert_dir = format!("--cert-dir={}", dir.path().display());
    let (addr, _) = start_secure(&client, &[&cert_dir]).await;
    let served = https_get(addr, "/healthz", None).await.cert;
    let names = server::tls::self_signed_names("127.0.0.1".parse().unwrap());
    println!("self-signed for {names:?}");
    let cert = webpki::EndEntityCert::try_from(&served).unwrap();
    for name in &names {
        let name = ServerName::try_from(name.as_str()).unwrap();
        assert!(
            cert.verify_is_valid_for_subject_name(&name).is_ok(),
            "{name:?}"
        );
    }
    assert!(names.iter().any(|n| n == "localhost") && names.iter().any(|n| n == "127.0.0.1"));
    let other = ServerName::try_from("elsewhere.example").unwrap();
    assert!(cert.verify_is_valid_for_subject_name(&other).is_err());

    let kept = std::fs::read_to_string(dir.path().join("cloud-controller-manager.crt")).unwrap();
    assert_eq!(der_of(&kept), served);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(dir.path().join("cloud-controller-manager.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "the key is private to its owner");
    // Started again with the same directory: the same certificate.
    let (again, _) = start_secure(&client, &[&cert_dir]).await;
    assert_eq!(https_get(again, "/healthz", None).await.cert, served);
}

#[tokio::test]
async fn tls_flags_rustls_cannot_honour_or_that_do_not_load_are_start_up_errors() {
    let (_api, client) = delegating_api().await;
    let dir = tempfile::tempdir().unwrap();
    let (cert, _) = pair("ccm.example");
    let (_, other_key) = pair("ccm.example");
    std::fs::write(dir.path().join("tls.crt"), cert).unwrap();
    std::fs::write(dir.path().join("tls.key"), &other_key).unwrap();
    let args = serving_args(&[
        &format!("--tls-cert-file={}", dir.path().join("tls.crt").display()),
        &format!(
            "--tls-private-key-file={}",
            dir.path().join("tls.key").display()
        ),
    ]);
    let error = Security::from_args(&args, "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap_err();
    assert!(
        error.starts_with("--tls-private-key-file") && error.contains("does not match"),
        "{error}"
    );
    assert!(!error.contains("PRIVATE KEY"), "no key material: {error}");
    let args = serving_args(&["--tls-cert-file=/etc/tls.crt"]);
    let error = Security::from_args(&args, "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        "--tls-private-key-file is required with --tls-cert-file"
    );
    let args = serving_args(&["--client-ca-file=/nonexistent/ca.crt"]);
    let error = Security::from_args(&args, "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap_err();
    assert!(
        error.starts_with("--client-ca-file /nonexistent/ca.crt: "),
        "{error}"
    );
    let args = serving_args(&["--authorization-always-allow-paths=/a*b"]);
    let error = Security::from_args(&args, "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap_err();
    assert!(
        error.starts_with("--authorization-always-allow-paths"),
        "{error}"
    );
}

/// The binary on a free loopback port with `extra` flags; returns the child (killed on
/// drop) and the address it logged.
async fn start_binary(
    dir: &Path,
    kubeconfig: &Path,
    cloud_config: &Path,
    extra: &[&str],
) -> (KillOnDrop, SocketAddr, String) {
    let log = dir.join("ccm.log");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_cloudstack-ccm"))
        .args([
            "--cloud-provider=external-cloudstack",
            &format!("--cloud-config={}", cloud_config.display()),
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--log-format=json",
        ])
        .args(extra)
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("the binary starts");
    let child = KillOnDrop(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let serving = text
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .find(|entry| entry["fields"]["address"].is_string());
        if let Some(entry) = serving {
            let addr = entry["fields"]["address"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            let scheme = entry["fields"]["scheme"].as_str().unwrap_or("").to_string();
            return (child, addr, scheme);
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no address logged:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A child process killed when dropped.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn the_binary_serves_https_with_delegation_by_default_and_its_given_certificate() {
    let (api, _) = delegating_api().await;
    let sim = cloudstack_sim::SimServer::start(cloudstack_sim::Scenario::small())
        .await
        .unwrap();
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
    let given = pair("localhost");
    write_pair(dir.path(), &given);
    let (_child, addr, scheme) = start_binary(
        dir.path(),
        &kubeconfig,
        &cloud_config,
        &[
            "--controllers=-route",
            &format!("--tls-cert-file={}", dir.path().join("tls.crt").display()),
            &format!(
                "--tls-private-key-file={}",
                dir.path().join("tls.key").display()
            ),
        ],
    )
    .await;
    assert_eq!(scheme, "https");
    let healthz = https_get(addr, "/healthz", None).await;
    assert_eq!(healthz.status, 200);
    assert_eq!(healthz.cert, der_of(&given.0));
    assert_eq!(https_get(addr, "/metrics", None).await.status, 403);
    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();
    let scraped = https_get(addr, "/metrics", Some(&prometheus)).await;
    assert_eq!(scraped.status, 200);
    assert!(scraped.body.contains("cloudstack_ccm_"), "{}", scraped.body);

    // Plain HTTP to the secure port is not served.
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(10), plain.read_to_end(&mut response)).await;
    assert!(
        !String::from_utf8_lossy(&response).contains("cloudstack_ccm_"),
        "no metrics over plain HTTP"
    );
    drop(_child);

    // --insecure-plain-http: today's behaviour, every path over plain HTTP to anyone.
    let plain_dir = dir.path().join("plain");
    std::fs::create_dir(&plain_dir).unwrap();
    let (_plain, addr, scheme) = start_binary(
        &plain_dir,
        &kubeconfig,
        &cloud_config,
        &["--controllers=-route", "--insecure-plain-http"],
    )
    .await;
    assert_eq!(scheme, "http");
    let mut plain = tokio::net::TcpStream::connect(addr).await.unwrap();
    plain
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tokio::time::timeout(Duration::from_secs(10), plain.read_to_string(&mut response))
        .await
        .unwrap()
        .unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("cloudstack_ccm_"), "{response}");
    let log = std::fs::read_to_string(plain_dir.join("ccm.log")).unwrap();
    assert!(log.contains("not for production"), "{log}");
}

#[tokio::test]
async fn a_client_that_never_completes_the_tls_handshake_is_closed_after_the_header_timeout() {
    let (_api, client) = delegating_api().await;
    let security = Security::from_args(&serving_args(&[]), "127.0.0.1".parse().unwrap(), &client)
        .await
        .unwrap();
    let listener = server::bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = ServerState {
        metrics: Arc::new(Metrics::new()),
        readiness: Readiness::new(LeaderStatus::new()),
    };
    let limits = ServerLimits {
        max_connections: 2,
        header_read_timeout: Duration::from_millis(300),
    };
    let (_trigger, shutdown) = shutdown_channel();
    tokio::spawn(server::serve_secured(
        listener,
        state,
        limits,
        security,
        async move { shutdown.wait().await },
    ));
    let mut silent = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _held = tokio::net::TcpStream::connect(addr).await.unwrap();
    // Beyond the cap: closed at once.
    let mut third = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut buf = [0u8; 16];
    let closed = tokio::time::timeout(Duration::from_millis(200), third.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "the cap holds");
    // The silent one: closed after the timeout, not before.
    let started = std::time::Instant::now();
    let closed = tokio::time::timeout(Duration::from_secs(10), silent.read(&mut buf)).await;
    assert!(matches!(closed, Ok(Ok(0) | Err(_))), "closed");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "{:?}",
        started.elapsed()
    );
    // Then a probe gets through.
    assert_eq!(https_get(addr, "/healthz", None).await.status, 200);
}

/// A certificate authority: its certificate (PEM) and what signs with it.
struct Authority {
    pem: String,
    params: rcgen::CertificateParams,
    key: rcgen::KeyPair,
}

fn authority(name: &str) -> Authority {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let key = rcgen::KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    Authority { pem, params, key }
}

/// A client certificate for `name` in `organization`, signed by `ca`.
fn client_identity(ca: &Authority, name: &str, organization: &str) -> ClientIdentity {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, organization);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let issuer = rcgen::Issuer::from_params(&ca.params, &ca.key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).unwrap();
    (vec![cert.der().clone()], key)
}

#[tokio::test]
async fn a_client_certificate_of_the_client_ca_authenticates_as_its_common_name() {
    let (api, client) = delegating_api().await;
    // The group `scrapers` may get /metrics.
    api.create(
        "clusterrolebindings",
        None,
        json!({
            "metadata": { "name": "scrapers" },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "metrics-reader" },
            "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "scrapers" }],
        }),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ca = authority("client-ca");
    std::fs::write(dir.path().join("ca.crt"), &ca.pem).unwrap();
    let ca_flag = format!("--client-ca-file={}", dir.path().join("ca.crt").display());
    let (addr, _) = start_secure(&client, &[&ca_flag]).await;

    let scraper = client_identity(&ca, "vmagent", "scrapers");
    let answer = https_get_as(addr, "/metrics", None, Some(scraper))
        .await
        .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);

    let outsider = client_identity(&ca, "someone", "elsewhere");
    let answer = https_get_as(addr, "/metrics", None, Some(outsider))
        .await
        .unwrap();
    assert_eq!(answer.status, 403);
    assert!(
        answer
            .body
            .contains(r#"User \"someone\" cannot get path \"/metrics\""#),
        "{}",
        answer.body
    );

    // A certificate of another authority is refused at the handshake.
    let stranger = client_identity(&authority("other-ca"), "vmagent", "scrapers");
    let answer = https_get_as(addr, "/metrics", None, Some(stranger)).await;
    assert!(
        answer.is_none_or(|a| a.status != 200),
        "a certificate of another authority is served"
    );

    // Without a certificate, tokens still work.
    let prometheus = api
        .service_account_token("monitoring", "prometheus")
        .unwrap();
    assert_eq!(
        https_get(addr, "/metrics", Some(&prometheus)).await.status,
        200
    );
    assert_eq!(
        api.request_count(Verb::Create, "tokenreviews.authentication.k8s.io"),
        1,
        "client certificates need no TokenReview"
    );
}

//! TLS to CloudStack: the simulator behind a real rustls server (certificates in
//! `tests/fixtures/tls`). A self-signed `CA:TRUE` server certificate given as `ca-file`
//! works; a certificate the client does not trust, or one that names another host, fails
//! at once with one line naming the certificate problem (no retries); an empty or
//! unreadable `ca-file` is a start-up error.

use crate::common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use cloudstack_ccm::config::CloudConfig;
use cloudstack_ccm::connect;
use cloudstack_ccm::metrics::Metrics;
use cloudstack_sim::{Scenario, SimServer};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};

const BINARY: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

/// A fixture file of `tests/fixtures/tls`.
fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/tls")
        .join(name)
}

/// A TLS server on 127.0.0.1 forwarding every connection to the simulator.
struct TlsFront {
    addr: SocketAddr,
    /// TCP connections accepted (each request attempt of the client opens one when
    /// the handshake fails).
    connections: Arc<AtomicU64>,
}

impl TlsFront {
    /// Serves the certificate `<name>-cert.pem` with its key, in front of `sim`.
    async fn start(sim: &SimServer, name: &str) -> TlsFront {
        let certs = CertificateDer::pem_file_iter(fixture(&format!("{name}-cert.pem")))
            .expect("certificate file")
            .collect::<Result<Vec<_>, _>>()
            .expect("certificates");
        let key = PrivateKeyDer::from_pem_file(fixture(&format!("{name}-key.pem"))).expect("key");
        let config = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .expect("server TLS configuration");
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let backend: SocketAddr = sim
            .api_url()
            .trim_start_matches("http://")
            .split('/')
            .next()
            .and_then(|authority| authority.parse().ok())
            .expect("the simulator's address");
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let connections = Arc::new(AtomicU64::new(0));
        let counter = connections.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                counter.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(mut tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let Ok(mut sim) = TcpStream::connect(backend).await else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut sim).await;
                });
            }
        });
        TlsFront { addr, connections }
    }

    fn api_url(&self) -> String {
        format!("https://{}/client/api", self.addr)
    }
}

/// A cloud-config for alice at `url` with `ca-file = ca_file`.
fn cloud_config(sim: &SimServer, url: &str, ca_file: &Path) -> String {
    let (api_key, secret_key) = sim.credentials(common::ACCOUNT).expect("alice");
    format!(
        "[Global]\napi-url = {url}\napi-key = \"{}\"\nsecret-key = \"{}\"\nca-file = {}\n",
        api_key.expose(),
        secret_key.expose(),
        ca_file.display()
    )
}

/// Builds the client as the binary does and asks for the version.
async fn detect_version(
    sim: &SimServer,
    url: &str,
    ca_file: &Path,
) -> Result<cloudstack::ServerVersion, String> {
    let config =
        CloudConfig::from_text(&cloud_config(sim, url, ca_file), |_| None).expect("cloud-config");
    let client =
        connect::cloudstack_client(&config, Arc::new(Metrics::new())).map_err(|e| e.to_string())?;
    connect::learn_server(&config, &client)
        .await
        .map(|detected| detected.version)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_self_signed_ca_certificate_given_as_ca_file_is_trusted() {
    common::init();
    let sim = SimServer::start(Scenario::small())
        .await
        .expect("simulator");
    let front = TlsFront::start(&sim, "self-signed").await;
    let version = detect_version(&sim, &front.api_url(), &fixture("self-signed-cert.pem"))
        .await
        .expect("the configured certificate is trusted");
    assert_eq!(version.to_string(), Scenario::small().version.text);
}

#[tokio::test]
async fn an_untrusted_or_misnamed_certificate_fails_at_once_naming_the_problem() {
    common::init();
    let sim = SimServer::start(Scenario::small())
        .await
        .expect("simulator");
    for (served, trusted, problem) in [
        ("other", "self-signed-cert.pem", "UnknownIssuer"),
        (
            "wrong-name",
            "wrong-name-cert.pem",
            "not valid for name \"127.0.0.1\"",
        ),
    ] {
        let front = TlsFront::start(&sim, served).await;
        let started = Instant::now();
        let error = detect_version(&sim, &front.api_url(), &fixture(trusted))
            .await
            .expect_err("an untrusted certificate must fail");
        let took = started.elapsed();
        assert!(
            error.contains("TLS to") && error.contains("certificate") && error.contains(problem),
            "{served}: {error}"
        );
        assert!(error.contains("ca-file"), "says what to set: {error}");
        assert_eq!(
            front.connections.load(Ordering::SeqCst),
            1,
            "{served}: a certificate problem is not retried ({took:?}): {error}"
        );
    }
}

#[test]
fn an_empty_or_unreadable_ca_file_is_a_start_up_error_in_one_line() {
    let empty = tempfile::NamedTempFile::new().unwrap();
    for (ca_file, fragment) in [
        (empty.path().to_path_buf(), "holds no PEM certificate"),
        (PathBuf::from("/nonexistent/ca.pem"), "cannot read"),
        // A directory where the file should be (a Secret mounted at the wrong path).
        (std::env::temp_dir(), "cannot read"),
    ] {
        let config = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(
            config.path(),
            format!(
                "[Global]\napi-url = https://127.0.0.1:1/client/api\napi-key = AK\nsecret-key = SK\nca-file = {}\n",
                ca_file.display()
            ),
        )
        .unwrap();
        let output = std::process::Command::new(BINARY)
            .arg(format!("--cloud-config={}", config.path().display()))
            .env_remove("RUST_LOG")
            .output()
            .expect("the binary runs");
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.starts_with("cloudstack-ccm: error: ")
                && last.contains(&format!("ca-file {}", ca_file.display()))
                && last.contains(fragment),
            "{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_names_a_certificate_problem_in_one_line_without_retrying() {
    common::init();
    let sim = SimServer::start(Scenario::small())
        .await
        .expect("simulator");
    let front = TlsFront::start(&sim, "other").await;
    let config = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        config.path(),
        cloud_config(&sim, &front.api_url(), &fixture("self-signed-cert.pem")),
    )
    .unwrap();
    let path = config.path().to_path_buf();
    let api = fake_apiserver::FakeApiServer::start()
        .await
        .expect("fake API server starts");
    let kubeconfig = tempfile::NamedTempFile::new().unwrap();
    api.write_kubeconfig(kubeconfig.path())
        .expect("kubeconfig written");
    let kubeconfig = kubeconfig.path().to_path_buf();
    let port = crate::reliability::ccm::free_port();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(BINARY)
            .arg(format!("--cloud-config={}", path.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg("--insecure-plain-http")
            .arg("--leader-elect=false")
            .env_remove("RUST_LOG")
            .output()
            .expect("the binary runs")
    })
    .await
    .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("TLS to")).collect();
    assert_eq!(errors.len(), 1, "one line names the problem: {stderr}");
    assert!(
        errors[0].starts_with("cloudstack-ccm: error: ") && errors[0].contains("UnknownIssuer"),
        "{stderr}"
    );
    assert_eq!(front.connections.load(Ordering::SeqCst), 1, "{stderr}");
}

//! The secure port over real HTTPS against the fake API server with RBAC: who may see
//! what (`access`), the serving certificate and client certificates (`certificates`), and
//! the binary serving HTTPS by default and plain HTTP with `--insecure-plain-http`
//! (`binary`). This file holds what they share: an HTTPS client that keeps the server's
//! certificate, an API server that delegates, and a secure server in the test process.

mod access;
mod binary;
mod certificates;

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
use fake_apiserver::{FakeApiServer, Verb};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The serving flags parsed from `flags` (the defaults for none).
pub(crate) fn serving_args(flags: &[&str]) -> ServingArgs {
    let args = std::iter::once("cloudstack-ccm")
        .chain(flags.iter().copied())
        .map(std::ffi::OsString::from);
    Cli::parse_with_warnings(args).unwrap().cli.manager.serving
}

/// Accepts any server certificate and keeps the one presented.
#[derive(Debug)]
pub(crate) struct Capture {
    seen: Mutex<Option<CertificateDer<'static>>>,
    provider: rustls::crypto::CryptoProvider,
}

impl Capture {
    /// A verifier that has seen nothing yet.
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Capture {
            seen: Mutex::new(None),
            provider: rustls::crypto::ring::default_provider(),
        })
    }
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
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
    pub(crate) cert: CertificateDer<'static>,
}

/// `GET path` over HTTPS (any certificate accepted), with `token` as bearer token.
pub(crate) async fn https_get(addr: SocketAddr, path: &str, token: Option<&str>) -> Answer {
    https_get_as(addr, path, token, None)
        .await
        .unwrap_or_else(|| panic!("no answer to {path}"))
}

/// A client certificate chain and its key.
pub(crate) type ClientIdentity = (
    Vec<CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
);

/// `GET path` over HTTPS, presenting `identity` when given; `None` when the connection
/// fails (a refused handshake).
pub(crate) async fn https_get_as(
    addr: SocketAddr,
    path: &str,
    token: Option<&str>,
    identity: Option<ClientIdentity>,
) -> Option<Answer> {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|value| ("Authorization", value.as_str()))
        .collect();
    https_request(addr, path, &headers, identity).await
}

/// `GET path` over HTTPS with `headers`, presenting `identity` when given; `None` when the
/// connection fails (a refused handshake).
pub(crate) async fn https_request(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    identity: Option<ClientIdentity>,
) -> Option<Answer> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let capture = Capture::new();
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
    let headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{headers}Connection: close\r\n\r\n");
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
pub(crate) async fn delegating_api() -> (FakeApiServer, kube::Client) {
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
pub(crate) async fn start_secure(
    client: &kube::Client,
    flags: &[&str],
) -> (SocketAddr, Arc<Metrics>) {
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

pub(crate) fn reviews(api: &FakeApiServer) -> (u64, u64) {
    (
        api.request_count(Verb::Create, "tokenreviews.authentication.k8s.io"),
        api.request_count(Verb::Create, "subjectaccessreviews.authorization.k8s.io"),
    )
}

/// A certificate for `name` and its key, as PEM.
pub(crate) fn pair(name: &str) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

pub(crate) fn der_of(pem: &str) -> CertificateDer<'static> {
    use rustls::pki_types::pem::PemObject as _;
    CertificateDer::from_pem_slice(pem.as_bytes()).unwrap()
}

pub(crate) fn write_pair(dir: &Path, (cert, key): &(String, String)) {
    std::fs::write(dir.join("tls.crt"), cert).unwrap();
    std::fs::write(dir.join("tls.key"), key).unwrap();
}

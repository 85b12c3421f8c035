//! The serving certificate: the given one served and replaced on disk without a restart,
//! a self-signed one for the host's names otherwise (kept in `--cert-dir`), start-up
//! errors naming the flag; and client certificates of `--client-ca-file`.

use std::time::Duration;

use fake_apiserver::Verb;
use rustls::pki_types::ServerName;
use serde_json::json;

use cloudstack_ccm::server::{self, Security};

use super::{
    ClientIdentity, delegating_api, der_of, https_get, https_get_as, https_request, pair,
    serving_args, start_secure, write_pair,
};

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

/// Whether a TLS handshake with `addr` succeeds for a client offering only `versions` and
/// the ring provider's `suites` (all when empty).
async fn handshake(
    addr: std::net::SocketAddr,
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: &[rustls::SupportedCipherSuite],
) -> bool {
    let mut provider = rustls::crypto::ring::default_provider();
    if !suites.is_empty() {
        provider.cipher_suites = suites.to_vec();
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(provider))
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(super::Capture::new())
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .is_ok()
}

#[tokio::test]
async fn the_minimum_version_and_the_cipher_suites_are_honoured() {
    use rustls::crypto::ring::cipher_suite as suites;
    use rustls::version::{TLS12, TLS13};
    let (_api, client) = delegating_api().await;
    let (defaults, _) = start_secure(&client, &[]).await;
    assert!(
        handshake(defaults, &[&TLS12], &[]).await,
        "TLS 1.2 by default"
    );
    assert!(handshake(defaults, &[&TLS13], &[]).await);

    let (tls13, _) = start_secure(&client, &["--tls-min-version=VersionTLS13"]).await;
    assert!(!handshake(tls13, &[&TLS12], &[]).await, "TLS 1.2 refused");
    assert!(handshake(tls13, &[&TLS13], &[]).await);

    // The self-signed certificate has an ECDSA key.
    let (one_suite, _) = start_secure(
        &client,
        &["--tls-cipher-suites=TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
    )
    .await;
    assert!(
        handshake(
            one_suite,
            &[&TLS12],
            &[suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]
        )
        .await
    );
    assert!(
        !handshake(
            one_suite,
            &[&TLS12],
            &[suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]
        )
        .await,
        "a TLS 1.2 suite not listed is refused"
    );
    assert!(
        handshake(one_suite, &[&TLS13], &[suites::TLS13_AES_128_GCM_SHA256]).await,
        "TLS 1.3 suites stay on, as in Go"
    );
}

#[tokio::test]
async fn a_front_proxy_of_the_requestheader_ca_names_the_user_in_its_headers() {
    let (api, client) = delegating_api().await;
    let dir = tempfile::tempdir().unwrap();
    let proxies = authority("front-proxy-ca");
    std::fs::write(dir.path().join("front-proxy-ca.crt"), &proxies.pem).unwrap();
    let ca_flag = format!(
        "--requestheader-client-ca-file={}",
        dir.path().join("front-proxy-ca.crt").display()
    );
    let (addr, _) = start_secure(
        &client,
        &[&ca_flag, "--requestheader-allowed-names=front-proxy-client"],
    )
    .await;
    let proxy = || client_identity(&proxies, "front-proxy-client", "");
    let prometheus = "system:serviceaccount:monitoring:prometheus";

    let answer = https_request(
        addr,
        "/metrics",
        &[("X-Remote-User", prometheus)],
        Some(proxy()),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 200, "{}", answer.body);
    let answer = https_request(
        addr,
        "/metrics",
        &[("X-Remote-User", "mallory"), ("X-Remote-Group", "dev")],
        Some(proxy()),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 403);
    assert!(
        answer.body.contains(r#"User \"mallory\""#),
        "{}",
        answer.body
    );

    // A proxy certificate without a user header, or of a CommonName not allowed: 401.
    let answer = https_request(addr, "/metrics", &[], Some(proxy()))
        .await
        .unwrap();
    assert_eq!(answer.status, 401);
    let other = client_identity(&proxies, "somebody-else", "");
    let answer = https_request(
        addr,
        "/metrics",
        &[("X-Remote-User", prometheus)],
        Some(other),
    )
    .await
    .unwrap();
    assert_eq!(answer.status, 401);

    // Without a certificate the headers are worth nothing: anonymous.
    let answer = https_request(addr, "/metrics", &[("X-Remote-User", prometheus)], None)
        .await
        .unwrap();
    assert_eq!(answer.status, 403);
    assert!(answer.body.contains("system:anonymous"), "{}", answer.body);
    assert_eq!(
        api.request_count(Verb::Create, "tokenreviews.authentication.k8s.io"),
        0,
        "front proxies need no TokenReview"
    );
}

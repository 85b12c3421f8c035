//! The binary: HTTPS with delegation and the given certificate by default, plain HTTP to
//! everyone with `--insecure-plain-http`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{delegating_api, der_of, https_get, pair, write_pair};

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

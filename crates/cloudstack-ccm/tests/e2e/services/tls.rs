//! TLS termination end to end: a `kubernetes.io/tls` Secret becomes an `ssl` rule with
//! the certificate (uploaded, named after the Service, attached); a renewal swaps it with
//! no failing call and deletes the old one; an unchanged Secret costs no call; a bad Secret
//! warns and changes nothing; a provider without `SslTermination` gets a Warning and no
//! rule for the port; the Service's deletion leaves no certificate and no rule; and the
//! private key is in no log line (at trace level) and no Event. The simulator and the fake
//! API server only (certificates are checked against the simulator's store).

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::support::*;
use cloudstack_ccm::cloud::loadbalancer::annotations;
use cloudstack_sim::{Scenario, Version};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};

pub(super) const NODES: [&str; 3] = ["node-1", "node-2", "node-3"];
pub(super) const RESYNC: Duration = Duration::from_secs(100);
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../cloudstack-sim/tests/fixtures/ssl/"
);
/// `openssl x509 -noout -fingerprint -sha256` of the two test certificates.
pub(super) const LEAF_A: &str = "3E:13:1F:83:04:B3:68:D9:7D:24:59:46:F4:1D:2A:9B:6F:D4:4A:8B:98:8F:03:8A:08:81:4C:88:77:A0:10:12";

pub(super) fn fixture(name: &str) -> String {
    std::fs::read_to_string(format!("{FIXTURES}{name}")).expect("fixture")
}

/// A `kubernetes.io/tls` Secret with the fixture pair `pair` (`leaf-a`, `leaf-b`, `expired`).
fn tls_secret(name: &str, pair: &str) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            ..Default::default()
        },
        type_: Some("kubernetes.io/tls".into()),
        data: Some(
            [
                (
                    "tls.crt".to_string(),
                    ByteString(fixture(&format!("{pair}-cert.pem")).into_bytes()),
                ),
                (
                    "tls.key".to_string(),
                    ByteString(fixture(&format!("{pair}-key.pem")).into_bytes()),
                ),
            ]
            .into(),
        ),
        ..Default::default()
    }
}

fn secrets(t: &LbTest) -> Api<Secret> {
    Api::namespaced(t.h.kube.clone(), NAMESPACE)
}

/// Creates the Secret, or replaces its data.
pub(super) async fn put_secret(t: &LbTest, name: &str, pair: &str) {
    let api = secrets(t);
    let mut secret = tls_secret(name, pair);
    match api.get_opt(name).await.expect("reading the Secret") {
        None => {
            api.create(&PostParams::default(), &secret)
                .await
                .expect("creating the Secret");
        }
        Some(current) => {
            secret.metadata.resource_version = current.metadata.resource_version;
            api.replace(name, &PostParams::default(), &secret)
                .await
                .expect("replacing the Secret");
        }
    }
}

/// The simulator's certificates: (id, name, fingerprint, rule names it is bound to).
pub(super) fn certificates(t: &LbTest) -> Vec<(String, String, String, Vec<String>)> {
    t.h.sim.with_state(|state| {
        state
            .ssl_certs
            .iter()
            .map(|c| {
                let rules = state
                    .cert_bindings
                    .iter()
                    .filter(|b| b.cert_id == c.id)
                    .filter_map(|b| state.lb_rule(&b.rule_id).map(|r| r.name.clone()))
                    .collect();
                (c.id.clone(), c.name.clone(), c.fingerprint.clone(), rules)
            })
            .collect()
    })
}

pub(super) fn fingerprint_of(pair: &str) -> String {
    use rustls::pki_types::pem::PemObject as _;
    let der = rustls::pki_types::CertificateDer::from_pem_slice(
        fixture(&format!("{pair}-cert.pem")).as_bytes(),
    )
    .expect("certificate");
    cloudstack_ccm::cloud::loadbalancer::certificates::fingerprint(der.as_ref())
}

/// Waits until exactly one certificate exists, bound to the `ssl` rule of port 443, with
/// fingerprint `print`.
pub(super) async fn wait_bound(t: &LbTest, print: &str) -> (String, String) {
    common::eventually(
        &format!("one certificate {print} bound to the 443 rule"),
        t.h.wait(),
        || async {
            let certs = certificates(t);
            match certs.as_slice() {
                [(id, name, p, rules)]
                    if p == print && rules.len() == 1 && rules[0].ends_with("-ssl-443") =>
                {
                    Some((id.clone(), name.clone()))
                }
                _ => None,
            }
        },
    )
    .await
}

pub(super) fn web(secret: &str) -> k8s_openapi::api::core::v1::Service {
    with_annotations(
        lb_service("web", &[("TCP", 80, 30080), ("TCP", 443, 30443)]),
        &[(annotations::TLS_SECRET.key, secret)],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_becomes_an_https_rule_and_its_renewal_is_swapped_in() {
    if common::skip_in_remote_mode("reads the simulator's certificate store") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    let rules = t
        .wait_rules("web", "stand with members", |r| {
            r.len() == 2 && r.iter().all(|r| r.members.len() == 3)
        })
        .await;
    let protocols: Vec<(u16, &str)> = rules
        .iter()
        .map(|r| (r.public_port, r.protocol.as_str()))
        .collect();
    assert!(
        protocols.contains(&(443, "ssl")) && protocols.contains(&(80, "tcp")),
        "{protocols:?}"
    );
    let (first_id, name) = wait_bound(&t, LEAF_A).await;
    let service = t
        .wait_for("web", "has its ingress", |s| ingress_ip(s).is_some())
        .await;
    assert_eq!(
        ingress_ip_mode(&service).as_deref(),
        Some("Proxy"),
        "TLS ends at the load balancer: in-cluster clients go through it"
    );
    let uid = t.uid("web").await;
    assert!(name.contains(&uid), "named after the Service: {name}");
    assert!(
        name.ends_with(&LEAF_A.replace(':', "")[..16].to_lowercase()),
        "{name}"
    );

    // Renewal: a new certificate in the Secret is swapped in, the old one deleted.
    t.h.reset_cloudstack_counts();
    let since = sim_now_ms();
    put_secret(&t, "shop-tls", "leaf-b").await;
    let (second_id, _) = wait_bound(&t, &fingerprint_of("leaf-b")).await;
    assert_ne!(first_id, second_id);
    settle().await;
    assert!(
        failing_calls(&t.h, since).is_empty(),
        "{:?}",
        failing_calls(&t.h, since)
    );
    let counts = mutating_counts(&t.h);
    assert_eq!(
        counts,
        [
            ("assignCertToLoadBalancer".to_string(), 1),
            ("deleteSslCert".to_string(), 1),
            ("uploadSslCert".to_string(), 1),
        ]
        .into(),
        "calls of a renewal"
    );

    // The same certificate again (the Secret rewritten): no change.
    t.h.reset_cloudstack_counts();
    put_secret(&t, "shop-tls", "leaf-b").await;
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );

    // A bad renewal (expired): a Warning, and the certificate in place stays.
    put_secret(&t, "shop-tls", "expired").await;
    t.wait_event("web", "LoadBalancerWarning", "expired").await;
    settle().await;
    assert!(
        mutating_counts(&t.h).is_empty(),
        "{:?}",
        mutating_counts(&t.h)
    );
    wait_bound(&t, &fingerprint_of("leaf-b")).await;

    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(certificates(&t).is_empty(), "{:?}", certificates(&t));
    assert!(t.rules_of_uid(&uid).is_empty());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_ssl_termination_the_port_gets_a_warning_and_no_rule() {
    if common::skip_in_remote_mode("needs a CloudStack version below 4.22") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.version = Version::parse("4.21").unwrap();
    let t = LbTest::start(scenario, &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    let event = t.wait_event("web", "LoadBalancerWarning", "port 443").await;
    assert_eq!(event["type"], "Warning");
    assert!(common::event_note(&event).contains("TLS"), "{event}");
    let rules = t
        .wait_rules("web", "stand", |r| r.len() == 1 && r[0].members.len() == 3)
        .await;
    assert_eq!(rules[0].public_port, 80, "no rule of any protocol for 443");
    settle().await;
    assert!(t.rules("web").await.iter().all(|r| r.public_port != 443));
    assert_eq!(
        t.h.sim.call_counts().get("uploadSslCert"),
        None,
        "no upload"
    );
    assert!(certificates(&t).is_empty());
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_warns_and_the_certificate_id_form_needs_none() {
    if common::skip_in_remote_mode("reads the simulator's certificate store") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    t.create(&web("absent")).await;
    t.wait_event(
        "web",
        "LoadBalancerWarning",
        "Secret default/absent not found",
    )
    .await;
    let rules = t
        .wait_rules("web", "stand", |r| r.len() == 1 && r[0].members.len() == 3)
        .await;
    assert_eq!(
        rules[0].public_port, 80,
        "no 443 rule without a certificate"
    );

    // a certificate uploaded by hand, named by id
    let cert = t
        .client_of(common::ACCOUNT)
        .upload_ssl_cert(&cloudstack::UploadSslCert {
            certificate: fixture("leaf-a-cert.pem"),
            privatekey: cloudstack::Secret::new(fixture("leaf-a-key.pem")),
            name: "by-hand".into(),
            ..Default::default()
        })
        .await
        .expect("upload");
    let id = cert.id.expect("id");
    t.create(&with_annotations(
        lb_service("api", &[("TCP", 443, 31443)]),
        &[(annotations::TLS_CERTIFICATE_ID.key, id.as_str())],
    ))
    .await;
    t.wait_rules("api", "serve TLS", |r| {
        r.len() == 1 && r[0].protocol == "ssl" && r[0].members.len() == 3
    })
    .await;
    common::eventually("the certificate is attached", t.h.wait(), || async {
        certificates(&t)
            .iter()
            .any(|(cid, _, _, rules)| cid == &id && rules.len() == 1)
            .then_some(())
    })
    .await;
    t.delete("api").await;
    t.wait_gone("api").await;
    assert!(
        certificates(&t).iter().any(|(cid, ..)| cid == &id),
        "a certificate given by id is never deleted"
    );
    t.stop().await;
}

/// A `tracing` writer into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log buffer").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_private_key_is_in_no_log_line_and_no_event() {
    if common::skip_in_remote_mode("captures the in-process controller's logs") {
        return;
    }
    common::init();
    // Every task runs on this thread: the subscriber below sees all of them, at trace.
    let logs = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(logs.clone())
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    wait_bound(&t, LEAF_A).await;
    put_secret(&t, "shop-tls", "leaf-b").await;
    wait_bound(&t, &fingerprint_of("leaf-b")).await;
    put_secret(&t, "shop-tls", "expired").await;
    t.wait_event("web", "LoadBalancerWarning", "expired").await;
    t.delete("web").await;
    t.wait_gone("web").await;

    let text = String::from_utf8(logs.0.lock().expect("log buffer").clone()).expect("UTF-8");
    assert!(text.contains("uploadSslCert"), "trace logs were captured");
    let events = serde_json::to_string(&t.h.events_about("web")).expect("JSON");
    for pair in ["leaf-a", "leaf-b", "expired"] {
        let key = fixture(&format!("{pair}-key.pem"));
        for line in key.lines().filter(|l| !l.starts_with("-----")) {
            assert!(
                !text.contains(line),
                "a line of the {pair} key is in the logs"
            );
            assert!(
                !events.contains(line),
                "a line of the {pair} key is in an Event"
            );
        }
    }
    assert!(
        !text.contains("PRIVATE KEY-----"),
        "no PEM key header in the logs"
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_the_cks_role_one_warning_names_the_permission_and_the_id_form_works() {
    if common::skip_in_remote_mode("starts an API server with RBAC enforced") {
        return;
    }
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 2;
    let h = common::Harness::start_with(common::HarnessOptions {
        scenario,
        rbac: true,
        ..common::HarnessOptions::default()
    })
    .await;
    for (kind, namespace, object) in crate::rbac::go_provider_role() {
        h.apiserver
            .create(&kind, namespace.as_deref(), object)
            .unwrap_or_else(|e| panic!("creating the {kind}: {e}"));
    }
    for name in NODES {
        add_node(&h, name).await;
    }
    let mut t = LbTest::from_harness(h);
    t.start_controller(RESYNC);
    put_secret(&t, "shop-tls", "leaf-a").await;
    t.create(&web("shop-tls")).await;
    let warning = t
        .wait_event(
            "web",
            "LoadBalancerWarning",
            "get, list and watch on secrets",
        )
        .await;
    assert_eq!(warning["type"], "Warning");
    let rules = t
        .wait_rules("web", "stand", |r| r.len() == 1 && r[0].members.len() == 3)
        .await;
    assert_eq!(
        rules[0].public_port, 80,
        "no 443 rule without the certificate"
    );

    let cert = t
        .client_of(common::ACCOUNT)
        .upload_ssl_cert(&cloudstack::UploadSslCert {
            certificate: fixture("leaf-a-cert.pem"),
            privatekey: cloudstack::Secret::new(fixture("leaf-a-key.pem")),
            name: "by-hand".into(),
            ..Default::default()
        })
        .await
        .expect("upload");
    let id = cert.id.expect("id");
    t.create(&with_annotations(
        lb_service("api", &[("TCP", 443, 31443)]),
        &[(annotations::TLS_CERTIFICATE_ID.key, id.as_str())],
    ))
    .await;
    common::eventually(
        "the certificate given by id is attached",
        t.h.wait(),
        || async {
            certificates(&t)
                .iter()
                .any(|(cid, _, _, rules)| cid == &id && rules.len() == 1)
                .then_some(())
        },
    )
    .await;
    let about_secrets: Vec<_> =
        t.h.events_about("web")
            .into_iter()
            .filter(|e| common::event_note(e).contains("on secrets"))
            .collect();
    assert_eq!(
        about_secrets.len(),
        1,
        "one Warning (repeats counted): {about_secrets:?}"
    );
    t.stop().await;
}

/// Waits (polling fast) until the simulator counted `n` calls of `command`.
async fn wait_calls(t: &LbTest, command: &str, n: u64) {
    let deadline = std::time::Instant::now() + t.h.wait();
    while t.h.sim.call_counts().get(command).copied().unwrap_or(0) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no {n} {command} calls"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_at_each_certificate_step_leaks_nothing() {
    if common::skip_in_remote_mode("slows the simulator's jobs and reads its state") {
        return;
    }
    let t = LbTest::prepare(Scenario::small(), &NODES, RESYNC).await;
    t.h.sim.set_job_duration(Duration::from_millis(300));
    put_secret(&t, "shop-tls", "leaf-a").await;

    // Killed right after the upload: the next controller uses that certificate.
    let first = OwnController::start(&t, RESYNC);
    t.create(&web("shop-tls")).await;
    wait_calls(&t, "uploadSslCert", 1).await;
    first.kill();
    // Killed while the attach job runs (slow jobs: the next controller sees the rule
    // without its certificate yet): it attaches again, forced, without a failure.
    t.h.sim.set_job_duration(Duration::from_millis(800));
    let second = OwnController::start(&t, RESYNC);
    wait_calls(&t, "assignCertToLoadBalancer", 1).await;
    second.kill();
    let since = sim_now_ms();
    let after_attach = OwnController::start(&t, RESYNC);
    wait_calls(&t, "assignCertToLoadBalancer", 2).await;
    t.h.sim.set_job_duration(Duration::from_millis(300));
    wait_bound(&t, LEAF_A).await;
    assert_eq!(
        t.h.sim.call_counts().get("uploadSslCert"),
        Some(&1),
        "not uploaded twice"
    );
    common::eventually("the certificate jobs ended", t.h.wait(), || async {
        t.h.sim
            .with_state(|st| {
                st.jobs
                    .iter()
                    .all(|j| !j.command.contains("Cert") || j.status != 0)
            })
            .then_some(())
    })
    .await;
    let failed: Vec<String> = failing_calls(&t.h, since)
        .into_iter()
        .filter(|c| c.contains("Cert"))
        .collect();
    assert!(failed.is_empty(), "{failed:?}");
    after_attach.kill();

    // Renewal killed after the new upload, then during the swap job.
    let third = OwnController::start(&t, RESYNC);
    put_secret(&t, "shop-tls", "leaf-b").await;
    wait_calls(&t, "uploadSslCert", 2).await;
    third.kill();
    let fourth = OwnController::start(&t, RESYNC);
    // the renewal is picked up again by a resync-free start (the Service is reconciled)
    wait_calls(&t, "assignCertToLoadBalancer", 3).await;
    fourth.kill();
    let last = OwnController::start(&t, RESYNC);
    wait_bound(&t, &fingerprint_of("leaf-b")).await;

    t.delete("web").await;
    t.wait_gone("web").await;
    assert!(certificates(&t).is_empty(), "{:?}", certificates(&t));
    tokio::time::timeout(common::WAIT, last.stop())
        .await
        .expect("stops");
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_of_gone_services_are_orphans() {
    if common::skip_in_remote_mode("uploads a certificate named for another cluster's Service") {
        return;
    }
    let t = LbTest::start(Scenario::small(), &NODES, RESYNC).await;
    let client = t.client_of(common::ACCOUNT);
    let cluster = t.h.ctx.cluster_name.clone();
    let gone = cloudstack_ccm::cloud::loadbalancer::certificates::certificate_name(
        &cluster,
        "00000000-0000-4000-8000-000000000001",
        LEAF_A,
    );
    for name in [gone.as_str(), "somebody-elses"] {
        client
            .upload_ssl_cert(&cloudstack::UploadSslCert {
                certificate: fixture("leaf-a-cert.pem"),
                privatekey: cloudstack::Secret::new(fixture("leaf-a-key.pem")),
                name: name.into(),
                ..Default::default()
            })
            .await
            .expect("upload");
    }
    let owners = cloudstack_ccm::cloud::orphans::Owners::default();
    let found = cloudstack_ccm::cloud::orphans::find(
        &client,
        &cluster,
        &owners,
        cloudstack_ccm::cloud::orphans::RoutingFirewall::Listed,
    )
    .await
    .expect("orphans");
    let certs: Vec<_> = found
        .iter()
        .filter(|o| o.kind == cloudstack_ccm::cloud::orphans::OrphanKind::Certificate)
        .collect();
    assert_eq!(certs.len(), 1, "{found:?}");
    assert_eq!(certs[0].what, gone);
    cloudstack_ccm::cloud::orphans::delete(&client, &found).await;
    let left: Vec<String> = certificates(&t).into_iter().map(|c| c.1).collect();
    assert_eq!(left, vec!["somebody-elses".to_string()]);
    t.stop().await;
}

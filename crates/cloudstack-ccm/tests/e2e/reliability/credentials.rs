//! Credentials: the simulator rejects tampered, expired (replayed) and unknown-key
//! requests sent as raw HTTP; the controller manager started with a wrong key says so in
//! one line naming the 401 and the command, lives on, and starts once the keys in its
//! cloud-config are corrected; and the API key and secret key appear in no
//! log line (at the most verbose level), Event, Service, error, `Debug` output or metric.

use crate::common;

use std::time::Duration;

use super::ccm::Ccm;
use super::raw_http;
use super::rig::Rig;
use super::services::{self, lb_service};
use cloudstack_ccm::config::CloudConfig;
use cloudstack_sim::{Scenario, Secret};

/// The 401 text CloudStack answers for every signature problem.
pub(super) const UNAUTHORIZED: &str = "unable to verify user credentials and/or request signature";

/// `small()` with alice's keys replaced by long mixed-case random ones, so any copy of
/// them in an output is unmistakable.
pub(super) fn scenario_with_distinct_keys() -> (Scenario, String, String) {
    let mut scenario = Scenario::small();
    scenario.settings.job_duration_ms = 5;
    let api_key = format!(
        "AkRel{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let secret_key = format!(
        "SkRel{:016x}{:016x}",
        rand::random::<u64>(),
        rand::random::<u64>()
    );
    let alice = scenario
        .accounts
        .iter_mut()
        .find(|a| a.name == common::ACCOUNT)
        .expect("alice is in the small scenario");
    alice.api_key = Secret::new(api_key.clone());
    alice.secret_key = Secret::new(secret_key.clone());
    (scenario, api_key, secret_key)
}

/// Lines of `text` containing any of `secrets` (case-insensitively: signing lower-cases).
pub(super) fn lines_with_secrets<'a>(text: &'a str, secrets: &[&str]) -> Vec<&'a str> {
    text.lines()
        .filter(|line| {
            let lower = line.to_lowercase();
            secrets.iter().any(|s| lower.contains(&s.to_lowercase()))
        })
        .collect()
}

/// A signed `/client/api` query for `params` (+ `apikey`, `response=json`).
fn signed_query(params: &[(&str, &str)], api_key: &str, secret_key: &str) -> String {
    let mut all: Vec<(&str, &str)> = params.to_vec();
    all.push(("apikey", api_key));
    all.push(("response", "json"));
    let signature = cloudstack::sign::signature(secret_key, all.iter().copied());
    all.push(("signature", &signature));
    let query = all
        .iter()
        .map(|(k, v)| format!("{k}={}", cloudstack::sign::encode_value(v)))
        .collect::<Vec<_>>()
        .join("&");
    format!("/client/api?{query}")
}

/// `expires` `secs` from now (negative: in the past), in the format every version accepts.
fn expires_in(secs: i64) -> String {
    let at = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(secs);
    at.strftime("%Y-%m-%dT%H:%M:%S%z").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulator_rejects_tampered_expired_and_unknown_key_requests() {
    if common::skip_in_remote_mode("checks the simulator's signature handling and call log") {
        return;
    }
    let rig = Rig::start(Scenario::small()).await;
    let (key, secret) = rig.sim.credentials(common::ACCOUNT).expect("alice");
    let (key, secret) = (key.expose().to_string(), secret.expose().to_string());
    let addr = rig.sim.addr();
    let send = |path: String| async move { raw_http::get(addr, &path).await.expect("an answer") };

    // A valid request, signature version 3 with an expiry 2 s ahead.
    let expires = expires_in(2);
    let fresh: Vec<(&str, &str)> = vec![
        ("command", "listZones"),
        ("signatureversion", "3"),
        ("expires", &expires),
    ];
    let valid = signed_query(&fresh, &key, &secret);
    let ok = send(valid.clone()).await;
    assert_eq!(ok.status, 200, "{}", ok.body);
    assert!(ok.body.contains("zone1"), "{}", ok.body);

    // Tampered: a parameter added after signing, or a value changed.
    let tampered_add = format!("{valid}&name=zone1");
    let tampered_value = valid.replace("listZones", "listNetworks");
    // Unknown key, and a known key signed with the wrong secret.
    let unknown_key = signed_query(&[("command", "listZones")], "no-such-key", &secret);
    let wrong_secret = signed_query(&[("command", "listZones")], &key, "not-the-secret");
    // Expired at signing time.
    let past = expires_in(-60);
    let expired = signed_query(
        &[
            ("command", "listZones"),
            ("signatureversion", "3"),
            ("expires", &past),
        ],
        &key,
        &secret,
    );
    // No signature at all.
    let unsigned = format!("/client/api?command=listZones&apikey={key}&response=json");
    let mut rejected = 0;
    for (what, path) in [
        ("parameter added after signing", tampered_add),
        ("command changed after signing", tampered_value),
        ("unknown API key", unknown_key),
        ("wrong secret key", wrong_secret),
        ("expired", expired),
        ("unsigned", unsigned),
    ] {
        let reply = send(path).await;
        assert_eq!(reply.status, 401, "{what}: {}", reply.body);
        assert!(reply.body.contains(UNAUTHORIZED), "{what}: {}", reply.body);
        rejected += 1;
    }

    // Replay of the valid request once its expiry has passed.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let replay = send(valid).await;
    assert_eq!(replay.status, 401, "replayed after expiry: {}", replay.body);
    rejected += 1;

    let log = rig.sim.call_log();
    let refused: Vec<_> = log.iter().filter(|c| c.status == 401).collect();
    assert_eq!(refused.len(), rejected);
    assert!(
        refused.iter().all(|c| c.account.is_none()),
        "no account is credited: {refused:?}"
    );
    assert_eq!(rig.mutating_calls(), 0);
    println!(
        "signature summary: 1 accepted, {rejected} rejected with 401, calls {}",
        log.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_keys_at_start_are_one_line_and_corrected_keys_are_taken_up_without_a_restart() {
    if common::skip_in_remote_mode("needs a simulator account whose keys it alters") {
        return;
    }
    let (scenario, api_key, secret_key) = scenario_with_distinct_keys();
    let rig = Rig::start(scenario).await;
    let wrong_secret = "SkWrong0123456789abcdefABCDEF";
    let cases = [
        ("wrong-secret", api_key.as_str(), wrong_secret),
        (
            "wrong-api-key",
            "AkUnknown0123456789abcdefABCDEF",
            secret_key.as_str(),
        ),
    ];
    for (name, key, secret) in cases {
        let config = rig.cloud_config_with(name, key, secret);
        let mut ccm = Ccm::start(&rig, name, &config, &["-v=10"]);
        common::eventually("the refusal is said", Duration::from_secs(20), || async {
            ccm.output()
                .contains("refused the credentials")
                .then_some(())
        })
        .await;
        // A refused key is not a reason to exit: the Secret may be corrected any minute.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert!(ccm.running(), "{name}: lives on:\n{}", ccm.output());
        let output = ccm.output();
        // Above debug level, CloudStack's words are quoted by the line saying the keys were
        // refused, no other; one more line says the controllers wait for CloudStack.
        let quoted: Vec<&str> = output
            .lines()
            .filter(|l| {
                l.contains(UNAUTHORIZED) && !l.contains(" DEBUG ") && !l.contains(" TRACE ")
            })
            .collect();
        assert_eq!(quoted.len(), 1, "{name}: {quoted:#?}");
        assert!(
            quoted[0].contains("ERROR")
                && quoted[0].contains("refused the credentials")
                && quoted[0].contains("listApis"),
            "{name}: {}",
            quoted[0]
        );
        let waiting = output
            .lines()
            .filter(|l| l.contains("waiting for CloudStack"))
            .count();
        assert_eq!(waiting, 1, "{name}: one line says it waits:\n{output}");
        // The keys corrected in place: taken up, and the controllers start.
        rig.cloud_config_with(name, &api_key, &secret_key);
        common::eventually(
            "the corrected keys start it",
            Duration::from_secs(30),
            || async {
                ccm.output()
                    .contains("CloudStack answers; starting")
                    .then_some(())
            },
        )
        .await;
        assert!(ccm.running(), "{name}: the same process");
        let output = ccm.output();
        let leaked = lines_with_secrets(&output, &[key, secret, &api_key, &secret_key]);
        assert!(leaked.is_empty(), "{name}: keys in the output: {leaked:#?}");
        ccm.kill();
        println!("{name}: {}", quoted[0]);
    }
    assert_eq!(rig.mutating_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_in_logs_events_services_metrics_or_debug() {
    if common::skip_in_remote_mode("reads the fake API server's store and the simulator's call log")
    {
        return;
    }
    let (scenario, api_key, secret_key) = scenario_with_distinct_keys();
    let secrets = [api_key.as_str(), secret_key.as_str()];
    let rig = Rig::start(scenario).await;
    for vm in ["node-1", "node-2"] {
        rig.add_node(vm);
    }
    let cluster = rig.cluster();
    services::create(&cluster, lb_service("web", &[("TCP", 80, 30080)], &[]));
    services::create(&cluster, lb_service("gone", &[("TCP", 81, 30081)], &[]));
    let bad = [(
        "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol",
        "maybe",
    )];
    services::create(&cluster, lb_service("bad", &[("TCP", 82, 30082)], &bad));

    // 1. Working credentials, most verbose level, leader election on.
    let config = rig.cloud_config(common::ACCOUNT);
    let ccm = Ccm::start(&rig, "verbose", &config, &["-v=10", "--leader-elect=true"]);
    let up = super::poll(Duration::from_secs(30), || async {
        let web = services::get(&cluster, "web")?;
        let gone = services::get(&cluster, "gone")?;
        (services::is_converged(&web, &rig.sim) && services::is_converged(&gone, &rig.sim))
            .then_some(())
    })
    .await;
    assert!(
        up.is_some(),
        "Services converge:\n{}",
        tail(&ccm.output(), 30)
    );
    services::delete(&cluster, "gone");
    let deleted = super::poll(Duration::from_secs(20), || async {
        services::get(&cluster, "gone").is_none().then_some(())
    })
    .await;
    assert!(deleted.is_some(), "the deleted Service goes away");
    let metrics = ccm.metrics().await;
    assert!(metrics.contains("cloudstack_api_calls_total"), "{metrics}");
    drop(ccm);

    // 2. Failing credentials at run time: the version is configured, so the start does
    // not call CloudStack and every reconcile meets the 401.
    let wrong = rig.write_file(
        "cloud-config-failing",
        &format!(
            "[Global]\napi-url = {}\napi-key = {api_key}\nsecret-key = SkWrongRuntime42\nversion = 4.19.1.0\n",
            rig.sim.api_url()
        ),
    );
    services::create(&cluster, lb_service("later", &[("TCP", 83, 30083)], &[]));
    let failing = Ccm::start(&rig, "failing", &wrong, &["-v=10"]);
    let refused = super::poll(Duration::from_secs(20), || async {
        rig.sim
            .call_log()
            .iter()
            .any(|c| c.status == 401)
            .then_some(())
    })
    .await;
    assert!(
        refused.is_some(),
        "the failing CCM meets the 401:\n{}",
        tail(&failing.output(), 30)
    );
    let failure_event = super::poll(Duration::from_secs(20), || async {
        cluster.events().into_iter().find(|e| {
            e.to_string().contains("SyncLoadBalancerFailed") && e.to_string().contains("later")
        })
    })
    .await;
    let failing_metrics = failing.metrics().await;
    drop(failing);

    // Everything the outside world can read.
    let logs = format!(
        "{}\n{}",
        std::fs::read_to_string(rig.path("verbose.log")).unwrap_or_default(),
        std::fs::read_to_string(rig.path("failing.log")).unwrap_or_default()
    );
    let events: Vec<String> = cluster.events().iter().map(|e| e.to_string()).collect();
    let objects: Vec<String> = services::list(&cluster)
        .iter()
        .map(|s| s.to_string())
        .collect();
    let leaked_logs = lines_with_secrets(&logs, &secrets);
    let leaked_events: Vec<&String> = events
        .iter()
        .filter(|e| !lines_with_secrets(e, &secrets).is_empty())
        .collect();
    let leaked_objects: Vec<&String> = objects
        .iter()
        .filter(|o| !lines_with_secrets(o, &secrets).is_empty())
        .collect();
    let leaked_metrics = lines_with_secrets(&metrics, &secrets).len()
        + lines_with_secrets(&failing_metrics, &secrets).len();

    // Debug and Display of what the process builds from the keys.
    let config_text = format!(
        "[Global]\napi-url = {}\napi-key = {api_key}\nsecret-key = {secret_key}\n",
        rig.sim.api_url()
    );
    let cloud_config = CloudConfig::from_text(&config_text, |_| None).expect("cloud-config parses");
    let mut client_config =
        cloudstack::ClientConfig::new(rig.sim.api_url(), api_key.clone(), "SkWrongDebug42");
    client_config.max_retries = 0;
    let client = cloudstack::Client::new(client_config.clone()).expect("client");
    let error = client
        .server_version()
        .await
        .expect_err("wrong secret fails");
    let error_text = format!("{error:?}\n{error}");
    let debug = format!(
        "{cloud_config:?}\n{client_config:?}\n{client:?}\n{error_text}\n{:?}",
        anyhow::Error::new(error)
    );
    let leaked_debug = lines_with_secrets(&debug, &[&api_key, &secret_key, "SkWrongDebug42"]);

    println!(
        "secrets summary: log lines {} ({} bytes), events {}, Services {}, metrics lines {}; \
         lines with a key: logs {}, events {}, Services {}, metrics {leaked_metrics}, Debug/Display {}",
        logs.lines().count(),
        logs.len(),
        events.len(),
        objects.len(),
        metrics.lines().count() + failing_metrics.lines().count(),
        leaked_logs.len(),
        leaked_events.len(),
        leaked_objects.len(),
        leaked_debug.len(),
    );
    assert!(logs.lines().count() > 100, "verbose logs were captured");
    assert!(
        logs.contains("TRACE"),
        "the most verbose level logs at trace"
    );
    assert!(
        failure_event.is_some(),
        "a SyncLoadBalancerFailed Event for the 401:\n{}",
        tail(&logs, 20)
    );
    assert!(
        leaked_logs.is_empty(),
        "keys in {} log lines, e.g. {:#?}",
        leaked_logs.len(),
        &leaked_logs[..leaked_logs.len().min(5)]
    );
    assert!(
        leaked_events.is_empty(),
        "keys in Events: {leaked_events:#?}"
    );
    assert!(
        leaked_objects.is_empty(),
        "keys in Services: {leaked_objects:#?}"
    );
    assert_eq!(leaked_metrics, 0, "keys in /metrics");
    assert!(
        leaked_debug.is_empty(),
        "keys in Debug/Display: {leaked_debug:#?}"
    );
    assert!(debug.contains("401"), "the error names the 401: {debug}");
}

/// The last `n` lines of `text`.
pub(super) fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

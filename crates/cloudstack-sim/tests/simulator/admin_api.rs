//! `/sim/…` over HTTP (counters, call log, faults, VM lifecycle, dump) and the state file.

use crate::common;

use cloudstack::{
    AssociateIpAddress, CreateLoadBalancerRule, ListLoadBalancerRules, ListVirtualMachines,
    ListZones,
};
use cloudstack_sim::{Scenario, SimOptions, SimServer};
use common::{client, id_of, start};
use serde_json::{Value, json};

async fn get(url: String) -> Value {
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn counters_calls_and_reset() {
    let sim = start(Scenario::small()).await;
    let alice = client(&sim, "alice");
    alice.list_zones(&ListZones::default()).await.unwrap();
    alice.list_zones(&ListZones::default()).await.unwrap();
    alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(&sim, "networks", "net-vr")),
            ..Default::default()
        })
        .await
        .unwrap();
    let counts = get(format!("{}/counts", sim.admin_url())).await;
    assert_eq!(counts["listZones"], 2);
    assert_eq!(counts["associateIpAddress"], 1);
    assert!(counts["queryAsyncJobResult"].as_u64().unwrap() >= 1);
    assert_eq!(sim.mutating_calls(), 1);
    let calls = get(format!("{}/calls", sim.admin_url())).await;
    let associate = calls
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["command"] == "associateIpAddress")
        .unwrap();
    assert_eq!(
        (associate["account"].as_str(), associate["status"].as_u64()),
        (Some("alice"), Some(200))
    );
    assert!(associate["job_id"].is_string());
    let reset = reqwest::Client::new()
        .post(format!("{}/reset", sim.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(reset.status().as_u16(), 204);
    assert!(sim.call_counts().is_empty() && sim.call_log().is_empty());
}

#[tokio::test]
async fn faults_and_job_duration_over_http() {
    let sim = start(Scenario::small()).await;
    let http = reqwest::Client::new();
    let faults =
        json!({"errors": {"listZones": {"rate": 1.0, "code": 530}}, "latency_ms": {"*": 1}});
    assert_eq!(
        http.put(format!("{}/faults", sim.admin_url()))
            .json(&faults)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        204
    );
    assert_eq!(
        get(format!("{}/faults", sim.admin_url())).await["errors"]["listZones"]["code"],
        530
    );
    let err = client(&sim, "alice")
        .list_zones(&ListZones::default())
        .await
        .unwrap_err();
    assert_eq!(common::api_error(err).0, 530);
    let put = http
        .put(format!("{}/job-duration", sim.admin_url()))
        .json(&json!({"ms": 7}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status().as_u16(), 204);
    assert_eq!(sim.with_state(|s| s.settings.job_duration_ms), 7);
    let bad = http
        .put(format!("{}/job-duration", sim.admin_url()))
        .json(&json!({"seconds": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
}

#[tokio::test]
async fn vm_lifecycle_at_run_time() {
    let sim = start(Scenario::small()).await;
    let http = reqwest::Client::new();
    let alice = client(&sim, "alice");
    let spec = json!({"name": "node-9", "zone": "zone1", "offering": "small", "account": "alice",
                      "nics": [{"network": "net-vr", "ipv4": "10.1.1.99"}]});
    let added = http
        .post(format!("{}/vms", sim.admin_url()))
        .json(&spec)
        .send()
        .await
        .unwrap();
    assert_eq!(added.status().as_u16(), 201);
    let id = added.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let listed = alice
        .list_virtual_machines(&ListVirtualMachines {
            name: Some("node-9".into()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed[0].id.as_deref(), Some(id.as_str()));
    assert_eq!(
        http.post(format!("{}/vms/{id}/stop", sim.admin_url()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        204
    );
    let stopped = alice
        .list_virtual_machines(&ListVirtualMachines {
            id: Some(id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(stopped[0].state.as_deref(), Some("Stopped"));
    assert_eq!(
        http.delete(format!("{}/vms/{id}", sim.admin_url()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        204
    );
    assert!(
        alice
            .list_virtual_machines(&ListVirtualMachines {
                id: Some(id.clone()),
                ..Default::default()
            })
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        http.delete(format!("{}/vms/{id}", sim.admin_url()))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16(),
        404
    );
    let bad = http.post(format!("{}/vms", sim.admin_url())).json(&json!({"name": "x", "zone": "zone1", "offering": "nope", "nics": [{"network": "net-vr", "ipv4": "10.1.1.98"}]})).send().await.unwrap();
    assert_eq!(bad.status().as_u16(), 400);
    assert!(bad.text().await.unwrap().contains("field offering"));
}

#[tokio::test]
async fn admin_paths_are_not_api_commands() {
    let sim = start(Scenario::small()).await;
    let err = client(&sim, "alice")
        .call("dump", cloudstack::Params::new())
        .await
        .unwrap_err();
    assert_eq!(
        common::api_error(err).0,
        401,
        "not a command the server has"
    );
    let dump = get(format!("{}/dump", sim.admin_url())).await;
    assert_eq!(dump["vms"].as_array().unwrap().len(), 3);
    assert!(
        dump["lb_rules"].is_array()
            && dump["firewall_rules"].is_array()
            && dump["tags"].is_array()
            && dump["jobs"].is_array()
    );
}

#[tokio::test]
async fn state_file_survives_a_restart_and_resumes_pending_jobs() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let options = SimOptions {
        state_file: Some(dir.path().join("state.json")),
        ..SimOptions::default()
    };
    let first = SimServer::start_with(Scenario::small(), options.clone())
        .await
        .unwrap();
    let alice = client(&first, "alice");
    let ip = alice
        .associate_ip_address(&AssociateIpAddress {
            networkid: Some(id_of(&first, "networks", "net-vr")),
            ..Default::default()
        })
        .await
        .unwrap();
    first.set_job_duration(std::time::Duration::from_millis(300));
    let request = CreateLoadBalancerRule {
        name: "r-tcp-80".into(),
        algorithm: "roundrobin".into(),
        privateport: 30080,
        publicport: 80,
        publicipid: ip.id.clone(),
        openfirewall: Some(false),
        ..Default::default()
    };
    let pending = alice
        .create_load_balancer_rule_begin(&request)
        .await
        .unwrap();
    first.shutdown();

    let second = SimServer::start_with(Scenario::small(), options)
        .await
        .unwrap();
    let alice = client(&second, "alice");
    let rule = alice
        .create_load_balancer_rule_finish(&pending)
        .await
        .expect("the pending job completes after the restart");
    assert_eq!(rule.publicipid, ip.id);
    let rules = alice
        .list_load_balancer_rules(&ListLoadBalancerRules::default())
        .await
        .unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].state.as_deref(),
        Some("Add"),
        "created, not applied: no member"
    );
}

/// Counts the credential reports of a client.
#[derive(Default)]
struct CredentialReports {
    refused: std::sync::atomic::AtomicUsize,
    accepted: std::sync::atomic::AtomicUsize,
}

impl cloudstack::CallObserver for CredentialReports {
    fn on_call(&self, _: &str, _: &cloudstack::CallOutcome, _: std::time::Duration) {}
    fn on_job(&self, _: &str, _: bool, _: std::time::Duration) {}
    fn on_credentials(&self, change: &cloudstack::CredentialsChange<'_>) {
        use std::sync::atomic::Ordering::SeqCst;
        match change {
            cloudstack::CredentialsChange::Refused { errortext, .. } => {
                assert_eq!(
                    *errortext,
                    "unable to verify user credentials and/or request signature"
                );
                self.refused.fetch_add(1, SeqCst);
            }
            cloudstack::CredentialsChange::Accepted { .. } => {
                self.accepted.fetch_add(1, SeqCst);
            }
        }
    }
}

/// `POST /sim/accounts/{name}/keys` rotates the keys as `registerUserKeys` does: the old
/// keys answer 401 with CloudStack's text and the new ones work. A running client meets
/// the refusal once, holds its calls, and once it adopts the new keys polls the job it
/// started with the old ones to its end.
#[tokio::test]
async fn rotated_keys_refuse_the_old_ones_and_keep_jobs() {
    use std::sync::atomic::Ordering::SeqCst;
    let sim = start(Scenario::small()).await;
    sim.set_job_duration(std::time::Duration::from_millis(1500));
    let (old_key, old_secret) = sim.credentials("alice").unwrap();
    let reports = std::sync::Arc::new(CredentialReports::default());
    let mut config =
        cloudstack::ClientConfig::new(sim.api_url(), old_key.expose(), old_secret.expose());
    config.max_retries = 0;
    config.job_poll_initial = std::time::Duration::from_millis(20);
    config.job_poll_max = std::time::Duration::from_millis(50);
    config.credentials_probe_interval = std::time::Duration::from_secs(60);
    config.observer = Some(reports.clone());
    let running = cloudstack::Client::new(config).unwrap();
    assert_eq!(
        running.identify_account().await.unwrap().as_deref(),
        Some("alice")
    );
    let started = running
        .start_async(
            "associateIpAddress",
            cloudstack::Params::new().set("networkid", id_of(&sim, "networks", "net-vr")),
        )
        .await
        .expect("the job starts with the old keys");
    let waiter = running.clone();
    let jobid = started.jobid.clone();
    let job = tokio::spawn(async move { waiter.wait_job("associateIpAddress", &jobid).await });

    let reply = reqwest::Client::new()
        .post(format!("{}/accounts/alice/keys", sim.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let keys: Value = reply.json().await.unwrap();
    let (new_key, new_secret) = (
        keys["api_key"].as_str().unwrap().to_owned(),
        keys["secret_key"].as_str().unwrap().to_owned(),
    );
    assert!(new_key.len() >= 64 && new_key != old_key.expose());
    assert_ne!(new_secret, old_secret.expose());
    assert_eq!(
        sim.credentials("alice")
            .map(|(k, s)| (k.expose().to_owned(), s.expose().to_owned())),
        Some((new_key.clone(), new_secret.clone()))
    );

    // The old keys, exactly as CloudStack refuses them.
    let fresh_old = common::client_with_keys(&sim, old_key.expose(), old_secret.expose());
    let refused = fresh_old
        .list_zones(&ListZones::default())
        .await
        .expect_err("the old keys are refused");
    assert!(
        matches!(refused, cloudstack::Error::CredentialsRefused { .. }),
        "{refused}"
    );
    let raw = sim.call_log().last().cloned().unwrap();
    assert_eq!(raw.status, 401);
    assert_eq!(
        raw.error.as_deref(),
        Some("unable to verify user credentials and/or request signature")
    );

    // The running client meets the refusal (its job poll or this call), then holds.
    let _ = running.list_zones(&ListZones::default()).await;
    assert!(running.credentials_refused());
    // A job poll sent before the refusal was met may still be on its way to the log.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let sent = sim.call_log().len();
    for _ in 0..5 {
        let held = running.list_zones(&ListZones::default()).await.unwrap_err();
        assert!(held.is_refused_credentials(), "{held}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        sim.call_log().len(),
        sent,
        "held calls and polls are not sent"
    );
    assert_eq!(reports.refused.load(SeqCst), 1, "one report per refusal");
    assert!(!job.is_finished(), "the job wait goes on while refused");

    let new = common::client_with_keys(&sim, &new_key, &new_secret);
    assert_eq!(
        new.identify_account().await.unwrap().as_deref(),
        Some("alice")
    );
    running.adopt_credentials(&new);
    assert!(!running.credentials_refused());
    assert_eq!(reports.accepted.load(SeqCst), 1);
    let result = job
        .await
        .unwrap()
        .expect("the job started with the old keys ends, polled with the new ones");
    assert!(result.get("ipaddress").is_some(), "{result}");
    assert!(
        !running
            .list_zones(&ListZones::default())
            .await
            .unwrap()
            .is_empty()
    );
    let accounts = new
        .list_all::<Value>("listAccounts", "account", cloudstack::Params::new())
        .await
        .unwrap();
    assert_eq!(
        accounts.len(),
        1,
        "a user sees its own account: {accounts:?}"
    );
    assert!(!accounts[0].to_string().contains(&new_key));
    let admin = client(&sim, "admin");
    let own: Vec<Value> = admin
        .list_all("listAccounts", "account", cloudstack::Params::new())
        .await
        .unwrap();
    assert_eq!(
        own.len(),
        1,
        "an admin sees its own account unless listall: {own:?}"
    );
    let all: Vec<Value> = admin
        .list_all(
            "listAccounts",
            "account",
            cloudstack::Params::new().set("listall", true),
        )
        .await
        .unwrap();
    assert!(
        all.len() > 1 && all.iter().any(|a| a["name"] == "alice"),
        "{all:?}"
    );

    // Chosen keys, and an unknown account.
    let http = reqwest::Client::new();
    let chosen = http
        .post(format!("{}/accounts/alice/keys", sim.admin_url()))
        .json(&json!({"api_key": "AkChosen", "secret_key": "SkChosen"}))
        .send()
        .await
        .unwrap();
    assert_eq!(chosen.status().as_u16(), 200);
    assert!(
        common::client_with_keys(&sim, "AkChosen", "SkChosen")
            .list_zones(&ListZones::default())
            .await
            .is_ok()
    );
    let unknown = http
        .post(format!("{}/accounts/nobody/keys", sim.admin_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status().as_u16(), 404);
}

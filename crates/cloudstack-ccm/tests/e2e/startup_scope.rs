//! Start-up checks of the cloud-config's scope: a `project-id` or `zone` that names
//! nothing this account can see stops the real binary with one line naming the key,
//! before any controller runs — so a NotReady Node is never deleted for a VM that is
//! only outside a wrong scope.

use crate::common;
use crate::reliability;

use std::path::PathBuf;
use std::time::Duration;

use cloudstack_sim::Scenario;
use reliability::ccm::Ccm;
use reliability::rig::Rig;
use serde_json::json;

/// A cloud-config for alice with `extra` lines appended to `[Global]`.
fn config_with(rig: &Rig, name: &str, extra: &str) -> PathBuf {
    let (api_key, secret_key) = rig.sim.credentials(common::ACCOUNT).expect("alice");
    rig.write_file(
        &format!("cloud-config-{name}"),
        &format!(
            "[Global]\napi-url = {}\napi-key = \"{}\"\nsecret-key = \"{}\"\n{extra}",
            rig.sim.api_url(),
            api_key.expose(),
            secret_key.expose()
        ),
    )
}

/// Marks Node `name` NotReady.
fn set_not_ready(rig: &Rig, name: &str) {
    let not_ready = json!({ "status": { "conditions": [{
        "type": "Ready", "status": "False", "reason": "KubeletNotReady",
        "lastHeartbeatTime": "2026-01-01T00:00:00Z",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    rig.cluster()
        .patch(
            "nodes",
            None,
            name,
            fake_apiserver::PatchType::Merge,
            &not_ready,
            true,
        )
        .expect("node status set");
}

/// Starts the binary with `config`, waits for it to exit and returns its output.
fn failed_start(rig: &Rig, name: &str, config: &std::path::Path) -> String {
    let mut ccm = Ccm::start(rig, name, config, &[]);
    let status = ccm
        .wait_exit(Duration::from_secs(30))
        .unwrap_or_else(|| panic!("{name}: still running: {}", ccm.output()));
    assert!(!status.success(), "{name}: must fail: {}", ccm.output());
    ccm.output()
}

/// The last line of `output`, which must be the error, and must name `key`.
fn assert_error_names(output: &str, key: &str) {
    let last = output.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("cloudstack-ccm: error: ")
            && last.contains(&format!("cloud-config {key}")),
        "the last line must be one error naming {key}: {output}"
    );
    let errors = output
        .lines()
        .filter(|line| line.to_ascii_lowercase().contains("error"))
        .count();
    assert_eq!(errors, 1, "one error line, not a chain: {output}");
    assert!(
        !output.contains("controllers started"),
        "no controller may run: {output}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_id_the_account_cannot_see_stops_the_start_naming_the_key() {
    let rig = Rig::start(Scenario::small()).await;
    rig.add_node("node-1");
    set_not_ready(&rig, "node-1");

    let unknown = config_with(
        &rig,
        "unknown-project",
        "project-id = 0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d\n",
    );
    let output = failed_start(&rig, "unknown-project", &unknown);
    assert_error_names(&output, "project-id");
    assert!(
        output.contains("0b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"),
        "{output}"
    );

    let malformed = config_with(&rig, "malformed-project", "project-id = proj1\n");
    let output = failed_start(&rig, "malformed-project", &malformed);
    assert_error_names(&output, "project-id");

    assert!(
        rig.cluster().get("nodes", None, "node-1").is_ok(),
        "the NotReady Node is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_zone_stops_the_start_naming_the_key_and_the_known_zones() {
    let rig = Rig::start(Scenario::small()).await;
    let config = config_with(&rig, "unknown-zone", "zone = zone-9\n");
    let output = failed_start(&rig, "unknown-zone", &config);
    assert_error_names(&output, "zone");
    let last = output.lines().last().unwrap_or_default();
    assert!(
        last.contains("\"zone-9\"") && last.contains(cloudstack_sim::SMALL_ZONE),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_visible_project_and_zone_pass_the_check() {
    let rig = Rig::start(Scenario::small()).await;
    let project = rig.sim.with_state(|s| {
        s.projects
            .iter()
            .find(|p| p.name == cloudstack_sim::SMALL_PROJECT)
            .map(|p| p.id.clone())
            .expect("proj1")
    });
    let config = config_with(
        &rig,
        "good-scope",
        &format!(
            "project-id = {project}\nzone = {}\n",
            cloudstack_sim::SMALL_ZONE
        ),
    );
    let ccm = Ccm::start(&rig, "good-scope", &config, &[]);
    let started = reliability::poll(Duration::from_secs(30), || async {
        ccm.output().contains("controllers started").then_some(())
    })
    .await;
    assert!(started.is_some(), "{}", ccm.output());
}

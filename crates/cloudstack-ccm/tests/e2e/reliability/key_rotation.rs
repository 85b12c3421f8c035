//! Day two: keys rotated in CloudStack while the controller manager runs. The simulator
//! rotates the account's keys (the old ones answer 401 as CloudStack does); the
//! cloud-config then changes as kubelet updates a Secret volume (an atomic swap of the
//! `..data` symlink) or as a plain file is rewritten in place. The same process (same PID)
//! says once that the keys were refused, holds its calls (one probe every few seconds),
//! adopts the new keys within seconds, and serves the Services created meanwhile and
//! after. An invalid new cloud-config is refused and the running one keeps working;
//! `SIGHUP` asks for a reload. No key appears in the log.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::ccm::Ccm;
use super::credentials::{UNAUTHORIZED, lines_with_secrets, scenario_with_distinct_keys, tail};
use super::rig::Rig;
use super::services::{self, lb_service};

/// The line the controller manager logs when CloudStack refuses its keys.
const REFUSED_LINE: &str = "CloudStack refused the credentials of";
/// The line it logs when it adopted a new cloud-config.
const RELOADED_LINE: &str = "cloud-config reloaded";

/// A directory laid out as kubelet mounts a Secret volume (`AtomicWriter`): the file is
/// `cloud-config -> ..data/cloud-config`, `..data -> ..<version>`; an update writes a new
/// version directory, points `..data_tmp` at it and renames that over `..data`.
struct SecretVolume {
    dir: PathBuf,
    version: u32,
}

impl SecretVolume {
    fn new(dir: PathBuf, text: &str) -> SecretVolume {
        std::fs::create_dir_all(&dir).expect("volume directory");
        let mut volume = SecretVolume { dir, version: 0 };
        volume.write_version(text);
        std::os::unix::fs::symlink("..version-1", volume.dir.join("..data")).expect("..data");
        std::os::unix::fs::symlink("..data/cloud-config", volume.path()).expect("cloud-config");
        volume
    }

    /// The path the controller manager is given.
    fn path(&self) -> PathBuf {
        self.dir.join("cloud-config")
    }

    fn write_version(&mut self, text: &str) -> String {
        self.version += 1;
        let name = format!("..version-{}", self.version);
        std::fs::create_dir(self.dir.join(&name)).expect("version directory");
        std::fs::write(self.dir.join(&name).join("cloud-config"), text).expect("written");
        name
    }

    /// Kubelet's update: new version directory, `..data` swapped atomically, old removed.
    fn update(&mut self, text: &str) {
        let old = format!("..version-{}", self.version);
        let name = self.write_version(text);
        let tmp = self.dir.join("..data_tmp");
        std::os::unix::fs::symlink(&name, &tmp).expect("..data_tmp");
        std::fs::rename(&tmp, self.dir.join("..data")).expect("..data swapped");
        std::fs::remove_dir_all(self.dir.join(old)).expect("old version removed");
    }
}

/// A cloud-config for the simulator with these keys.
fn cloud_config_text(rig: &Rig, api_key: &str, secret_key: &str) -> String {
    format!(
        "[Global]\napi-url = {}\napi-key = \"{api_key}\"\nsecret-key = \"{secret_key}\"\n",
        rig.sim.api_url()
    )
}

/// The value of the metric line `name` (labels included) in `text`.
fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// Lines of `output` containing `fragment`.
fn count_lines(output: &str, fragment: &str) -> usize {
    output.lines().filter(|l| l.contains(fragment)).count()
}

/// Waits until the log of `ccm` has `count` lines containing `fragment`.
async fn wait_for_lines(ccm: &Ccm, fragment: &str, count: usize, timeout: Duration) -> bool {
    super::poll(timeout, || async {
        (count_lines(&ccm.output(), fragment) >= count).then_some(())
    })
    .await
    .is_some()
}

/// Waits until the Service `name` has its load balancer; returns how long that took.
async fn wait_served(rig: &Rig, name: &str, timeout: Duration) -> Option<Duration> {
    let started = Instant::now();
    let cluster = rig.cluster();
    super::poll(timeout, || async {
        let service = services::get(&cluster, name)?;
        services::is_converged(&service, &rig.sim).then_some(started.elapsed())
    })
    .await
}

/// One rotation: keys rotated in CloudStack, a Service created in the stale window, the
/// cloud-config updated by `update` after `stale_for`. Returns (calls refused with 401
/// during the window, window length, reload latency, time from the reload to the stale
/// Service served).
async fn rotate(
    rig: &Rig,
    ccm: &Ccm,
    episode: usize,
    stale_for: Duration,
    update: impl FnOnce(&str),
) -> (usize, Duration, Duration, Duration) {
    let calls_before = rig.sim.call_log().len();
    let (new_key, new_secret) = rig
        .sim
        .rotate_keys(common::ACCOUNT, None, None)
        .expect("keys rotated");
    let rotated = Instant::now();
    let stale = format!("stale-{episode}");
    services::create(
        &rig.cluster(),
        lb_service(
            &stale,
            &[("TCP", 90 + episode as i64, 30090 + episode as i64)],
            &[],
        ),
    );
    assert!(
        wait_for_lines(ccm, REFUSED_LINE, episode, Duration::from_secs(20)).await,
        "the refusal is logged:\n{}",
        tail(&ccm.output(), 30)
    );
    let ready = super::raw_http::get(ccm.addr, "/readyz")
        .await
        .map(|r| r.status);
    assert_eq!(
        ready,
        Some(200),
        "/readyz stays true: a restart would not help"
    );
    let refused_metrics = ccm.metrics().await;
    assert_eq!(
        metric(
            &refused_metrics,
            "cloudstack_ccm_cloudstack_credentials_refused"
        ),
        Some(1.0),
        "the gauge says the keys are refused"
    );
    tokio::time::sleep(stale_for.saturating_sub(rotated.elapsed())).await;
    let window = rotated.elapsed();
    let window_calls = rig.sim.call_log()[calls_before..].to_vec();
    let refused_calls = window_calls
        .iter()
        .filter(|call| call.status == 401)
        .count();
    assert_eq!(
        refused_calls,
        window_calls.len(),
        "every call of the window is refused"
    );
    println!(
        "calls while refused: {:?}",
        window_calls
            .iter()
            .map(|c| format!("+{}ms {}", c.at_ms - window_calls[0].at_ms, c.command))
            .collect::<Vec<_>>()
    );

    let text = cloud_config_text(rig, new_key.expose(), new_secret.expose());
    let changed = Instant::now();
    update(&text);
    assert!(
        wait_for_lines(ccm, RELOADED_LINE, episode, Duration::from_secs(10)).await,
        "the new keys are adopted within 10 s:\n{}",
        tail(&ccm.output(), 30)
    );
    let latency = changed.elapsed();
    let served = wait_served(rig, &stale, Duration::from_secs(30))
        .await
        .unwrap_or_else(|| panic!("{stale} served:\n{}", tail(&ccm.output(), 30)));
    (refused_calls, window, latency, served)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_keys_are_followed_through_a_secret_volume_and_a_rewrite_in_place() {
    if common::skip_in_remote_mode("rotates the simulator account's keys") {
        return;
    }
    let (scenario, api_key, secret_key) = scenario_with_distinct_keys();
    let rig = Rig::start(scenario).await;
    for vm in ["node-1", "node-2"] {
        rig.add_node(vm);
    }
    let cluster = rig.cluster();
    let mut volume = SecretVolume::new(
        rig.path("secret-volume"),
        &cloud_config_text(&rig, &api_key, &secret_key),
    );
    let mut ccm = Ccm::start(&rig, "rotation", &volume.path(), &[]);
    let pid = ccm.pid();
    services::create(&cluster, lb_service("before", &[("TCP", 80, 30080)], &[]));
    assert!(
        wait_served(&rig, "before", Duration::from_secs(30))
            .await
            .is_some(),
        "{}",
        tail(&ccm.output(), 30)
    );
    let before_ip =
        services::ingress_ip(&services::get(&cluster, "before").unwrap()).map(str::to_owned);

    // 1. Kubelet swaps the Secret volume's `..data` symlink.
    let stale_for = Duration::from_secs(12);
    let swap = rotate(&rig, &ccm, 1, stale_for, |text| volume.update(text)).await;
    // 2. A plain file rewritten in place (the file behind the symlink, same inode).
    let target = volume.dir.join("..data").join("cloud-config");
    let in_place = rotate(&rig, &ccm, 2, Duration::from_secs(6), |text| {
        std::fs::write(&target, text).expect("rewritten in place")
    })
    .await;

    services::create(&cluster, lb_service("after", &[("TCP", 81, 30081)], &[]));
    let after = wait_served(&rig, "after", Duration::from_secs(30)).await;
    let output = ccm.output();
    let metrics = ccm.metrics().await;
    let events: Vec<String> = cluster.events().iter().map(|e| e.to_string()).collect();
    let (final_key, final_secret) = rig.sim.credentials(common::ACCOUNT).unwrap();
    for (what, (refused, window, latency, served)) in
        [("..data swap", swap), ("in place", in_place)]
    {
        println!(
            "rotation by {what}: {refused} calls refused with 401 in a stale window of {window:.1?} \
             (one probe per 5 s), new keys adopted {latency:.1?} after the file changed, \
             the Service created in the window served {served:.1?} after that"
        );
    }
    println!(
        "Service created after the rotations served in {after:.1?}; {} log lines in all",
        output.lines().count()
    );

    assert!(ccm.running() && ccm.pid() == pid, "same process");
    assert!(after.is_some(), "served after:\n{}", tail(&output, 30));
    assert_eq!(
        services::ingress_ip(&services::get(&cluster, "before").unwrap()).map(str::to_owned),
        before_ip,
        "nothing released while refused"
    );
    assert!(services::is_converged(
        &services::get(&cluster, "before").unwrap(),
        &rig.sim
    ));
    for (refused, window, latency, _) in [swap, in_place] {
        assert!(
            latency < Duration::from_secs(10),
            "reload latency {latency:?}"
        );
        // Paced: the first refusals (calls already in flight) and one probe per 5 s.
        let allowed = 4 + (window.as_secs() / 5) as usize;
        assert!(refused <= allowed, "{refused} refused calls in {window:?}");
        assert!(
            refused > window.as_secs() as usize / 5,
            "probes go on: {refused} in {window:?}"
        );
    }
    assert_eq!(
        count_lines(&output, REFUSED_LINE),
        2,
        "one refusal line per rotation:\n{}",
        tail(&output, 40)
    );
    let repeated: Vec<&str> = output
        .lines()
        .filter(|l| l.contains("refused the credentials") && !l.contains(REFUSED_LINE))
        .collect();
    assert!(
        repeated.is_empty(),
        "no other line repeats it (no line per call or per retry): {repeated:#?}"
    );
    assert_eq!(
        count_lines(&output, UNAUTHORIZED),
        2,
        "CloudStack's 401 text quoted once per rotation"
    );
    assert!(
        output
            .lines()
            .filter(|l| l.contains(REFUSED_LINE))
            .all(|l| l.contains("ERROR") && l.contains("api-key") && l.contains("account alice")),
        "the line names the keys and the account"
    );
    assert_eq!(
        metric(&metrics, "cloudstack_ccm_cloudstack_credentials_refused"),
        Some(0.0)
    );
    assert_eq!(
        metric(
            &metrics,
            "cloudstack_ccm_cloud_config_reloads_total{result=\"applied\"}"
        ),
        Some(2.0),
        "{metrics}"
    );
    assert!(
        events.iter().any(|e| e.contains("stale-1")
            && e.contains("Warning")
            && e.contains("refused the credentials")),
        "a Warning Event on the Service waiting for keys"
    );
    let secrets = [
        api_key.as_str(),
        secret_key.as_str(),
        final_key.expose(),
        final_secret.expose(),
    ];
    let leaked = lines_with_secrets(&output, &secrets);
    assert!(leaked.is_empty(), "keys in the log: {leaked:#?}");
    let leaked_events: Vec<&String> = events
        .iter()
        .filter(|e| !lines_with_secrets(e, &secrets).is_empty())
        .collect();
    assert!(
        leaked_events.is_empty(),
        "keys in Events: {leaked_events:#?}"
    );
    assert_eq!(
        lines_with_secrets(&metrics, &secrets).len(),
        0,
        "keys in /metrics"
    );
    ccm.kill();
}

/// Writes `text` to `path` and waits for the log to say `expected` (one more time).
async fn write_and_expect(ccm: &Ccm, path: &Path, text: &str, expected: &str) {
    let seen = count_lines(&ccm.output(), expected);
    std::fs::write(path, text).expect("cloud-config written");
    assert!(
        wait_for_lines(ccm, expected, seen + 1, Duration::from_secs(10)).await,
        "{expected:?} within 10 s:\n{}",
        tail(&ccm.output(), 20)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_new_cloud_config_is_refused_and_the_running_one_keeps_working() {
    if common::skip_in_remote_mode("reads the controller manager's log") {
        return;
    }
    let (scenario, api_key, secret_key) = scenario_with_distinct_keys();
    let rig = Rig::start(scenario).await;
    rig.add_node("node-1");
    let cluster = rig.cluster();
    let valid = cloud_config_text(&rig, &api_key, &secret_key);
    let path = rig.write_file("cloud-config-reloaded", &valid);
    let mut ccm = Ccm::start(&rig, "invalid", &path, &[]);
    let pid = ccm.pid();
    services::create(&cluster, lb_service("one", &[("TCP", 80, 30080)], &[]));
    assert!(
        wait_served(&rig, "one", Duration::from_secs(30))
            .await
            .is_some()
    );

    let wrong_secret = "SkRefusedByCloudStack0123456789";
    let cases = [
        (
            valid.replace(&format!("\"{secret_key}\""), "\"unterminated"),
            "cloud-config not reloaded: cloud-config syntax error at line 4",
        ),
        (
            valid.replace(&format!("secret-key = \"{secret_key}\"\n"), ""),
            "required key secret-key is missing",
        ),
        (
            valid.replace(&secret_key, wrong_secret),
            "CloudStack refused the new api-key / secret-key",
        ),
        (
            format!(
                "{valid}ca-file = {}\n",
                rig.path("no-such-ca.pem").display()
            ),
            "cloud-config not reloaded: invalid CloudStack client configuration",
        ),
        (
            valid.replace(&rig.sim.api_url(), "http://127.0.0.1:9/client/api"),
            "cloud-config api-url changed",
        ),
    ];
    for (text, expected) in &cases {
        write_and_expect(&ccm, &path, text, expected).await;
    }
    // The running configuration keeps working.
    let ready = super::raw_http::get(ccm.addr, "/readyz")
        .await
        .map(|r| r.status);
    assert_eq!(ready, Some(200), "/readyz stays true");
    services::create(&cluster, lb_service("two", &[("TCP", 81, 30081)], &[]));
    let two = wait_served(&rig, "two", Duration::from_secs(30)).await;

    // SIGHUP asks for a reload (and no longer ends the process).
    std::fs::write(&path, &valid).expect("valid again");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let reloaded = count_lines(&ccm.output(), RELOADED_LINE);
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(hup.success());
    assert!(
        wait_for_lines(&ccm, RELOADED_LINE, reloaded + 1, Duration::from_secs(10)).await,
        "SIGHUP reloads:\n{}",
        tail(&ccm.output(), 20)
    );
    let output = ccm.output();
    let metrics = ccm.metrics().await;
    println!(
        "reload results: {}",
        metrics
            .lines()
            .filter(|l| l.starts_with("cloudstack_ccm_cloud_config_reloads_total"))
            .collect::<Vec<_>>()
            .join("; ")
    );
    assert!(ccm.running() && ccm.pid() == pid, "same process");
    assert!(
        two.is_some(),
        "served with the running keys:\n{}",
        tail(&output, 30)
    );
    assert_eq!(
        count_lines(&output, REFUSED_LINE),
        0,
        "the running keys were never refused"
    );
    for (result, count) in [
        ("invalid", 3.0),
        ("rejected", 1.0),
        ("restart_required", 1.0),
    ] {
        let name = format!("cloudstack_ccm_cloud_config_reloads_total{{result=\"{result}\"}}");
        assert_eq!(metric(&metrics, &name), Some(count), "{name}:\n{metrics}");
    }
    assert!(
        metric(
            &metrics,
            "cloudstack_ccm_cloud_config_reloads_total{result=\"applied\"}"
        )
        .is_some_and(|n| n >= 1.0)
    );
    let leaked = lines_with_secrets(&output, &[&api_key, &secret_key, wrong_secret]);
    assert!(leaked.is_empty(), "keys in the log: {leaked:#?}");
    ccm.kill();
}

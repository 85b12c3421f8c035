//! The real controller manager as a child process: the cloud-config and kubeconfig it
//! reads, its flags, and its resource usage read from `/proc/<pid>` before it is stopped.

use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The controller manager binary Cargo built for this benchmark (default features: the
/// `demo` subcommand with the simulator and the fake API server linked in).
const BUILT_BINARY: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

/// Runs another build of the controller manager when set, e.g. the shipped one
/// (`cargo build --release -p cloudstack-ccm --no-default-features`, as the image builds
/// it): its code is smaller, so its file-backed resident pages are fewer.
const BINARY_ENV: &str = "SCALE_CCM_BINARY";

/// The binary the scenarios run: [`BINARY_ENV`] when set, else [`BUILT_BINARY`].
fn binary() -> String {
    std::env::var(BINARY_ENV).unwrap_or_else(|_| BUILT_BINARY.to_owned())
}

/// Whether the scenarios run a binary given with [`BINARY_ENV`] (the image's build, for
/// the memory targets) rather than the bench's own default build.
pub fn runs_given_binary() -> bool {
    std::env::var_os(BINARY_ENV).is_some()
}

/// Runs the controller under a wrapper when set: the command (e.g. `heaptrack -o
/// /tmp/ccm`) is split on spaces and the binary and its arguments follow it. For heap
/// profiles; RSS and CPU figures are then the wrapper's process tree's, not comparable.
const WRAPPER_ENV: &str = "SCALE_CCM_WRAPPER";

/// Flags that change between scenarios; everything else is fixed (`--leader-elect=false`,
/// the health server on a free loopback port, `-v=0`).
#[derive(Debug, Clone)]
pub struct Flags {
    /// `--controllers`.
    pub controllers: String,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--service-resync-period`.
    pub service_resync_period: Duration,
    /// `--concurrent-service-syncs`.
    pub concurrent_service_syncs: u32,
}

impl Default for Flags {
    fn default() -> Self {
        Flags {
            controllers: "*".to_owned(),
            node_status_update_frequency: Duration::from_secs(300),
            node_monitor_period: Duration::from_secs(5),
            service_resync_period: Duration::from_secs(100),
            concurrent_service_syncs: 1,
        }
    }
}

/// Resource usage of the child at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    /// Peak resident set size (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// Current resident set size (`VmRSS`), KiB.
    pub rss_kib: u64,
    /// Of which anonymous memory (heap, stacks), KiB.
    pub rss_anon_kib: u64,
    /// Of which file-backed pages (the binary's code and data), KiB.
    pub rss_file_kib: u64,
    /// Threads.
    pub threads: u64,
    /// User + system CPU time, seconds.
    pub cpu_seconds: f64,
}

impl Usage {
    /// `peak … MiB, now … MiB (anon …, file …)`.
    pub fn rss_text(&self) -> String {
        let mib = |kib: u64| kib as f64 / 1024.0;
        format!(
            "peak {:.1} MiB, now {:.1} MiB (anon {:.1}, file {:.1})",
            mib(self.peak_rss_kib),
            mib(self.rss_kib),
            mib(self.rss_anon_kib),
            mib(self.rss_file_kib)
        )
    }
}

/// A running controller manager.
pub struct Ccm {
    child: tokio::process::Child,
    pid: u32,
    /// Where its stderr goes.
    pub log: PathBuf,
}

/// Writes the cloud-config (gcfg `[Global]`) pointing at the simulator.
pub fn write_cloud_config(
    dir: &Path,
    api_url: &str,
    api_key: &str,
    secret_key: &str,
) -> anyhow::Result<PathBuf> {
    let path = dir.join("cloud-config");
    let text =
        format!("[Global]\napi-url = {api_url}\napi-key = {api_key}\nsecret-key = {secret_key}\n");
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

impl Ccm {
    /// Starts the binary with `flags`; its log goes to `<dir>/ccm-<n>.log`.
    pub fn spawn(
        dir: &Path,
        cloud_config: &Path,
        kubeconfig: &Path,
        flags: &Flags,
    ) -> anyhow::Result<Ccm> {
        let log = next_log_path(dir);
        let stderr = std::fs::File::create(&log)
            .with_context(|| format!("creating the log file {}", log.display()))?;
        let port = free_port()?;
        let binary = binary();
        let wrapper = std::env::var(WRAPPER_ENV).unwrap_or_default();
        let mut wrapper = wrapper.split_whitespace();
        let mut command = match wrapper.next() {
            Some(program) => {
                let mut command = tokio::process::Command::new(program);
                command.args(wrapper).arg(&binary);
                command
            }
            None => tokio::process::Command::new(&binary),
        };
        // `SCALE_CCM_LOG=<directives>` turns on the child's detailed log (off by default:
        // logging costs CPU the measurements should not include).
        match std::env::var("SCALE_CCM_LOG") {
            Ok(directives) => command.env("RUST_LOG", directives),
            Err(_) => command.env_remove("RUST_LOG"),
        };
        // The image's environment (Dockerfile: `ENV MALLOC_ARENA_MAX=1`); a value set for
        // the bench is passed on instead, to compare.
        if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
            command.env("MALLOC_ARENA_MAX", "1");
        }
        let child = command
            .arg(format!("--cloud-config={}", cloud_config.display()))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg("--insecure-plain-http")
            .arg(format!("--controllers={}", flags.controllers))
            .arg(format!(
                "--node-status-update-frequency={}ms",
                flags.node_status_update_frequency.as_millis()
            ))
            .arg(format!(
                "--node-monitor-period={}ms",
                flags.node_monitor_period.as_millis()
            ))
            .arg(format!(
                "--service-resync-period={}ms",
                flags.service_resync_period.as_millis()
            ))
            .arg(format!(
                "--concurrent-service-syncs={}",
                flags.concurrent_service_syncs
            ))
            .arg("--v=0")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {binary}"))?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow::anyhow!("the controller manager exited at once"))?;
        Ok(Ccm { child, pid, log })
    }

    /// Fails when the process has exited (showing the end of its log).
    pub fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!(
                "the controller manager exited ({status}); last log lines:\n{}",
                self.log_tail(20)
            );
        }
        Ok(())
    }

    /// The CPU time of every thread of the process so far, in nanoseconds, from
    /// `/proc/<pid>/task/*/schedstat` (the scheduler's own accounting: nanosecond
    /// resolution, where `/proc/<pid>/stat`'s ticks are 10 ms). Threads that already ended
    /// are not counted; the runtime's workers live as long as the process.
    pub fn cpu_nanos(&self) -> anyhow::Result<u64> {
        let mut total = 0u64;
        for task in std::fs::read_dir(format!("/proc/{}/task", self.pid))
            .context("reading /proc/<pid>/task")?
        {
            let path = task?.path().join("schedstat");
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            total += text
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
        Ok(total)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Peak and current RSS and CPU time so far.
    pub fn usage(&self) -> anyhow::Result<Usage> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid))
            .context("reading /proc/<pid>/status")?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse::<u64>().ok())
                .unwrap_or_default()
        };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid))
            .context("reading /proc/<pid>/stat")?;
        // Fields after the command name (which may hold spaces) start at field 3 (state).
        let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
        let fields: Vec<&str> = after_name.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        // utime and stime are fields 14 and 15, i.e. indices 11 and 12 after the name.
        let cpu_ticks = ticks(11) + ticks(12);
        Ok(Usage {
            peak_rss_kib: field("VmHWM:"),
            rss_kib: field("VmRSS:"),
            rss_anon_kib: field("RssAnon:"),
            rss_file_kib: field("RssFile:"),
            threads: field("Threads:"),
            cpu_seconds: cpu_ticks as f64 / clock_ticks_per_second(),
        })
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops the process (SIGKILL; the benchmark needs no graceful shutdown) and reaps it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
        if std::env::var_os("SCALE_CCM_LOG").is_some() {
            // The run's directory goes away with it: keep the detailed log.
            let kept = std::env::temp_dir().join(format!("scale-ccm-{}.log", self.pid));
            if std::fs::copy(&self.log, &kept).is_ok() {
                eprintln!("controller manager log kept at {}", kept.display());
            }
        }
    }
}

fn next_log_path(dir: &Path) -> PathBuf {
    (1..)
        .map(|n| dir.join(format!("ccm-{n}.log")))
        .find(|p| !p.exists())
        .unwrap_or_else(|| dir.join("ccm.log"))
}

/// A loopback port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
    Ok(listener.local_addr()?.port())
}

/// `getconf CLK_TCK` (100 on Linux unless configured otherwise).
fn clock_ticks_per_second() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|v| *v > 0.0)
        .unwrap_or(100.0)
}

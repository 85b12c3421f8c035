//! The real `cloudstack-ccm` binary as a child process: started against a [`Rig`], its
//! stdout and stderr appended to one log file (which survives SIGKILL), killed with
//! SIGKILL or waited for.

use std::fs::OpenOptions;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::rig::Rig;

/// The binary under test.
pub const BINARY: &str = env!("CARGO_BIN_EXE_cloudstack-ccm");

/// A running (or exited) `cloudstack-ccm` process.
pub struct Ccm {
    child: Child,
    /// Where stdout and stderr go (appended across restarts of the same name).
    pub log: PathBuf,
    /// The health and metrics server.
    pub addr: SocketAddr,
}

/// The flags every test passes: our kubeconfig and cloud-config, a loopback metrics port
/// over plain HTTP (the secure port has its own tests in `secure_serving`),
/// no leader election, a short resync and a few concurrent syncs.
pub fn base_args(rig: &Rig, cloud_config: &Path, port: u16) -> Vec<String> {
    vec![
        "--cloud-provider=external-cloudstack".into(),
        format!("--cloud-config={}", cloud_config.display()),
        format!("--kubeconfig={}", rig.kubeconfig.display()),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        "--insecure-plain-http".into(),
        "--leader-elect=false".into(),
        "--service-resync-period=2s".into(),
        "--concurrent-service-syncs=4".into(),
        "--node-monitor-period=1s".into(),
    ]
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

impl Ccm {
    /// Starts the binary with [`base_args`] plus `extra` (which replaces a base flag of
    /// the same name), logging to `<name>.log` in the rig's directory.
    pub fn start(rig: &Rig, name: &str, cloud_config: &Path, extra: &[&str]) -> Ccm {
        let port = free_port();
        let flag = |arg: &str| arg.split('=').next().unwrap_or_default().to_string();
        let overridden: Vec<String> = extra.iter().map(|a| flag(a)).collect();
        let mut args = base_args(rig, cloud_config, port);
        args.retain(|a| !overridden.contains(&flag(a)));
        args.extend(extra.iter().map(|a| (*a).to_string()));
        Self::start_raw(rig, name, &args, port)
    }

    /// Starts the binary with exactly `args` (`port` is where it serves metrics, if it does).
    pub fn start_raw(rig: &Rig, name: &str, args: &[String], port: u16) -> Ccm {
        let log = rig.path(&format!("{name}.log"));
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log file opens");
        let stderr = file.try_clone().expect("log file handle");
        let child = Command::new(BINARY)
            .args(args)
            .env_remove("RUST_LOG")
            .env_remove("CLOUDSTACK_API_URL")
            .env_remove("CLOUDSTACK_API_KEY")
            .env_remove("CLOUDSTACK_SECRET_KEY")
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(stderr))
            .spawn()
            .expect("the binary starts");
        Ccm {
            child,
            log,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// SIGKILL, then reap.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Waits up to `timeout` for the process to exit on its own.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Everything the process (and earlier ones of the same name) wrote.
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET /metrics` of this process (empty when it does not answer).
    pub async fn metrics(&self) -> String {
        super::raw_http::get(self.addr, "/metrics")
            .await
            .map(|r| r.body)
            .unwrap_or_default()
    }
}

impl Drop for Ccm {
    fn drop(&mut self) {
        self.kill();
    }
}

//! Shared harness of the reliability tests: a simulator (with a state file) and a fake
//! API server that outlive any number of `cloudstack-ccm` child processes, Service
//! builders over the fake cluster's store, an audit of what the simulator holds against
//! the Services that exist, and raw HTTP for signature checks.
//! The tests themselves are the modules without `pub`; they reuse the shared e2e helpers
//! of [`crate::common`].

pub mod audit;
pub mod ccm;
pub mod in_process;
pub mod raw_http;
pub mod rig;
pub mod services;

mod bad_input;
mod crash;
mod credentials;
mod failover;
mod faults;
mod key_rotation;
mod outage;
mod startup_outage;

use std::time::Duration;

/// Reads a count from the environment (`CRASH_KILLS=500`), else `default`.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The seed of a randomised test: `$name` when set, else a fresh one. Printed so a
/// failure can be replayed.
pub fn seed(name: &str) -> u64 {
    let seed = std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    println!("seed: {name}={seed}");
    seed
}

/// Polls `probe` every 25 ms until it returns `Some`, at most `timeout`; `None` after.
pub async fn poll<T, F, Fut>(timeout: Duration, mut probe: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    tokio::time::timeout(timeout, async {
        loop {
            if let Some(found) = probe().await {
                return found;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
    .ok()
}

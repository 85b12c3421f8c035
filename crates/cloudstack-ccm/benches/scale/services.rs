//! What the load-balancer scenarios share: a cloud with N initialised Nodes and the
//! controller manager running, a burst of S Services created at once with the time each
//! one takes to get `status.loadBalancer.ingress`, quiet detection, and LB membership
//! checks against the simulator's state.

use crate::calls::Calls;
use crate::ccm::{Ccm, Flags};
use crate::cloud::CloudModel;
use crate::report::Row;
use crate::rig::{Rig, ingress_ip, poll_until, service_name};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// A cloud with N VMs whose Nodes are already initialised, and a running controller manager.
pub struct LbWorld {
    /// Simulator and fake API server.
    pub rig: Rig,
    /// The controller manager.
    pub ccm: Ccm,
    /// Its flags (to restart it alike).
    pub flags: Flags,
}

impl LbWorld {
    /// Starts the cloud, creates `model.vms` initialised Nodes and starts the controller
    /// manager; returns once it watches Nodes and Services and its start-up calls are over.
    pub async fn start(model: CloudModel, flags: Flags) -> anyhow::Result<LbWorld> {
        Self::start_on(Rig::start(model).await?, model, flags).await
    }

    /// [`LbWorld::start`] on a started `rig` of `model`.
    pub async fn start_on(rig: Rig, model: CloudModel, flags: Flags) -> anyhow::Result<LbWorld> {
        rig.create_nodes(1..=model.vms, true)?;
        let ccm = rig.start_ccm(&flags, &["nodes", "services"]).await?;
        let world = LbWorld { rig, ccm, flags };
        world
            .wait_quiet(Duration::from_millis(500), Duration::from_secs(30))
            .await;
        Ok(world)
    }

    /// Stops the controller manager and starts a new one with the same flags.
    pub async fn restart(self) -> anyhow::Result<LbWorld> {
        let LbWorld { rig, ccm, flags } = self;
        ccm.stop().await;
        let ccm = rig.start_ccm(&flags, &["nodes", "services"]).await?;
        Ok(LbWorld { rig, ccm, flags })
    }

    /// Waits until no CloudStack call arrived for `quiet` (at most `timeout`); true if so.
    pub async fn wait_quiet(&self, quiet: Duration, timeout: Duration) -> bool {
        let mut last_total = Calls::read(&self.rig.sim).total();
        let mut last_change = Instant::now();
        poll_until(timeout, Duration::from_millis(100), || {
            let total = Calls::read(&self.rig.sim).total();
            if total != last_total {
                last_total = total;
                last_change = Instant::now();
            }
            let done = last_change.elapsed() >= quiet;
            async move { done.then_some(()) }
        })
        .await
        .is_some()
    }

    /// Creates Services `svc-<i>` for `indexes` with `ports` ports each, all at once, and
    /// waits (at most `timeout`) for their ingress.
    pub async fn burst(
        &self,
        indexes: std::ops::RangeInclusive<usize>,
        ports: usize,
        timeout: Duration,
    ) -> anyhow::Result<Burst> {
        let started = Instant::now();
        let started_ms = cloudstack_sim::jobs::now_ms();
        let names: BTreeSet<String> = indexes.clone().map(service_name).collect();
        for index in indexes {
            self.rig.create_service(index, ports)?;
        }
        let mut ready: BTreeMap<String, Duration> = BTreeMap::new();
        let every = Duration::from_millis(if names.len() > 100 { 50 } else { 20 });
        poll_until(timeout, every, || {
            let now = started.elapsed();
            if let Ok(services) = self.rig.list("services") {
                for service in &services {
                    let name = service["metadata"]["name"].as_str().unwrap_or_default();
                    if names.contains(name) && ingress_ip(service).is_some() {
                        ready.entry(name.to_owned()).or_insert(now);
                    }
                }
            }
            let all = ready.len() == names.len();
            async move { all.then_some(()) }
        })
        .await;
        Ok(Burst {
            expected: names.len(),
            ready: ready.into_values().collect(),
            started_ms,
            elapsed: started.elapsed(),
        })
    }

    /// Whether every LB rule of the simulator has exactly the VMs of `nodes` (by name) as
    /// members, and there are `rules` rules.
    pub fn members_match(&self, nodes: &BTreeSet<String>, rules: usize) -> bool {
        self.rig.sim.with_state(|state| {
            let ids: BTreeSet<&str> = state
                .vms
                .iter()
                .filter(|vm| nodes.contains(&vm.name))
                .map(|vm| vm.id.as_str())
                .collect();
            state.lb_rules.len() == rules
                && state.lb_rules.iter().all(|rule| {
                    rule.members.len() == ids.len()
                        && rule.members.iter().all(|m| ids.contains(m.vm_id.as_str()))
                })
        })
    }
}

/// The outcome of a burst of Service creations.
#[derive(Debug, Clone)]
pub struct Burst {
    /// Services created.
    pub expected: usize,
    /// Time to ingress of each Service that got one.
    pub ready: Vec<Duration>,
    /// When the burst started, ms since the epoch (to select its jobs).
    pub started_ms: u64,
    /// Time until the last ingress or the timeout.
    pub elapsed: Duration,
}

impl Burst {
    /// Whether every Service got its ingress.
    pub fn complete(&self) -> bool {
        self.ready.len() == self.expected
    }

    /// The row of a scenario whose setup was this burst and did not complete (`None` when
    /// it did): how many Services got their ingress.
    pub fn setup_failure(&self, scenario: &str, size: &str) -> Option<Row> {
        (!self.complete()).then(|| {
            Row::failed(
                scenario,
                size,
                "setup",
                format!(
                    "{}/{} Services got ingress",
                    self.ready.len(),
                    self.expected
                ),
            )
        })
    }

    /// The `q` quantile (0..=1) of the time to ingress, seconds (nearest rank).
    pub fn quantile(&self, q: f64) -> f64 {
        let mut sorted: Vec<f64> = self.ready.iter().map(Duration::as_secs_f64).collect();
        sorted.sort_by(f64::total_cmp);
        if sorted.is_empty() {
            return f64::NAN;
        }
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
        sorted[rank - 1]
    }
}

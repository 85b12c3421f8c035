//! The simulated CloudStack of a run: one account, one isolated Virtual Router network with
//! N Running VMs (all load-balancer jobs queue on that network), a public IP pool sized
//! to the run, and the latency model (fixed delay per call, fixed async job duration, optional
//! per-account throttling).

use cloudstack_sim::{IpRange, Scenario, SimServer, Throttle, VmSpec};
use std::time::Duration;

/// The account the controller manager uses.
pub const ACCOUNT: &str = "alice";
/// The network every VM sits on.
pub const NETWORK: &str = cloudstack_sim::SMALL_NETWORK;
/// Prefix of VM (and Node) names.
pub const VM_PREFIX: &str = "node-";

/// The latency model and size of the simulated cloud.
#[derive(Debug, Clone, Copy)]
pub struct CloudModel {
    /// Running VMs created at start (`node-1…node-N`).
    pub vms: usize,
    /// Duration of one async job (jobs of one network run one at a time).
    pub job: Duration,
    /// Fixed delay added to every API call.
    pub call_latency: Duration,
    /// Requests per second per account when throttling is on.
    pub throttle_per_second: Option<u64>,
    /// Addresses in the zone's public IP range. Each new load balancer lists every free
    /// address of the zone once (its IP claim), so the range is kept to what a run needs
    /// instead of a size that would make that list dominate the run.
    pub public_ips: usize,
}

/// Public addresses of the default range: every scenario's Services (at most 1000) plus
/// headroom.
pub const DEFAULT_PUBLIC_IPS: usize = 1280;

impl CloudModel {
    /// `vms` VMs, 100 ms jobs, 5 ms per call, no throttling, [`DEFAULT_PUBLIC_IPS`]
    /// public addresses.
    pub fn new(vms: usize) -> Self {
        CloudModel {
            vms,
            job: Duration::from_millis(100),
            call_latency: Duration::from_millis(5),
            throttle_per_second: None,
            public_ips: DEFAULT_PUBLIC_IPS,
        }
    }

    /// With `count` public addresses (at least one).
    pub fn public_ips(mut self, count: usize) -> Self {
        self.public_ips = count.max(1);
        self
    }

    /// With a job duration.
    pub fn job(mut self, job: Duration) -> Self {
        self.job = job;
        self
    }

    /// With throttling at `per_second` requests per second per account.
    pub fn throttled(mut self, per_second: u64) -> Self {
        self.throttle_per_second = Some(per_second);
        self
    }

    /// The simulator scenario: the small scenario's accounts and networks, the VR network
    /// widened to a /16 so it holds 5000+ VMs, `public_ips` public addresses from
    /// 100.64.0.10, `vms` VMs on it.
    pub fn scenario(&self) -> Scenario {
        let mut scenario = Scenario::small();
        scenario.vms.clear();
        if let Some(network) = scenario.networks.iter_mut().find(|n| n.name == NETWORK) {
            network.cidr = "10.8.0.0/16".to_owned();
        }
        for zone in &mut scenario.zones {
            zone.public_ip_range = Some(IpRange {
                start: public_address(0),
                end: public_address(self.public_ips - 1),
            });
        }
        scenario.settings.job_duration_ms = millis(self.job);
        scenario.settings.call_latency_ms = millis(self.call_latency);
        scenario.settings.throttle = self.throttle_per_second.map(|max| Throttle {
            max,
            interval_secs: 1,
        });
        scenario.add_vms(NETWORK, VM_PREFIX, self.vms);
        scenario
    }

    /// A short label for tables (`job=100ms call=5ms`).
    pub fn label(&self) -> String {
        let mut label = format!(
            "job={}ms call={}ms",
            millis(self.job),
            millis(self.call_latency)
        );
        if let Some(rate) = self.throttle_per_second {
            label.push_str(&format!(" throttle={rate}/s"));
        }
        label
    }
}

/// Public address number `index` of the range (0-based, from 100.64.0.10, up to
/// 100.64.255.255).
fn public_address(index: usize) -> String {
    let offset = u32::try_from(index + 10).unwrap_or(u32::MAX).min(0xffff);
    format!("100.64.{}.{}", offset / 256, offset % 256)
}

/// Milliseconds of a duration, saturating.
pub fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Name of VM / Node number `index` (1-based), as [`Scenario::add_vms`] names them.
pub fn vm_name(index: usize) -> String {
    format!("{VM_PREFIX}{index}")
}

/// Adds one Running VM named `name` with address `10.9.x.y` on [`NETWORK`]; returns its id.
pub fn add_vm(sim: &SimServer, name: &str, index: usize) -> anyhow::Result<String> {
    let spec = VmSpec {
        id: None,
        name: name.to_owned(),
        state: "Running".to_owned(),
        zone: cloudstack_sim::SMALL_ZONE.to_owned(),
        offering: "small".to_owned(),
        nics: vec![cloudstack_sim::NicSpec {
            network: NETWORK.to_owned(),
            ipv4: format!("10.8.{}.{}", 200 + index / 250, 1 + index % 250),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: Some(ACCOUNT.to_owned()),
        project: None,
    };
    sim.add_vm(spec)
        .map_err(|e| anyhow::anyhow!("adding VM {name}: {e}"))
}

//! What a test reads of the doubles or the endpoints: the fake cluster's store, the
//! simulator's VMs, and the CloudStack and Kubernetes call counts (in both modes).

use std::collections::BTreeMap;

use cloudstack_sim::VmSpec;
use serde_json::Value;

use super::{ACCOUNT, Harness, Target};

impl Harness {
    /// Direct access to the fake cluster's store, counters and faults.
    pub fn cluster(&self) -> fake_apiserver::Cluster {
        self.apiserver.cluster()
    }

    /// Id of the simulator VM named `name` (in remote mode: of the environment's VM that
    /// stands for `name`, see [`Harness::vm`]).
    pub fn vm_id(&self, name: &str) -> String {
        if let Target::Remote(_) = &self.target {
            return self.vm(name).id;
        }
        self.sim
            .with_state(|state| {
                state
                    .vms
                    .iter()
                    .find(|vm| vm.name == name)
                    .map(|vm| vm.id.clone())
            })
            .unwrap_or_else(|| panic!("no VM named {name:?} in the simulator"))
    }

    /// Adds a Running VM named `name` on the small scenario's network with `ipv4`; returns its id.
    pub fn add_vm(&self, name: &str, ipv4: &str) -> String {
        self.sim
            .add_vm(vm_spec(name, ipv4))
            .unwrap_or_else(|e| panic!("adding VM {name}: {e}"))
    }

    /// Total CloudStack calls since start or the last [`Harness::reset_cloudstack_counts`].
    pub fn cloudstack_calls(&self) -> u64 {
        self.cloudstack_call_counts().values().sum()
    }

    /// `listVirtualMachines` calls since start or the last reset.
    pub fn list_vm_calls(&self) -> u64 {
        self.cloudstack_call_counts()
            .get("listVirtualMachines")
            .copied()
            .unwrap_or(0)
    }

    /// CloudStack calls per command since start or the last reset: the simulator's counters
    /// in process; in remote mode the controllers' client's own reports (a real server has
    /// no counters to ask, and other clients may share it).
    pub fn cloudstack_call_counts(&self) -> BTreeMap<String, u64> {
        match &self.target {
            Target::InProcess => self.sim.call_counts(),
            Target::Remote(remote) => remote.calls.counts(),
        }
    }

    /// Restarts the counts of [`Harness::cloudstack_call_counts`].
    pub fn reset_cloudstack_counts(&self) {
        match &self.target {
            Target::InProcess => self.sim.reset_counts(),
            Target::Remote(remote) => remote.calls.reset(),
        }
    }

    /// Kubernetes API requests with `verb` on `resource` (`nodes/status` for a subresource):
    /// the fake API server's counters in process; in remote mode the requests this process
    /// sent about objects of this test.
    pub fn kube_request_count(&self, verb: fake_apiserver::Verb, resource: &str) -> usize {
        match &self.target {
            Target::InProcess => self.cluster().request_count(verb, resource) as usize,
            Target::Remote(remote) => remote.requests.count(verb, resource, &remote.prefix),
        }
    }
}

/// The CloudStack calls that failed since `since_ms` (simulator clock): answers with an
/// error status, and async jobs that ended in failure, as `command: error`.
pub fn failing_calls(h: &Harness, since_ms: u64) -> Vec<String> {
    let mut failed: Vec<String> = h
        .sim
        .call_log()
        .into_iter()
        .filter(|call| call.at_ms >= since_ms && call.status >= 400)
        .map(|call| format!("{}: {}", call.command, call.error.unwrap_or_default()))
        .collect();
    h.sim.with_state(|state| {
        for job in &state.jobs {
            if job.created_ms >= since_ms && job.status == 2 {
                let text = job
                    .result
                    .as_ref()
                    .and_then(|r| r.get("errortext"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                failed.push(format!("{} (job): {text}", job.command));
            }
        }
    });
    failed
}

/// A VM on the small scenario's network (`net-vr`, zone `zone1`, offering `small`).
pub fn vm_spec(name: &str, ipv4: &str) -> VmSpec {
    VmSpec {
        id: None,
        name: name.to_string(),
        state: "Running".to_string(),
        zone: cloudstack_sim::SMALL_ZONE.to_string(),
        offering: "small".to_string(),
        nics: vec![cloudstack_sim::NicSpec {
            network: cloudstack_sim::SMALL_NETWORK.to_string(),
            ipv4: ipv4.to_string(),
            ipv6: None,
            isdefault: true,
        }],
        static_nat_ip: None,
        account: Some(ACCOUNT.to_string()),
        project: None,
    }
}

//! What the simulator saw: CloudStack calls by command (mutating vs read), bursts of calls
//! in the call log, and the async jobs with their queue times, from which the lower bounds
//! of load-balancer provisioning are computed.

use cloudstack_sim::SimServer;
use cloudstack_sim::jobs::Job;
use std::collections::BTreeMap;

/// Calls since the last reset.
#[derive(Debug, Clone, Default)]
pub struct Calls {
    /// Calls per command.
    pub by_command: BTreeMap<String, u64>,
}

impl Calls {
    /// The simulator's counters now.
    pub fn read(sim: &SimServer) -> Self {
        Calls {
            by_command: sim.call_counts(),
        }
    }

    /// The calls of the simulator's call log that arrived at or before `until_ms` (ms
    /// since the Unix epoch); the log must hold only the calls of interest (reset before).
    pub fn logged_until(sim: &SimServer, until_ms: u64) -> Self {
        let mut by_command = BTreeMap::new();
        for call in sim.call_log().iter().filter(|c| c.at_ms <= until_ms) {
            *by_command.entry(call.command.clone()).or_default() += 1;
        }
        Calls { by_command }
    }

    /// Every call.
    pub fn total(&self) -> u64 {
        self.by_command.values().sum()
    }

    /// Calls of state-changing commands.
    pub fn mutating(&self) -> u64 {
        self.by_command
            .iter()
            .filter(|(c, _)| cloudstack_sim::commands::is_mutating(c))
            .map(|(_, n)| n)
            .sum()
    }

    /// Read calls (`list*`, `query*`).
    pub fn reads(&self) -> u64 {
        self.total() - self.mutating()
    }

    /// `command×n` for every command, most frequent first.
    pub fn breakdown(&self) -> String {
        let mut items: Vec<(&String, &u64)> = self.by_command.iter().collect();
        items.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        items
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// How many bursts of `command` the call log holds: calls more than `gap_ms` apart start a
/// new burst (one burst per periodic refresh).
pub fn bursts(sim: &SimServer, command: &str, gap_ms: u64) -> usize {
    let mut times: Vec<u64> = sim
        .call_log()
        .iter()
        .filter(|c| c.command == command)
        .map(|c| c.at_ms)
        .collect();
    times.sort_unstable();
    let mut count = 0;
    let mut last: Option<u64> = None;
    for t in times {
        if last.is_none_or(|l| t.saturating_sub(l) > gap_ms) {
            count += 1;
        }
        last = Some(t);
    }
    count
}

/// The async jobs created at or after `since_ms` (ms since the epoch).
pub fn jobs_since(sim: &SimServer, since_ms: u64) -> Vec<Job> {
    sim.with_state(|state| {
        state
            .jobs
            .iter()
            .filter(|j| j.created_ms >= since_ms)
            .cloned()
            .collect()
    })
}

/// Jobs per command, `command×n`, most frequent first.
pub fn job_breakdown(jobs: &[Job]) -> String {
    let mut counts: BTreeMap<&str, u64> = BTreeMap::new();
    for job in jobs {
        *counts.entry(job.command.as_str()).or_default() += 1;
    }
    let mut items: Vec<_> = counts.into_iter().collect();
    items.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    items
        .iter()
        .map(|(c, n)| format!("{c}×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The longest chain of jobs in which each job was created only after the previous one
/// completed: how many job durations the controller actually waited in sequence.
pub fn observed_chain(jobs: &[Job]) -> usize {
    let mut sorted: Vec<&Job> = jobs.iter().collect();
    sorted.sort_by_key(|j| j.created_ms);
    let mut depth: Vec<usize> = Vec::with_capacity(sorted.len());
    for (i, job) in sorted.iter().enumerate() {
        let before = (0..i)
            .filter(|&k| {
                sorted[k]
                    .completed_ms
                    .is_some_and(|done| done <= job.created_ms)
            })
            .map(|k| depth[k])
            .max()
            .unwrap_or(0);
        depth.push(before + 1);
    }
    depth.into_iter().max().unwrap_or(0)
}

/// The dependent steps one Service cannot avoid: associate the IP, then create a rule on
/// it, then assign members to the rule (3 jobs; 2 when the IP already exists).
pub fn inherent_chain(jobs: &[Job]) -> usize {
    [
        "associateIpAddress",
        "createLoadBalancerRule",
        "assignToLoadBalancerRule",
    ]
    .iter()
    .filter(|c| jobs.iter().any(|j| j.command == **c))
    .count()
}

/// The fewest jobs `services` Services with `ports` ports need on one network: per Service
/// one IP association, and per port one rule and one member assignment.
pub fn fewest_jobs(services: usize, ports: usize) -> usize {
    services * (1 + 2 * ports)
}

/// How busy the network queues were while `jobs` ran: jobs that waited in a network's
/// queue, the time at least one job was running, and the span from the first job's
/// creation to the last one's completion (ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueUse {
    /// Jobs queued on a network (the rest run without waiting, e.g. tags).
    pub network_jobs: usize,
    /// Time with a job running.
    pub busy_ms: u64,
    /// From the first job's creation to the last completion.
    pub span_ms: u64,
}

/// The [`QueueUse`] of `jobs`.
pub fn queue_use(jobs: &[Job]) -> QueueUse {
    let mut intervals: Vec<(u64, u64)> = jobs
        .iter()
        .filter(|j| j.network_id.is_some())
        .filter_map(|j| Some((j.start_ms, j.completed_ms?)))
        .collect();
    intervals.sort_unstable();
    let mut busy = 0;
    let mut current: Option<(u64, u64)> = None;
    for (start, end) in intervals.iter().copied() {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                busy += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        busy += e - s;
    }
    let first = jobs.iter().map(|j| j.created_ms).min().unwrap_or(0);
    let last = jobs
        .iter()
        .filter_map(|j| j.completed_ms)
        .max()
        .unwrap_or(first);
    QueueUse {
        network_jobs: intervals.len(),
        busy_ms: busy,
        span_ms: last - first,
    }
}

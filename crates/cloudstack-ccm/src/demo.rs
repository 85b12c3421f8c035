//! `cloudstack-ccm demo`: a self-contained tour. It starts the CloudStack simulator and the
//! in-process Kubernetes API server, runs the real controllers against them, registers
//! three Nodes, creates a LoadBalancer Service, changes it and deletes it, and shows what
//! happens: one line per change observed in CloudStack (completed async jobs) or in
//! Kubernetes (Nodes, the Service, Events), then a summary per phase.

mod cloud_watch;
mod error;
mod kube_watch;
mod progress;
pub mod render;
pub mod scenario;
mod serve;
pub mod vpc;
mod world;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use cloudstack_sim::state::{LbRule, State};

use crate::cli::DemoArgs;
use crate::cloud::loadbalancer::vocabulary::default_lb_name;

pub use self::error::DemoError;
use self::progress::{Progress, WorldState};
use self::render::{Line, Mark, PhaseStats, Style, summary_table};
use self::scenario::{NAMESPACE, NODES, SERVICE};
use self::world::World;

/// What the demo measured.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// One entry per phase, in order.
    pub phases: Vec<PhaseStats>,
    /// From start to the end of the last phase.
    pub wall: Duration,
}

/// Runs the demo, printing the progress view to `out`.
pub async fn run(args: &DemoArgs, out: impl Write) -> Result<DemoReport, DemoError> {
    let mut progress = Progress::new(out, Style::detect(), args.timeout);
    let mut world = World::start().await?;
    let result = tour(&mut world, &mut progress, args).await;
    let result = match result {
        Ok(report) if args.serve => serve::serve(&mut world, &mut progress)
            .await
            .map(|()| report),
        other => other,
    };
    let stopped = world.stop().await;
    let report = result?;
    stopped?;
    Ok(report)
}

/// The phases, the summary and the verdict.
async fn tour<W: Write>(
    world: &mut World,
    progress: &mut Progress<W>,
    args: &DemoArgs,
) -> Result<DemoReport, DemoError> {
    let style = progress.style();
    progress.say(&format!(
        "cloudstack-ccm demo: CloudStack {} simulator at {} (zone {}, isolated network {}, VPC tier {}), \
         Kubernetes API server at {}; controllers cloud-node, cloud-node-lifecycle and service, leader election off",
        world.server_version,
        world.sim.api_url(),
        cloudstack_sim::SMALL_ZONE,
        cloudstack_sim::SMALL_NETWORK,
        cloudstack_sim::SMALL_TIER,
        world.apiserver.url()
    ))?;
    progress.say(&style.legend())?;
    let mut clock = PhaseClock::new(progress.start_ms(), Instant::now() - progress.elapsed());
    clock.finish(world, "start-up");

    progress.say(&style.heading("1. three kubelets register their Nodes"))?;
    for node in &NODES {
        world
            .apiserver
            .create("nodes", None, scenario::node_manifest(node))
            .map_err(kube_err("create", format!("Node {}", node.node)))?;
        progress.action(
            &format!("Node {} registered", node.node),
            &format!(
                "VM {}, taint node.cloudprovider.kubernetes.io/uninitialized",
                node.vm
            ),
        )?;
    }
    progress
        .wait_for(world, "nodes", "3 initialised Nodes", |s| {
            s.kube.initialised.len() == NODES.len()
        })
        .await?;
    clock.finish(world, "1. nodes");
    phase_calls(progress, &clock)?;

    progress.say(&style.heading("2. a LoadBalancer Service with two ports"))?;
    world
        .apiserver
        .create("services", Some(NAMESPACE), scenario::service_manifest())
        .map_err(kube_err("create", format!("Service {NAMESPACE}/{SERVICE}")))?;
    progress.action(
        &format!("Service {NAMESPACE}/{SERVICE} created"),
        "type LoadBalancer, ports 80/TCP, 443/TCP",
    )?;
    let created = progress
        .wait_for(
            world,
            "create",
            "ingress, 2 active rules with 3 members each, no job running",
            |s| !s.kube.ingress.is_empty() && rules_ready(s, 2, "tcp"),
        )
        .await?;
    clock.finish(world, "2. create");
    phase_calls(progress, &clock)?;
    let address = created
        .kube
        .ingress
        .first()
        .and_then(|entry| entry.split_whitespace().next())
        .unwrap_or_default()
        .to_string();

    progress.say(&style.heading("3. change it: PROXY protocol on, a third port"))?;
    let stored = world
        .apiserver
        .get("services", Some(NAMESPACE), SERVICE)
        .map_err(kube_err("read", format!("Service {NAMESPACE}/{SERVICE}")))?;
    world
        .apiserver
        .patch(
            "services",
            Some(NAMESPACE),
            SERVICE,
            fake_apiserver::PatchType::Merge,
            &scenario::service_change(&stored["spec"]["ports"]),
            false,
        )
        .map_err(kube_err("patch", format!("Service {NAMESPACE}/{SERVICE}")))?;
    progress.action(
        &format!("Service {NAMESPACE}/{SERVICE} changed"),
        "annotation cloudstack-load-balancer-proxy-protocol=true, port 9090/TCP added",
    )?;
    progress
        .wait_for(
            world,
            "change",
            "3 tcp-proxy rules with 3 members each, ingress ipMode Proxy",
            |s| {
                rules_ready(s, 3, "tcp-proxy") && s.kube.ingress.iter().any(|i| i.contains("Proxy"))
            },
        )
        .await?;
    clock.finish(world, "3. change");
    phase_calls(progress, &clock)?;

    if !args.serve {
        progress.say(&style.heading("4. delete it"))?;
        world
            .apiserver
            .delete("services", Some(NAMESPACE), SERVICE)
            .map_err(kube_err("delete", format!("Service {NAMESPACE}/{SERVICE}")))?;
        progress.action(
            &format!("Service {NAMESPACE}/{SERVICE} deleted"),
            "kubectl delete",
        )?;
        progress
            .wait_for(
                world,
                "delete",
                "the Service gone, its rules deleted and its IP released",
                |s| {
                    !s.kube.service_exists
                        && s.kube
                            .service_uid
                            .as_deref()
                            .is_some_and(|uid| rules_of(&s.cloud, uid).is_empty())
                        && ip_released(&s.cloud, &address)
                        && !jobs_running(&s.cloud)
                },
            )
            .await?;
        clock.finish(world, "4. delete");
        phase_calls(progress, &clock)?;
    }

    let wall = progress.elapsed();
    progress.say(&style.heading("summary"))?;
    progress.say(summary_table(&style, &clock.phases).trim_end())?;
    let verdict = if args.serve {
        format!(
            "converged in {:.1}s: 3 Nodes initialised, load balancer {address} created and changed",
            wall.as_secs_f64()
        )
    } else {
        format!(
            "converged in {:.1}s: 3 Nodes initialised, load balancer {address} created, changed and deleted; no rule or IP left behind",
            wall.as_secs_f64()
        )
    };
    progress.say(&format!("\n{}", style.verdict(true, &verdict)))?;
    Ok(DemoReport {
        phases: clock.phases,
        wall,
    })
}

/// Wraps an API server error with what the demo was doing.
fn kube_err(
    action: &'static str,
    object: String,
) -> impl FnOnce(fake_apiserver::ServerError) -> DemoError {
    move |source| DemoError::Kube {
        action,
        object,
        source: Box::new(source),
    }
}

/// The demo Service's rules (by its load-balancer name).
fn rules_of<'a>(state: &'a State, uid: &str) -> Vec<&'a LbRule> {
    let prefix = format!("{}-", default_lb_name(uid));
    state
        .lb_rules
        .iter()
        .filter(|rule| rule.name.starts_with(&prefix))
        .collect()
}

/// `count` active rules of `protocol`, each with every VM as a member, and no job running.
fn rules_ready(snapshot: &WorldState, count: usize, protocol: &str) -> bool {
    let Some(uid) = snapshot.kube.service_uid.as_deref() else {
        return false;
    };
    let rules = rules_of(&snapshot.cloud, uid);
    rules.len() == count
        && rules.iter().all(|rule| {
            rule.state == "Active" && rule.protocol == protocol && rule.members.len() == NODES.len()
        })
        && !jobs_running(&snapshot.cloud)
}

fn jobs_running(state: &State) -> bool {
    state.jobs.iter().any(|job| job.status == 0)
}

fn ip_released(state: &State, address: &str) -> bool {
    state
        .ips
        .iter()
        .find(|ip| ip.address == address)
        .is_none_or(|ip| ip.state == "Free")
}

/// Phase boundaries and their numbers.
struct PhaseClock {
    start_ms: u64,
    start: Instant,
    phases: Vec<PhaseStats>,
    calls: BTreeMap<String, u64>,
}

impl PhaseClock {
    fn new(start_ms: u64, start: Instant) -> PhaseClock {
        PhaseClock {
            start_ms,
            start,
            phases: Vec::new(),
            calls: BTreeMap::new(),
        }
    }

    /// Closes the current phase: its wall time, CloudStack calls and jobs, and how many
    /// calls CloudStack refused or jobs failed.
    fn finish(&mut self, world: &World, name: &str) {
        let end_ms = cloudstack_sim::jobs::now_ms();
        let (from, to) = (self.start_ms, end_ms);
        self.calls.clear();
        let (mut reads, mut mutating, mut failed) = (0, 0, 0);
        for call in world.sim.call_log() {
            if call.at_ms < from || call.at_ms >= to {
                continue;
            }
            if call.status >= 400 {
                failed += 1;
            }
            if cloudstack_sim::commands::is_mutating(&call.command) {
                mutating += 1;
                *self.calls.entry(call.command).or_default() += 1;
            } else {
                reads += 1;
            }
        }
        let (jobs, failed_jobs) = world.sim.with_state(|state| {
            let started: Vec<_> = state
                .jobs
                .iter()
                .filter(|job| job.created_ms >= from && job.created_ms < to)
                .collect();
            let failed = started.iter().filter(|job| job.status == 2).count();
            (started.len() as u64, failed as u64)
        });
        self.phases.push(PhaseStats {
            name: name.to_string(),
            wall: self.start.elapsed(),
            reads,
            mutating,
            jobs,
            failed: failed + failed_jobs,
        });
        self.start_ms = end_ms;
        self.start = Instant::now();
    }
}

/// Prints the numbers of the phase just closed and its mutating calls by command.
fn phase_calls<W: Write>(progress: &mut Progress<W>, clock: &PhaseClock) -> Result<(), DemoError> {
    let Some(phase) = clock.phases.last() else {
        return Ok(());
    };
    let commands: Vec<String> = clock
        .calls
        .iter()
        .map(|(command, n)| {
            if *n > 1 {
                format!("{command} x{n}")
            } else {
                command.clone()
            }
        })
        .collect();
    let text = format!(
        "converged in {:.2}s: {} CloudStack calls ({} read, {} mutating), {} async jobs, {} failed",
        phase.wall.as_secs_f64(),
        phase.reads + phase.mutating,
        phase.reads,
        phase.mutating,
        phase.jobs,
        phase.failed
    );
    let line = Line::new(progress.elapsed(), Mark::Note, text, commands.join(", "));
    progress.print(line)
}

//! The live progress view: polls the simulator and the API server every few milliseconds,
//! prints one line per observed change (offsets from the demo's start, never going
//! backwards), and waits — within the demo's deadline — for a phase to converge.

use std::io::Write;
use std::time::{Duration, Instant};

use cloudstack_sim::jobs::now_ms;
use cloudstack_sim::state::State;
use serde_json::Value;

use super::cloud_watch::CloudWatch;
use super::error::DemoError;
use super::kube_watch::{KubeView, KubeWatch};
use super::render::{Line, Mark, Style};
use super::scenario::{NAMESPACE, SERVICE};
use super::world::World;

/// How often the servers are looked at.
const POLL: Duration = Duration::from_millis(20);

/// What the demo saw at one instant.
#[derive(Debug, Clone)]
pub(crate) struct WorldState {
    /// The simulator's state.
    pub cloud: State,
    /// The demo's Kubernetes objects.
    pub kube: KubeView,
}

/// The progress view and its clock.
pub(crate) struct Progress<W: Write> {
    out: W,
    style: Style,
    started: Instant,
    start_ms: u64,
    deadline: Instant,
    timeout: Duration,
    cloud: CloudWatch,
    kube: KubeWatch,
    last_at: Duration,
}

impl<W: Write> Progress<W> {
    /// Starts the clock; every wait fails after `timeout` from now.
    pub fn new(out: W, style: Style, timeout: Duration) -> Progress<W> {
        let start_ms = now_ms();
        let started = Instant::now();
        Progress {
            out,
            style,
            started,
            start_ms,
            deadline: started + timeout,
            timeout,
            cloud: CloudWatch::new(start_ms),
            kube: KubeWatch::default(),
            last_at: Duration::ZERO,
        }
    }

    /// The demo's start, in ms since the Unix epoch (the simulator's clock).
    pub fn start_ms(&self) -> u64 {
        self.start_ms
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The styling in use.
    pub(crate) fn style(&self) -> Style {
        self.style
    }

    /// Prints a text as is (headings, tables).
    pub fn say(&mut self, text: &str) -> Result<(), DemoError> {
        writeln!(self.out, "{text}")?;
        self.out.flush()?;
        Ok(())
    }

    /// Prints a line, its offset clamped so the view never goes back in time.
    pub fn print(&mut self, mut line: Line) -> Result<(), DemoError> {
        line.at = line.at.max(self.last_at);
        self.last_at = line.at;
        let text = self.style.line(&line);
        self.say(&text)
    }

    /// Prints something the demo does now.
    pub fn action(&mut self, text: &str, detail: &str) -> Result<(), DemoError> {
        let line = Line::new(self.elapsed(), Mark::Action, text, detail);
        self.print(line)
    }

    /// Looks at both servers once and prints what changed.
    pub fn tick(&mut self, world: &World) -> Result<WorldState, DemoError> {
        let cloud = world.sim.with_state(State::clone);
        let nodes = world
            .apiserver
            .list("nodes", None)
            .map_err(|source| DemoError::Kube {
                action: "list",
                object: "Nodes".to_string(),
                source: Box::new(source),
            })?;
        let service = world
            .apiserver
            .get("services", Some(NAMESPACE), SERVICE)
            .ok();
        let events: Vec<Value> = world.apiserver.events();
        let mut lines = self.cloud.poll(&cloud);
        let at = self.elapsed();
        lines.extend(
            self.kube
                .poll(at, &nodes, service.as_ref(), &events, SERVICE),
        );
        lines.sort_by_key(|line| line.at);
        for line in lines {
            self.print(line)?;
        }
        Ok(WorldState {
            cloud,
            kube: self.kube.view().clone(),
        })
    }

    /// Ticks until `converged` holds; fails at the deadline naming `phase` and `what`, or
    /// as soon as the controllers stop.
    pub async fn wait_for(
        &mut self,
        world: &mut World,
        phase: &str,
        what: &str,
        converged: impl Fn(&WorldState) -> bool,
    ) -> Result<WorldState, DemoError> {
        loop {
            let snapshot = self.tick(world)?;
            if converged(&snapshot) {
                return Ok(snapshot);
            }
            world.check_controllers().await?;
            if Instant::now() >= self.deadline {
                return Err(DemoError::NotConverged {
                    phase: phase.to_string(),
                    waiting_for: what.to_string(),
                    timeout: self.timeout,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Ticks until `stop` completes (the `--serve` mode), printing what changes.
    pub(crate) async fn follow_until(
        &mut self,
        world: &mut World,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<(), DemoError> {
        tokio::pin!(stop);
        loop {
            self.tick(world)?;
            world.check_controllers().await?;
            tokio::select! {
                () = &mut stop => return Ok(()),
                () = tokio::time::sleep(POLL * 5) => {}
            }
        }
    }
}

//! The controller's side of CloudStack's per-network job queue.
//!
//! CloudStack runs the jobs of one network one at a time, in the order they were
//! submitted. A controller that submits everything at once makes every Service wait for
//! every other (the median Service is ready only at the end); one that runs a Service's
//! whole plan before the next Service starts leaves the network idle while it notices that
//! a job finished and prepares the next one. [`NetworkQueues`] sits in between:
//!
//! * at most `JOBS_IN_FLIGHT` of our jobs are submitted and unfinished per network: one
//!   running and one waiting behind it, so the network never idles while the owner of the
//!   running job notices its end, and a new job is never stuck behind a long backlog;
//! * a free place goes to the oldest plan (`PlanTicket`, taken when a plan starts) that
//!   has a job ready, so Services finish in the order they came; the place a finished job
//!   frees is kept for its own plan for half a run time (the job behind it runs
//!   meanwhile), so a younger plan that is waiting does not take it in the instant before
//!   the older plan submits its next job;
//! * only the oldest unfinished job is polled, at the moment it should end (the typical
//!   run time of its command on that network, learnt from the jobs seen so far), then in
//!   short steps; a job behind it polls only if the one ahead does not end within a few
//!   run times (say, a job that never finishes). This keeps `queryAsyncJobResult`
//!   calls to a few per job while noticing each end within a fraction of a job's time;
//! * while another of our jobs waits behind the head, the head is first polled a quarter
//!   of a run time after it should end: CloudStack starts the waiting job by itself, so
//!   noticing the head's end a little later idles nothing, and that poll almost always
//!   finds the job finished (one `queryAsyncJobResult` instead of two). A head with
//!   nothing behind it is polled when it should end: its end is what a Service waits for.
//!   Such a late poll tells only that the job ended before it, so the next head's start
//!   is assumed, and the next head is polled when it should end (which measures its end
//!   again): an error in the typical run time never adds up along a busy queue.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cloudstack::{AsyncStart, BackoffPacing, FINISHED_AT_FIRST_POLL_SHARE, JobPacing, Params};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Our submitted, unfinished jobs per network: one running, one queued behind it.
pub(crate) const JOBS_IN_FLIGHT: usize = 2;

/// Weight of the newest run time in the typical run time (exponential average).
const ESTIMATE_WEIGHT: f64 = 0.3;

/// The job queues of all networks.
#[derive(Debug, Default)]
pub struct NetworkQueues {
    queues: Mutex<HashMap<String, Arc<NetworkQueue>>>,
}

impl NetworkQueues {
    /// Enters the queue of `network_id` with a new plan: its jobs go before those of plans
    /// that enter later.
    pub(crate) fn enter(&self, network_id: &str) -> PlanTicket {
        let queue = self
            .queues
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(network_id.to_string())
            .or_default()
            .clone();
        let ticket = {
            let mut state = queue.lock();
            state.next_ticket += 1;
            state.next_ticket
        };
        PlanTicket { queue, ticket }
    }
}

/// One network's queue.
#[derive(Debug, Default)]
struct NetworkQueue {
    state: Mutex<QueueState>,
    /// Woken on every change of `state`.
    changed: Notify,
}

impl NetworkQueue {
    fn lock(&self) -> MutexGuard<'_, QueueState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a free place (the oldest waiting plan first, a place handed over to an
    /// older plan kept for it) and takes it.
    async fn take_place(self: &Arc<Self>, ticket: u64) -> JobPlace {
        let waiter = {
            let mut state = self.lock();
            state.next_waiter += 1;
            let waiter = (ticket, state.next_waiter);
            state.waiting.insert(waiter);
            waiter
        };
        // Leaves the waiting set however this future ends (also when it is dropped).
        let mut waiting = WaitingGuard {
            queue: self,
            waiter,
            armed: true,
        };
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let kept_until = {
                let mut state = self.lock();
                let kept_until = state.kept_for_an_older_plan(ticket);
                if kept_until.is_none()
                    && state.in_flight.len() < JOBS_IN_FLIGHT
                    && state.waiting.first() == Some(&waiter)
                {
                    state.waiting.remove(&waiter);
                    waiting.armed = false;
                    if state.handover.is_some_and(|h| h.ticket == ticket) {
                        state.handover = None;
                    }
                    state.next_job += 1;
                    let seq = state.next_job;
                    state.in_flight.push_back(InFlight {
                        seq,
                        ticket,
                        submitted: None,
                        running_at: None,
                        polled_late: false,
                    });
                    tracing::trace!(
                        ticket,
                        seq,
                        in_flight = state.in_flight.len(),
                        waiting = state.waiting.len(),
                        "job place taken"
                    );
                    drop(state);
                    self.changed.notify_waiters();
                    return JobPlace {
                        queue: self.clone(),
                        seq,
                    };
                }
                kept_until
            };
            match kept_until {
                Some(until) => {
                    let _ = tokio::time::timeout_at(until, notified).await;
                }
                None => notified.await,
            }
        }
    }
}

/// Removes a waiter that gave up.
struct WaitingGuard<'a> {
    queue: &'a NetworkQueue,
    waiter: (u64, u64),
    /// Still waiting (not yet given a place).
    armed: bool,
}

impl Drop for WaitingGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.queue.lock().waiting.remove(&self.waiter);
            self.queue.changed.notify_waiters();
        }
    }
}

#[derive(Debug, Default)]
struct QueueState {
    next_ticket: u64,
    next_waiter: u64,
    next_job: u64,
    /// Plans waiting for a place: (ticket, waiter), oldest plan first.
    waiting: BTreeSet<(u64, u64)>,
    /// Our jobs submitted (or being submitted) and not yet seen finished, oldest first.
    in_flight: VecDeque<InFlight>,
    /// When the job before the oldest in flight ended, as far as we can tell: the head
    /// cannot have started earlier.
    previous_end: Option<Instant>,
    /// `previous_end` was placed by a poll that found that job still running (not
    /// assumed from its typical run time).
    previous_end_placed: bool,
    /// Typical run time by command, learnt from finished jobs.
    run_times: HashMap<String, Duration>,
    /// A freed place kept for the plan whose job just finished.
    handover: Option<Handover>,
    /// The typical run time learnt last, of any command: the first guess for a command
    /// not seen yet on this network (jobs of one network cost alike).
    last_run_time: Option<Duration>,
}

/// The place a finished job freed, kept for its plan until `until`.
#[derive(Debug, Clone, Copy)]
struct Handover {
    ticket: u64,
    until: Instant,
}

/// The longest a freed place is kept for the plan whose job freed it.
const MAX_HANDOVER: Duration = Duration::from_secs(1);

impl QueueState {
    /// Until when a free place is kept for a plan older than `ticket`, if it is; an
    /// expired hand-over is dropped.
    fn kept_for_an_older_plan(&mut self, ticket: u64) -> Option<Instant> {
        let handover = self.handover?;
        if Instant::now() >= handover.until {
            self.handover = None;
            return None;
        }
        (handover.ticket < ticket).then_some(handover.until)
    }

    fn position(&self, seq: u64) -> Option<usize> {
        self.in_flight.iter().position(|job| job.seq == seq)
    }

    fn job_mut(&mut self, seq: u64) -> Option<&mut InFlight> {
        self.in_flight.iter_mut().find(|job| job.seq == seq)
    }

    /// The typical run time of `command`, or of the last command learnt.
    fn typical_run_time(&self, command: &str) -> Option<Duration> {
        self.run_times.get(command).copied().or(self.last_run_time)
    }

    /// Whether the head's start is measured, not assumed: it started at its own
    /// submission (the job before it had ended), or the end of the job before it was
    /// placed by a poll that found it running.
    fn head_start_measured(&self) -> bool {
        let Some(head) = self.in_flight.front() else {
            return false;
        };
        self.previous_end_placed
            || matches!(
                (self.previous_end, head.submitted),
                (Some(end), Some(submitted)) if submitted >= end
            )
            || (self.previous_end.is_none() && head.submitted.is_some())
    }

    /// When the head job `seq` started to run, as far as we can tell.
    fn head_started(&self, seq: u64) -> Option<Instant> {
        let head = self.in_flight.front().filter(|job| job.seq == seq)?;
        match (self.previous_end, head.submitted) {
            (Some(end), Some(submitted)) => Some(end.max(submitted)),
            (end, submitted) => end.or(submitted),
        }
    }
}

#[derive(Debug)]
struct InFlight {
    seq: u64,
    /// The plan it belongs to.
    ticket: u64,
    submitted: Option<Instant>,
    /// The last poll that found the job still running was sent then.
    running_at: Option<Instant>,
    /// Its first poll was put after its typical end on purpose (a job of ours waited
    /// behind it): finding it finished then says nothing of how long it ran.
    polled_late: bool,
}

/// A plan's place in the order of its network's queue.
#[derive(Debug)]
pub(crate) struct PlanTicket {
    queue: Arc<NetworkQueue>,
    ticket: u64,
}

impl Drop for PlanTicket {
    fn drop(&mut self) {
        // A plan that ended keeps no place.
        let mut state = self.queue.lock();
        if state.handover.is_some_and(|h| h.ticket == self.ticket) {
            state.handover = None;
            drop(state);
            self.queue.changed.notify_waiters();
        }
    }
}

impl PlanTicket {
    /// Waits for a place on the network, then submits `command`. The place is held until
    /// the job is waited for ([`QueuedJob::wait`]) or dropped.
    pub(crate) async fn submit(
        &self,
        client: &cloudstack::Client,
        command: &str,
        params: Params,
    ) -> Result<QueuedJob, cloudstack::Error> {
        let place = self.queue.take_place(self.ticket).await;
        place.wait_for_the_jobs_ahead_to_be_submitted().await;
        let start = client.start_async(command, params).await?;
        place.mark_submitted();
        Ok(QueuedJob {
            command: command.to_string(),
            start,
            place,
        })
    }

    /// Submits `command` and waits for its job: its `jobresult`.
    pub async fn run(
        &self,
        client: &cloudstack::Client,
        command: &str,
        params: Params,
    ) -> Result<Value, cloudstack::Error> {
        self.submit(client, command, params)
            .await?
            .wait(client)
            .await
    }
}

/// A submitted job holding its place on the network.
#[derive(Debug)]
pub(crate) struct QueuedJob {
    command: String,
    start: AsyncStart,
    place: JobPlace,
}

impl QueuedJob {
    /// The job id and the id of the entity it creates.
    pub fn start(&self) -> &AsyncStart {
        &self.start
    }

    /// Waits for the job (paced as the module describes) and frees its place.
    pub async fn wait(self, client: &cloudstack::Client) -> Result<Value, cloudstack::Error> {
        let config = client.config();
        let mut pacing = QueuePacing {
            queue: self.place.queue.clone(),
            seq: self.place.seq,
            command: self.command.clone(),
            behind_timeout: config.job_poll_max,
            fallback: BackoffPacing::new(config.job_poll_initial, config.job_poll_max),
            client_run_time: client.typical_job_run_time(&self.command),
            after_due: None,
            last_poll: None,
        };
        let result = client
            .wait_job_paced(&self.command, &self.start.jobid, &mut pacing)
            .await;
        if matches!(&result, Ok(_) | Err(cloudstack::Error::JobFailed { .. }))
            && let Some(run_time) = self.place.finished(&self.command, pacing.last_poll)
            && result.is_ok()
        {
            // What this network taught also guides the jobs waited for outside the
            // queues (tags), which would otherwise start from the client's backoff.
            client.learn_job_run_time(&self.command, run_time);
        }
        result
    }
}

/// A place in a network's queue; freed when dropped.
#[derive(Debug)]
struct JobPlace {
    queue: Arc<NetworkQueue>,
    seq: u64,
}

impl JobPlace {
    /// Waits until CloudStack has every job of ours ahead of this one (or they gave up),
    /// so its queue runs our jobs in the order of their places: two plans submitting at
    /// the same instant could otherwise reach it in the other order, and the job polled
    /// as the head would be the one waiting.
    async fn wait_for_the_jobs_ahead_to_be_submitted(&self) {
        loop {
            let notified = self.queue.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let state = self.queue.lock();
                let all_submitted = state
                    .in_flight
                    .iter()
                    .take_while(|job| job.seq != self.seq)
                    .all(|job| job.submitted.is_some());
                if all_submitted {
                    return;
                }
            }
            notified.await;
        }
    }

    fn mark_submitted(&self) {
        let mut state = self.queue.lock();
        if let Some(job) = state.job_mut(self.seq) {
            job.submitted = Some(Instant::now());
        }
        drop(state);
        self.queue.changed.notify_waiters();
    }

    /// The job was seen finished by the poll sent at `done_poll` (now if unknown). At the
    /// head, it ended between the last poll that found it running and that poll: that end
    /// is where the next job started, and the run time teaches the typical run time of
    /// `command`. When even the first poll found it finished, only "not longer than this"
    /// is known, which pulls the typical time down (the first poll comes earlier next
    /// time, until one finds the job running). Returns the run time sample learnt, if any
    /// (only the head's run time is known).
    fn finished(&self, command: &str, done_poll: Option<Instant>) -> Option<Duration> {
        let now = done_poll.unwrap_or_else(Instant::now);
        let mut state = self.queue.lock();
        let position = state.position(self.seq)?;
        let mut learnt = None;
        if position == 0
            && let Some(started) = state.head_started(self.seq)
        {
            let typical = state.typical_run_time(command);
            let running_at = state.in_flight[0].running_at.filter(|at| *at > started);
            let polled_late = state.in_flight[0].polled_late;
            let (end, sample) = match (running_at, typical) {
                (Some(running_at), _) => {
                    let end = running_at + (now - running_at) / 2;
                    (end, end - started)
                }
                // Found finished by a poll put late on purpose: it ended about when such
                // jobs end, and teaches nothing new (the typical time stays as it is).
                (None, Some(typical)) if polled_late => {
                    (started + typical.min(now - started), typical)
                }
                (None, _) => {
                    // Ended by the first poll, likely about when it typically ends; what
                    // is learnt is a little less than the wait, so the first poll comes
                    // a little earlier next time, until one finds a job still running.
                    let bound = now - started;
                    let ended_after = typical.map_or(bound, |typical| typical.min(bound));
                    (
                        started + ended_after,
                        bound.mul_f64(FINISHED_AT_FIRST_POLL_SHARE),
                    )
                }
            };
            let typical = match typical {
                Some(old) => old.mul_f64(1.0 - ESTIMATE_WEIGHT) + sample.mul_f64(ESTIMATE_WEIGHT),
                None => sample,
            };
            state.run_times.insert(command.to_string(), typical);
            state.last_run_time = Some(typical);
            state.previous_end = Some(end);
            state.previous_end_placed = running_at.is_some();
            learnt = Some(sample);
        }
        let job = state.in_flight.remove(position);
        // Its plan likely has a next job: keep the place for it while the job behind
        // runs, if a younger plan waits for it.
        if let Some(job) = job
            && state.waiting.iter().any(|(ticket, _)| *ticket > job.ticket)
            && let Some(run_time) = state.typical_run_time(command)
        {
            state.handover = Some(Handover {
                ticket: job.ticket,
                until: Instant::now() + (run_time / 2).min(MAX_HANDOVER),
            });
        }
        tracing::trace!(
            seq = self.seq,
            position,
            in_flight = state.in_flight.len(),
            waiting = state.waiting.len(),
            "queued job finished"
        );
        drop(state);
        self.queue.changed.notify_waiters();
        learnt
    }
}

impl Drop for JobPlace {
    fn drop(&mut self) {
        // A job not seen finished (its wait failed or was dropped): the one behind it is
        // taken to start now.
        let mut state = self.queue.lock();
        if let Some(position) = state.position(self.seq) {
            state.in_flight.remove(position);
            if position == 0 {
                state.previous_end = Some(Instant::now());
                state.previous_end_placed = false;
            }
            drop(state);
            self.queue.changed.notify_waiters();
        }
    }
}

mod pacing;

use pacing::QueuePacing;

#[cfg(test)]
mod tests;

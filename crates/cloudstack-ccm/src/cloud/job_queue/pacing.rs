//! When a queued job is polled: the head when its command typically ends (a quarter of
//! a run time later when our next job waits behind it and its start was measured), a job
//! behind the head when the head ends (see the parent module).

use super::*;

/// Later polls are this share of the typical run time apart (growing ×1.5).
const NEXT_POLL_SHARE: f64 = 0.1;

/// The shortest interval between two polls of one job.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// How much later than its typical end a head with a job of ours behind it is first
/// polled, as a share of its run time (the job behind runs meanwhile).
const FOLLOWED_HEAD_DELAY_SHARE: f64 = 0.25;

/// A job behind the head polls anyway after this many typical run times (the head's and
/// its own, with room to spare), at least `job_poll_max`: the head never ending is the
/// only reason, and the head's own polls find that first.
const BEHIND_RUN_TIMES: u32 = 3;

/// Polls a queued job: when it should end if it is the head, else when the job ahead ends.
pub(super) struct QueuePacing {
    pub(super) queue: Arc<NetworkQueue>,
    pub(super) seq: u64,
    pub(super) command: String,
    /// Longest wait for the job ahead before polling anyway.
    pub(super) behind_timeout: Duration,
    /// Pacing when nothing is known of the command's run time.
    pub(super) fallback: BackoffPacing,
    /// The client's typical run time of the command (learnt from the jobs it waited for
    /// outside the queues): the guess while this network has learnt none.
    pub(super) client_run_time: Option<Duration>,
    /// Interval of the polls after the due time (grows ×1.5).
    pub(super) after_due: Option<BackoffPacing>,
    /// When the last poll was sent.
    pub(super) last_poll: Option<Instant>,
}

/// Where a queued job stands.
enum Standing {
    /// Behind another of our jobs; jobs of its command typically run `run_time`.
    Behind { run_time: Option<Duration> },
    /// At the head since `started`, typically running `run_time`; `followed` when
    /// another of our jobs waits behind it.
    Head {
        started: Instant,
        run_time: Option<Duration>,
        followed: bool,
    },
    /// No longer tracked (should not happen while waiting): poll as usual.
    Unknown,
}

impl QueuePacing {
    fn place_still_running(&self, at: Instant) {
        let mut state = self.queue.lock();
        if let Some(job) = state.job_mut(self.seq) {
            job.running_at = Some(at);
        }
    }

    /// Records whether the first poll is put late on purpose.
    fn place_polled_late(&self, late: bool) {
        let mut state = self.queue.lock();
        if let Some(job) = state.job_mut(self.seq) {
            job.polled_late = late;
        }
    }

    fn standing(&self) -> Standing {
        let state = self.queue.lock();
        let run_time = state
            .typical_run_time(&self.command)
            .or(self.client_run_time);
        match state.position(self.seq) {
            Some(0) => match state.head_started(self.seq) {
                // A late first poll only where the start is measured: after a head
                // found finished by its late poll, the next is polled when it should
                // end, so an error of the typical time never adds up along the queue.
                Some(started) => Standing::Head {
                    started,
                    run_time,
                    followed: state.in_flight.len() > 1 && state.head_start_measured(),
                },
                None => Standing::Unknown,
            },
            Some(_) => Standing::Behind { run_time },
            None => Standing::Unknown,
        }
    }

    pub(super) async fn wait(&mut self) {
        let waiting_since = Instant::now();
        loop {
            let notified = self.queue.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            match self.standing() {
                Standing::Behind { run_time } => {
                    let patience = run_time.map_or(self.behind_timeout, |run_time| {
                        (run_time * BEHIND_RUN_TIMES).max(self.behind_timeout)
                    });
                    if tokio::time::timeout_at(waiting_since + patience, notified)
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                Standing::Head {
                    started,
                    run_time: Some(run_time),
                    followed,
                } => {
                    if let Some(after_due) = &mut self.after_due {
                        tokio::time::sleep(after_due.next_interval()).await;
                        return;
                    }
                    let due = if followed {
                        run_time.mul_f64(1.0 + FOLLOWED_HEAD_DELAY_SHARE)
                    } else {
                        run_time
                    };
                    // Until the first poll is due, a change of the queue (a job of ours
                    // joining behind this one, or the head's start placed anew) moves it.
                    if tokio::time::timeout_at(started + due, notified)
                        .await
                        .is_err()
                    {
                        let step = run_time.mul_f64(NEXT_POLL_SHARE).max(MIN_POLL_INTERVAL);
                        self.after_due = Some(BackoffPacing::new(step, self.behind_timeout));
                        self.place_polled_late(followed);
                        return;
                    }
                }
                Standing::Head { run_time: None, .. } | Standing::Unknown => {
                    tokio::time::sleep(self.fallback.next_interval()).await;
                    return;
                }
            }
        }
    }
}

impl JobPacing for QueuePacing {
    fn before_poll(&mut self, _attempt: u32) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Asked again: the last poll found the job running.
            if let Some(at) = self.last_poll {
                self.place_still_running(at);
            }
            self.wait().await;
            self.last_poll = Some(Instant::now());
        })
    }
}

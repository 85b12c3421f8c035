//! Async commands: the `{jobid}` / `{id, jobid}` start reply and `queryAsyncJobResult` polling.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::time::Instant;

use crate::envelope::{code_field, string_field};
use crate::types::{JOB_FAILED, JOB_SUCCEEDED};
use crate::{Client, Error, Params};

/// The immediate reply of an async command: the job id and, for create commands, the id of
/// the new entity (known before the job finishes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AsyncStart {
    /// Id of the entity being created (`BaseAsyncCreateCmd` replies only).
    pub id: Option<String>,
    /// The async job id.
    pub jobid: String,
}

/// Growth factor of the poll interval.
const POLL_GROWTH: f64 = 1.5;

/// Decides when a job is polled. [`Client::wait_job`] uses [`BackoffPacing`]; a caller
/// that knows more (e.g. that the job waits behind others on its network, and how long
/// jobs there take) passes its own to [`Client::wait_job_paced`].
pub trait JobPacing: Send {
    /// Waits until poll number `attempt` (0 for the first) is due.
    fn before_poll(&mut self, attempt: u32) -> BoxFuture<'_, ()>;
}

/// The default pacing: the first poll after `initial`, then ×1.5 up to `max`.
#[derive(Debug, Clone)]
pub struct BackoffPacing {
    interval: Duration,
    max: Duration,
}

impl BackoffPacing {
    /// Polls after `initial`, growing ×1.5 up to `max` (at least `initial`).
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            interval: initial,
            max: max.max(initial),
        }
    }

    /// The next interval, advancing the backoff.
    pub fn next_interval(&mut self) -> Duration {
        let interval = self.interval;
        self.interval = self.interval.mul_f64(POLL_GROWTH).min(self.max);
        interval
    }
}

impl JobPacing for BackoffPacing {
    fn before_poll(&mut self, _attempt: u32) -> BoxFuture<'_, ()> {
        let interval = self.next_interval();
        Box::pin(tokio::time::sleep(interval))
    }
}

/// Weight of the newest sample in a learnt run time (exponential average).
const RUN_TIME_WEIGHT: f64 = 0.3;

/// When the first poll already finds a job finished, its run time is only known to be at
/// most the wait; the sample is this share of it, so the first poll comes a little earlier
/// next time, until one finds a job still running.
pub const FINISHED_AT_FIRST_POLL_SHARE: f64 = 0.9;

/// A sample counts for at most this multiple of the run time known so far: one job that
/// hung behind a busy router must not delay the first poll of every job after it; a real
/// change of run time still shows within a few jobs.
const MAX_SAMPLE_GROWTH: f64 = 2.0;

/// After the due time, polls are this share of the learnt run time apart (growing ×1.5).
const AFTER_DUE_SHARE: f64 = 0.1;

/// The shortest interval between two polls of one job.
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Typical run time of each async command, learnt from the jobs [`Client::wait_job`]
/// waited for: the first poll of a job is due when its command typically ends, instead of
/// a backoff from `job_poll_initial` that polls a one-second job six times. A command not
/// seen yet takes the run time learnt last, of any command (a CloudStack's jobs cost
/// alike); before any job finished, the backoff is used.
#[derive(Debug, Default)]
pub(crate) struct JobRunTimes {
    learnt: Mutex<(HashMap<String, Duration>, Option<Duration>)>,
}

impl JobRunTimes {
    /// The typical run time of `command`, or of the command learnt last.
    fn typical(&self, command: &str) -> Option<Duration> {
        let learnt = self.learnt.lock().unwrap_or_else(|e| e.into_inner());
        learnt.0.get(command).copied().or(learnt.1)
    }

    /// Folds one run time of `command` into its typical run time.
    fn learn(&self, command: &str, sample: Duration) {
        let mut learnt = self.learnt.lock().unwrap_or_else(|e| e.into_inner());
        let typical = match learnt.0.get(command) {
            Some(known) => known.mul_f64(1.0 - RUN_TIME_WEIGHT).saturating_add(
                sample
                    .min(known.mul_f64(MAX_SAMPLE_GROWTH))
                    .mul_f64(RUN_TIME_WEIGHT),
            ),
            None => sample,
        };
        learnt.0.insert(command.to_owned(), typical);
        learnt.1 = Some(typical);
    }
}

/// [`Client::wait_job`]'s pacing: the first poll when the command typically ends, then
/// short steps growing ×1.5; a backoff from `job_poll_initial` while nothing is learnt.
/// Remembers when it polled, so the run time can be learnt from the outcome.
struct LearntPacing {
    started: Instant,
    typical: Option<Duration>,
    steps: BackoffPacing,
    /// When the last poll was sent, and the one before it (the last that found the job
    /// still running, once a later poll found it finished).
    last_poll: Option<Instant>,
    running_at: Option<Instant>,
}

impl LearntPacing {
    fn new(typical: Option<Duration>, initial: Duration, max: Duration) -> Self {
        Self::started_at(Instant::now(), typical, initial, max)
    }

    /// The pacing of a job submitted at `started`.
    fn started_at(
        started: Instant,
        typical: Option<Duration>,
        initial: Duration,
        max: Duration,
    ) -> Self {
        let steps = match typical {
            Some(run_time) => BackoffPacing::new(
                run_time.mul_f64(AFTER_DUE_SHARE).max(MIN_POLL_INTERVAL),
                max,
            ),
            None => BackoffPacing::new(initial, max),
        };
        Self {
            started,
            typical,
            steps,
            last_poll: None,
            running_at: None,
        }
    }

    /// The run time the finished job teaches: between the last poll that found it running
    /// and the poll that found it finished (sent at `last_poll`, or at `answered` when the
    /// job's deadline cut the wait short), or a little under the wait when the first poll
    /// found it finished.
    fn sample(&self, answered: Instant) -> Duration {
        let done = self
            .last_poll
            .unwrap_or(answered)
            .duration_since(self.started);
        match self.running_at {
            Some(running) => (running.duration_since(self.started) + done) / 2,
            None => done.mul_f64(FINISHED_AT_FIRST_POLL_SHARE),
        }
    }
}

impl JobPacing for LearntPacing {
    fn before_poll(&mut self, attempt: u32) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Unset while waiting: a wait the deadline cuts short leaves no stale time.
            self.running_at = self.last_poll.take().or(self.running_at);
            match (attempt, self.typical) {
                (0, Some(run_time)) => tokio::time::sleep_until(self.started + run_time).await,
                _ => tokio::time::sleep(self.steps.next_interval()).await,
            }
            self.last_poll = Some(Instant::now());
        })
    }
}

impl Client {
    /// The typical run time of `command`'s jobs as learnt so far (or of the command learnt
    /// last, when `command` has not been seen); `None` before any job finished.
    pub fn typical_job_run_time(&self, command: &str) -> Option<Duration> {
        self.inner.job_run_times.typical(command)
    }

    /// Folds a run time of `command`'s jobs that the caller measured itself (a caller that
    /// paces its own waits, e.g. knowing the job waited behind others) into the typical
    /// run time [`Client::wait_job`] polls by: later jobs of any command not seen yet are
    /// polled when this one typically ends, not from `job_poll_initial`.
    pub fn learn_job_run_time(&self, command: &str, run_time: Duration) {
        self.inner.job_run_times.learn(command, run_time);
    }

    /// Sends an async command and returns its job id (and new entity id) without waiting.
    pub async fn start_async(&self, command: &str, params: Params) -> Result<AsyncStart, Error> {
        let inner = self.call(command, params).await?;
        let jobid = string_field(&inner, "jobid").ok_or_else(|| Error::Decode {
            command: command.to_owned(),
            detail: format!("async reply has no jobid: {inner}"),
        })?;
        Ok(AsyncStart {
            id: string_field(&inner, "id"),
            jobid,
        })
    }

    /// Polls `queryAsyncJobResult` for `jobid` (started by `command`, just now) until it
    /// finishes and returns its `jobresult` (`Value::Null` when absent). The first poll is
    /// due when `command`'s jobs typically end ([`Client::typical_job_run_time`]), then
    /// the interval grows ×1.5 from a tenth of that up to `job_poll_max`; before any run
    /// time is learnt it starts at `job_poll_initial`. After `job_timeout` the result is
    /// [`Error::JobTimeout`]. A failed job is [`Error::JobFailed`]. Every job that
    /// succeeded teaches its command's typical run time (a sample counts for at most
    /// twice the time known).
    pub async fn wait_job(&self, command: &str, jobid: &str) -> Result<Value, Error> {
        let config = &self.inner.config;
        let mut pacing = LearntPacing::new(
            self.typical_job_run_time(command),
            config.job_poll_initial,
            config.job_poll_max,
        );
        let result = self.wait_job_paced(command, jobid, &mut pacing).await;
        // Only a job that did its work teaches a run time: one that failed its checks
        // ends early and would make every later job be polled too soon.
        if result.is_ok() {
            let sample = pacing.sample(Instant::now());
            self.inner.job_run_times.learn(command, sample);
        }
        result
    }

    /// Like [`Client::wait_job`] for a job submitted at `submitted` whose first poll the
    /// caller put off until other work of its own had ended (the job ran meanwhile, e.g.
    /// a tag job beside the network jobs of the same change): polled at once when its
    /// typical end has passed, else when it comes. A poll put off that finds the job
    /// finished says nothing of how long it ran, so the run time is learnt only when a
    /// poll found it still running.
    pub async fn wait_job_put_off(
        &self,
        command: &str,
        jobid: &str,
        submitted: Instant,
    ) -> Result<Value, Error> {
        let config = &self.inner.config;
        let mut pacing = LearntPacing::started_at(
            submitted,
            self.typical_job_run_time(command),
            config.job_poll_initial,
            config.job_poll_max,
        );
        let result = self.wait_job_paced(command, jobid, &mut pacing).await;
        if result.is_ok() && pacing.running_at.is_some() {
            let sample = pacing.sample(Instant::now());
            self.inner.job_run_times.learn(command, sample);
        }
        result
    }

    /// Like [`Client::wait_job`], polling when `pacing` says (still bounded by
    /// `job_timeout`).
    pub async fn wait_job_paced(
        &self,
        command: &str,
        jobid: &str,
        pacing: &mut dyn JobPacing,
    ) -> Result<Value, Error> {
        let started = Instant::now();
        let result = self.poll_job(command, jobid, started, pacing).await;
        if let Some(observer) = &self.inner.config.observer {
            observer.on_job(command, result.is_ok(), started.elapsed());
        }
        match &result {
            Ok(_) => {
                tracing::debug!(command, jobid, elapsed = ?started.elapsed(), "async job succeeded")
            }
            Err(error) => tracing::debug!(command, jobid, %error, "async job did not succeed"),
        }
        result
    }

    /// One `queryAsyncJobResult` for `jobid` (started by `command`): `None` while the job
    /// runs, its `jobresult` once it succeeded, [`Error::JobFailed`] when it failed.
    pub async fn poll_job_once(&self, command: &str, jobid: &str) -> Result<Option<Value>, Error> {
        use crate::requests::{QueryAsyncJobResult, Request as _};
        let request = QueryAsyncJobResult {
            jobid: jobid.to_owned(),
        };
        let job = self
            .call(QueryAsyncJobResult::COMMAND, request.to_params())
            .await?;
        match code_field(&job, "jobstatus").map(i64::from) {
            Some(JOB_SUCCEEDED) => Ok(Some(job.get("jobresult").cloned().unwrap_or(Value::Null))),
            Some(JOB_FAILED) => Err(job_failure(command, jobid, &job)),
            _ => Ok(None),
        }
    }

    /// Starts an async command and waits for its result.
    pub async fn call_async(&self, command: &str, params: Params) -> Result<Value, Error> {
        let start = self.start_async(command, params).await?;
        self.wait_job(command, &start.jobid).await
    }

    /// The polling loop of [`Client::wait_job_paced`].
    async fn poll_job(
        &self,
        command: &str,
        jobid: &str,
        started: Instant,
        pacing: &mut dyn JobPacing,
    ) -> Result<Value, Error> {
        let timeout = self.inner.config.job_timeout;
        let deadline = started + timeout;
        let mut attempt = 0;
        loop {
            // A wait cut short by the deadline still ends in one last poll.
            let _ = tokio::time::timeout_at(deadline, pacing.before_poll(attempt)).await;
            attempt += 1;
            match self.poll_job_once(command, jobid).await {
                Ok(Some(result)) => return Ok(result),
                Ok(None) => {}
                // Refused keys do not end the job: keep polling (held polls cost nothing)
                // until new keys are adopted or a probe passes.
                Err(error) if error.is_refused_credentials() => {
                    let pause = self
                        .inner
                        .refusal
                        .probe_interval()
                        .min(Duration::from_secs(1));
                    let _ = tokio::time::timeout_at(deadline, tokio::time::sleep(pause)).await;
                }
                Err(error) => return Err(error),
            }
            if Instant::now() >= deadline {
                return Err(Error::JobTimeout {
                    command: command.to_owned(),
                    jobid: jobid.to_owned(),
                    timeout,
                });
            }
        }
    }
}

/// Builds the error of a failed job from `jobresult.errorcode/errortext` (falling back to
/// `jobresultcode`).
fn job_failure(command: &str, jobid: &str, job: &Value) -> Error {
    let result = job.get("jobresult").cloned().unwrap_or(Value::Null);
    Error::JobFailed {
        command: command.to_owned(),
        jobid: jobid.to_owned(),
        errorcode: code_field(&result, "errorcode")
            .or_else(|| code_field(job, "jobresultcode"))
            .unwrap_or(530),
        errortext: result
            .get("errortext")
            .and_then(Value::as_str)
            .unwrap_or("(no errortext)")
            .to_owned(),
    }
}

/// Decodes the object (or array) `key` out of a job result or a synchronous reply
/// (`{"loadbalancer":{…}}` → `LoadBalancerRule`).
pub fn job_object<T: DeserializeOwned>(
    command: &str,
    jobresult: Value,
    key: &str,
) -> Result<T, Error> {
    let object = match jobresult {
        Value::Object(mut map) => map.remove(key),
        _ => None,
    };
    let object = object.ok_or_else(|| Error::Decode {
        command: command.to_owned(),
        detail: format!("job result has no {key:?} object"),
    })?;
    serde_json::from_value(object).map_err(|e| Error::Decode {
        command: command.to_owned(),
        detail: format!("{key}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_slow_job_at_most_doubles_the_run_time_a_command_is_known_by() {
        let times = JobRunTimes::default();
        times.learn("createLoadBalancerRule", Duration::from_millis(400));
        // A job that waited a minute behind a busy router.
        times.learn("createLoadBalancerRule", Duration::from_secs(60));
        let after_outlier = times.typical("createLoadBalancerRule").unwrap();
        assert_eq!(
            after_outlier,
            Duration::from_millis(520),
            "0.7 × 400 + 0.3 × 800"
        );
        // Back to normal jobs: the estimate returns towards 400 ms.
        for _ in 0..5 {
            times.learn("createLoadBalancerRule", Duration::from_millis(400));
        }
        let settled = times.typical("createLoadBalancerRule").unwrap();
        assert!(settled < Duration::from_millis(430), "{settled:?}");
        // A lasting change still shows: jobs twice as slow for good are learnt.
        for _ in 0..10 {
            times.learn("createLoadBalancerRule", Duration::from_millis(800));
        }
        let slower = times.typical("createLoadBalancerRule").unwrap();
        assert!(slower > Duration::from_millis(770), "{slower:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_cut_short_learns_from_when_the_answer_came() {
        let mut pacing = LearntPacing::new(
            Some(Duration::from_secs(1)),
            Duration::from_millis(50),
            Duration::from_secs(1),
        );
        pacing.before_poll(0).await; // found running at 1 s
        // The deadline cuts the next wait: the future is dropped before it polls.
        let _ = tokio::time::timeout(Duration::from_millis(10), pacing.before_poll(1)).await;
        let answered = Instant::now();
        assert_eq!(
            pacing.sample(answered),
            Duration::from_millis(1005),
            "between the poll that found it running (1 s) and the answer (1.01 s)"
        );
    }
}

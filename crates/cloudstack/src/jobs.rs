//! Async commands: the `{jobid}` / `{id, jobid}` start reply and `queryAsyncJobResult` polling.

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

impl Client {
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

    /// Polls `queryAsyncJobResult` for `jobid` (started by `command`) until it finishes and
    /// returns its `jobresult` (`Value::Null` when absent). The interval starts at
    /// `job_poll_initial` and grows ×1.5 up to `job_poll_max`; after `job_timeout`
    /// the result is [`Error::JobTimeout`]. A failed job is [`Error::JobFailed`].
    pub async fn wait_job(&self, command: &str, jobid: &str) -> Result<Value, Error> {
        let config = &self.inner.config;
        let mut pacing = BackoffPacing::new(config.job_poll_initial, config.job_poll_max);
        self.wait_job_paced(command, jobid, &mut pacing).await
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
        let job = self
            .call("queryAsyncJobResult", Params::new().set("jobid", jobid))
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
            if let Some(result) = self.poll_job_once(command, jobid).await? {
                return Ok(result);
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

/// Decodes the object `key` out of a job result (`{"loadbalancer":{…}}` → `LoadBalancerRule`).
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

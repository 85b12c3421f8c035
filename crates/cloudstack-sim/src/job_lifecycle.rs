//! The life of an async job in the simulated state: submitted behind the jobs queued on its
//! network, started, completed or failed (the state's methods; the job records themselves
//! are in [`crate::jobs`]).

use crate::error::ApiError;
use serde_json::{Value, json};

use crate::jobs::{ApiErrorRecord, Job, NewJob, now_ms};
use crate::state::{State, new_id, now_text};

impl State {
    /// Records a job and schedules it behind the jobs already queued on its network.
    pub fn enqueue_job(
        &mut self,
        new: NewJob,
        never_finishes: bool,
        failure: Option<ApiError>,
    ) -> String {
        let now = now_ms();
        let duration = self.settings.job_duration_ms;
        // Jobs on one network run one at a time (the network sync queue): this one starts
        // when the last pending one there ends — a hung one only when it is cancelled.
        let start = match &new.network_id {
            None => now,
            Some(net) => self
                .jobs
                .iter()
                .filter(|j| j.network_id.as_ref() == Some(net) && j.status == 0)
                .filter_map(|j| j.finish_ms.or(j.cancel_ms))
                .max()
                .unwrap_or(now)
                .max(now),
        };
        let account = self.account(&new.account).cloned();
        let job = Job {
            id: new_id(),
            command: new.command.clone(),
            account: new.account,
            account_id: account.as_ref().map(|a| a.id.clone()).unwrap_or_default(),
            user_id: account
                .as_ref()
                .map(|a| a.user_id.clone())
                .unwrap_or_default(),
            instance_type: new.instance_type.map(str::to_owned),
            instance_id: new.instance_id,
            status: 0,
            result_code: 0,
            result: None,
            created: now_text(),
            completed: None,
            network_id: new.network_id,
            action: new.action,
            created_ms: now,
            start_ms: start,
            finish_ms: (!never_finishes).then_some(start + duration),
            cancel_ms: never_finishes.then_some(start + self.settings.job_cancel_threshold_ms),
            completed_ms: None,
            injected_failure: failure.as_ref().map(ApiErrorRecord::from),
        };
        let id = job.id.clone();
        self.jobs.push(job);
        id
    }

    /// A job by id.
    pub fn job(&self, id: &str) -> Option<&Job> {
        self.jobs.iter().rev().find(|j| j.id == id)
    }

    /// Cancels a job that held its queue too long (`AsyncJobManagerImpl`: status failed,
    /// result code 0, "Job is cancelled as it has been blocking others for too long").
    pub fn cancel_job(&mut self, id: &str) {
        let Some(job) = self.jobs.iter_mut().rev().find(|j| j.id == id) else {
            return;
        };
        job.completed = Some(now_text());
        job.completed_ms = Some(now_ms());
        job.status = 2;
        job.result_code = 0;
        job.result = Some(json!({
            "errortext": "Job is cancelled as it has been blocking others for too long"
        }));
    }

    /// Stores the outcome of a job.
    pub fn finish_job(&mut self, id: &str, outcome: Result<Value, ApiError>) {
        let Some(job) = self.jobs.iter_mut().rev().find(|j| j.id == id) else {
            return;
        };
        job.completed = Some(now_text());
        job.completed_ms = Some(now_ms());
        match outcome {
            Ok(result) => {
                job.status = 1;
                job.result = Some(result);
            }
            Err(e) => {
                job.status = 2;
                job.result_code = e.code;
                job.result = Some(json!({"errorcode": e.code, "errortext": e.text}));
            }
        }
    }
}

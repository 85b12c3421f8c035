//! The tag jobs of one phase of a plan. Tagging does not queue on the network: a tag job
//! submitted beside a phase's rule or member jobs ends about when they do, so it is first
//! polled once the phase's other steps have ended (or at its typical end, if that comes
//! later), which almost always finds it finished: one `queryAsyncJobResult` instead of
//! two, and the phase ends no later than its other steps let it.

use std::sync::Mutex;

use cloudstack::{Params, Request};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::super::plan::Step;

/// How many of a phase's steps other than tagging are still running.
#[derive(Debug)]
pub(crate) struct PhaseSteps {
    running: Mutex<usize>,
    ended: Notify,
}

impl PhaseSteps {
    /// The phase of `steps`.
    pub(crate) fn of(steps: &[Step]) -> Self {
        PhaseSteps {
            running: Mutex::new(steps.iter().filter(|step| !is_tagging(step)).count()),
            ended: Notify::new(),
        }
    }

    /// `step` has ended (whatever its result).
    pub(crate) fn ended(&self, step: &Step) {
        if is_tagging(step) {
            return;
        }
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        *running = running.saturating_sub(1);
        drop(running);
        self.ended.notify_waiters();
    }

    /// Waits until every step of the phase other than tagging has ended.
    async fn others_ended(&self) {
        loop {
            let notified = self.ended.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if *self.running.lock().unwrap_or_else(|e| e.into_inner()) == 0 {
                return;
            }
            notified.await;
        }
    }
}

/// Whether `step` only tags or untags.
fn is_tagging(step: &Step) -> bool {
    matches!(
        step,
        Step::TagResources { .. } | Step::UntagResources { .. }
    )
}

/// Runs the tag command `request` (`createTags`, `deleteTags`) of a step of `phase`: its
/// job is first polled once the phase's other steps have ended.
pub(crate) async fn run_tagging<R: Request>(
    client: &cloudstack::Client,
    request: &R,
    phase: &PhaseSteps,
) -> Result<(), cloudstack::Error> {
    run_put_off(client, R::COMMAND, request.to_params(), phase).await
}

async fn run_put_off(
    client: &cloudstack::Client,
    command: &str,
    params: Params,
    phase: &PhaseSteps,
) -> Result<(), cloudstack::Error> {
    let submitted = Instant::now();
    let start = client.start_async(command, params).await?;
    phase.others_ended().await;
    client
        .wait_job_put_off(command, &start.jobid, submitted)
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::loadbalancer::plan::{ResourceRef, TagResourceType};
    use futures::FutureExt;

    fn tag_step() -> Step {
        Step::TagResources {
            resource_type: TagResourceType::LoadBalancer,
            resources: vec![ResourceRef::Existing("r1".into())],
            tags: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_tag_job_waits_for_the_phases_other_steps_only() {
        let other = Step::ReleaseIp {
            id: "ip-1".into(),
            address: "203.0.113.5".parse().expect("address"),
        };
        let phase = PhaseSteps::of(&[tag_step(), other.clone(), other.clone()]);
        let mut waiting = Box::pin(phase.others_ended());
        assert!(waiting.as_mut().now_or_never().is_none(), "two others run");
        phase.ended(&tag_step());
        phase.ended(&other);
        assert!(waiting.as_mut().now_or_never().is_none(), "one other runs");
        phase.ended(&other);
        assert!(
            waiting.as_mut().now_or_never().is_some(),
            "all others ended"
        );
        let tags_only = PhaseSteps::of(&[tag_step()]);
        assert!(
            tags_only.others_ended().now_or_never().is_some(),
            "a phase of tags alone waits for nothing"
        );
    }
}

//! queryAsyncJobResult and listAsyncJobs (API.md §2.2).

use super::Ctx;
use crate::error::ApiError;
use crate::response::list_body;
use serde_json::Value;

/// queryAsyncJobResult: the job must exist and belong to the caller (root admin: any).
pub fn query_async_job_result(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let id = p.required("jobid")?;
    let job = ctx
        .state
        .job(id)
        .filter(|j| ctx.caller.is_admin() || j.account == ctx.caller.account)
        .ok_or_else(|| ApiError::invalid_uuid(&p.command, "jobid", id))?;
    Ok(job.render())
}

/// listAsyncJobs: the caller's jobs (root admin with `listall`: everyone's), oldest first
/// (`QueryManagerImpl.searchForAsyncJobs` sorts by `id` ascending).
pub fn list_async_jobs(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let page = ctx.page()?;
    let p = ctx.params;
    let all = ctx.caller.is_admin() && p.bool("listall") == Some(true);
    let items = ctx
        .state
        .jobs
        .iter()
        .filter(|j| all || j.account == ctx.caller.account)
        .filter(|j| p.text("keyword").is_none_or(|k| super::like(&j.command, k)))
        .map(|j| j.render())
        .collect();
    Ok(list_body("asyncjobs", items, page))
}

//! Server capabilities, version and async jobs.

use crate::requests::{ListAsyncJobs, ListCapabilities, QueryAsyncJobResult, Request as _};
use crate::types::{AsyncJob, Capabilities};
use crate::version::ServerVersion;
use crate::{Client, Error};

impl Client {
    /// `listCapabilities` (works for any user key).
    pub async fn list_capabilities(&self) -> Result<Capabilities, Error> {
        const COMMAND: &str = ListCapabilities::COMMAND;
        let mut inner = self.call(COMMAND, ListCapabilities {}.to_params()).await?;
        let capability = inner
            .get_mut("capability")
            .map(serde_json::Value::take)
            .ok_or_else(|| Error::Decode {
                command: COMMAND.to_owned(),
                detail: "no capability object".into(),
            })?;
        serde_json::from_value(capability).map_err(|e| Error::Decode {
            command: COMMAND.to_owned(),
            detail: format!("capability: {e}"),
        })
    }

    /// The server version from `listCapabilities` → `cloudstackversion`.
    pub async fn server_version(&self) -> Result<ServerVersion, Error> {
        let capabilities = self.list_capabilities().await?;
        let text = capabilities.cloudstackversion.unwrap_or_default();
        text.parse().map_err(|e| Error::Decode {
            command: ListCapabilities::COMMAND.to_owned(),
            detail: format!("cloudstackversion: {e}"),
        })
    }

    /// `queryAsyncJobResult` once (no waiting; see [`Client::wait_job`]).
    pub async fn query_async_job_result(&self, jobid: &str) -> Result<AsyncJob, Error> {
        const COMMAND: &str = QueryAsyncJobResult::COMMAND;
        let request = QueryAsyncJobResult {
            jobid: jobid.to_owned(),
        };
        let inner = self.call(COMMAND, request.to_params()).await?;
        serde_json::from_value(inner).map_err(|e| Error::Decode {
            command: COMMAND.to_owned(),
            detail: e.to_string(),
        })
    }

    /// `listAsyncJobs`, all pages.
    pub async fn list_async_jobs(&self, request: &ListAsyncJobs) -> Result<Vec<AsyncJob>, Error> {
        self.list_request(request, "asyncjobs").await
    }
}

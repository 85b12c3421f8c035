//! Typed methods on [`crate::Client`], one per command, named after the command in
//! snake_case. Lists return every page; async creates return the created object after the
//! job (with a `_begin` variant returning [`crate::AsyncStart`]); other async commands
//! return `()` once their job succeeded.

mod address;
mod certs;
mod lb;
mod network;
mod policy;
mod routes;
mod rules;
mod server;
mod tags;

use serde::de::DeserializeOwned;

use crate::jobs::job_object;
use crate::requests::Request;
use crate::{AsyncStart, Client, Error};

impl Client {
    /// Lists every item of a typed list request.
    pub(crate) async fn list_request<R: Request, T: DeserializeOwned>(
        &self,
        request: &R,
        item_key: &str,
    ) -> Result<Vec<T>, Error> {
        self.list_all(R::COMMAND, item_key, request.to_params())
            .await
    }

    /// Starts a typed async request without waiting.
    pub(crate) async fn begin_request<R: Request>(&self, request: &R) -> Result<AsyncStart, Error> {
        self.start_async(R::COMMAND, request.to_params()).await
    }

    /// Runs a typed async request to completion, ignoring its `{"success":true}` result.
    pub(crate) async fn run_request<R: Request>(&self, request: &R) -> Result<(), Error> {
        self.call_async(R::COMMAND, request.to_params())
            .await
            .map(drop)
    }

    /// Runs a typed async create request and decodes the object `key` of its job result.
    pub(crate) async fn create_request<R: Request, T: DeserializeOwned>(
        &self,
        request: &R,
        key: &str,
    ) -> Result<T, Error> {
        let start = self.begin_request(request).await?;
        self.wait_job_object(R::COMMAND, &start.jobid, key).await
    }

    /// Waits for job `jobid` (started by `command`) and decodes the object `key` of its
    /// result, e.g. `("createLoadBalancerRule", jobid, "loadbalancer")`.
    pub async fn wait_job_object<T: DeserializeOwned>(
        &self,
        command: &str,
        jobid: &str,
        key: &str,
    ) -> Result<T, Error> {
        let result = self.wait_job(command, jobid).await?;
        job_object(command, result, key)
    }
}

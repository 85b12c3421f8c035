//! Server-level objects: capabilities and async jobs.

use super::de::response;
use crate::version::ServerVersion;

response! {
    /// The `capability` object of `listCapabilities`.
    Capabilities {
        /// Server version, e.g. `4.15.2.0`.
        cloudstackversion: Option<String>,
        /// Security groups enabled.
        securitygroupsenabled: Option<bool>,
        /// Dynamic roles enabled.
        dynamicrolesenabled: Option<bool>,
        /// Elastic LB supported (sent as a string).
        #[serde(rename = "supportELB")]
        support_elb: Option<bool>,
        /// Project invitations required.
        projectinviterequired: Option<bool>,
        /// Users may create projects.
        allowusercreateprojects: Option<bool>,
        /// Kubernetes service enabled.
        kubernetesserviceenabled: Option<bool>,
        /// API throttling interval in seconds (only when throttling is enabled).
        apilimitinterval: Option<i64>,
        /// API throttling maximum per interval (only when throttling is enabled).
        apilimitmax: Option<i64>,
        /// Default UI page size.
        defaultuipagesize: Option<i64>,
    }
}

impl Capabilities {
    /// The parsed server version, if present and well-formed.
    pub fn version(&self) -> Option<ServerVersion> {
        self.cloudstackversion.as_deref()?.parse().ok()
    }
}

response! {
    /// An async job as returned by `queryAsyncJobResult` and `listAsyncJobs`.
    AsyncJob {
        /// Job id.
        jobid: Option<String>,
        /// 0 pending, 1 succeeded, 2 failed.
        jobstatus: Option<i64>,
        /// Progress status.
        jobprocstatus: Option<i64>,
        /// 0 on success, the error code on failure.
        jobresultcode: Option<i64>,
        /// Result type (`object`).
        jobresulttype: Option<String>,
        /// The result: the created object wrapped by its name, `{"success":true}`, or
        /// `{"errorcode","errortext"}` on failure.
        jobresult: Option<serde_json::Value>,
        /// Instance type (`FirewallRule`, `IpAddress`, …).
        jobinstancetype: Option<String>,
        /// Instance id.
        jobinstanceid: Option<String>,
        /// Java command class.
        cmd: Option<String>,
        /// Account id.
        accountid: Option<String>,
        /// Account name.
        account: Option<String>,
        /// User id.
        userid: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Creation date.
        created: Option<String>,
        /// Completion date.
        completed: Option<String>,
        /// Management server that ran the job (4.19+).
        managementserverid: Option<String>,
    }
}

/// `jobstatus` of a job still running.
pub const JOB_PENDING: i64 = 0;
/// `jobstatus` of a job that succeeded.
pub const JOB_SUCCEEDED: i64 = 1;
/// `jobstatus` of a job that failed.
pub const JOB_FAILED: i64 = 2;

response! {
    /// One API of `listApis` (`ApiDiscoveryResponse`): what the caller's role may call.
    ApiInfo {
        /// The command name, e.g. `createLoadBalancerRule`.
        name: Option<String>,
        /// The release that added it (`@APICommand(since=…)`), e.g. `4.17.0`; absent or
        /// empty for the oldest commands.
        since: Option<String>,
        /// Whether the command answers with a job id.
        isasync: Option<bool>,
    }
}

impl ApiInfo {
    /// The release that added the command, when it says one that parses.
    pub fn since_version(&self) -> Option<ServerVersion> {
        self.since.as_deref()?.parse().ok()
    }
}

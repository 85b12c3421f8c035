//! Requests about the server itself.

use super::request;

request! {
    /// `listAsyncJobs`.
    ListAsyncJobs => "listAsyncJobs" {
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Include subdomains.
        isrecursive: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Jobs started on or after this date.
        startdate: Option<String>,
    }
}

request! {
    /// `listCapabilities`: the server's version and settings (any key may call it).
    ListCapabilities => "listCapabilities" {}
}

request! {
    /// `queryAsyncJobResult`: one job's state and, once done, its result.
    QueryAsyncJobResult => "queryAsyncJobResult" {
        /// The job id (required).
        jobid: String,
    }
}

request! {
    /// `listAccounts`: without `listall`, the caller's own account only
    /// (`AccountManagerImpl.buildACLSearchParameters`).
    ListAccounts => "listAccounts" {}
}

request! {
    /// `listApis`: the commands the caller's role may call (`ApiDiscoveryServiceImpl`). Not
    /// a paged list: one reply holds every API.
    ListApis => "listApis" {
        /// One API by name (an unknown or refused name is a 530).
        name: Option<String>,
    }
}

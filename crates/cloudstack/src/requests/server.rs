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

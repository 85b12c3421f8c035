//! Requests for LB health-check and stickiness policies.

use super::request;

request! {
    /// `createLBHealthCheckPolicy` (async create; not supported by the Virtual Router).
    CreateLbHealthCheckPolicy => "createLBHealthCheckPolicy" {
        /// LB rule id (required).
        lbruleid: String,
        /// HTTP ping path.
        pingpath: Option<String>,
        /// Response timeout in seconds (2–60).
        responsetimeout: Option<u32>,
        /// Interval in seconds.
        intervaltime: Option<u32>,
        /// Healthy threshold.
        healthythreshold: Option<u32>,
        /// Unhealthy threshold.
        unhealthythreshold: Option<u32>,
        /// Description.
        description: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `listLBHealthCheckPolicies`. Give `lbruleid` or `id`.
    ListLbHealthCheckPolicies => "listLBHealthCheckPolicies" {
        /// LB rule id.
        lbruleid: Option<String>,
        /// Policy id.
        id: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `deleteLBHealthCheckPolicy` (async).
    DeleteLbHealthCheckPolicy => "deleteLBHealthCheckPolicy" {
        /// Policy id (required).
        id: String,
    }
}

request! {
    /// `createLBStickinessPolicy` (async create).
    CreateLbStickinessPolicy => "createLBStickinessPolicy" {
        /// LB rule id (required).
        lbruleid: String,
        /// Policy name (required).
        name: String,
        /// `LbCookie`, `AppCookie`, `SourceBased` (required).
        methodname: String,
        /// Method parameters (map `param[i].name/value`).
        param: Vec<(String, String)>,
        /// Description.
        description: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `listLBStickinessPolicies`. Give `lbruleid` or `id`.
    ListLbStickinessPolicies => "listLBStickinessPolicies" {
        /// LB rule id.
        lbruleid: Option<String>,
        /// Policy id.
        id: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

request! {
    /// `deleteLBStickinessPolicy` (async).
    DeleteLbStickinessPolicy => "deleteLBStickinessPolicy" {
        /// Policy id (required).
        id: String,
    }
}

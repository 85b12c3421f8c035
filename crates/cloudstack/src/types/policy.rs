//! LB health-check and stickiness policies.

use super::de::response;

response! {
    /// One health-check policy (field spellings as CloudStack sends them).
    HealthCheckPolicy {
        /// Policy id.
        id: Option<String>,
        /// HTTP ping path.
        pingpath: Option<String>,
        /// Description.
        description: Option<String>,
        /// State.
        state: Option<String>,
        /// Response timeout in seconds.
        responsetime: Option<i64>,
        /// Interval in seconds.
        healthcheckinterval: Option<i64>,
        /// Healthy threshold.
        healthcheckthresshold: Option<i64>,
        /// Unhealthy threshold.
        unhealthcheckthresshold: Option<i64>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

response! {
    /// The health-check policies of one LB rule (object name `healthcheckpolicies`).
    HealthCheckPolicies {
        /// LB rule id.
        lbruleid: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// The policies.
        healthcheckpolicy: Vec<HealthCheckPolicy>,
    }
}

response! {
    /// One stickiness policy.
    StickinessPolicy {
        /// Policy id.
        id: Option<String>,
        /// Name.
        name: Option<String>,
        /// `LbCookie`, `AppCookie`, `SourceBased`.
        methodname: Option<String>,
        /// Method parameters (a JSON map).
        params: Option<serde_json::Value>,
        /// Description.
        description: Option<String>,
        /// State.
        state: Option<String>,
        /// Shown to the user.
        fordisplay: Option<bool>,
    }
}

response! {
    /// The stickiness policies of one LB rule (object name `stickinesspolicies`).
    StickinessPolicies {
        /// LB rule id.
        lbruleid: Option<String>,
        /// Name.
        name: Option<String>,
        /// Description.
        description: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Zone id.
        zoneid: Option<String>,
        /// State.
        state: Option<String>,
        /// The policies.
        stickinesspolicy: Vec<StickinessPolicy>,
    }
}

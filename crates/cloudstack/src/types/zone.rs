//! Zones (`listZones`) and projects (`listProjects`).

use super::de::response;
use super::tag::Tag;

response! {
    /// A zone.
    Zone {
        /// Zone id.
        id: Option<String>,
        /// Zone name.
        name: Option<String>,
        /// Description.
        description: Option<String>,
        /// `Basic` or `Advanced`.
        networktype: Option<String>,
        /// `Enabled` / `Disabled`.
        allocationstate: Option<String>,
        /// Security groups enabled.
        securitygroupsenabled: Option<bool>,
        /// Local storage enabled.
        localstorageenabled: Option<bool>,
        /// Zone type (`Core`, `Edge`; newer servers).
        r#type: Option<String>,
        /// Domain id for dedicated zones.
        domainid: Option<String>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

response! {
    /// A project.
    Project {
        /// Project id.
        id: Option<String>,
        /// Project name.
        name: Option<String>,
        /// Display text.
        displaytext: Option<String>,
        /// State (`Active`, `Suspended`, …).
        state: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Project account name.
        projectaccountname: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Domain name.
        domain: Option<String>,
        /// Tags.
        tags: Vec<Tag>,
    }
}

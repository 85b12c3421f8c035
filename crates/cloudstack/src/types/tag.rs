//! Resource tags (`listTags` items and the `tags` array embedded in many responses).

use super::de::response;

response! {
    /// A resource tag.
    Tag {
        /// Tag key.
        key: Option<String>,
        /// Tag value.
        value: Option<String>,
        /// Tagged resource id.
        resourceid: Option<String>,
        /// Tagged resource type (`LoadBalancer`, `PublicIpAddress`, …).
        resourcetype: Option<String>,
        /// Customer-supplied extra data.
        customer: Option<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Owning project name.
        project: Option<String>,
        /// Owning project id.
        projectid: Option<String>,
    }
}

/// The value of tag `key` in a tag list, if present.
pub fn tag_value<'a>(tags: &'a [Tag], key: &str) -> Option<&'a str> {
    tags.iter()
        .find(|tag| tag.key.as_deref() == Some(key))
        .and_then(|tag| tag.value.as_deref())
}

//! Requests for resource tags.

use super::request;

request! {
    /// `createTags` (async).
    CreateTags => "createTags" {
        /// Resource ids (list, required).
        resourceids: Vec<String>,
        /// Resource type, e.g. `LoadBalancer` (required).
        resourcetype: String,
        /// Key/value pairs (map `tags[i].key/value`, required).
        tags: Vec<(String, String)>,
        /// Customer data.
        customer: Option<String>,
    }
}

request! {
    /// `deleteTags` (async). A pair with an empty value deletes by key; no pairs delete all
    /// tags of the resources.
    DeleteTags => "deleteTags" {
        /// Resource ids (list, required).
        resourceids: Vec<String>,
        /// Resource type (required).
        resourcetype: String,
        /// Key/value pairs (map).
        tags: Vec<(String, String)>,
    }
}

request! {
    /// `listTags`.
    ListTags => "listTags" {
        /// Resource id.
        resourceid: Option<String>,
        /// Resource type.
        resourcetype: Option<String>,
        /// Tag key.
        key: Option<String>,
        /// Tag value.
        value: Option<String>,
        /// Customer data.
        customer: Option<String>,
        /// List everything the caller may see.
        listall: Option<bool>,
        /// Project id (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Account (with `domainid`).
        account: Option<String>,
        /// Domain id.
        domainid: Option<String>,
        /// Include subdomains.
        isrecursive: Option<bool>,
        /// Keyword search.
        keyword: Option<String>,
    }
}

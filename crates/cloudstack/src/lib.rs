//! A typed, signed Apache CloudStack API client.
//!
//! * Requests are signed exactly as the management server verifies them ([`sign`]), with
//!   `signatureversion=3`, a five-minute `expires` and `response=json`; reads go out as GET,
//!   everything else as a POST form.
//! * Replies are decoded from their `<command>response` envelope; errors keep the command,
//!   HTTP status, `errorcode`, `cserrorcode` and `errortext` ([`Error`]).
//! * [`Client::list_all`] walks every page; [`Client::call_async`] waits for async jobs.
//! * Reads are retried on 429/5xx/connection errors; mutating commands never are.
//! * A command CloudStack refuses to the keys' role (432) is remembered and not sent again
//!   for a long while ([`Client::may_call`]); `listApis` tells the allowed commands ahead
//!   ([`Client::discover_api_access`]).
//! * Keys can be replaced while calls run ([`Client::adopt_credentials`]); while CloudStack
//!   refuses them, calls are held and one probe goes every few seconds.
//! * Typed requests ([`requests`]) and responses ([`types`]) cover the commands a cloud
//!   controller manager uses.
//!
//! Typed commands (method = command in snake_case): `listVirtualMachines`, `listZones`,
//! `listNetworks`, `listProjects`, `listPublicIpAddresses`, `associateIpAddress`,
//! `disassociateIpAddress`, `listLoadBalancerRules`, `createLoadBalancerRule`,
//! `updateLoadBalancerRule`, `deleteLoadBalancerRule`, `assignToLoadBalancerRule`,
//! `removeFromLoadBalancerRule`, `listLoadBalancerRuleInstances`, `createLoadBalancer`,
//! `listLoadBalancers`, `deleteLoadBalancer`, `listFirewallRules`,
//! `createFirewallRule`, `deleteFirewallRule`, `listNetworkACLLists`, `listNetworkACLs`,
//! `createNetworkACL`, `deleteNetworkACL`, `createTags`, `deleteTags`, `listTags`,
//! `listCapabilities`, `queryAsyncJobResult`, `listAsyncJobs`, `createLBHealthCheckPolicy`,
//! `listLBHealthCheckPolicies`, `deleteLBHealthCheckPolicy`, `createLBStickinessPolicy`,
//! `listLBStickinessPolicies`, `deleteLBStickinessPolicy`, `createStaticRoute`,
//! `listStaticRoutes`, `deleteStaticRoute`. Any other command works through
//! [`Client::call`], [`Client::list_all`] and [`Client::call_async`].

#![warn(missing_docs)]

mod access;
mod api;
mod client;
mod command;
mod config;
mod credentials;
mod envelope;
mod error;
mod jobs;
mod params;
mod secret;
mod throttle;
mod tls;

pub mod requests;
pub mod sign;
pub mod types;
pub mod version;

pub use access::ApiListing;
pub use client::Client;
pub use command::{PAGE_SIZE, is_read, is_retry_safe};
pub use config::{CallObserver, CallOutcome, ClientConfig, CredentialsChange};
pub use envelope::{decode_reply, response_key};
pub use error::{
    API_LIMIT_EXCEEDED, Error, NETWORK_RULE_CONFLICT, PARAM_ERROR, UNSUPPORTED_ACTION,
};
pub use jobs::{AsyncStart, BackoffPacing, FINISHED_AT_FIRST_POLL_SHARE, JobPacing, job_object};
pub use params::Params;
pub use requests::*;
pub use secret::Secret;
pub use types::*;
pub use version::ServerVersion;

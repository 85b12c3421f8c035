//! Async jobs: records, the per-network run queue, and the `AsyncJobResponse` rendering.

use crate::error::ApiError;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What a job does when it runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum JobAction {
    /// Finish associating an allocated IP.
    AssociateIp {
        /// Public IP id.
        ip_id: String,
        /// The network the job binds the address to (`associateIPToGuestNetwork`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        network_id: Option<String>,
    },
    /// Release an IP and its rules.
    DisassociateIp {
        /// Public IP id.
        ip_id: String,
    },
    /// Activate a created LB rule (and its firewall rule).
    CreateLbRule {
        /// Rule id.
        rule_id: String,
    },
    /// Change an LB rule.
    UpdateLbRule {
        /// Rule id.
        rule_id: String,
        /// Changed fields (`name`, `description`, `algorithm`, `protocol`, `cidrlist`).
        changes: BTreeMap<String, String>,
    },
    /// Delete an LB rule.
    DeleteLbRule {
        /// Rule id.
        rule_id: String,
        /// Its `openfirewall` firewall rule is revoked first (`deleteLoadBalancerRule`, not
        /// `deleteLoadBalancer`).
        revoke_related_firewall_rule: bool,
    },
    /// Add members.
    AssignToLbRule {
        /// Rule id.
        rule_id: String,
        /// The VMs (and addresses) asked for.
        members: Vec<MemberRequest>,
    },
    /// Remove members.
    RemoveFromLbRule {
        /// Rule id.
        rule_id: String,
        /// The VMs (and addresses) asked for.
        members: Vec<MemberRequest>,
    },
    /// Activate a firewall rule.
    CreateFirewallRule {
        /// Rule id.
        rule_id: String,
    },
    /// Delete a firewall rule.
    DeleteFirewallRule {
        /// Rule id.
        rule_id: String,
    },
    /// Apply a routing firewall rule.
    CreateRoutingFirewallRule {
        /// Rule id.
        rule_id: String,
    },
    /// Revoke a routing firewall rule.
    DeleteRoutingFirewallRule {
        /// Rule id.
        rule_id: String,
    },
    /// Activate an ACL item.
    CreateNetworkAcl {
        /// ACL item id.
        item_id: String,
    },
    /// Delete an ACL item.
    DeleteNetworkAcl {
        /// ACL item id.
        item_id: String,
    },
    /// Add tags.
    CreateTags {
        /// Resource type.
        resource_type: String,
        /// Resource ids.
        resource_ids: Vec<String>,
        /// Key/value pairs.
        tags: Vec<(String, String)>,
        /// Customer.
        customer: Option<String>,
    },
    /// Remove tags (all of the resources' tags when `tags` is empty).
    DeleteTags {
        /// Resource type.
        resource_type: String,
        /// Resource ids.
        resource_ids: Vec<String>,
        /// Key/value pairs.
        tags: Vec<(String, Option<String>)>,
    },
    /// Activate an LB policy.
    CreatePolicy {
        /// Policy id.
        policy_id: String,
    },
    /// Delete an LB policy.
    DeletePolicy {
        /// Policy id.
        policy_id: String,
    },
    /// Destroy a VM (and expunge it with `expunge`).
    DestroyVm {
        /// VM id.
        vm_id: String,
        /// `expunge=true`.
        expunge: bool,
    },
    /// Expunge a destroyed VM.
    ExpungeVm {
        /// VM id.
        vm_id: String,
    },
    /// Apply a created static route.
    CreateStaticRoute {
        /// Route id.
        route_id: String,
    },
    /// Revoke a static route.
    DeleteStaticRoute {
        /// Route id.
        route_id: String,
    },
    /// Activate a port-forwarding rule (and its firewall rule).
    CreatePfRule {
        /// Rule id.
        rule_id: String,
    },
    /// Delete a port-forwarding rule.
    DeletePfRule {
        /// Rule id.
        rule_id: String,
    },
    /// Assign a certificate to an LB rule.
    AssignCert {
        /// Rule id.
        rule_id: String,
        /// Certificate id.
        cert_id: String,
        /// `forced` (4.17): replace a bound certificate.
        forced: bool,
    },
    /// Remove the certificate from an LB rule.
    RemoveCert {
        /// Rule id.
        rule_id: String,
    },
}

/// A VM named by `virtualmachineids` or `vmidipmap` of assign/removeFromLoadBalancerRule,
/// resolved inside the job as the server does.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MemberRequest {
    /// VM id as sent.
    pub vm_id: String,
    /// `vmidipmap[i].vmip`, if any.
    pub ip: Option<String>,
    /// From `vmidipmap` (resolved in the job) rather than `virtualmachineids` (resolved
    /// by parameter processing before the job is queued).
    #[serde(default)]
    pub from_map: bool,
}

/// An async job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Job {
    /// Job id.
    pub id: String,
    /// API command that started it.
    pub command: String,
    /// Owner account name.
    pub account: String,
    /// Owner account id.
    pub account_id: String,
    /// User id.
    pub user_id: String,
    /// `jobinstancetype`.
    pub instance_type: Option<String>,
    /// `jobinstanceid`.
    pub instance_id: Option<String>,
    /// 0 pending, 1 succeeded, 2 failed.
    pub status: u8,
    /// 0, or the error code.
    pub result_code: u16,
    /// `jobresult`.
    pub result: Option<Value>,
    /// Creation date.
    pub created: String,
    /// Completion date.
    pub completed: Option<String>,
    /// Network whose queue the job waits in.
    pub network_id: Option<String>,
    /// The work.
    pub action: JobAction,
    /// Creation time, ms since the Unix epoch.
    pub created_ms: u64,
    /// When it may start (its network's previous job done).
    pub start_ms: u64,
    /// When it completes; `None` for a job that never finishes (fault injection).
    pub finish_ms: Option<u64>,
    /// When a job that never finishes is cancelled for blocking its queue.
    #[serde(default)]
    pub cancel_ms: Option<u64>,
    /// When it actually completed.
    pub completed_ms: Option<u64>,
    /// Fail with this error instead of running (fault injection).
    pub injected_failure: Option<ApiErrorRecord>,
}

/// A serialisable [`ApiError`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ApiErrorRecord {
    /// Code.
    pub code: u16,
    /// CS code.
    pub cs_code: Option<u32>,
    /// Text.
    pub text: String,
}

impl From<&ApiError> for ApiErrorRecord {
    fn from(e: &ApiError) -> Self {
        Self {
            code: e.code,
            cs_code: e.cs_code,
            text: e.text.clone(),
        }
    }
}

impl From<&ApiErrorRecord> for ApiError {
    fn from(e: &ApiErrorRecord) -> Self {
        ApiError::new(e.code, e.cs_code, e.text.clone())
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    u64::try_from(jiff::Timestamp::now().as_millisecond()).unwrap_or_default()
}

/// Java class name reported in `cmd`: the command's class in
/// `org.apache.cloudstack.api.command.user.*`. Most are `<Name>Cmd` in their package; the
/// address commands are `AssociateIPAddrCmd` / `DisassociateIPAddrCmd`, the static-route
/// commands live in `user.vpc`.
fn command_class(command: &str) -> String {
    let fixed = match command {
        "destroyVirtualMachine" => Some("vm.DestroyVMCmd"),
        "expungeVirtualMachine" => Some("vm.ExpungeVMCmd"),
        "associateIpAddress" => Some("address.AssociateIPAddrCmd"),
        "disassociateIpAddress" => Some("address.DisassociateIPAddrCmd"),
        "createLoadBalancer" => Some("loadbalancer.CreateApplicationLoadBalancerCmd"),
        "deleteLoadBalancer" => Some("loadbalancer.DeleteApplicationLoadBalancerCmd"),
        _ => None,
    };
    if let Some(class) = fixed {
        return format!("org.apache.cloudstack.api.command.user.{class}");
    }
    let package = match command {
        c if c.contains("LoadBalancer") || c.contains("LB") => "loadbalancer",
        c if c.contains("Firewall") || c.contains("PortForwarding") => "firewall",
        c if c.contains("NetworkACL") => "network",
        c if c.contains("Tags") => "tag",
        c if c.contains("StaticRoute") => "vpc",
        _ => "address",
    };
    let mut class = command.to_owned();
    if let Some(first) = class.get_mut(0..1) {
        first.make_ascii_uppercase();
    }
    format!("org.apache.cloudstack.api.command.user.{package}.{class}Cmd")
}

/// Parameters of a new job.
pub struct NewJob {
    /// API command.
    pub command: String,
    /// Owner account name.
    pub account: String,
    /// Network queue.
    pub network_id: Option<String>,
    /// `jobinstancetype`.
    pub instance_type: Option<&'static str>,
    /// `jobinstanceid`.
    pub instance_id: Option<String>,
    /// The work.
    pub action: JobAction,
}

impl Job {
    /// The `AsyncJobResponse` object.
    pub fn render(&self) -> Value {
        let mut out = json!({
            "jobid": self.id,
            "accountid": self.account_id,
            "account": self.account,
            "userid": self.user_id,
            "cmd": command_class(&self.command),
            "jobstatus": self.status,
            "jobprocstatus": 0,
            "jobresultcode": self.result_code,
            "jobresulttype": "object",
            "created": self.created,
        });
        if let Some(t) = &self.instance_type {
            out["jobinstancetype"] = json!(t);
        }
        if let Some(i) = &self.instance_id {
            out["jobinstanceid"] = json!(i);
        }
        if let Some(r) = &self.result {
            out["jobresult"] = r.clone();
        }
        if let Some(c) = &self.completed {
            out["completed"] = json!(c);
        }
        out
    }
}

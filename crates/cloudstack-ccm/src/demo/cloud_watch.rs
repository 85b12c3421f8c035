//! The CloudStack side of the progress view: every async job the simulator completed
//! becomes one line, described from the simulator's state (the IP address, the rule's
//! name and ports, the members' VM names).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;

use cloudstack_sim::jobs::{Job, JobAction};
use cloudstack_sim::state::{LbRule, State};

use super::render::{Line, Mark};

/// What a rule looked like when last seen (rules are gone once deleted).
#[derive(Debug, Clone)]
struct RuleFacts {
    name: String,
    protocol: String,
    public_port: u16,
    private_port: u16,
}

impl From<&LbRule> for RuleFacts {
    fn from(rule: &LbRule) -> Self {
        RuleFacts {
            name: rule.name.clone(),
            protocol: rule.protocol.clone(),
            public_port: rule.public_port,
            private_port: rule.private_port,
        }
    }
}

/// Turns newly completed jobs into lines.
#[derive(Debug)]
pub(crate) struct CloudWatch {
    /// Epoch milliseconds of the demo's start (the simulator's clock).
    start_ms: u64,
    reported: HashSet<String>,
    rules: HashMap<String, RuleFacts>,
    /// `protocol port` of each firewall rule and ACL item seen, by id.
    openings: HashMap<String, String>,
}

impl CloudWatch {
    /// A watch whose offsets count from `start_ms` (ms since the Unix epoch).
    pub fn new(start_ms: u64) -> CloudWatch {
        CloudWatch {
            start_ms,
            reported: HashSet::new(),
            rules: HashMap::new(),
            openings: HashMap::new(),
        }
    }

    /// Lines for the jobs completed since the last call, in completion order.
    pub fn poll(&mut self, state: &State) -> Vec<Line> {
        let mut done: Vec<&Job> = state
            .jobs
            .iter()
            .filter(|job| job.status != 0 && !self.reported.contains(&job.id))
            .collect();
        done.sort_by_key(|job| job.completed_ms);
        let lines = done
            .iter()
            .map(|job| {
                self.reported.insert(job.id.clone());
                self.describe(state, job)
            })
            .collect();
        for rule in &state.lb_rules {
            self.rules.insert(rule.id.clone(), RuleFacts::from(rule));
        }
        for rule in &state.firewall_rules {
            let opening = format!("{} {}", rule.protocol, port_text(rule.start_port));
            self.openings.insert(rule.id.clone(), opening);
        }
        for item in &state.acl_items {
            let opening = format!("{} {}", item.protocol, port_text(item.start_port));
            self.openings.insert(item.id.clone(), opening);
        }
        lines
    }

    fn rule(&self, state: &State, id: &str) -> RuleFacts {
        state
            .lb_rule(id)
            .map(RuleFacts::from)
            .or_else(|| self.rules.get(id).cloned())
            .unwrap_or(RuleFacts {
                name: id.to_string(),
                protocol: "?".to_string(),
                public_port: 0,
                private_port: 0,
            })
    }

    /// The name the rule had before this tick (an update may have renamed it).
    fn previous_name(&self, state: &State, id: &str) -> String {
        self.rules
            .get(id)
            .map(|facts| facts.name.clone())
            .unwrap_or_else(|| self.rule(state, id).name)
    }

    fn opening<'a>(&'a self, id: &'a str) -> &'a str {
        self.openings.get(id).map_or(id, String::as_str)
    }

    fn describe(&self, state: &State, job: &Job) -> Line {
        let completed = job.completed_ms.unwrap_or(job.created_ms);
        let at = Duration::from_millis(completed.saturating_sub(self.start_ms));
        let ran = completed.saturating_sub(job.start_ms.max(job.created_ms));
        let queued = job.start_ms.saturating_sub(job.created_ms);
        let mut detail = format!("{} · job {:.2}s", job.command, ran as f64 / 1000.0);
        if queued >= 20 {
            detail.push_str(&format!(", queued {:.2}s", queued as f64 / 1000.0));
        }
        if job.status != 1 {
            let reason = job
                .result
                .as_ref()
                .and_then(|r| r.get("errortext"))
                .and_then(|t| t.as_str())
                .unwrap_or("no error text");
            let text = format!("{} failed ({}): {reason}", job.command, job.result_code);
            return Line::new(at, Mark::Warn, text, detail);
        }
        Line::new(at, Mark::Done, self.text(state, &job.action), detail)
    }

    fn text(&self, state: &State, action: &JobAction) -> String {
        match action {
            JobAction::AssociateIp { ip_id, .. } => {
                let ip = state.ip(ip_id);
                let address = ip.map_or(ip_id.as_str(), |ip| ip.address.as_str());
                let network = ip
                    .and_then(|ip| ip.network_id.as_deref())
                    .and_then(|id| state.network(id))
                    .map(|n| format!(" with network {}", n.name))
                    .unwrap_or_default();
                format!("IP {address} associated{network}")
            }
            JobAction::DisassociateIp { ip_id } => {
                let address = state
                    .ip(ip_id)
                    .map_or(ip_id.as_str(), |ip| ip.address.as_str());
                format!("IP {address} released")
            }
            JobAction::CreateLbRule { rule_id } => {
                let rule = self.rule(state, rule_id);
                let firewall = state
                    .lb_rule(rule_id)
                    .is_some_and(|r| r.firewall_rule_id.is_some());
                format!(
                    "rule {} created: {} {} -> node port {}{}",
                    rule.name,
                    rule.protocol,
                    rule.public_port,
                    rule.private_port,
                    if firewall { ", firewall opened" } else { "" }
                )
            }
            JobAction::UpdateLbRule { rule_id, changes } => {
                format!(
                    "rule {} updated: {}",
                    self.previous_name(state, rule_id),
                    describe_changes(changes)
                )
            }
            JobAction::DeleteLbRule { rule_id, .. } => {
                format!("rule {} deleted", self.previous_name(state, rule_id))
            }
            JobAction::AssignCert { rule_id, .. } => {
                format!("certificate assigned to {}", self.rule(state, rule_id).name)
            }
            JobAction::RemoveCert { rule_id } => {
                format!(
                    "certificate removed from {}",
                    self.rule(state, rule_id).name
                )
            }
            JobAction::AssignToLbRule { rule_id, members } => format!(
                "members assigned to {}: {}",
                self.rule(state, rule_id).name,
                vm_names(state, members.iter().map(|m| m.vm_id.as_str()))
            ),
            JobAction::RemoveFromLbRule { rule_id, members } => format!(
                "members removed from {}: {}",
                self.rule(state, rule_id).name,
                vm_names(state, members.iter().map(|m| m.vm_id.as_str()))
            ),
            JobAction::CreateFirewallRule { rule_id } => {
                match state.firewall_rules.iter().find(|r| &r.id == rule_id) {
                    Some(rule) => format!(
                        "firewall opened: {} {} from {}",
                        rule.protocol,
                        port_text(rule.start_port),
                        rule.cidrs.join(",")
                    ),
                    None => "firewall opened".to_string(),
                }
            }
            JobAction::DeleteFirewallRule { rule_id } => {
                format!("firewall closed: {}", self.opening(rule_id))
            }
            JobAction::CreateRoutingFirewallRule { rule_id } => {
                format!("routing firewall rule {rule_id} created")
            }
            JobAction::DeleteRoutingFirewallRule { rule_id } => {
                format!("routing firewall rule {rule_id} deleted")
            }
            JobAction::CreateNetworkAcl { item_id } => {
                match state.acl_items.iter().find(|i| &i.id == item_id) {
                    Some(item) => format!(
                        "ACL item added: allow {} {} from {}",
                        item.protocol,
                        port_text(item.start_port),
                        item.cidrs.join(",")
                    ),
                    None => "ACL item added".to_string(),
                }
            }
            JobAction::DeleteNetworkAcl { item_id } => {
                format!("ACL item deleted: {}", self.opening(item_id))
            }
            JobAction::CreateTags {
                resource_type,
                resource_ids,
                tags,
                ..
            } => format!(
                "tagged {} {resource_type}: {}",
                resource_ids.len(),
                tags.iter()
                    .map(|(key, _)| key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            JobAction::DeleteTags {
                resource_type,
                resource_ids,
                ..
            } => format!("tags removed from {} {resource_type}", resource_ids.len()),
            JobAction::CreatePolicy { .. } => "load-balancer policy added".to_string(),
            JobAction::DeletePolicy { .. } => "load-balancer policy deleted".to_string(),
            JobAction::DestroyVm { vm_id, expunge } => format!(
                "VM {} destroyed{}",
                vm_names(state, std::iter::once(vm_id.as_str())),
                if *expunge { " and expunged" } else { "" }
            ),
            JobAction::ExpungeVm { vm_id } => format!(
                "VM {} expunged",
                vm_names(state, std::iter::once(vm_id.as_str()))
            ),
            JobAction::CreateStaticRoute { route_id } => match state.static_route(route_id) {
                Some(route) => format!(
                    "static route added: {} via {}",
                    route.cidr,
                    route.next_hop.as_deref().unwrap_or("a private gateway")
                ),
                None => "static route added".to_string(),
            },
            JobAction::DeleteStaticRoute { .. } => "static route deleted".to_string(),
            JobAction::CreatePfRule { .. } => "port forwarding opened".to_string(),
            JobAction::DeletePfRule { .. } => "port forwarding closed".to_string(),
        }
    }
}

/// `protocol tcp-proxy, renamed to X` from an update's changed fields.
fn describe_changes(changes: &BTreeMap<String, String>) -> String {
    let parts: Vec<String> = changes
        .iter()
        .filter(|(field, _)| field.as_str() != "description")
        .map(|(field, value)| match field.as_str() {
            "name" => format!("renamed to {value}"),
            _ => format!("{field} {value}"),
        })
        .collect();
    if parts.is_empty() {
        "description".to_string()
    } else {
        parts.join(", ")
    }
}

/// A port, or `*` for all.
fn port_text(port: Option<i64>) -> String {
    port.map_or("*".to_string(), |p| p.to_string())
}

/// The VMs' names (their ids when unknown), comma-separated.
fn vm_names<'a>(state: &State, ids: impl Iterator<Item = &'a str>) -> String {
    ids.map(|id| state.vm(id).map_or(id, |vm| vm.name.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

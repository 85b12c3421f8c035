//! What the simulator holds against the Services that exist: public IPs, load-balancer
//! rules, firewall rules and ACL items no Service owns (leaks), and rules that exist
//! twice (duplicates).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name;
use cloudstack_sim::SimServer;
use serde_json::Value;

use super::services;

/// What existed before the controller ran: never counted as leaked.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    ips: BTreeSet<String>,
    firewall_rules: BTreeSet<String>,
    acl_items: BTreeSet<String>,
}

impl Baseline {
    /// The allocated IPs (source NAT, user-brought), firewall rules and ACL items now.
    pub fn take(sim: &SimServer) -> Baseline {
        sim.with_state(|s| Baseline {
            ips: s
                .ips
                .iter()
                .filter(|ip| ip.state != "Free")
                .map(|ip| ip.id.clone())
                .collect(),
            firewall_rules: s.firewall_rules.iter().map(|f| f.id.clone()).collect(),
            acl_items: s.acl_items.iter().map(|a| a.id.clone()).collect(),
        })
    }
}

/// The findings of one audit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Findings {
    /// Allocated public IPs no live Service records.
    pub leaked_ips: Vec<String>,
    /// Rules whose name belongs to no live Service, or that sit on another IP.
    pub leaked_rules: Vec<String>,
    /// Firewall rules on an IP no live Service records.
    pub leaked_firewall_rules: Vec<String>,
    /// ACL items naming no live Service's load balancer.
    pub leaked_acl_items: Vec<String>,
    /// Internal rules of no live internal Service, or not on its address.
    pub leaked_internal_rules: Vec<String>,
    /// Rule names (or IP:port/protocol) present more than once.
    pub duplicates: Vec<String>,
    /// Firewall openings (IP, protocol, port) present more than once.
    pub duplicate_firewall_rules: Vec<String>,
}

impl Findings {
    /// Leaks of every kind.
    pub fn leaks(&self) -> usize {
        self.leaked_ips.len()
            + self.leaked_rules.len()
            + self.leaked_firewall_rules.len()
            + self.leaked_acl_items.len()
            + self.leaked_internal_rules.len()
    }

    /// Duplicates of every kind.
    pub fn duplicate_count(&self) -> usize {
        self.duplicates.len() + self.duplicate_firewall_rules.len()
    }

    /// Nothing leaked, nothing doubled.
    pub fn is_clean(&self) -> bool {
        self.leaks() == 0 && self.duplicate_count() == 0
    }
}

impl fmt::Display for Findings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "leaks {} (ips {:?}, rules {:?}, firewall {:?}, acl {:?}, internal rules {:?}), duplicates {} ({:?} {:?})",
            self.leaks(),
            self.leaked_ips,
            self.leaked_rules,
            self.leaked_firewall_rules,
            self.leaked_acl_items,
            self.leaked_internal_rules,
            self.duplicate_count(),
            self.duplicates,
            self.duplicate_firewall_rules,
        )
    }
}

/// Audits the simulator against `live` Services (those that exist and are not being
/// deleted own what they recorded; a Service being deleted owns nothing).
pub fn audit(sim: &SimServer, baseline: &Baseline, live: &[Value]) -> Findings {
    let owners: BTreeMap<String, Option<String>> = live
        .iter()
        .filter(|s| !services::is_deleting(s))
        .map(|s| {
            (
                default_lb_name(services::uid(s)),
                services::recorded_ip_id(s).map(str::to_string),
            )
        })
        .collect();
    let owned_ips: BTreeSet<String> = owners.values().flatten().cloned().collect();
    sim.with_state(|s| {
        let mut findings = Findings::default();
        for ip in &s.ips {
            if ip.state != "Free" && !baseline.ips.contains(&ip.id) && !owned_ips.contains(&ip.id) {
                let tags: Vec<String> = s
                    .tags
                    .iter()
                    .filter(|t| t.resource_id == ip.id)
                    .map(|t| format!("{}={}", t.key, t.value))
                    .collect();
                findings.leaked_ips.push(format!(
                    "{} {} ({}, allocated {:?}, tags {tags:?})",
                    ip.address, ip.id, ip.state, ip.allocated
                ));
            }
        }
        let mut names = BTreeMap::<&str, usize>::new();
        let mut endpoints = BTreeMap::<(String, u16, String), usize>::new();
        for rule in &s.lb_rules {
            *names.entry(rule.name.as_str()).or_default() += 1;
            *endpoints
                .entry((rule.ip_id.clone(), rule.public_port, rule.protocol.clone()))
                .or_default() += 1;
            let lb_name = rule.name.split('-').next().unwrap_or_default();
            let owner_ip = owners.get(lb_name);
            if owner_ip.is_none_or(|ip| ip.as_deref() != Some(rule.ip_id.as_str())) {
                findings
                    .leaked_rules
                    .push(format!("{} on {}", rule.name, rule.ip_id));
            }
        }
        // Internal rules: owned by a live internal Service, on the address it reports.
        let internal_owners: BTreeMap<String, Option<&str>> = live
            .iter()
            .filter(|s| !services::is_deleting(s) && services::is_internal(s))
            .map(|s| (default_lb_name(services::uid(s)), services::ingress_ip(s)))
            .collect();
        let mut sources = BTreeMap::<(String, u16), usize>::new();
        for rule in &s.internal_lb_rules {
            *names.entry(rule.name.as_str()).or_default() += 1;
            *sources
                .entry((rule.source_ip.clone(), rule.source_port))
                .or_default() += 1;
            let lb_name = rule.name.split('-').next().unwrap_or_default();
            // A Service whose status is not written yet owns any address.
            let owned = internal_owners
                .get(lb_name)
                .is_some_and(|address| address.is_none_or(|a| a == rule.source_ip));
            if !owned {
                findings.leaked_internal_rules.push(format!(
                    "{} on {}:{}",
                    rule.name, rule.source_ip, rule.source_port
                ));
            }
        }
        findings.duplicates.extend(
            sources
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|((ip, port), n)| format!("internal {ip}:{port} x{n}")),
        );
        findings.duplicates.extend(
            names
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|(name, n)| format!("{name} x{n}")),
        );
        findings.duplicates.extend(
            endpoints
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|((ip, port, proto), n)| format!("{ip}:{port}/{proto} x{n}")),
        );
        let mut openings = BTreeMap::<(String, String, Option<i64>), usize>::new();
        for fw in &s.firewall_rules {
            if baseline.firewall_rules.contains(&fw.id) {
                continue;
            }
            *openings
                .entry((fw.ip_id.clone(), fw.protocol.clone(), fw.start_port))
                .or_default() += 1;
            if !owned_ips.contains(&fw.ip_id) {
                findings.leaked_firewall_rules.push(format!(
                    "{} {}/{:?} on {}",
                    fw.id, fw.protocol, fw.start_port, fw.ip_id
                ));
            }
        }
        findings.duplicate_firewall_rules.extend(
            openings
                .into_iter()
                .filter(|(_, n)| *n > 1)
                .map(|((ip, proto, port), n)| format!("{ip} {proto}/{port:?} x{n}")),
        );
        for item in &s.acl_items {
            if baseline.acl_items.contains(&item.id) {
                continue;
            }
            let reason = item.reason.clone().unwrap_or_default();
            if !owners.keys().any(|lb| reason.contains(lb.as_str())) {
                findings
                    .leaked_acl_items
                    .push(format!("{} {:?} {reason:?}", item.id, item.start_port));
            }
        }
        findings
    })
}

/// One line of simulator totals: IPs allocated, rules, firewall rules, ACL items, jobs.
pub fn totals(sim: &SimServer) -> String {
    sim.with_state(|s| {
        format!(
            "ips allocated {}, lb rules {}, internal lb rules {}, firewall rules {}, acl items {}, jobs {}",
            s.ips.iter().filter(|ip| ip.state != "Free").count(),
            s.lb_rules.len(),
            s.internal_lb_rules.len(),
            s.firewall_rules.len(),
            s.acl_items.len(),
            s.jobs.len()
        )
    })
}

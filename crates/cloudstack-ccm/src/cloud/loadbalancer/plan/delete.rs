//! The removal of a Service's load balancer.

use super::*;

/// Plans the removal of a Service's load balancer.
///
/// Deletes the firewall rules or ACL items of the Service's ports, then its rules (a
/// firewall rule `openfirewall` made goes with its rule and is not deleted on its own:
/// see `firewall_deletes_first`). With `keep-ip` the IP stays and its ownership tags go:
/// it is the user's from then on. Else it releases the IP
/// when the controller associated it, no other rule uses it, it is not a source-NAT IP,
/// and `keep-ip` is not set.
pub(crate) fn plan_delete(spec: &DeleteSpec, observed: &ObservedLb, ctx: &PlanContext) -> Plan {
    let mut first = Vec::new();
    let ports: BTreeSet<(IpProtocol, u16)> = observed
        .rules
        .iter()
        .map(|r| (r.protocol.ip_protocol(), r.public_port))
        .collect();
    for rule in &observed.rules {
        first.push(Step::DeleteRule {
            id: rule.id.clone(),
            name: rule.name.clone(),
        });
    }
    // Rules of the Service on an address another Service took go; the address stays.
    first.extend(taken_ip_rule_deletes(observed));
    for fw in &observed.firewall_rules {
        if fw.start_port == fw.end_port && ports.contains(&(fw.protocol, fw.start_port)) {
            first.push(Step::DeleteFirewallRule {
                id: fw.id.clone(),
                protocol: fw.protocol,
                port: fw.start_port,
            });
        }
    }
    if matches!(ctx.network.port_access, PortAccess::NetworkAcl { .. }) {
        for item in &observed.acl_items {
            // Items made for the Service go with it, also when its rules never stood (a
            // rule CloudStack refused after the items were made); an untagged item of the
            // Go CCM only for a port of one of its rules.
            if acl_item_is_ours(item, &spec.lb_name, &spec.service_uid)
                || (adopted_go_acl_item(item, observed)
                    && ports.contains(&(item.protocol, item.start_port)))
            {
                first.push(Step::DeleteAclItem {
                    id: item.id.clone(),
                    protocol: item.protocol,
                    port: item.start_port,
                });
            }
        }
    }
    let mut release = Vec::new();
    let mut warnings = Vec::new();
    if let Some(ip) = &observed.ip {
        let ours = spec.ip_associated_by_controller
            || ip.associated_by_us()
            || spec.pending_claim == Some(ip.address)
            || spec.associated_by_predecessor(observed);
        if spec.keep_ip {
            warnings.push(format!("keeping IP {} (keep-ip)", ip.address));
            if ip.associated_by_us() {
                // The address now belongs to the user, as one they brought: a later
                // Service that requests it never releases it.
                release.push(Step::UntagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ip.id.clone()],
                    keys: [TAG_ASSOCIATED, TAG_CLUSTER, TAG_KEEP_IP, TAG_SERVICE_UID]
                        .into_iter()
                        .filter(|key| ip.tags.contains_key(*key))
                        .map(str::to_string)
                        .collect(),
                });
            }
        } else if !observed.foreign_rules.is_empty() {
            warnings.push(format!(
                "keeping IP {}: other load-balancer rules use it",
                ip.address
            ));
        } else if ours && !ip.is_source_nat && ip.ownership == IpOwnership::Ours {
            // Held by a claim alone (no id recorded): taken first, so an address another
            // Service has just associated and not yet tagged is never released under it
            // (see `ip_claim`); the release waits for the next phase.
            if spec.pending_claim == Some(ip.address) && !ip.tags.contains_key(TAG_SERVICE_UID) {
                first.push(Step::TagResources {
                    resource_type: TagResourceType::PublicIpAddress,
                    resources: vec![ResourceRef::Existing(ip.id.clone())],
                    tags: [(TAG_SERVICE_UID.to_string(), spec.service_uid.clone())].into(),
                });
            }
            release.push(Step::ReleaseIp {
                id: ip.id.clone(),
                address: ip.address,
            });
        }
    }
    release.extend(super::tls::delete_steps(observed));
    if let Some(command) = ctx.access.refused(Feature::TlsTermination)
        && observed.rules.iter().any(|r| r.protocol == LbProtocol::Ssl)
    {
        warnings.push(format!(
            "the certificates the controller uploaded for this Service, if any, stay in CloudStack: the keys' role may not call {command}"
        ));
    }
    let phases = firewall_deletes_first(vec![first, release], observed);
    Plan::from_phases(phases, warnings).fitted_to_keys(&ctx.access)
}

/// Deletes the Service's own rules that stand on an address another Service took
/// ([`super::super::observe::TakenIp`]): the Service moves to a new address, and the
/// address is the other's.
pub(super) fn taken_ip_rule_deletes(observed: &ObservedLb) -> impl Iterator<Item = Step> + '_ {
    observed
        .taken_ip
        .iter()
        .flat_map(|taken| &taken.own_rules)
        .map(|(id, name)| Step::DeleteRule {
            id: id.clone(),
            name: name.clone(),
        })
}

/// What deleting a load balancer needs to know; built leniently, so a Service with a
/// broken annotation can still be cleaned up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeleteSpec {
    /// Load-balancer name (rule-name prefix).
    pub lb_name: String,
    /// Service UID (ownership tags).
    pub service_uid: String,
    /// `…-keep-ip` (true when unreadable).
    pub keep_ip: bool,
    /// `…-ip-associated-by-controller`.
    pub ip_associated_by_controller: bool,
    /// The claimed address while no IP id is recorded (`LbSpec::pending_claim`): when
    /// observed as ours, we associated it.
    pub pending_claim: Option<IpAddr>,
    /// The Service asks for an address (`spec.loadBalancerIP` or `…-address`).
    pub requests_address: bool,
    /// An IP id is recorded on the Service (`…-id`).
    pub ip_id_recorded: bool,
    /// Rule-name prefixes of the leaseweb fork for this Service.
    pub legacy_lb_names: Vec<String>,
}

impl DeleteSpec {
    /// Whether the controller the load balancer was taken over from associated its
    /// address, and so would release it on delete (the controller does the same, and
    /// tags the address as its own when it takes the load balancer over):
    ///
    /// * the Go provider (v1.2.0 and before) associated every address
    ///   `spec.loadBalancerIP` did not request; it records no IP id on the Service, so an
    ///   untagged address under the Service's rules with no id recorded and no address
    ///   requested is one it associated (a requested one it associated carries its
    ///   `…-ip-associated-by-controller` annotation);
    /// * the leaseweb fork releases the address of its rules (named by it) unless
    ///   `keep-ip` is set.
    pub(crate) fn associated_by_predecessor(&self, observed: &ObservedLb) -> bool {
        let Some(ip) = &observed.ip else {
            return false;
        };
        if ip.associated_by_us() || ip.is_source_nat || ip.ownership != IpOwnership::Ours {
            return false;
        }
        let rules_on_ip = || observed.rules.iter().filter(|r| r.public_ip_id == ip.id);
        let by_go = !self.requests_address
            && !self.ip_id_recorded
            && self.pending_claim.is_none()
            && rules_on_ip().next().is_some();
        let by_leaseweb = rules_on_ip().any(|r| {
            self.legacy_lb_names
                .iter()
                .any(|prefix| r.name.starts_with(&format!("{prefix}-")))
        });
        by_go || by_leaseweb
    }
}

impl LbSpec {
    /// The part of the spec deletion needs.
    pub(crate) fn delete_spec(&self) -> DeleteSpec {
        DeleteSpec {
            lb_name: self.lb_name.clone(),
            service_uid: self.service.uid.clone(),
            keep_ip: self.keep_ip,
            ip_associated_by_controller: self.ip_associated_by_controller,
            pending_claim: self.pending_claim(),
            requests_address: self.requested_ip.is_some(),
            ip_id_recorded: self.recorded_ip_id.is_some(),
            legacy_lb_names: self.legacy_lb_names.clone(),
        }
    }
}

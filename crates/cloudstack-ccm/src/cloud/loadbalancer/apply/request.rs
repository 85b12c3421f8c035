//! What each plan step asks CloudStack: a [`Step`], with the ids earlier phases produced,
//! becomes the request to send. Pure, no I/O: [`super::run_step`] sends it.

use std::net::IpAddr;

use cloudstack::{
    AssignCertToLoadBalancer, DeleteSslCert, RemoveCertFromLoadBalancer, UploadSslCert,
};
use cloudstack::{
    AssignToLoadBalancerRule, CreateFirewallRule, CreateLbHealthCheckPolicy,
    CreateLbStickinessPolicy, CreateLoadBalancerRule, CreateNetworkAcl, CreateRoutingFirewallRule,
    CreateTags, DeleteFirewallRule, DeleteLbHealthCheckPolicy, DeleteLbStickinessPolicy,
    DeleteLoadBalancerRule, DeleteNetworkAcl, DeleteRoutingFirewallRule, DeleteTags,
    DisassociateIpAddress, Params, Request, UpdateLoadBalancerRule,
};
use cloudstack::{CreateLoadBalancer, DeleteLoadBalancer};

use super::super::plan::{
    AssociateTarget, CertRef, InternalAddress, IpRef, POLICY_DESCRIPTION, ResourceRef, RuleRef,
    Step, TagResourceType,
};
use super::super::vocabulary::INTERNAL_SCHEME;
use super::{Applied, ApplyError};
use crate::cloud::cidr::Cidr;
use crate::cloud::tags::TAG_SERVICE_UID;

/// One command and its parameters, queued on the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Queued {
    /// The CloudStack command.
    pub command: &'static str,
    /// Its parameters.
    pub params: Params,
}

impl Queued {
    /// `request` as a queued call.
    pub(super) fn of<R: Request>(request: &R) -> Queued {
        Queued {
            command: R::COMMAND,
            params: request.to_params(),
        }
    }
}

/// How a step is sent.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Call {
    /// A new public IP: claimed, associated and recorded ([`super::super::ip_claim`]).
    AssociateIp {
        /// Network or VPC.
        target: AssociateTarget,
        /// The address asked for, if any (else one is claimed).
        address: Option<IpAddr>,
        /// The record of another Service's address to drop first.
        replacing: Option<String>,
    },
    /// The claimed IP found allocated after a crash: recorded, no CloudStack call.
    AdoptClaimedIp {
        /// Network or VPC it was associated with.
        target: AssociateTarget,
        /// IP id.
        id: String,
        /// The address.
        address: IpAddr,
    },
    /// `createLoadBalancerRule`: the rule's id is kept under `name` as soon as the reply
    /// names it, before the job is awaited.
    CreateRule {
        /// The rule's name.
        name: String,
        /// The call.
        call: Queued,
    },
    /// `createLoadBalancer` (an internal rule): its id is kept under `name` as soon as
    /// the reply names it, its address once the job ends.
    CreateInternalRule {
        /// The rule's name.
        name: String,
        /// The call.
        call: Queued,
    },
    /// A job, awaited.
    Job(Queued),
    /// A job that creates an object, which is then given the plan's ownership tags:
    /// the object is `reply_key` of the job result, tagged as `resource_type`.
    CreateTagged {
        /// The call.
        call: Queued,
        /// The key of the created object in the job result.
        reply_key: &'static str,
        /// Its resource type for `createTags`.
        resource_type: &'static str,
    },
    /// A deleting job: finding nothing to delete is fine.
    Delete(Queued),
    /// `removeFromLoadBalancerRule`, tolerant of members already gone.
    RemoveMembers {
        /// The rule id.
        rule_id: String,
        /// The VMs to remove.
        vm_ids: Vec<String>,
    },
    /// `createTags` (tags do not queue on the network).
    CreateTags(CreateTags),
    /// `createTags` of a public IP's ownership tags, the Service's UID among them: the
    /// first Service to tag an address holds it ([`super::super::ip_claim`]).
    TakeIp {
        /// The IP id.
        ip_id: String,
        /// The Service's UID, as tagged.
        service_uid: String,
        /// The tags to create.
        request: CreateTags,
    },
    /// `deleteTags` (tags do not queue on the network).
    DeleteTags(DeleteTags),
    /// `uploadSslCert` (synchronous): the new id is kept under the fingerprint.
    UploadCertificate {
        /// The certificate's fingerprint.
        fingerprint: String,
        /// The request (its `Debug` hides the key).
        request: Box<UploadSslCert>,
    },
    /// `deleteSslCert` (synchronous): finding nothing to delete is fine.
    DeleteCertificate(DeleteSslCert),
}

/// What one step sends, and the existing rule it changes (whose caches are renewed after
/// the run).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct StepRequest {
    /// How the step is sent.
    pub call: Call,
    /// The id of an existing rule whose members, policies or settings the step changes.
    pub touches: Option<String>,
}

/// The request of `step`, its references resolved from what earlier phases `done`.
pub(super) fn request(step: &Step, done: &Applied) -> Result<StepRequest, ApplyError> {
    let mut touches = None;
    let mut rule_id = |rule: &RuleRef| -> Result<String, ApplyError> {
        if let RuleRef::Existing { id, .. } = rule {
            touches = Some(id.clone());
        }
        resolve_rule(step, rule, done)
    };
    let call = match step {
        Step::AssociateIp {
            target,
            address,
            replacing,
        } => Call::AssociateIp {
            target: target.clone(),
            address: *address,
            replacing: replacing.clone(),
        },
        Step::AdoptClaimedIp {
            target,
            id,
            address,
        } => Call::AdoptClaimedIp {
            target: target.clone(),
            id: id.clone(),
            address: *address,
        },
        Step::CreateRule {
            name,
            ip,
            network_id,
            protocol,
            public_port,
            private_port,
            algorithm,
            cidrs,
            open_firewall,
        } => Call::CreateRule {
            name: name.clone(),
            call: Queued::of(&CreateLoadBalancerRule {
                name: name.clone(),
                algorithm: algorithm.as_str().to_string(),
                privateport: u32::from(*private_port),
                publicport: u32::from(*public_port),
                publicipid: Some(resolve_ip(step, ip, done)?),
                networkid: Some(network_id.clone()),
                protocol: Some(protocol.as_str().to_string()),
                openfirewall: Some(*open_firewall),
                cidrlist: cidr_strings(cidrs),
                ..Default::default()
            }),
        },
        Step::UpdateRule {
            id,
            new_name,
            protocol,
            algorithm,
            cidrs,
            ..
        } => {
            touches = Some(id.clone());
            Call::Job(Queued::of(&UpdateLoadBalancerRule {
                id: id.clone(),
                name: new_name.clone(),
                protocol: protocol.map(|p| p.as_str().to_string()),
                algorithm: algorithm.map(|a| a.as_str().to_string()),
                cidrlist: cidrs.as_deref().map(cidr_strings).unwrap_or_default(),
                ..Default::default()
            }))
        }
        Step::DeleteRule { id, .. } => {
            touches = Some(id.clone());
            Call::Delete(Queued::of(&DeleteLoadBalancerRule { id: id.clone() }))
        }
        Step::CreateInternalRule {
            name,
            network_id,
            address,
            source_port,
            instance_port,
            algorithm,
        } => {
            let sourceipaddress = match address {
                InternalAddress::Known(address) => Some(address.to_string()),
                InternalAddress::Acquire => None,
                InternalAddress::OfFirstRule => Some(
                    done.internal_address
                        .ok_or_else(|| ApplyError::Unresolved {
                            step: step.to_string(),
                            detail: "no internal rule of the plan has an address yet".into(),
                        })?
                        .to_string(),
                ),
            };
            Call::CreateInternalRule {
                name: name.clone(),
                call: Queued::of(&CreateLoadBalancer {
                    name: name.clone(),
                    networkid: network_id.clone(),
                    sourceport: u32::from(*source_port),
                    instanceport: u32::from(*instance_port),
                    algorithm: algorithm.as_str().to_string(),
                    sourceipaddressnetworkid: network_id.clone(),
                    scheme: INTERNAL_SCHEME.to_string(),
                    sourceipaddress,
                    ..Default::default()
                }),
            }
        }
        Step::DeleteInternalRule { id, .. } => {
            Call::Delete(Queued::of(&DeleteLoadBalancer { id: id.clone() }))
        }
        Step::AssignMembers { rule, vm_ids } => Call::Job(Queued::of(&AssignToLoadBalancerRule {
            id: rule_id(rule)?,
            virtualmachineids: vm_ids.iter().cloned().collect(),
            ..Default::default()
        })),
        Step::RemoveMembers { rule, vm_ids } => Call::RemoveMembers {
            rule_id: rule_id(rule)?,
            vm_ids: vm_ids.clone(),
        },
        Step::CreateFirewallRule {
            ip,
            protocol,
            port,
            cidrs,
        } => Call::CreateTagged {
            call: Queued::of(&CreateFirewallRule {
                ipaddressid: resolve_ip(step, ip, done)?,
                protocol: protocol.as_str().to_string(),
                startport: Some(u32::from(*port)),
                endport: Some(u32::from(*port)),
                cidrlist: cidr_strings(cidrs),
                ..Default::default()
            }),
            reply_key: "firewallrule",
            resource_type: "FirewallRule",
        },
        // A firewall rule known without its id (made by `openfirewall` since the view was
        // read) is read before a plan deletes it; sending no id would read as "gone".
        Step::DeleteFirewallRule { id, .. } if id.is_empty() => {
            return Err(ApplyError::Unresolved {
                step: step.to_string(),
                detail: "the firewall rule's id is not known".into(),
            });
        }
        Step::DeleteFirewallRule { id, .. } => {
            Call::Delete(Queued::of(&DeleteFirewallRule { id: id.clone() }))
        }
        Step::CreateRoutingFirewallRule {
            network_id,
            protocol,
            port,
            destination,
            cidrs,
        } => Call::CreateTagged {
            call: Queued::of(&CreateRoutingFirewallRule {
                networkid: network_id.clone(),
                protocol: protocol.as_str().to_string(),
                startport: Some(u32::from(*port)),
                endport: Some(u32::from(*port)),
                cidrlist: cidr_strings(cidrs),
                destcidrlist: cidr_strings(std::slice::from_ref(destination)),
                traffictype: Some("Ingress".into()),
            }),
            reply_key: "firewallrule",
            // `ApiResponseHelper.createFirewallResponse` makes routing rules firewall rules.
            resource_type: "FirewallRule",
        },
        Step::DeleteRoutingFirewallRule { id, .. } => {
            Call::Delete(Queued::of(&DeleteRoutingFirewallRule { id: id.clone() }))
        }
        Step::CreateAclItem {
            acl_id,
            network_id,
            protocol,
            port,
            cidrs,
            reason,
        } => Call::CreateTagged {
            call: Queued::of(&CreateNetworkAcl {
                protocol: protocol.as_str().to_string(),
                aclid: Some(acl_id.clone()),
                networkid: Some(network_id.clone()),
                startport: Some(u32::from(*port)),
                endport: Some(u32::from(*port)),
                cidrlist: cidr_strings(cidrs),
                traffictype: Some("Ingress".into()),
                action: Some("Allow".into()),
                reason: Some(reason.clone()),
                ..Default::default()
            }),
            reply_key: "networkacl",
            resource_type: "NetworkACL",
        },
        Step::DeleteAclItem { id, .. } => {
            Call::Delete(Queued::of(&DeleteNetworkAcl { id: id.clone() }))
        }
        Step::CreateHealthCheck { rule, check } => {
            Call::Job(Queued::of(&CreateLbHealthCheckPolicy {
                lbruleid: rule_id(rule)?,
                pingpath: Some(check.path.clone()),
                responsetimeout: Some(check.timeout_secs),
                intervaltime: Some(check.interval_secs),
                healthythreshold: Some(check.healthy_threshold),
                unhealthythreshold: Some(check.unhealthy_threshold),
                description: Some(POLICY_DESCRIPTION.to_string()),
                ..Default::default()
            }))
        }
        Step::DeleteHealthCheck { id, .. } => {
            Call::Delete(Queued::of(&DeleteLbHealthCheckPolicy { id: id.clone() }))
        }
        Step::CreateStickiness { rule, name, policy } => {
            Call::Job(Queued::of(&CreateLbStickinessPolicy {
                lbruleid: rule_id(rule)?,
                name: name.clone(),
                methodname: policy.method.as_str().to_string(),
                param: policy
                    .params
                    .iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                description: Some(POLICY_DESCRIPTION.to_string()),
                ..Default::default()
            }))
        }
        Step::DeleteStickiness { id, .. } => {
            Call::Delete(Queued::of(&DeleteLbStickinessPolicy { id: id.clone() }))
        }
        Step::TagResources {
            resource_type,
            resources,
            tags,
        } => {
            let resourceids = resources
                .iter()
                .map(|resource| match resource {
                    ResourceRef::Existing(id) => Ok(id.clone()),
                    ResourceRef::CreatedRule(name) => {
                        resolve_rule(step, &RuleRef::Created { name: name.clone() }, done)
                    }
                    ResourceRef::AssociatedIp => resolve_ip(step, &IpRef::Associated, done),
                })
                .collect::<Result<Vec<_>, _>>()?;
            let request = CreateTags {
                resourceids,
                resourcetype: resource_type.as_str().to_string(),
                tags: tags.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                ..Default::default()
            };
            let owner = tags.get(TAG_SERVICE_UID);
            match (resource_type, owner, request.resourceids.as_slice()) {
                (TagResourceType::PublicIpAddress, Some(uid), [ip_id]) => Call::TakeIp {
                    ip_id: ip_id.clone(),
                    service_uid: uid.clone(),
                    request,
                },
                _ => Call::CreateTags(request),
            }
        }
        Step::UntagResources {
            resource_type,
            resources,
            keys,
        } => Call::DeleteTags(DeleteTags {
            resourceids: resources.clone(),
            resourcetype: resource_type.as_str().to_string(),
            tags: keys.iter().map(|k| (k.clone(), String::new())).collect(),
        }),
        Step::ReleaseIp { id, .. } => Call::Delete(Queued::of(&DisassociateIpAddress {
            id: id.clone(),
            ..Default::default()
        })),
        Step::UploadCertificate {
            name,
            fingerprint,
            material,
        } => Call::UploadCertificate {
            fingerprint: fingerprint.clone(),
            request: Box::new(UploadSslCert {
                certificate: material.certificate.clone(),
                privatekey: material.key.clone(),
                name: name.clone(),
                certchain: material.chain.clone(),
                // With the check on (the default from 4.15) CloudStack refuses every chain:
                // it has no CRL to check against (`CertServiceImpl.validateChain`).
                enabledrevocationcheck: material.chain.as_ref().map(|_| false),
                ..Default::default()
            }),
        },
        Step::AssignCertificate {
            rule,
            certificate,
            forced,
            ..
        } => Call::Job(Queued::of(&AssignCertToLoadBalancer {
            lbruleid: rule_id(rule)?,
            certid: resolve_certificate(step, certificate, done)?,
            forced: forced.then_some(true),
        })),
        Step::RemoveCertificate { rule } => Call::Job(Queued::of(&RemoveCertFromLoadBalancer {
            lbruleid: rule_id(rule)?,
        })),
        Step::DeleteCertificate { id, .. } => {
            Call::DeleteCertificate(DeleteSslCert { id: id.clone() })
        }
    };
    Ok(StepRequest { call, touches })
}

fn cidr_strings(cidrs: &[Cidr]) -> Vec<String> {
    cidrs.iter().map(Cidr::to_string).collect()
}

/// The id of an IP a step refers to.
fn resolve_ip(step: &Step, ip: &IpRef, done: &Applied) -> Result<String, ApplyError> {
    match ip {
        IpRef::Existing { id, .. } => Ok(id.clone()),
        IpRef::Associated => done
            .associated_ip
            .as_ref()
            .map(|(id, _)| id.clone())
            .ok_or_else(|| ApplyError::Unresolved {
                step: step.to_string(),
                detail: "no IP was associated".into(),
            }),
    }
}

/// The id of a certificate a step assigns.
fn resolve_certificate(
    step: &Step,
    certificate: &CertRef,
    done: &Applied,
) -> Result<String, ApplyError> {
    match certificate {
        CertRef::Existing(id) => Ok(id.clone()),
        CertRef::Uploaded(fingerprint) => done
            .uploaded_certificates
            .get(fingerprint)
            .cloned()
            .ok_or_else(|| ApplyError::Unresolved {
                step: step.to_string(),
                detail: format!("no certificate {fingerprint} was uploaded"),
            }),
    }
}

/// The id of a rule a step refers to.
fn resolve_rule(step: &Step, rule: &RuleRef, done: &Applied) -> Result<String, ApplyError> {
    match rule {
        RuleRef::Existing { id, .. } => Ok(id.clone()),
        RuleRef::Created { name } => {
            done.created_rules
                .get(name)
                .cloned()
                .ok_or_else(|| ApplyError::Unresolved {
                    step: step.to_string(),
                    detail: format!("rule {name} was not created"),
                })
        }
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;

//! Service (+ annotations) → [`LbSpec`], validated.
//!
//! This is the only file of the engine that sees Kubernetes types. Bad input gives a
//! [`SpecError`] naming the field (`spec.ports[1].port`) or the annotation and its value.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;

use super::annotations::{self as ann, AnnotationError, Annotations};
use super::vocabulary::{
    Algorithm, LbProtocol, StickinessMethod, default_lb_name, leaseweb_lb_name, rule_name,
};
use crate::cloud::cidr::Cidr;

mod health_check;
mod internal;
mod lenient;
mod ports;
mod source_ranges;

use health_check::health_check;
use lenient::{Kept, Lenient};
use ports::port_rules;
pub(crate) use source_ranges::companion_source_ranges;
use source_ranges::source_ranges;

/// A Service that cannot be turned into a load balancer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    /// An annotation has a bad value.
    #[error(transparent)]
    Annotation(#[from] AnnotationError),
    /// A required metadata field is missing.
    #[error("{field} is missing")]
    MissingField {
        /// The field path.
        field: &'static str,
    },
    /// The Service has no ports.
    #[error("spec.ports: a load balancer needs at least one port")]
    NoPorts,
    /// The Service is IPv6 only, and CloudStack load balancers are IPv4 only.
    #[error(
        "spec.ipFamilies: {families}: CloudStack load balancers are IPv4 only, so nothing is created in CloudStack; add IPv4 (ipFamilyPolicy PreferDualStack), or give the Service a loadBalancerClass served by MetalLB or Cilium"
    )]
    Ipv6Only {
        /// The families asked for, as written.
        families: String,
    },
    /// A port's protocol is not TCP or UDP.
    #[error(
        "{field}: protocol {protocol} is not supported by CloudStack load balancers (TCP and UDP only)"
    )]
    UnsupportedProtocol {
        /// The field path.
        field: String,
        /// The protocol found.
        protocol: String,
    },
    /// A port number is out of range.
    #[error("{field}: {value} is not a valid port")]
    InvalidPort {
        /// The field path.
        field: String,
        /// The value found.
        value: i32,
    },
    /// The node port is not allocated (yet).
    #[error("{field} is missing")]
    MissingNodePort {
        /// The field path.
        field: String,
    },
    /// Two ports use the same public port.
    #[error(
        "{field}: public port {port} is already used by {first}; CloudStack cannot put two load-balancer rules on one public port, whatever their protocol"
    )]
    DuplicatePort {
        /// The later port's field path.
        field: String,
        /// The public port.
        port: u16,
        /// The earlier port's field path.
        first: String,
    },
    /// `spec.sessionAffinity` has an unknown value.
    #[error("spec.sessionAffinity: unsupported value {value:?} (None or ClientIP)")]
    UnsupportedSessionAffinity {
        /// The value found.
        value: String,
    },
    /// A source range is not a CIDR.
    #[error("{field}: {value:?} is not a CIDR")]
    InvalidSourceRange {
        /// The field path.
        field: String,
        /// The value found.
        value: String,
    },
    /// `spec.loadBalancerIP` is not an IP address.
    #[error("spec.loadBalancerIP: {value:?} is not an IP address")]
    InvalidLoadBalancerIp {
        /// The value found.
        value: String,
    },
    /// Health-check timeout not below the interval.
    #[error(
        "annotation {timeout_key}: timeout {timeout}s must be less than the interval {interval}s"
    )]
    HealthCheckTimeout {
        /// The timeout annotation key.
        timeout_key: &'static str,
        /// Timeout seconds.
        timeout: u32,
        /// Interval seconds.
        interval: u32,
    },
}

/// One load-balancer rule the Service needs (one per Service port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSpec {
    /// Rule name, `<lb name>-<protocol>-<port>`.
    pub name: String,
    /// Rule protocol.
    pub protocol: LbProtocol,
    /// Public port.
    pub public_port: u16,
    /// Private port: the Service's node port.
    pub node_port: u16,
}

/// A health-check policy, asked for by annotation. CloudStack's policy has no port: the
/// provider probes each rule's private port (the Service's node port) over HTTP, so no
/// check is implied by `externalTrafficPolicy: Local` (it could not probe
/// `healthCheckNodePort`) and UDP rules never get one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheck {
    /// HTTP path probed.
    pub path: String,
    /// Seconds between probes.
    pub interval_secs: u32,
    /// Seconds to wait for an answer.
    pub timeout_secs: u32,
    /// Successes before a member is healthy.
    pub healthy_threshold: u32,
    /// Failures before a member is unhealthy.
    pub unhealthy_threshold: u32,
}

/// A stickiness policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stickiness {
    /// The method.
    pub method: StickinessMethod,
    /// Method parameters (`param[i].name/value`).
    pub params: BTreeMap<String, String>,
}

/// Identity of the Service (for messages, tags and legacy names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// UID.
    pub uid: String,
}

/// Everything the engine needs to know about a Service's load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LbSpec {
    /// The Service.
    pub service: ServiceRef,
    /// Load-balancer name (`a` + UID without dashes, 32 chars), the rule-name prefix.
    pub lb_name: String,
    /// Other prefixes whose rules belong to this Service (the leaseweb fork's name).
    pub legacy_lb_names: Vec<String>,
    /// One rule per port, in port order.
    pub rules: Vec<RuleSpec>,
    /// Balancing algorithm.
    pub algorithm: Algorithm,
    /// Source ranges for firewall rules / ACL items (never empty; default `0.0.0.0/0`).
    pub source_ranges: Vec<Cidr>,
    /// The source ranges cannot be read (a bad annotation): the ranges last applied stay
    /// (`source_ranges` is then only a placeholder; the planner reads them from CloudStack).
    pub keep_source_ranges: bool,
    /// The rules' own `cidrlist` (`…-source-cidrs`), when set.
    pub rule_cidrs: Option<Vec<Cidr>>,
    /// `…-source-cidrs` cannot be read: the rules keep the `cidrlist` last applied.
    pub keep_rule_cidrs: bool,
    /// The public IP asked for (`…-address`, else `spec.loadBalancerIP`).
    pub requested_ip: Option<IpAddr>,
    /// The public IP id recorded on the Service (`…-id`).
    pub recorded_ip_id: Option<String>,
    /// The free address the controller claimed before associating it (`…-ip-claim`;
    /// an unreadable value counts as no claim).
    pub claimed_ip: Option<IpAddr>,
    /// The network id recorded on the Service (`…-network-id`).
    pub recorded_network_id: Option<String>,
    /// The controller associated the IP (`…-ip-associated-by-controller`).
    pub ip_associated_by_controller: bool,
    /// Never release the IP (`…-keep-ip`).
    pub keep_ip: bool,
    /// Hostname to report instead of the IP (`…-hostname`).
    pub hostname: Option<String>,
    /// PROXY protocol on (TCP rules use `tcp-proxy`).
    pub proxy_protocol: bool,
    /// Health-check policy, if any.
    pub health_check: Option<HealthCheck>,
    /// Stickiness policy, if any.
    pub stickiness: Option<Stickiness>,
    /// TLS termination (`…-tls-secret` / `…-tls-certificate-id`): its ports' rules use
    /// protocol `ssl`. The controller fills in the Secret's certificate.
    pub tls: Option<super::tls_spec::TlsTermination>,
    /// An internal load balancer on the VPC tier (`…-internal`) instead of a public one.
    pub internal: Option<InternalSpec>,
    /// The tier internal rules were made on (`…-internal-network-id`): they may stand
    /// there, whatever the Service asks for now.
    pub recorded_internal_network_id: Option<String>,
    /// What the Service asks for that is replaced or questionable (a bad annotation
    /// value and what is used instead, source ranges that admit no IPv4 client), for
    /// Warning Events.
    pub warnings: Vec<String>,
}

/// What an internal load balancer (`…-internal`) asks for beyond the rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InternalSpec {
    /// The tier address asked for (`…-internal-address`, else `spec.loadBalancerIP`);
    /// `None`: CloudStack picks one.
    pub address: Option<IpAddr>,
}

/// Settings that come from the controller's configuration, not the Service.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpecOptions {
    /// Cluster name (`--cluster-name`), used by the leaseweb fork's rule names.
    pub cluster_name: String,
    /// A `spec.loadBalancerClass` this controller also owns (besides none).
    pub load_balancer_class: Option<String>,
}

/// Whether the Service asks this controller for a load balancer: `type: LoadBalancer`
/// with no `loadBalancerClass`, or the class we are configured to own.
pub(crate) fn wants_load_balancer(service: &Service, options: &SpecOptions) -> bool {
    let Some(spec) = &service.spec else {
        return false;
    };
    if spec.type_.as_deref() != Some("LoadBalancer") {
        return false;
    }
    match &spec.load_balancer_class {
        None => true,
        Some(class) => options.load_balancer_class.as_deref() == Some(class.as_str()),
    }
}

impl LbSpec {
    /// Validates a Service and builds its load-balancer spec.
    ///
    /// A bad field of the Service itself (ports, protocol, affinity, spec ranges) is an
    /// error. A bad annotation value does not stop the load balancer: the field falls
    /// back to its default, noted in [`LbSpec::warnings`] — except where the default
    /// would open access or take another address (source ranges, source CIDRs, the
    /// address): there the value last applied stays, and without a load balancer yet
    /// (no recorded IP id) the value is an error.
    pub(crate) fn from_service(
        service: &Service,
        options: &SpecOptions,
    ) -> Result<LbSpec, SpecError> {
        let meta = &service.metadata;
        let uid = meta.uid.clone().ok_or(SpecError::MissingField {
            field: "metadata.uid",
        })?;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let name = meta.name.clone().ok_or(SpecError::MissingField {
            field: "metadata.name",
        })?;
        let annotations = Annotations::new(meta.annotations.as_ref());
        let spec = service.spec.clone().unwrap_or_default();
        let mut read = Lenient::default();
        // CloudStack's load-balancer rules and public addresses are IPv4 only.
        let families = spec.ip_families.clone().unwrap_or_default();
        if !families.is_empty() && !families.iter().any(|f| f.eq_ignore_ascii_case("IPv4")) {
            return Err(SpecError::Ipv6Only {
                families: format!("[{}]", families.join(", ")),
            });
        }
        if families.len() > 1 && spec.ip_family_policy.as_deref() == Some("RequireDualStack") {
            read.warnings.push(
                "spec.ipFamilyPolicy RequireDualStack: CloudStack load balancers are IPv4 only; the Service gets an IPv4 load balancer and no IPv6 address".to_string(),
            );
        }
        let tls = super::tls_spec::read_tls(&annotations)?;

        let recorded_ip_id = read.or(annotations.get(&ann::IP_ID, ann::parse_uuid), None, "none");
        let applied = recorded_ip_id.is_some();

        let proxy_protocol = read.or(annotations.flag(&ann::PROXY_PROTOCOL), false, "false");
        let lb_name = default_lb_name(&uid);
        let mut rules = port_rules(&spec, &lb_name, proxy_protocol)?;
        if let Some(tls) = &tls {
            let ports: Vec<(u16, LbProtocol)> =
                rules.iter().map(|r| (r.public_port, r.protocol)).collect();
            let ssl = super::tls_spec::ssl_ports(&ports, &tls.ports, &mut read.warnings);
            for rule in rules.iter_mut().filter(|r| ssl.contains(&r.public_port)) {
                rule.protocol = LbProtocol::Ssl;
                rule.name = rule_name(&lb_name, LbProtocol::Ssl, rule.public_port);
            }
        }

        let from_annotation = read.or(
            annotations.get(&ann::ALGORITHM, ann::parse_algorithm),
            None,
            "the algorithm of spec.sessionAffinity",
        );
        let algorithm = match from_annotation {
            Some(a) => a,
            None => match spec.session_affinity.as_deref() {
                None | Some("None") => Algorithm::RoundRobin,
                Some("ClientIP") => Algorithm::Source,
                Some(other) => {
                    return Err(SpecError::UnsupportedSessionAffinity {
                        value: other.into(),
                    });
                }
            },
        };

        let address = read.keep_applied(
            annotations.get(&ann::ADDRESS, ann::parse_ip),
            applied,
            "the load balancer's current IP",
        )?;
        let requested_ip = match address {
            Kept::Read(Some(ip)) => Some(ip),
            Kept::Applied => None,
            Kept::Read(None) => match spec.load_balancer_ip.as_deref().map(str::trim) {
                None | Some("") => None,
                Some(text) => Some(text.parse().map_err(|_| SpecError::InvalidLoadBalancerIp {
                    value: text.to_string(),
                })?),
            },
        };

        let (rule_cidrs, keep_rule_cidrs) = match read.keep_applied(
            annotations.get(&ann::SOURCE_CIDRS, ann::parse_cidr_list),
            applied,
            "the rules' current source CIDRs",
        )? {
            Kept::Read(cidrs) => (cidrs, false),
            Kept::Applied => (None, true),
        };
        let (source_ranges, keep_source_ranges) =
            match source_ranges(&spec, &annotations, &mut read, applied)? {
                Kept::Read(ranges) => (ranges, false),
                Kept::Applied => (vec![Cidr::ANY_V4], true),
            };
        if !keep_source_ranges {
            read.warn_without_ipv4("source ranges", &source_ranges);
        }
        if let Some(cidrs) = rule_cidrs.as_deref().filter(|c| !c.is_empty()) {
            read.warn_without_ipv4(ann::SOURCE_CIDRS.key, cidrs);
        }

        let method = read.or(
            annotations.get(&ann::STICKINESS_METHOD, ann::parse_stickiness_method),
            None,
            "no stickiness policy",
        );
        let stickiness = method.map(|method| Stickiness {
            method,
            params: read
                .or(
                    annotations.get(&ann::STICKINESS_PARAMS, ann::parse_key_values),
                    None,
                    "no parameters",
                )
                .unwrap_or_default(),
        });

        // Unreadable, the Service is not served: a public load balancer is not what a
        // Service that may have asked for an internal one should get.
        let internal = annotations.flag(&ann::INTERNAL)?;
        let internal_address = annotations.get(&ann::INTERNAL_ADDRESS, ann::parse_ip)?;
        let recorded_internal_network_id = read.or(
            annotations.get(&ann::INTERNAL_NETWORK_ID, ann::parse_uuid),
            None,
            "none",
        );
        let spec = LbSpec {
            legacy_lb_names: vec![leaseweb_lb_name(&options.cluster_name, &namespace, &name)],
            service: ServiceRef {
                namespace,
                name,
                uid,
            },
            lb_name,
            rules,
            algorithm,
            source_ranges,
            keep_source_ranges,
            rule_cidrs,
            keep_rule_cidrs,
            requested_ip,
            recorded_ip_id,
            claimed_ip: annotations
                .get(&ann::IP_CLAIM, ann::parse_ip)
                .ok()
                .flatten(),
            recorded_network_id: read.or(
                annotations.get(&ann::NETWORK_ID, ann::parse_uuid),
                None,
                "none",
            ),
            ip_associated_by_controller: read.or(
                annotations.flag(&ann::IP_ASSOCIATED_BY_CONTROLLER),
                false,
                "false",
            ),
            // Unreadable, the IP is kept: releasing it cannot be undone.
            keep_ip: read.or(annotations.flag(&ann::KEEP_IP), true, "true"),
            hostname: read.or(
                annotations.get(&ann::HOSTNAME, ann::parse_hostname),
                None,
                "the IP in the status",
            ),
            proxy_protocol,
            health_check: health_check(&annotations, &mut read),
            stickiness,
            tls: tls.map(|spec| super::tls_spec::TlsTermination {
                spec,
                material: None,
            }),
            internal: None,
            recorded_internal_network_id,
            warnings: read.warnings,
        };
        Ok(if internal {
            spec.into_internal(internal_address)
        } else {
            spec
        })
    }

    /// A spec good enough to delete the Service's load balancer when
    /// [`LbSpec::from_service`] refuses it (a bad annotation or port must not block the
    /// cleanup). Fails only without `metadata.uid`/`metadata.name`. No rules; an
    /// unreadable `keep-ip` counts as set, so an IP is never released by mistake.
    pub(crate) fn for_deletion(
        service: &Service,
        options: &SpecOptions,
    ) -> Result<LbSpec, SpecError> {
        let meta = &service.metadata;
        let uid = meta.uid.clone().ok_or(SpecError::MissingField {
            field: "metadata.uid",
        })?;
        let name = meta.name.clone().ok_or(SpecError::MissingField {
            field: "metadata.name",
        })?;
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".into());
        let annotations = Annotations::new(meta.annotations.as_ref());
        Ok(LbSpec {
            legacy_lb_names: vec![leaseweb_lb_name(&options.cluster_name, &namespace, &name)],
            lb_name: default_lb_name(&uid),
            service: ServiceRef {
                namespace,
                name,
                uid,
            },
            rules: Vec::new(),
            algorithm: Algorithm::RoundRobin,
            source_ranges: vec![Cidr::ANY_V4],
            keep_source_ranges: true,
            rule_cidrs: None,
            keep_rule_cidrs: true,
            requested_ip: annotations.get(&ann::ADDRESS, ann::parse_ip).ok().flatten(),
            recorded_ip_id: annotations.get(&ann::IP_ID, ann::parse_uuid).ok().flatten(),
            claimed_ip: annotations
                .get(&ann::IP_CLAIM, ann::parse_ip)
                .ok()
                .flatten(),
            recorded_network_id: annotations
                .get(&ann::NETWORK_ID, ann::parse_uuid)
                .ok()
                .flatten(),
            ip_associated_by_controller: annotations
                .flag(&ann::IP_ASSOCIATED_BY_CONTROLLER)
                .unwrap_or(false),
            keep_ip: annotations.flag(&ann::KEEP_IP).unwrap_or(true),
            hostname: None,
            proxy_protocol: false,
            health_check: None,
            stickiness: None,
            tls: None,
            internal: annotations
                .flag(&ann::INTERNAL)
                .unwrap_or(false)
                .then(InternalSpec::default),
            recorded_internal_network_id: annotations
                .get(&ann::INTERNAL_NETWORK_ID, ann::parse_uuid)
                .ok()
                .flatten(),
            warnings: Vec::new(),
        })
    }

    /// Every rule-name prefix of this Service (`<name>-`), current first.
    pub(crate) fn name_prefixes(&self) -> impl Iterator<Item = String> + '_ {
        std::iter::once(&self.lb_name)
            .chain(self.legacy_lb_names.iter())
            .map(|n| format!("{n}-"))
    }

    /// The claimed address while it is the Service's only hold on an IP: no address
    /// requested and no IP id recorded yet (after a crash between claiming and
    /// recording, the claimed address may already be allocated to us).
    pub(crate) fn pending_claim(&self) -> Option<IpAddr> {
        match (&self.requested_ip, &self.recorded_ip_id) {
            (None, None) => self.claimed_ip,
            _ => None,
        }
    }

    /// Whether a rule name belongs to this Service: `<prefix><tcp|udp|tcp-proxy>-<port>`
    /// for the current or a legacy name, compared exactly.
    pub(crate) fn owns_rule_name(&self, rule: &str) -> bool {
        self.name_prefixes().any(|prefix| {
            rule.strip_prefix(&prefix)
                .and_then(|rest| rest.rsplit_once('-'))
                .is_some_and(|(protocol, port)| {
                    LbProtocol::parse(protocol).is_some()
                        && port.parse::<u16>().is_ok_and(|n| n.to_string() == port)
                })
        })
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;

//! The Service annotations we read and write: one typed table, one parse function per
//! kind of value, and the Markdown for `docs/annotations.md` rendered from the table (a
//! unit test keeps the committed file equal to the rendering).
//!
//! Keys are those of the Go CCM (`apache/cloudstack-kubernetes-provider`) and of the
//! leaseweb fork, so Services move between the controllers unchanged, plus new ones in
//! the same `service.beta.kubernetes.io/cloudstack-load-balancer-` family.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::vocabulary::{Algorithm, StickinessMethod};
use crate::cloud::cidr::Cidr;

mod tls;
pub use tls::{TLS_CERTIFICATE_ID, TLS_PORTS, TLS_SECRET};
pub(crate) use tls::{parse_port_list, parse_secret_name};

/// An invalid annotation value. The message names the annotation and the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("annotation {key}: invalid value {value:?}: {reason}")]
pub struct AnnotationError {
    /// The annotation key.
    pub key: String,
    /// The value as found on the Service.
    pub value: String,
    /// What is wrong with it.
    pub reason: String,
}

impl AnnotationError {
    fn new(key: &str, value: &str, reason: impl Into<String>) -> Self {
        AnnotationError {
            key: key.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

/// Who first defined an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// Kubernetes itself.
    Kubernetes,
    /// The Go CCM, `apache/cloudstack-kubernetes-provider`.
    Apache,
    /// The leaseweb fork of the Go CCM.
    Leaseweb,
    /// This controller.
    CloudstackCcm,
}

#[cfg(test)]
impl Origin {
    fn label(self) -> &'static str {
        match self {
            Origin::Kubernetes => "Kubernetes",
            Origin::Apache => "Go CCM (apache)",
            Origin::Leaseweb => "leaseweb fork",
            Origin::CloudstackCcm => "cloudstack-ccm",
        }
    }
}

/// Who writes an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetBy {
    /// The user sets it; the controller only reads it.
    User,
    /// The controller records it; users should not edit it.
    Controller,
    /// The controller records it; a user may set it first to choose.
    UserOrController,
}

/// The kind of value an annotation holds; each kind has one parse function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnotationKind {
    /// `true` / `false` (also Go's `1`, `t`, `T`, `TRUE`, `True`, `0`, `f`, ...).
    Bool,
    /// A DNS hostname.
    Hostname,
    /// An IPv4 or IPv6 address.
    IpAddress,
    /// Comma-separated CIDRs (a bare address means a single host).
    CidrList,
    /// `roundrobin`, `leastconn` or `source`.
    Algorithm,
    /// Whole seconds within a range.
    Seconds {
        /// Smallest value allowed.
        min: u32,
        /// Largest value allowed.
        max: u32,
    },
    /// A count within a range.
    Count {
        /// Smallest value allowed.
        min: u32,
        /// Largest value allowed.
        max: u32,
    },
    /// An HTTP path starting with `/`.
    HttpPath,
    /// `LbCookie`, `AppCookie` or `SourceBased` (any case).
    StickinessMethod,
    /// Comma-separated `key=value` pairs.
    KeyValueList,
    /// A CloudStack UUID.
    Uuid,
    /// The name of a Secret in the Service's namespace.
    SecretName,
    /// Comma-separated ports.
    PortList,
}

impl AnnotationKind {
    /// A short description of the accepted values, for the documentation.
    pub fn describe(self) -> String {
        match self {
            AnnotationKind::Bool => "bool (`true`/`false`)".into(),
            AnnotationKind::Hostname => "hostname".into(),
            AnnotationKind::IpAddress => "IP address".into(),
            AnnotationKind::CidrList => "comma-separated CIDRs".into(),
            AnnotationKind::Algorithm => "`roundrobin` \\| `leastconn` \\| `source`".into(),
            AnnotationKind::Seconds { min, max } => format!("seconds ({min}–{max})"),
            AnnotationKind::Count { min, max } => format!("integer ({min}–{max})"),
            AnnotationKind::HttpPath => "HTTP path".into(),
            AnnotationKind::StickinessMethod => {
                "`LbCookie` \\| `AppCookie` \\| `SourceBased`".into()
            }
            AnnotationKind::KeyValueList => "comma-separated `key=value`".into(),
            AnnotationKind::Uuid => "UUID".into(),
            AnnotationKind::SecretName => "Secret name".into(),
            AnnotationKind::PortList => "comma-separated ports".into(),
        }
    }

    /// Checks a value against this kind, whatever the annotation.
    pub fn validate(self, key: &str, value: &str) -> Result<(), AnnotationError> {
        match self {
            AnnotationKind::Bool => parse_bool(key, value).map(drop),
            AnnotationKind::Hostname => parse_hostname(key, value).map(drop),
            AnnotationKind::IpAddress => parse_ip(key, value).map(drop),
            AnnotationKind::CidrList => parse_cidr_list(key, value).map(drop),
            AnnotationKind::Algorithm => parse_algorithm(key, value).map(drop),
            AnnotationKind::Seconds { min, max } | AnnotationKind::Count { min, max } => {
                parse_in_range(key, value, min, max).map(drop)
            }
            AnnotationKind::HttpPath => parse_http_path(key, value).map(drop),
            AnnotationKind::StickinessMethod => parse_stickiness_method(key, value).map(drop),
            AnnotationKind::KeyValueList => parse_key_values(key, value).map(drop),
            AnnotationKind::Uuid => parse_uuid(key, value).map(drop),
            AnnotationKind::SecretName => parse_secret_name(key, value).map(drop),
            AnnotationKind::PortList => parse_port_list(key, value).map(drop),
        }
    }
}

/// One annotation: its key, kind, default and documentation.
#[derive(Debug, Clone, Copy)]
pub struct Annotation {
    /// The full annotation key.
    pub key: &'static str,
    /// The kind of value.
    pub kind: AnnotationKind,
    /// The value assumed when the annotation is absent (empty: none).
    pub default: &'static str,
    /// What it does.
    pub description: &'static str,
    /// An example value.
    pub example: &'static str,
    /// Where the annotation comes from.
    pub origin: Origin,
    /// Who writes it.
    pub set_by: SetBy,
    /// Which networks (LB providers) and CloudStack versions support it.
    pub support: &'static str,
}

/// `…-proxy-protocol`: send the PROXY protocol header (rules use `tcp-proxy`).
pub static PROXY_PROTOCOL: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-proxy-protocol",
    kind: AnnotationKind::Bool,
    default: "false",
    description: "Use the `tcp-proxy` protocol for the TCP ports, so the backends receive the PROXY protocol header with the client address. The status then reports `ipMode: Proxy`.",
    example: "true",
    origin: Origin::Apache,
    set_by: SetBy::User,
    support: "Providers listing `tcp-proxy` (Virtual Router); CloudStack ≥ 4.6.",
};

/// `…-hostname`: report this hostname in the status instead of the IP.
pub static HOSTNAME: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-hostname",
    kind: AnnotationKind::Hostname,
    default: "",
    description: "Report this hostname in `status.loadBalancer.ingress` instead of the IP, so in-cluster clients go through the load balancer (needed with the PROXY protocol, kubernetes#66607).",
    example: "lb.example.com",
    origin: Origin::Apache,
    set_by: SetBy::User,
    support: "All.",
};

/// `…-source-cidrs`: the load-balancer rule's own `cidrlist`.
pub static SOURCE_CIDRS: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-source-cidrs",
    kind: AnnotationKind::CidrList,
    default: "0.0.0.0/0",
    description: "Source CIDRs the load-balancer rule itself accepts (its `cidrlist`, enforced by HAProxy). Changed in place on CloudStack ≥ 4.22; below that the rule is deleted and created again.",
    example: "10.0.0.0/8,192.168.1.0/24",
    origin: Origin::Apache,
    set_by: SetBy::User,
    support: "CloudStack ≥ 4.18 (ignored with a warning below).",
};

/// `…-ip-associated-by-controller`: the controller associated the IP.
pub static IP_ASSOCIATED_BY_CONTROLLER: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-ip-associated-by-controller",
    kind: AnnotationKind::Bool,
    default: "false",
    description: "Recorded when the controller associated the public IP itself; only such IPs are released when the Service goes away (and never with `keep-ip`).",
    example: "true",
    origin: Origin::Apache,
    set_by: SetBy::Controller,
    support: "All.",
};

/// `…-address`: the public IP to use.
pub static ADDRESS: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-address",
    kind: AnnotationKind::IpAddress,
    default: "",
    description: "The public IP to use; takes precedence over the deprecated `spec.loadBalancerIP`. A free address is associated; one allocated to another account or network is refused.",
    example: "203.0.113.10",
    origin: Origin::Leaseweb,
    set_by: SetBy::User,
    support: "All.",
};

/// `…-keep-ip`: never release the public IP.
pub static KEEP_IP: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-keep-ip",
    kind: AnnotationKind::Bool,
    default: "false",
    description: "Keep the public IP allocated when the Service is deleted or stops being a load balancer. The address is yours from then on, as one you brought: the controller removes its ownership tags from it, and a later Service that requests it (`spec.loadBalancerIP` or `…-address`) never releases it. While the Service asks for this, an address the controller associated carries the tag `cloudstack-ccm/keep-ip=true`, so that the orphan clean-up never releases it even if the Service disappears without the controller seeing it (a force-removed finalizer).",
    example: "true",
    origin: Origin::Leaseweb,
    set_by: SetBy::User,
    support: "All.",
};

/// `…-id`: the public IP's id, recorded by the controller.
pub static IP_ID: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-id",
    kind: AnnotationKind::Uuid,
    default: "",
    description: "The id of the public IP, recorded as soon as it is known, so the load balancer is found again by id after a crash.",
    example: "6f2e3c1a-9b7d-4e8f-a0b1-c2d3e4f5a6b7",
    origin: Origin::Leaseweb,
    set_by: SetBy::Controller,
    support: "All.",
};

/// `…-ip-claim`: the free address the controller chose, recorded before associating it.
pub static IP_CLAIM: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-ip-claim",
    kind: AnnotationKind::IpAddress,
    default: "",
    description: "The free public address the controller chose for the Service, recorded before `associateIpAddress` so an address allocated just before a crash is found again (adopted when allocated to the account with no rules or tags of another Service, associated again when still free, replaced when someone else holds it) and released when the Service goes away.",
    example: "203.0.113.7",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::Controller,
    support: "All; not used with `loadBalancerIP` or `-address`.",
};

/// `…-network-id`: the network of the load balancer, recorded by the controller.
pub static NETWORK_ID: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-network-id",
    kind: AnnotationKind::Uuid,
    default: "",
    description: "The id of the network the rules live in, recorded next to the IP id. With Nodes on several networks, a load balancer serves the Nodes of this network only; without it, the network holding the most eligible Nodes is chosen and recorded. Set it before the load balancer is created to choose the network; Nodes elsewhere are left out with a Warning Event naming them.",
    example: "eb9c270d-dd66-443b-9524-ada1eff4442a",
    origin: Origin::Leaseweb,
    set_by: SetBy::UserOrController,
    support: "All.",
};

/// `…-algorithm`: the balancing algorithm.
pub static ALGORITHM: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-algorithm",
    kind: AnnotationKind::Algorithm,
    default: "from spec.sessionAffinity",
    description: "The balancing algorithm. Without it, `sessionAffinity: None` gives `roundrobin` and `ClientIP` gives `source`. Changed in place.",
    example: "leastconn",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "Algorithms the network's LB provider lists (`SupportedLbAlgorithms`).",
};

/// `…-health-check-path`: HTTP health check path (turns the health check on).
pub static HEALTH_CHECK_PATH: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-health-check-path",
    kind: AnnotationKind::HttpPath,
    default: "",
    description: "Turns on an HTTP health-check policy on every TCP rule, probing this path on the rule's node port (CloudStack's policy has no port of its own). Nothing is implied by `externalTrafficPolicy: Local`: such a check could not probe `healthCheckNodePort`; a `Local` Service's rules have as members the Nodes holding a ready endpoint instead, on every provider (see configuration.md, \"externalTrafficPolicy: Local\"), and this check, when set, applies on top. UDP rules never get one.",
    example: "/healthz",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "Providers with `HealthCheckPolicy` (NetScaler, …); not the Virtual Router.",
};

/// `…-health-check-interval`: seconds between probes.
pub(crate) static HEALTH_CHECK_INTERVAL: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-health-check-interval",
    kind: AnnotationKind::Seconds { min: 1, max: 20940 },
    default: "5",
    description: "Seconds between two health probes.",
    example: "10",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `health-check-path`.",
};

/// `…-health-check-timeout`: seconds to wait for a probe's answer.
pub(crate) static HEALTH_CHECK_TIMEOUT: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-health-check-timeout",
    kind: AnnotationKind::Seconds { min: 2, max: 60 },
    default: "2",
    description: "Seconds to wait for a probe's answer; must be less than the interval.",
    example: "3",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `health-check-path`.",
};

/// `…-health-check-healthy-threshold`: successes before a member is healthy.
pub(crate) static HEALTH_CHECK_HEALTHY_THRESHOLD: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-health-check-healthy-threshold",
    kind: AnnotationKind::Count { min: 1, max: 10 },
    default: "2",
    description: "Consecutive successful probes before a member receives traffic again.",
    example: "3",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `health-check-path`.",
};

/// `…-health-check-unhealthy-threshold`: failures before a member is unhealthy.
pub(crate) static HEALTH_CHECK_UNHEALTHY_THRESHOLD: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-health-check-unhealthy-threshold",
    kind: AnnotationKind::Count { min: 1, max: 10 },
    default: "3",
    description: "Consecutive failed probes before a member stops receiving traffic.",
    example: "2",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `health-check-path`.",
};

/// `…-stickiness-method-name`: the stickiness policy method.
pub static STICKINESS_METHOD: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-stickiness-method-name",
    kind: AnnotationKind::StickinessMethod,
    default: "",
    description: "Adds a stickiness policy with this method to every rule. The method must be one the provider lists in `SupportedStickinessMethods`.",
    example: "SourceBased",
    origin: Origin::Apache,
    set_by: SetBy::User,
    support: "Providers listing the method (Virtual Router: all three).",
};

/// `…-stickiness-method-param`: the stickiness policy parameters.
pub(crate) static STICKINESS_PARAMS: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-stickiness-method-param",
    kind: AnnotationKind::KeyValueList,
    default: "",
    description: "Parameters of the stickiness method (e.g. `tablesize`, `expire` for `SourceBased`; `cookie-name`, `mode` for `LbCookie`). Ignored without a method.",
    example: "tablesize=200k,expire=30m",
    origin: Origin::Apache,
    set_by: SetBy::User,
    support: "As `stickiness-method-name`.",
};

/// The standard Kubernetes source-ranges annotation (used when the spec field is empty).
pub static K8S_SOURCE_RANGES: Annotation = Annotation {
    key: "service.beta.kubernetes.io/load-balancer-source-ranges",
    kind: AnnotationKind::CidrList,
    default: "0.0.0.0/0",
    description: "Source ranges allowed through the firewall rules (isolated networks) or ACL items (VPC tiers), used when `spec.loadBalancerSourceRanges` is empty.",
    example: "198.51.100.0/24",
    origin: Origin::Kubernetes,
    set_by: SetBy::User,
    support: "All.",
};

/// Every annotation, in documentation order.
pub static ALL: &[&Annotation] = &[
    &PROXY_PROTOCOL,
    &HOSTNAME,
    &SOURCE_CIDRS,
    &K8S_SOURCE_RANGES,
    &ADDRESS,
    &KEEP_IP,
    &ALGORITHM,
    &HEALTH_CHECK_PATH,
    &HEALTH_CHECK_INTERVAL,
    &HEALTH_CHECK_TIMEOUT,
    &HEALTH_CHECK_HEALTHY_THRESHOLD,
    &HEALTH_CHECK_UNHEALTHY_THRESHOLD,
    &STICKINESS_METHOD,
    &STICKINESS_PARAMS,
    &TLS_SECRET,
    &TLS_CERTIFICATE_ID,
    &TLS_PORTS,
    &IP_ASSOCIATED_BY_CONTROLLER,
    &IP_ID,
    &IP_CLAIM,
    &NETWORK_ID,
];

/// Parses a bool the way Go's `strconv.ParseBool` does (the Go CCM's annotations).
pub(crate) fn parse_bool(key: &str, value: &str) -> Result<bool, AnnotationError> {
    match value.trim() {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(AnnotationError::new(key, value, "expected true or false")),
    }
}

/// Parses a DNS hostname (RFC 1123 labels, at most 253 characters).
pub(crate) fn parse_hostname(key: &str, value: &str) -> Result<String, AnnotationError> {
    let host = value.trim();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(AnnotationError::new(key, value, "expected a DNS hostname"));
    }
    Ok(host.to_ascii_lowercase())
}

/// Parses an IPv4 or IPv6 address.
pub(crate) fn parse_ip(key: &str, value: &str) -> Result<IpAddr, AnnotationError> {
    value
        .trim()
        .parse()
        .map_err(|_| AnnotationError::new(key, value, "expected an IP address"))
}

/// Parses a comma-separated CIDR list; spaces around entries and empty entries are
/// ignored, every other entry must be a CIDR or an address.
pub(crate) fn parse_cidr_list(key: &str, value: &str) -> Result<Vec<Cidr>, AnnotationError> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let cidr = Cidr::parse(entry)
            .ok_or_else(|| AnnotationError::new(key, value, format!("{entry:?} is not a CIDR")))?;
        if !out.contains(&cidr) {
            out.push(cidr);
        }
    }
    Ok(out)
}

/// Parses a load-balancing algorithm.
pub(crate) fn parse_algorithm(key: &str, value: &str) -> Result<Algorithm, AnnotationError> {
    Algorithm::parse(value)
        .ok_or_else(|| AnnotationError::new(key, value, "expected roundrobin, leastconn or source"))
}

/// Parses a whole number within `min..=max`.
pub(crate) fn parse_in_range(
    key: &str,
    value: &str,
    min: u32,
    max: u32,
) -> Result<u32, AnnotationError> {
    let out_of_range = || {
        AnnotationError::new(
            key,
            value,
            format!("expected a whole number from {min} to {max}"),
        )
    };
    let text = value.trim();
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(out_of_range());
    }
    let n: u32 = text.parse().map_err(|_| out_of_range())?;
    if n < min || n > max {
        return Err(out_of_range());
    }
    Ok(n)
}

/// Parses an HTTP path: starts with `/`, printable ASCII, no spaces.
pub(crate) fn parse_http_path(key: &str, value: &str) -> Result<String, AnnotationError> {
    let path = value.trim();
    if !path.starts_with('/') || !path.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(AnnotationError::new(
            key,
            value,
            "expected an HTTP path starting with / and without spaces",
        ));
    }
    Ok(path.to_string())
}

/// Parses a stickiness method name.
pub(crate) fn parse_stickiness_method(
    key: &str,
    value: &str,
) -> Result<StickinessMethod, AnnotationError> {
    StickinessMethod::parse(value).ok_or_else(|| {
        AnnotationError::new(key, value, "expected LbCookie, AppCookie or SourceBased")
    })
}

/// Parses `key=value` pairs separated by commas. Keys are lower-cased; a pair without a
/// value, a repeated key, or a space or one of `=&"'\#` inside a key or value is refused
/// (CloudStack copies them into the HAProxy configuration).
pub(crate) fn parse_key_values(
    key: &str,
    value: &str,
) -> Result<BTreeMap<String, String>, AnnotationError> {
    let bad = |c: char| c.is_whitespace() || "=&\"'\\#".contains(c);
    let mut out = BTreeMap::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((k, v)) = entry.split_once('=') else {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{entry:?} is not key=value"),
            ));
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        if k.is_empty() || v.is_empty() || k.contains(bad) || v.contains(bad) {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{entry:?} is not key=value"),
            ));
        }
        if out.insert(k.clone(), v.to_string()).is_some() {
            return Err(AnnotationError::new(
                key,
                value,
                format!("{k:?} is set twice"),
            ));
        }
    }
    Ok(out)
}

/// Parses a CloudStack UUID (returned in lower case, as CloudStack wants it).
pub(crate) fn parse_uuid(key: &str, value: &str) -> Result<String, AnnotationError> {
    let id = value.trim().to_ascii_lowercase();
    let groups: Vec<&str> = id.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    let ok = groups.len() == 5
        && groups
            .iter()
            .zip(lens)
            .all(|(g, n)| g.len() == n && g.bytes().all(|b| b.is_ascii_hexdigit()));
    if !ok {
        return Err(AnnotationError::new(key, value, "expected a UUID"));
    }
    Ok(id)
}

/// Typed access to a Service's annotations through the table.
#[derive(Debug, Clone, Copy)]
pub struct Annotations<'a> {
    map: Option<&'a BTreeMap<String, String>>,
}

impl<'a> Annotations<'a> {
    /// Wraps the annotations of an object (absent annotations are fine).
    pub fn new(map: Option<&'a BTreeMap<String, String>>) -> Self {
        Annotations { map }
    }

    /// The raw value of an annotation, if set.
    pub fn raw(&self, annotation: &Annotation) -> Option<&'a str> {
        self.map?.get(annotation.key).map(String::as_str)
    }

    /// Parses an annotation with `parse`, or returns `None` when it is absent.
    pub fn get<T>(
        &self,
        annotation: &Annotation,
        parse: impl FnOnce(&str, &str) -> Result<T, AnnotationError>,
    ) -> Result<Option<T>, AnnotationError> {
        self.raw(annotation)
            .map(|value| parse(annotation.key, value))
            .transpose()
    }

    /// A bool annotation, `false` when absent.
    pub fn flag(&self, annotation: &Annotation) -> Result<bool, AnnotationError> {
        Ok(self.get(annotation, parse_bool)?.unwrap_or(false))
    }

    /// A ranged number annotation, or its documented default when absent.
    pub fn number(&self, annotation: &Annotation) -> Result<u32, AnnotationError> {
        let (min, max) = match annotation.kind {
            AnnotationKind::Seconds { min, max } | AnnotationKind::Count { min, max } => (min, max),
            _ => (0, u32::MAX),
        };
        let value = self.raw(annotation).unwrap_or(annotation.default);
        parse_in_range(annotation.key, value, min, max)
    }
}

/// Renders `docs/annotations.md` from the table (a test keeps the file equal to it).
#[cfg(test)]
pub(crate) fn render_markdown() -> String {
    use std::fmt::Write as _;
    let mut md = String::new();
    md.push_str("# Service annotations\n\n");
    md.push_str(
        "<!-- Generated from crates/cloudstack-ccm/src/cloud/loadbalancer/annotations.rs; \
         run `UPDATE_DOCS=1 cargo test -p cloudstack-ccm annotations` to refresh. -->\n\n",
    );
    md.push_str(
        "Annotations on `type: LoadBalancer` Services. The keys of the Go CCM \
         (`apache/cloudstack-kubernetes-provider`) and of the leaseweb fork keep their meaning, \
         so Services move to this controller unchanged. An invalid value gives a Warning Event \
         (`LoadBalancerWarning`) naming the annotation and the value, and that field falls back \
         to its default (`keep-ip` to `true`, so an IP is never released by mistake) while the \
         rest of the Service is still reconciled. Where the default would open access or take \
         another address (`load-balancer-source-ranges`, `source-cidrs`, `address`), the value \
         last applied stays; a new load balancer with such a value is not created \
         (`SyncLoadBalancerFailed`).\n\n",
    );
    md.push_str("| Annotation | Value | Default | Set by | From |\n|---|---|---|---|---|\n");
    for a in ALL {
        let default = if a.default.is_empty() {
            "—".to_string()
        } else {
            format!("`{}`", a.default)
        };
        let set_by = match a.set_by {
            SetBy::User => "user",
            SetBy::Controller => "controller",
            SetBy::UserOrController => "controller (or user, first)",
        };
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} | {} |",
            a.key,
            a.kind.describe(),
            default,
            set_by,
            a.origin.label()
        );
    }
    for a in ALL {
        let _ = write!(
            md,
            "\n## `{}`\n\n{}\n\n- Value: {}\n- Example: `{}`\n- Supported: {}\n",
            a.key,
            a.description,
            a.kind.describe(),
            a.example,
            a.support
        );
        if a.set_by == SetBy::Controller {
            md.push_str("- Written by the controller; do not edit it by hand.\n");
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_file_matches_the_table() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/annotations.md");
        let rendered = render_markdown();
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(path, &rendered).expect("write docs/annotations.md");
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == rendered,
            "docs/annotations.md differs from the annotation table; run UPDATE_DOCS=1 cargo test -p cloudstack-ccm annotations"
        );
    }

    #[test]
    fn every_example_and_default_is_valid_for_its_kind() {
        for a in ALL {
            assert!(
                a.key.starts_with("service.beta.kubernetes.io/"),
                "{}",
                a.key
            );
            a.kind
                .validate(a.key, a.example)
                .unwrap_or_else(|e| panic!("{e}"));
            if !a.default.is_empty() && !a.default.starts_with("from ") {
                a.kind
                    .validate(a.key, a.default)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
        }
        let mut keys: Vec<_> = ALL.iter().map(|a| a.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), ALL.len(), "duplicate keys in the table");
    }

    #[test]
    fn bad_values_are_refused_naming_key_and_value() {
        let k = "k";
        let cases: Vec<(AnnotationKind, &str)> = vec![
            (AnnotationKind::Bool, "yes"),
            (AnnotationKind::Bool, ""),
            (AnnotationKind::Hostname, "-bad.example"),
            (AnnotationKind::Hostname, "a b"),
            (AnnotationKind::IpAddress, "300.1.1.1"),
            (AnnotationKind::CidrList, "10.0.0.0/8,banana"),
            (AnnotationKind::CidrList, "10.0.0.0/33"),
            (AnnotationKind::CidrList, "10.0.0.0/"),
            (AnnotationKind::Algorithm, "random"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "1"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "61"),
            (AnnotationKind::Seconds { min: 2, max: 60 }, "-5"),
            (AnnotationKind::Count { min: 1, max: 10 }, "ten"),
            (AnnotationKind::HttpPath, "healthz"),
            (AnnotationKind::HttpPath, "/a b"),
            (AnnotationKind::StickinessMethod, "cookie"),
            (AnnotationKind::KeyValueList, "nocache="),
            (AnnotationKind::KeyValueList, "a=1,a=2"),
            (AnnotationKind::KeyValueList, "a=b#c"),
            (AnnotationKind::Uuid, "not-a-uuid"),
        ];
        for (kind, value) in cases {
            let err = kind.validate(k, value).expect_err(value);
            assert_eq!(err.key, k);
            assert_eq!(err.value, value);
            assert!(err.to_string().contains(&format!("{value:?}")), "{err}");
        }
    }

    #[test]
    fn good_values_parse() {
        assert!(parse_bool("k", "True").unwrap());
        assert!(!parse_bool("k", "0").unwrap());
        assert_eq!(
            parse_cidr_list("k", " 10.0.0.0/8 , ,192.168.1.1").unwrap(),
            vec![
                Cidr::parse("10.0.0.0/8").unwrap(),
                Cidr::parse("192.168.1.1/32").unwrap()
            ]
        );
        assert_eq!(
            parse_algorithm("k", "LeastConn").unwrap(),
            Algorithm::LeastConn
        );
        assert_eq!(
            parse_stickiness_method("k", "sourcebased").unwrap(),
            StickinessMethod::SourceBased
        );
        let kv = parse_key_values("k", "tablesize=200k, Expire=30m").unwrap();
        assert_eq!(kv.get("expire").map(String::as_str), Some("30m"));
        assert_eq!(
            parse_uuid("k", "EB9C270D-DD66-443B-9524-ADA1EFF4442A").unwrap(),
            "eb9c270d-dd66-443b-9524-ada1eff4442a"
        );
    }
}

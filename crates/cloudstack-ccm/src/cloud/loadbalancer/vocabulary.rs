//! The words every part of the load-balancer engine shares: the rule protocols
//! ([`LbProtocol`]) and the IP protocols of firewall rules and ACL items ([`IpProtocol`]),
//! the balancing [`Algorithm`]s and [`StickinessMethod`]s, and how load balancers and
//! rules are named, so the Go CCM's and the leaseweb fork's rules are found again under
//! the same names.

use std::fmt;

/// The `scheme` of `createLoadBalancer` and `listLoadBalancers`: CloudStack's internal
/// load balancer (`CreateApplicationLoadBalancerCmd` takes no other).
pub(crate) const INTERNAL_SCHEME: &str = "Internal";

/// A CloudStack load-balancer rule protocol (`createLoadBalancerRule protocol=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LbProtocol {
    /// Plain TCP.
    Tcp,
    /// UDP (only some providers; the Virtual Router refuses it since 4.15).
    Udp,
    /// TCP with the PROXY protocol header sent to the backends.
    TcpProxy,
    /// TLS terminated at the load balancer with the rule's certificate, plain TCP to the
    /// backends (only providers with the `SslTermination` capability).
    Ssl,
}

impl LbProtocol {
    /// All protocols, in a stable order.
    pub const ALL: [LbProtocol; 4] = [
        LbProtocol::Tcp,
        LbProtocol::Udp,
        LbProtocol::TcpProxy,
        LbProtocol::Ssl,
    ];

    /// The CloudStack spelling (`tcp`, `udp`, `tcp-proxy`, `ssl`), also used in rule names.
    pub fn as_str(self) -> &'static str {
        match self {
            LbProtocol::Tcp => "tcp",
            LbProtocol::Udp => "udp",
            LbProtocol::TcpProxy => "tcp-proxy",
            LbProtocol::Ssl => "ssl",
        }
    }

    /// Parses a CloudStack protocol, ignoring case and surrounding spaces (older servers
    /// stored the name as the client sent it, e.g. `TCP`).
    pub fn parse(value: &str) -> Option<LbProtocol> {
        let value = value.trim();
        LbProtocol::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(value))
    }

    /// The IP protocol of the traffic: `tcp` for both `tcp` and `tcp-proxy`. Firewall
    /// rules and ACL items use this.
    pub(crate) fn ip_protocol(self) -> IpProtocol {
        match self {
            LbProtocol::Tcp | LbProtocol::TcpProxy | LbProtocol::Ssl => IpProtocol::Tcp,
            LbProtocol::Udp => IpProtocol::Udp,
        }
    }
}

impl fmt::Display for LbProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The IP protocol of firewall rules and network ACL items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpProtocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
}

impl IpProtocol {
    /// The CloudStack spelling (`tcp`, `udp`).
    pub fn as_str(self) -> &'static str {
        match self {
            IpProtocol::Tcp => "tcp",
            IpProtocol::Udp => "udp",
        }
    }

    /// Parses a firewall/ACL protocol, ignoring case.
    pub fn parse(value: &str) -> Option<IpProtocol> {
        match value.trim().to_ascii_lowercase().as_str() {
            "tcp" => Some(IpProtocol::Tcp),
            "udp" => Some(IpProtocol::Udp),
            _ => None,
        }
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CloudStack load-balancing algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Algorithm {
    /// Round robin.
    RoundRobin,
    /// Least connections.
    LeastConn,
    /// Source-address hash (client affinity).
    Source,
}

impl Algorithm {
    /// All algorithms.
    pub const ALL: [Algorithm; 3] = [
        Algorithm::RoundRobin,
        Algorithm::LeastConn,
        Algorithm::Source,
    ];

    /// The CloudStack spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::RoundRobin => "roundrobin",
            Algorithm::LeastConn => "leastconn",
            Algorithm::Source => "source",
        }
    }

    /// Parses the CloudStack spelling, ignoring case and surrounding spaces.
    pub fn parse(value: &str) -> Option<Algorithm> {
        let value = value.trim();
        Algorithm::ALL
            .into_iter()
            .find(|a| a.as_str().eq_ignore_ascii_case(value))
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A CloudStack LB stickiness method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum StickinessMethod {
    /// A cookie the load balancer inserts.
    LbCookie,
    /// An application cookie.
    AppCookie,
    /// The client's source address.
    SourceBased,
}

impl StickinessMethod {
    /// All methods.
    pub const ALL: [StickinessMethod; 3] = [
        StickinessMethod::LbCookie,
        StickinessMethod::AppCookie,
        StickinessMethod::SourceBased,
    ];

    /// The CloudStack spelling (`methodname`).
    pub fn as_str(self) -> &'static str {
        match self {
            StickinessMethod::LbCookie => "LbCookie",
            StickinessMethod::AppCookie => "AppCookie",
            StickinessMethod::SourceBased => "SourceBased",
        }
    }

    /// Parses a method name, ignoring case.
    pub fn parse(value: &str) -> Option<StickinessMethod> {
        let value = value.trim();
        StickinessMethod::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(value))
    }
}

impl fmt::Display for StickinessMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Longest load-balancer name, as in Kubernetes' `cloudprovider.DefaultLoadBalancerName`.
const DEFAULT_LB_NAME_MAX: usize = 32;

/// Longest name the leaseweb fork gives a load balancer (`Sprintf255`).
const LEASEWEB_LB_NAME_MAX: usize = 255;

/// The load-balancer name of a Service, as Kubernetes' `DefaultLoadBalancerName` makes
/// it: `"a"` + the UID without dashes, cut to 32 characters. The Go CCM uses it.
pub fn default_lb_name(service_uid: &str) -> String {
    let mut name: String = std::iter::once('a')
        .chain(service_uid.chars().filter(|c| *c != '-'))
        .collect();
    name.truncate(DEFAULT_LB_NAME_MAX);
    name
}

/// The load-balancer name the leaseweb fork gives a Service:
/// `K8s_svc_<cluster>_<namespace>_<name>`, cut to 255 bytes.
pub(crate) fn leaseweb_lb_name(cluster_name: &str, namespace: &str, name: &str) -> String {
    let mut full = format!("K8s_svc_{cluster_name}_{namespace}_{name}");
    if full.len() > LEASEWEB_LB_NAME_MAX {
        let mut cut = LEASEWEB_LB_NAME_MAX;
        while !full.is_char_boundary(cut) {
            cut -= 1;
        }
        full.truncate(cut);
    }
    full
}

/// The name of one load-balancer rule: `<lb name>-<tcp|udp|tcp-proxy>-<public port>`.
pub(crate) fn rule_name(lb_name: &str, protocol: LbProtocol, public_port: u16) -> String {
    format!("{lb_name}-{}-{public_port}", protocol.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_lb_name_matches_kubernetes() {
        // 36-char UID -> "a" + 32 hex chars, cut to 32.
        let uid = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0";
        assert_eq!(default_lb_name(uid), "a0b1c2d3e4f5061728394a5b6c7d8e9f");
        assert_eq!(default_lb_name(uid).len(), 32);
        assert_eq!(default_lb_name("ab-c"), "aabc");
    }

    #[test]
    fn rule_names_follow_the_go_ccm() {
        assert_eq!(
            rule_name("aabc", LbProtocol::TcpProxy, 443),
            "aabc-tcp-proxy-443"
        );
        assert_eq!(rule_name("aabc", LbProtocol::Udp, 53), "aabc-udp-53");
    }

    #[test]
    fn leaseweb_names_are_cut_to_255_bytes() {
        assert_eq!(leaseweb_lb_name("c1", "ns", "web"), "K8s_svc_c1_ns_web");
        let long = "x".repeat(300);
        assert_eq!(leaseweb_lb_name("c", "n", &long).len(), 255);
    }

    #[test]
    fn protocols_parse_case_insensitively() {
        assert_eq!(LbProtocol::parse("TCP"), Some(LbProtocol::Tcp));
        assert_eq!(LbProtocol::parse(" tcp-proxy"), Some(LbProtocol::TcpProxy));
        assert_eq!(LbProtocol::parse("sctp"), None);
        assert_eq!(LbProtocol::TcpProxy.ip_protocol(), IpProtocol::Tcp);
    }
}

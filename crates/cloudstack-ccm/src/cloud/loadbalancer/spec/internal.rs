//! A Service's spec as an internal load balancer (`…-internal`): what CloudStack's
//! internal load balancer cannot do is dropped with a Warning.

use super::*;

impl LbSpec {
    /// This spec as an internal load balancer: TCP rules only, on the tier address
    /// `address` (else `spec.loadBalancerIP`), and a Warning for each thing asked for
    /// that CloudStack's internal load balancer does not do (`InternalLoadBalancerElement`:
    /// TCP, no health-check policy; `createLoadBalancer` takes no `cidrlist`). The public
    /// address fields stay: they find what a public load balancer of the Service left.
    pub(super) fn into_internal(mut self, address: Option<IpAddr>) -> LbSpec {
        let not_applied = |what: &str| {
            format!(
                "{what}: not applied to the internal load balancer (CloudStack's internal load balancer has TCP rules only, no source CIDRs, health checks, stickiness or certificates)"
            )
        };
        let udp: Vec<String> = self
            .rules
            .iter()
            .filter(|r| r.protocol == LbProtocol::Udp)
            .map(|r| r.public_port.to_string())
            .collect();
        if !udp.is_empty() {
            self.warnings
                .push(not_applied(&format!("UDP port(s) {}", udp.join(", "))));
            self.rules.retain(|r| r.protocol != LbProtocol::Udp);
        }
        if self.source_ranges != [Cidr::ANY_V4] || self.keep_source_ranges {
            self.warnings
                .push(not_applied("loadBalancerSourceRanges (…-source-ranges)"));
        }
        if self.rule_cidrs.as_ref().is_some_and(|c| !c.is_empty()) {
            self.warnings.push(not_applied(ann::SOURCE_CIDRS.key));
        }
        if self.health_check.take().is_some() {
            self.warnings.push(not_applied("the health check"));
        }
        if self.stickiness.take().is_some() {
            self.warnings.push(not_applied(ann::STICKINESS_METHOD.key));
        }
        if self.tls.take().is_some() {
            self.warnings.push(not_applied("TLS termination"));
        }
        if self.proxy_protocol {
            self.warnings.push(not_applied(ann::PROXY_PROTOCOL.key));
            self.proxy_protocol = false;
        }
        for rule in &mut self.rules {
            rule.protocol = LbProtocol::Tcp;
            rule.name = rule_name(&self.lb_name, LbProtocol::Tcp, rule.public_port);
        }
        self.internal = Some(InternalSpec {
            address: address.or(self.requested_ip.take()),
        });
        self
    }
}

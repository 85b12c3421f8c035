//! The table: every annotation key, its kind of value, default, origin and support.

use super::*;

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

/// `…-routed-firewall`: open the Service's address on a ROUTED network.
pub static ROUTED_FIREWALL: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-routed-firewall",
    kind: AnnotationKind::Bool,
    default: "false",
    description: "For a LoadBalancer Service another controller serves (its `loadBalancerClass` is not this controller's; MetalLB, Cilium LB-IPAM) on a network in ROUTED mode: keep one routing firewall rule per port (`createRoutingFirewallRule`) from `loadBalancerSourceRanges` (else everywhere) to each IPv4 address in `status.loadBalancer.ingress` on an isolated network, or one ACL item per port in a VPC tier's custom ACL list; tagged with the Service's UID and deleted with the Service. See docs/networks.md.",
    example: "true",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "ROUTED networks, CloudStack ≥ 4.20; a tier needs a custom ACL list (else a Warning).",
};

/// `…-internal`: an internal load balancer on the VPC tier instead of a public one.
pub static INTERNAL: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-internal",
    kind: AnnotationKind::Bool,
    default: "false",
    description: "Serve the Service with CloudStack's internal load balancer (`createLoadBalancer` with scheme `Internal`, provider `InternalLbVm`) on the Nodes' VPC tier: one rule per TCP port, all on one address of the tier, reachable from inside the VPC only; no public address is used. The status reports that address. UDP ports, source ranges, health checks, stickiness, TLS and the PROXY protocol are not applied (a Warning says which). Switching a Service between internal and public deletes what the old kind made. See docs/networks.md.",
    example: "true",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "VPC tiers whose offering has the internal load balancer (`supportsinternallb`, e.g. `DefaultIsolatedNetworkOfferingForVpcNetworksWithInternalLB`); elsewhere a Warning and nothing is created.",
};

/// `…-internal-address`: the tier address of an internal load balancer.
pub static INTERNAL_ADDRESS: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-internal-address",
    kind: AnnotationKind::IpAddress,
    default: "",
    description: "With `…-internal`: the address of the tier the internal load balancer listens on (`sourceipaddress`). It must be in the tier's CIDR and not used by a VM; an address other internal rules of the tier use is shared with them on other ports. Without it, the address `spec.loadBalancerIP` (or `…-address`) names, else a free address of the tier CloudStack picks. Changing it moves the rules: the new ones stand before the old ones go.",
    example: "10.1.2.200",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `…-internal`.",
};

/// `…-internal-network-id`: the tier internal rules were made on, recorded by the
/// controller.
pub static INTERNAL_NETWORK_ID: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-internal-network-id",
    kind: AnnotationKind::Uuid,
    default: "",
    description: "The tier the Service's internal load-balancer rules live on, recorded before the first is created and removed once they are all deleted; a Service that goes away or becomes public has its internal rules deleted from there, also after a crash.",
    example: "eb9c270d-dd66-443b-9524-ada1eff4442a",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::Controller,
    support: "As `…-internal`.",
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
    &ROUTED_FIREWALL,
    &INTERNAL,
    &INTERNAL_ADDRESS,
    &IP_ASSOCIATED_BY_CONTROLLER,
    &IP_ID,
    &IP_CLAIM,
    &NETWORK_ID,
    &INTERNAL_NETWORK_ID,
];

//! Typed CloudStack responses. Every field is optional (CloudStack omits nulls and fields
//! differ between versions), unknown fields are ignored, and ids and ports decode from
//! numbers or strings.

pub(crate) mod de;

mod address;
mod certs;
mod network;
mod policy;
mod routes;
mod rules;
mod server;
mod tag;
mod vm;
mod zone;

pub use address::{AddressSummary, PublicIpAddress};
pub use certs::SslCert;
pub use network::{Network, NetworkServiceCapability, NetworkServiceInfo, NetworkServiceProvider};
pub use policy::{HealthCheckPolicies, HealthCheckPolicy, StickinessPolicies, StickinessPolicy};
pub use routes::StaticRoute;
pub use rules::{
    FirewallRule, InternalLoadBalancer, InternalLoadBalancerInstance, InternalLoadBalancerPorts,
    LoadBalancerRule, NetworkAcl, NetworkAclList,
};
pub use server::{ApiInfo, AsyncJob, Capabilities, JOB_FAILED, JOB_PENDING, JOB_SUCCEEDED};
pub use tag::{Tag, tag_value};
pub use vm::{Nic, NicSecondaryIp, NicSummary, VirtualMachine, VmId, VmSummary};
pub use zone::{Project, Zone};

//! LoadBalancer Services end to end, one module per concern, on the helpers of
//! [`support`].

pub mod support;

mod addresses;
mod allocating_ip;
mod annotations;
mod calls;
mod claim_conflict;
mod cleanup;
mod crash;
mod drift;
mod eligibility;
mod failures;
mod internal;
mod lifecycle;
mod lost_lease;
mod network_kinds;
mod networks;
mod normal_day;
mod plan;
mod protocols;
mod refused_ports;
mod replaced_vm;
mod several_networks;
mod tls;
mod tls_chain;
mod tls_lifecycle;
mod traffic_local;
mod vpc_acl;

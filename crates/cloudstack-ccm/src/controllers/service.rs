//! The service controller: LoadBalancer Services get a CloudStack load balancer.
//!
//! One `reconcile` per Service: the cleanup finalizer first, then the load-balancer engine
//! (`cloud::loadbalancer`: observe → plan → apply), then `status.loadBalancer.ingress`
//! (patched only on change) and Events with the Kubernetes service controller's reasons.

pub mod backoff;
pub mod eligible;
pub mod events;
pub mod finalizer;
pub mod status;

//! Everything that asks CloudStack on behalf of Kubernetes.

pub mod cidr;
pub mod instances;
pub mod inventory;
pub mod job_queue;
pub mod key_access;
pub mod loadbalancer;
pub mod orphans;
pub mod provider_id;
pub mod routes;
pub mod tags;

//! Uploaded SSL certificates and their assignment to LB rules, as the server stores them
//! (`SslCertVO`, `LoadBalancerCertMapVO`); the checks of an upload are in `crate::certs`.

use super::Owner;
use serde::{Deserialize, Serialize};

/// An uploaded certificate (`SslCertVO`). The private key is checked and not kept: no API
/// returns it, and the simulator programs no load balancer with it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SslCert {
    /// Id.
    pub id: String,
    /// Name given at upload (not unique).
    pub name: String,
    /// The certificate PEM as uploaded.
    pub certificate: String,
    /// The chain PEM as uploaded.
    pub chain: Option<String>,
    /// Fingerprint.
    pub fingerprint: String,
    /// Owner.
    pub owner: Owner,
}

/// A certificate assigned to a rule (`LoadBalancerCertMapVO`); it goes with the rule
/// (`ON DELETE CASCADE` on `load_balancer_cert_map.load_balancer_id`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CertBinding {
    /// LB rule id.
    pub rule_id: String,
    /// Certificate id.
    pub cert_id: String,
}

//! The load-balancer engine: spec -> observe -> plan -> apply.
//!
//! Its front door is [`ensure::Engine`]: `plan_service` (network, backends, members,
//! plan), `apply` and `ensure_deleted`, used by the service controller and the dry run
//! alike. The other modules are the engine's own; [`annotations`] and [`vocabulary`]
//! (and the [`plan`] types the engine returns) are public for the tools and tests.
//!
//! [`vocabulary`] holds the words every step shares (protocols, algorithms, stickiness
//! methods, rule names); `capabilities` what a network's load-balancer provider and
//! the server allow.

pub mod annotations;
pub(crate) mod apply;
pub(crate) mod capabilities;
pub mod certificates;
pub mod ensure;
pub(crate) mod ip_claim;
pub(crate) mod members;
pub(crate) mod observe;
pub mod plan;
pub(crate) mod spec;
#[cfg(test)]
pub(crate) mod ssl_fixtures;
pub mod tls_spec;
pub mod vocabulary;

/// A simulator of `scenario` and a client of its account `alice`, for unit tests that
/// need CloudStack's real answers.
#[cfg(test)]
pub(crate) async fn simulated_cloud(
    scenario: cloudstack_sim::Scenario,
) -> (cloudstack_sim::SimServer, cloudstack::Client) {
    let sim = cloudstack_sim::SimServer::start(scenario)
        .await
        .expect("simulator");
    let (key, secret) = sim.credentials("alice").expect("alice");
    let client = cloudstack::Client::new(cloudstack::ClientConfig::new(
        sim.api_url(),
        key.expose(),
        secret.expose(),
    ))
    .expect("client");
    (sim, client)
}

//! The load-balancer engine: spec -> observe -> plan -> apply.
//!
//! [`vocabulary`] holds the words every step shares (protocols, algorithms, stickiness
//! methods, rule names); [`capabilities`] what a network's load-balancer provider and
//! the server allow.

pub mod annotations;
pub mod apply;
pub mod capabilities;
pub mod certificates;
pub mod ensure;
pub mod ip_claim;
pub mod members;
pub mod observe;
pub mod plan;
pub mod spec;
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

//! Helpers shared by the HTTP tests: start a simulator, build a `cloudstack::Client` for an
//! account, and send hand-made requests for the error paths a good client never produces.

use cloudstack::{Client, ClientConfig, Secret};
use cloudstack_sim::{Scenario, SimServer};
use serde_json::Value;
use std::time::Duration;

/// Starts a simulator on 127.0.0.1:0.
pub async fn start(scenario: Scenario) -> SimServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    SimServer::start(scenario).await.expect("simulator starts")
}

/// A client for `account` that polls jobs quickly and never retries (errors surface as-is).
pub fn client(sim: &SimServer, account: &str) -> Client {
    let (api_key, secret_key) = sim.credentials(account).expect("account exists");
    client_with_keys(sim, api_key.expose(), secret_key.expose())
}

/// A client with explicit keys.
pub fn client_with_keys(sim: &SimServer, api_key: &str, secret_key: &str) -> Client {
    let mut config =
        ClientConfig::new(sim.api_url(), Secret::new(api_key), Secret::new(secret_key));
    config.max_retries = 0;
    config.job_poll_initial = Duration::from_millis(10);
    config.job_poll_max = Duration::from_millis(50);
    config.job_timeout = Duration::from_secs(20);
    Client::new(config).expect("client config is valid")
}

/// The fields of a `cloudstack::Error::Api` (also the server's 401 the client keeps in a
/// `CredentialsRefused`).
pub fn api_error(error: cloudstack::Error) -> (u16, u32, Option<u32>, String) {
    match error {
        cloudstack::Error::CredentialsRefused {
            reply: Some(reply), ..
        } => api_error(*reply),
        cloudstack::Error::Api {
            http_status,
            errorcode,
            cserrorcode,
            errortext,
            ..
        } => (http_status, errorcode, cserrorcode, errortext),
        other => panic!("expected an API error, got {other}"),
    }
}

/// The fields of a `cloudstack::Error::JobFailed`.
pub fn job_error(error: cloudstack::Error) -> (u32, String) {
    match error {
        cloudstack::Error::JobFailed {
            errorcode,
            errortext,
            ..
        } => (errorcode, errortext),
        other => panic!("expected a failed job, got {other}"),
    }
}

/// A raw HTTP answer.
pub struct Raw {
    /// Status.
    pub status: u16,
    /// Content-Type header.
    pub content_type: String,
    /// Body text.
    pub text: String,
    /// The `X-Description` header (the error text), if any.
    pub description: Option<String>,
}

impl Raw {
    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }
}

/// Sends a GET with `params` signed with `secret` (the client crate's signer); the
/// signature is replaced by `signature` when given.
pub async fn raw_get(
    sim: &SimServer,
    params: &[(&str, &str)],
    secret: &str,
    signature: Option<&str>,
) -> Raw {
    let computed = cloudstack::sign::signature(secret, params.iter().copied());
    let mut all: Vec<(&str, &str)> = params.to_vec();
    all.push(("signature", signature.unwrap_or(&computed)));
    let _ = rustls::crypto::ring::default_provider().install_default();
    let response = reqwest::Client::new()
        .get(sim.api_url())
        .query(&all)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let description = response
        .headers()
        .get("x-description")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Raw {
        status,
        content_type,
        description,
        text: response.text().await.expect("body"),
    }
}

/// Keys of the small scenario's account.
pub fn keys(sim: &SimServer, account: &str) -> (String, String) {
    let (a, s) = sim.credentials(account).expect("account exists");
    (a.expose().to_owned(), s.expose().to_owned())
}

/// Looks up an id in the state by entity list and name.
pub fn id_of(sim: &SimServer, list: &str, name: &str) -> String {
    let dump = sim.dump();
    dump[list]
        .as_array()
        .and_then(|items| items.iter().find(|i| i["name"] == name))
        .and_then(|i| i["id"].as_str())
        .unwrap_or_else(|| panic!("no {list} named {name}"))
        .to_owned()
}

/// A rule `web-<protocol>` on `port` (node port `30000 + port`, no `openfirewall`) on a new
/// address of the isolated `network`, as alice; its id.
pub async fn lb_rule_on(sim: &SimServer, network: &str, protocol: &str, port: u32) -> String {
    let alice = client(sim, "alice");
    let ip = alice
        .associate_ip_address(&cloudstack::AssociateIpAddress {
            networkid: Some(id_of(sim, "networks", network)),
            ..Default::default()
        })
        .await
        .expect("associate");
    let rule = alice
        .create_load_balancer_rule(&cloudstack::CreateLoadBalancerRule {
            name: format!("web-{protocol}"),
            algorithm: "roundrobin".into(),
            privateport: 30000 + port,
            publicport: port,
            publicipid: ip.id,
            protocol: Some(protocol.into()),
            openfirewall: Some(false),
            ..Default::default()
        })
        .await
        .expect("the rule is created");
    rule.id.expect("rule id")
}

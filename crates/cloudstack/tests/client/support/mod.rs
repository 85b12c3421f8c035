//! A tiny CloudStack-like HTTP server for the client's tests. It merges query and form
//! parameters like the servlet, verifies the signature with its own implementation of the
//! server's algorithm (API.md §1.2), records every request and answers with canned
//! envelopes from a test-supplied responder.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use base64::Engine as _;
use cloudstack::{Client, ClientConfig};
use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Value, json};

/// API key the test server accepts.
pub const API_KEY: &str = "TESTAPIKEY-abc_123";
/// Secret key the test server verifies with.
pub const SECRET_KEY: &str = "TestSecret-XyZ_987";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `GET` or `POST`.
    pub method: String,
    /// The `command` parameter.
    pub command: String,
    /// All parameters except `signature`, names as sent.
    pub params: BTreeMap<String, String>,
}

/// Produces `(http status, body)` for a request; `nth` counts earlier requests of the same
/// command (0 for the first).
pub type Responder = Arc<dyn Fn(&Recorded, usize) -> (u16, Value) + Send + Sync>;

/// A running test server.
pub struct TestServer {
    /// The API URL (`http://127.0.0.1:port/client/api`).
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Clone)]
struct AppState {
    responder: Responder,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl TestServer {
    /// Starts a server on 127.0.0.1:0 answering with `responder`.
    pub async fn start(
        responder: impl Fn(&Recorded, usize) -> (u16, Value) + Send + Sync + 'static,
    ) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = AppState {
            responder: Arc::new(responder),
            requests: requests.clone(),
        };
        let app = axum::Router::new()
            .route("/client/api", axum::routing::any(handle))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        TestServer {
            url: format!("http://{addr}/client/api"),
            requests,
            task,
        }
    }

    /// A client configuration for this server with fast retries and job polling.
    pub fn config(&self) -> ClientConfig {
        let mut config = ClientConfig::new(self.url.clone(), API_KEY, SECRET_KEY);
        config.retry_backoff_initial = Duration::from_millis(5);
        config.retry_backoff_max = Duration::from_millis(50);
        config.job_poll_initial = Duration::from_millis(5);
        config.job_poll_max = Duration::from_millis(20);
        config.request_timeout = Duration::from_secs(5);
        config
    }

    /// A client for this server (see [`TestServer::config`]).
    pub fn client(&self) -> Client {
        let _ = rustls::crypto::ring::default_provider().install_default();
        Client::new(self.config()).unwrap()
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// The requests of one command.
    pub fn requests_of(&self, command: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.command == command)
            .collect()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The servlet: merge query and form body, verify, record, answer.
async fn handle(
    State(state): State<AppState>,
    method: Method,
    headers: HeaderMap,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> impl IntoResponse {
    let mut pairs: Vec<(String, String)> =
        form_urlencoded::parse(query.unwrap_or_default().as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
    if method == Method::POST {
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(
            content_type.starts_with("application/x-www-form-urlencoded"),
            "POST content type {content_type}"
        );
        pairs.extend(form_urlencoded::parse(&body).map(|(k, v)| (k.into_owned(), v.into_owned())));
    }
    let mut params = BTreeMap::new();
    for (name, value) in pairs {
        params.entry(name).or_insert(value);
    }
    let command = params.get("command").cloned().unwrap_or_default();
    let response_key = format!("{}response", command.to_lowercase());
    if let Err(reason) = verify(&params) {
        let body = json!({ response_key: {"uuidList": [], "errorcode": 401, "errortext": format!("unable to verify user credentials and/or request signature ({reason})")} });
        return (StatusCode::UNAUTHORIZED, axum::Json(body));
    }
    params.remove("signature");
    let recorded = Recorded {
        method: method.to_string(),
        command: command.clone(),
        params,
    };
    let nth = {
        let mut requests = state.requests.lock().unwrap();
        let nth = requests.iter().filter(|r| r.command == command).count();
        requests.push(recorded.clone());
        nth
    };
    let (status, body) = (state.responder)(&recorded, nth);
    (StatusCode::from_u16(status).unwrap(), axum::Json(body))
}

/// Checks the request like `ApiServer.verifyRequest` with signatureVersion 3.
fn verify(params: &BTreeMap<String, String>) -> Result<(), String> {
    let given = params.get("signature").ok_or("no signature")?;
    if params.get("apikey").map(String::as_str) != Some(API_KEY) {
        return Err("unknown api key".into());
    }
    if params.get("response").map(String::as_str) != Some("json") {
        return Err("response=json missing".into());
    }
    if params.get("signatureversion").map(String::as_str) != Some("3") {
        return Err("signatureversion is not 3".into());
    }
    let expires = params.get("expires").ok_or("expires missing")?;
    let expires = jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%z", expires)
        .map_err(|e| format!("expires: {e}"))?;
    if expires <= jiff::Timestamp::now() {
        return Err("expired".into());
    }
    // BTreeMap iterates in byte order of the names: Java compareTo order for ASCII names.
    let canonical = params
        .iter()
        .filter(|(name, _)| !name.eq_ignore_ascii_case("signature"))
        .map(|(name, value)| {
            let encoded: String = form_urlencoded::byte_serialize(value.as_bytes()).collect();
            format!("{name}={}", encoded.replace('+', "%20"))
        })
        .collect::<Vec<_>>()
        .join("&")
        .to_lowercase();
    let mut mac = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(SECRET_KEY.as_bytes()).unwrap();
    mac.update(canonical.as_bytes());
    let expected = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    if &expected == given {
        Ok(())
    } else {
        Err("signature mismatch".into())
    }
}

/// A success envelope for `command`.
pub fn envelope(command: &str, inner: Value) -> (u16, Value) {
    (
        200,
        json!({ format!("{}response", command.to_lowercase()): inner }),
    )
}

/// An error envelope for `command` with status == errorcode.
pub fn error_envelope(command: &str, code: u16, cserrorcode: u32, text: &str) -> (u16, Value) {
    (
        code,
        json!({ format!("{}response", command.to_lowercase()): {"uuidList": [], "errorcode": code, "cserrorcode": cserrorcode, "errortext": text} }),
    )
}

//! The HTTP client: signing, sending, envelope decoding, retries, rate limiting, pagination.

use std::num::NonZeroU32;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable as _};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::command::{PAGE_SIZE, accepts_project, is_read, is_retry_safe};
use crate::credentials::{Admission, Live, RefusalGate};
use crate::envelope::{decode_list_page, decode_reply};
use crate::sign::{encode_value, signature};
use crate::throttle::ThrottleGate;
use crate::{CallOutcome, ClientConfig, Error, Params, tls};

/// Parameters the client always sets itself.
const RESERVED: &[&str] = &[
    "apikey",
    "command",
    "response",
    "signatureversion",
    "expires",
    "signature",
];

/// Upper bound on pages read by [`Client::list_all`] (5 million items), so a server that
/// ignores `page` cannot keep the walk going forever.
const MAX_PAGES: u32 = 10_000;

/// How long a signed request stays valid (`expires`).
const SIGNATURE_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// Decodes one reply (HTTP status, body) into what the caller wants.
pub(crate) type Decoder<'a, R> = dyn Fn(u16, &[u8]) -> Result<R, Error> + Sync + 'a;

/// A CloudStack API client. Cheap to clone (shares one connection pool, rate limiter and
/// configuration).
///
/// Retries: reads (`list*` and `query*`, including `queryAsyncJobResult`) are retried
/// with exponential backoff on 429, on non-deterministic 5xx errors, connection errors and
/// timeouts, up to [`ClientConfig::max_retries`] times. A 429 naming "retry after N ms"
/// holds every call of the client for that long (the account's window is shared), then
/// the refused call is sent again at once.
/// Mutating commands are retried only after a 429, which the server raises while verifying
/// the request, before the command runs. On any other failure a mutation is not resent: its
/// outcome is unknown (a lost reply may hide a created rule or an allocated IP), so the
/// caller re-observes the cloud state and decides.
///
/// Keys: [`Client::adopt_credentials`] replaces the keys (and the TLS settings) of a
/// running client; calls already sent finish with the keys they were signed with, every
/// later call (job polls included) is signed with the new ones. While CloudStack refuses
/// the keys in use (401 "unable to verify user credentials"), calls fail at once with
/// [`Error::CredentialsRefused`] and one call every
/// [`ClientConfig::credentials_probe_interval`] is sent as a probe; job waits keep polling
/// through that.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

/// Shared state of a [`Client`].
pub(crate) struct Inner {
    pub(crate) config: ClientConfig,
    /// The keys and connections in use (replaced by [`Client::adopt_credentials`]).
    pub(crate) live: RwLock<Arc<Live>>,
    /// Closed while CloudStack refuses the keys in use.
    pub(crate) refusal: RefusalGate,
    limiter: Option<DefaultDirectRateLimiter>,
    /// Held closed while the server's "retry after" of a 429 runs.
    throttle: ThrottleGate,
    /// Typical run times of async commands, learnt from the jobs waited for.
    pub(crate) job_run_times: crate::jobs::JobRunTimes,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("config", &self.inner.config)
            .finish()
    }
}

impl Client {
    /// Builds a client (TLS with rustls and the `ring` provider, which it installs as the
    /// process default if none is installed yet; optional CA file; optional `ssl_no_verify`).
    pub fn new(config: ClientConfig) -> Result<Client, Error> {
        validate(&config)?;
        let http = http_client(&config)?;
        let limiter = config
            .requests_per_second
            .map(|rate: NonZeroU32| RateLimiter::direct(Quota::per_second(rate)));
        let live = Live::new(config.api_key.clone(), config.secret_key.clone(), http);
        let refusal = RefusalGate::new(config.credentials_probe_interval);
        Ok(Client {
            inner: Arc::new(Inner {
                config,
                live: RwLock::new(live),
                refusal,
                limiter,
                throttle: ThrottleGate::default(),
                job_run_times: crate::jobs::JobRunTimes::default(),
            }),
        })
    }

    /// The configuration this client was built with. Its keys and TLS settings are the
    /// first ones: [`Client::adopt_credentials`] replaces those the client uses.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }

    /// The keys and connections in use.
    pub(crate) fn live(&self) -> Arc<Live> {
        self.inner
            .live
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// The HTTP client for `config` (TLS with rustls and the `ring` provider, which it
/// installs as the process default if none is installed yet; optional CA file; optional
/// `ssl_no_verify`).
fn http_client(config: &ClientConfig) -> Result<reqwest::Client, Error> {
    // One crypto provider (ring) for the whole process; a no-op when one is installed.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut builder = reqwest::Client::builder()
        .timeout(config.request_timeout)
        .tls_backend_rustls()
        .tls_danger_accept_invalid_certs(config.ssl_no_verify);
    if let Some(path) = &config.ca_file {
        // Read even with ssl_no_verify: a bad file is a configuration error either way.
        let certs = tls::read_ca_file(path)?;
        if !config.ssl_no_verify {
            builder = builder.tls_backend_preconfigured(tls::client_config(certs)?);
        }
    }
    builder
        .build()
        .map_err(|e| Error::Config(format!("cannot build the HTTP client: {}", e.without_url())))
}

impl Client {
    /// Sends `command` and returns the object under `<command lowercased>response`.
    /// Adds the configured `projectid` where the command accepts it; retries reads on
    /// transient failures and every command on 429 (see [`Client`]).
    pub async fn call(&self, command: &str, params: Params) -> Result<Value, Error> {
        self.call_decoded(command, params, &|status, body| {
            decode_reply(command, status, body)
        })
        .await
    }

    /// [`Client::call`] with the reply decoded by `decode` (HTTP status, body).
    pub(crate) async fn call_decoded<R>(
        &self,
        command: &str,
        params: Params,
        decode: &Decoder<'_, R>,
    ) -> Result<R, Error> {
        let params = self.with_project(command, params);
        let config = &self.inner.config;
        let should_retry: fn(&Error) -> bool = if is_retry_safe(command) {
            Error::is_retryable
        } else {
            Error::is_throttled
        };
        let backoff = ExponentialBuilder::default()
            .with_min_delay(config.retry_backoff_initial)
            .with_max_delay(config.retry_backoff_max)
            .with_max_times(config.max_retries as usize)
            .with_jitter();
        let max_delay = config.retry_backoff_max;
        (|| self.send(command, &params, decode))
            .retry(backoff)
            .sleep(tokio::time::sleep)
            .when(should_retry)
            .adjust(|error, delay| {
                delay.map(|delay| match error.retry_after() {
                    // Every call of the client waits for the window the server named
                    // (the gate), then this one is sent again at once.
                    Some(asked) => {
                        let asked = asked.min(max_delay);
                        self.inner.throttle.close_for(asked);
                        asked
                    }
                    None => delay,
                })
            })
            .notify(|error, delay| {
                tracing::debug!(command, %error, ?delay, "retrying CloudStack call");
            })
            .await
    }

    /// Reads every page of a list command (`page`/`pagesize=500`) and decodes the items under
    /// `item_key`. Stops when `count` items were read, when a page has no items, or (for
    /// servers that send no `count`) when a page is short.
    pub async fn list_all<T: DeserializeOwned>(
        &self,
        command: &str,
        item_key: &str,
        params: Params,
    ) -> Result<Vec<T>, Error> {
        self.list_all_mapped(command, item_key, params, Some).await
    }

    /// Like [`Client::list_all`], passing each item through `keep` as its page is read:
    /// what `keep` returns is collected (`None` drops the item), so a caller that keeps a
    /// little of each item never holds more than one page of decoded items.
    pub async fn list_all_mapped<T: DeserializeOwned, U>(
        &self,
        command: &str,
        item_key: &str,
        params: Params,
        mut keep: impl FnMut(T) -> Option<U>,
    ) -> Result<Vec<U>, Error> {
        let mut kept = Vec::new();
        let mut read = 0u64;
        let mut page = 1u32;
        loop {
            let (page_items, count): (Vec<T>, _) = self
                .list_one_page(command, item_key, params.clone(), page, PAGE_SIZE)
                .await?;
            let page_len = page_items.len();
            read += page_len as u64;
            kept.extend(page_items.into_iter().filter_map(&mut keep));
            let done = match count {
                Some(total) => read >= total,
                None => page_len < PAGE_SIZE as usize,
            };
            if page_len == 0 || done {
                return Ok(kept);
            }
            if page >= MAX_PAGES {
                return Err(Error::Decode {
                    command: command.to_owned(),
                    detail: format!("pagination did not end after {MAX_PAGES} pages of {item_key}"),
                });
            }
            page += 1;
        }
    }

    /// Reads page `page` (from 1) of a list command, `page_size` items a page (at most the
    /// server's `default.page.size`, 500 unless changed), and decodes its items under
    /// `item_key`, with the `count` total when the server sends it. For a caller that
    /// needs only some of a long list: one page in memory instead of all of them.
    pub async fn list_one_page<T: DeserializeOwned>(
        &self,
        command: &str,
        item_key: &str,
        params: Params,
        page: u32,
        page_size: u32,
    ) -> Result<(Vec<T>, Option<u64>), Error> {
        let page_params = params.set("page", page).set("pagesize", page_size);
        // The page is decoded straight into typed items: no JSON tree of the page.
        self.call_decoded(command, page_params, &|status, body| {
            decode_list_page(command, status, body, item_key)
        })
        .await
    }

    /// Adds the configured project to commands that accept it, unless already set.
    fn with_project(&self, command: &str, mut params: Params) -> Params {
        if let Some(project) = &self.inner.config.project_id
            && accepts_project(command)
            && !params.contains("projectid")
        {
            params.insert("projectid", project.clone());
        }
        params
    }

    /// Sends one signed request, reports it to the observer and decodes the envelope.
    async fn send<R>(
        &self,
        command: &str,
        params: &Params,
        decode: &Decoder<'_, R>,
    ) -> Result<R, Error> {
        self.inner.throttle.pass().await;
        if let Some(limiter) = &self.inner.limiter {
            limiter.until_ready().await;
        }
        let live = self.live();
        if !live
            .access
            .may_call(command, self.inner.config.refused_command_recheck)
        {
            return Err(crate::access::unavailable(command));
        }
        match self.inner.refusal.admit(live.generation) {
            Admission::Send => {}
            Admission::Hold => return Err(refused(command)),
            Admission::Probe => {
                // The probe runs on its own task: a caller that gives up on this call (a
                // sibling of a joined read failed at once) does not cancel it.
                let client = self.clone();
                let probed = live.clone();
                let probe = tokio::spawn(async move { client.probe(&probed).await });
                if !probe.await.unwrap_or(false) {
                    return Err(refused(command));
                }
            }
        }
        self.send_observed(command, params, decode, &live, Admission::Send)
            .await
    }

    /// Sends one request signed with `live`, reports it to the observer, and judges what
    /// the reply says about the keys.
    pub(crate) async fn send_observed<R>(
        &self,
        command: &str,
        params: &Params,
        decode: &Decoder<'_, R>,
        live: &Live,
        admission: Admission,
    ) -> Result<R, Error> {
        let started = Instant::now();
        let result = self.send_unobserved(command, params, decode, live).await;
        let latency = started.elapsed();
        let outcome = match &result {
            Ok(_) => CallOutcome::Ok,
            Err(Error::Transport { .. } | Error::Certificate { .. }) => CallOutcome::Transport,
            Err(error) => error
                .code()
                .map_or(CallOutcome::Decode, CallOutcome::ApiError),
        };
        match &result {
            Ok(_) => tracing::debug!(command, outcome = %outcome, ?latency, "CloudStack call"),
            Err(error) => {
                tracing::debug!(command, outcome = %outcome, ?latency, %error, "CloudStack call failed")
            }
        }
        if let Some(observer) = &self.inner.config.observer {
            observer.on_call(command, &outcome, latency);
        }
        self.judge_access(command, &live.access, &result);
        self.judge_credentials(command, live, admission, result)
    }

    /// Signs and sends one request: GET with a query string for reads, POST form otherwise;
    /// the reply goes through `decode`.
    async fn send_unobserved<R>(
        &self,
        command: &str,
        params: &Params,
        decode: &Decoder<'_, R>,
        live: &Live,
    ) -> Result<R, Error> {
        let body = self.signed_query(command, params, live);
        let config = &self.inner.config;
        let request = if is_read(command) {
            let separator = if config.api_url.contains('?') {
                '&'
            } else {
                '?'
            };
            live.http
                .get(format!("{}{separator}{body}", config.api_url))
        } else {
            live.http
                .post(&config.api_url)
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded; charset=UTF-8",
                )
                .body(body)
        };
        let transport = |source: reqwest::Error| match tls::tls_failure(&source) {
            Some(detail) => Error::Certificate {
                command: command.to_owned(),
                url: config.api_url.clone(),
                detail,
            },
            None => Error::Transport {
                command: command.to_owned(),
                source: source.without_url(),
            },
        };
        let response = request.send().await.map_err(transport)?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(transport)?;
        decode(status, &body)
    }

    /// The encoded, signed parameter string (`name=value&…&signature=…`).
    fn signed_query(&self, command: &str, params: &Params, live: &Live) -> String {
        let expires = jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::try_from(SIGNATURE_LIFETIME).unwrap_or_default())
            .unwrap_or_else(|_| jiff::Timestamp::now())
            .strftime("%Y-%m-%dT%H:%M:%S+0000")
            .to_string();
        // Names are lower-cased (the server does the same before binding), so byte order
        // equals the server's sort order; reserved names are always the client's own.
        let mut signed = Params::new();
        for (name, value) in params.iter() {
            let name = name.to_ascii_lowercase();
            if !RESERVED.contains(&name.as_str()) {
                signed.insert(&name, value.to_owned());
            }
        }
        signed.insert("apikey", live.api_key.expose().to_owned());
        signed.insert("command", command.to_owned());
        // JSON always, but for the one XML read that shows the version
        // ([`Client::server_version_from_xml`]).
        let format = match params.get("response") {
            Some("xml") => "xml",
            _ => "json",
        };
        signed.insert("response", format.to_owned());
        signed.insert("signatureversion", "3".to_owned());
        signed.insert("expires", expires);
        let sig = signature(live.secret_key.expose(), signed.iter());
        let mut query: Vec<String> = signed
            .iter()
            .map(|(name, value)| format!("{}={}", encode_value(name), encode_value(value)))
            .collect();
        query.push(format!("signature={}", encode_value(&sig)));
        query.join("&")
    }
}

/// The error of a call not sent because CloudStack refuses the keys.
fn refused(command: &str) -> Error {
    Error::CredentialsRefused {
        command: command.to_owned(),
        reply: None,
    }
}

/// Rejects configurations that cannot work, naming the field.
fn validate(config: &ClientConfig) -> Result<(), Error> {
    if !(config.api_url.starts_with("http://") || config.api_url.starts_with("https://")) {
        return Err(Error::Config(format!(
            "api_url {:?}: must start with http:// or https://",
            config.api_url
        )));
    }
    if config.api_key.is_empty() {
        return Err(Error::Config("api_key: must not be empty".into()));
    }
    if config.secret_key.is_empty() {
        return Err(Error::Config("secret_key: must not be empty".into()));
    }
    if config.job_poll_initial.is_zero() {
        return Err(Error::Config(
            "job_poll_initial: must be greater than zero".into(),
        ));
    }
    Ok(())
}

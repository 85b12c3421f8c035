//! `/client/api`: authenticate, throttle, inject faults, run the command, answer with the
//! server's envelope (JSON, or XML without `response=json`), and log the call.

use crate::commands::access;
use crate::commands::access::Caller;
use crate::commands::{self, Ctx, JobFaults};
use crate::error::ApiError;
use crate::faults::CallRecord;
use crate::jobs::now_ms;
use crate::listing;
use crate::params::{Params, parse_form};
use crate::response::{envelope, response_name, to_xml};
use crate::scenario::Role;
use crate::shared::{Shared, lock};
use crate::signing;
use axum::body::Bytes;
use axum::extract::{RawQuery, State as AxumState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// Builds the HTTP answer for a body or error. Errors of a command the server does not
/// have, and every 432, are keyed `errorresponse` (`ApiServer.getSerializedApiError`:
/// `UNSUPPORTED_ACTION_ERROR` forces it). `xml_version` is the `cloud-stack-version` the
/// XML root element carries (a verified caller while `expose_version_in_xml` is on).
fn answer(
    command: &str,
    known: bool,
    outcome: &Result<Value, ApiError>,
    json: bool,
    xml_version: Option<&str>,
) -> Response {
    let (status, body) = match outcome {
        Ok(body) => (StatusCode::OK, envelope(command, body.clone())),
        Err(e) => {
            let key = if !known || e.code == 432 {
                "errorresponse".to_owned()
            } else {
                response_name(command)
            };
            (
                StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                json!({ key: e.body() }),
            )
        }
    };
    let (content_type, text) = if json {
        ("application/json; charset=UTF-8", body.to_string())
    } else {
        ("text/xml; charset=UTF-8", to_xml(&body, xml_version))
    };
    let mut response = (status, text).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    if let Err(e) = outcome
        && !e.text.is_empty()
        && let Ok(v) = HeaderValue::from_str(&e.text)
    {
        response.headers_mut().insert("X-Description", v);
    }
    response
}

/// `/client/api` (GET and POST).
pub(crate) async fn api(
    AxumState(shared): AxumState<Arc<Shared>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut raw = parse_form(query.unwrap_or_default().as_bytes());
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if is_form {
        raw.extend(parse_form(&body));
    }
    let params = Params::new(raw);
    let json = params
        .get("response")
        .is_some_and(|r| r.eq_ignore_ascii_case("json"));
    let command = params.command.clone();
    let version = lock(&shared.state).version.clone();
    let known = commands::find(&command).is_some_and(|c| c.exists_in(&version));
    let arrived = now_ms();
    let unknown_params = listing::command(&command)
        .filter(|_| known)
        .map(|listed| listed.unknown_names(&params.raw))
        .unwrap_or_default();
    let Handled {
        outcome,
        account,
        job_id,
        verified,
    } = handle(&shared, &params).await;
    *lock(&shared.counts).entry(command.clone()).or_default() += 1;
    let (status, error) = match &outcome {
        Ok(_) => (200, None),
        Err(e) => (e.code, Some(e.text.clone())),
    };
    match &error {
        None => {
            tracing::info!(command = %command, account = account.as_deref().unwrap_or("-"), status, "api call")
        }
        Some(text) => {
            tracing::info!(command = %command, account = account.as_deref().unwrap_or("-"), status, error = %text, "api call failed")
        }
    }
    if !unknown_params.is_empty() {
        tracing::info!(command = %command, names = ?unknown_params, "parameters the command does not have (ignored)");
    }
    lock(&shared.log).push(CallRecord {
        at_ms: arrived,
        command: command.clone(),
        account,
        status,
        error,
        job_id,
        unknown_params,
    });
    // `ApiResponseSerializer.toXMLSerializedString`: the version only for a caller the
    // server has authenticated, and only while `expose.cloudstack.version.api.xml.response`.
    let xml_version = {
        let state = lock(&shared.state);
        (verified && state.settings.expose_version_in_xml).then(|| state.version.text.clone())
    };
    answer(&command, known, &outcome, json, xml_version.as_deref())
}

/// What [`handle`] made of a request.
struct Handled {
    outcome: Result<Value, ApiError>,
    /// The account the API key names, once the role let the command through to the
    /// signature check, or when it refused the command (432).
    account: Option<String>,
    job_id: Option<String>,
    /// The signature was verified: the caller is authenticated.
    verified: bool,
}

impl Handled {
    fn failed(error: ApiError, account: Option<String>, verified: bool) -> Self {
        Self {
            outcome: Err(error),
            account,
            job_id: None,
            verified,
        }
    }
}

/// Authenticates, throttles, injects faults and runs the command.
///
/// `ApiServer.verifyRequest` runs first for key-signed requests: a request without a
/// command, or naming a command the server does not have (absent from
/// `s_apiNameCmdClassMap`, e.g. one newer than the emulated version), fails verification
/// before the signature is even looked at — 401 "unable to verify user credentials and/or
/// request signature". Then the key's user is found (an unknown key: the same 401) and
/// `checkCommandAvailable` asks the API checkers — still before the signature: the role
/// ([`access::may_call`]) and the project (`projectid` of a project the account is not a
/// member of, unless root admin) refuse with 432 under `errorresponse`. Only then is the
/// signature verified (401).
async fn handle(shared: &Arc<Shared>, params: &Params) -> Handled {
    let command_name = params.command.as_str();
    let version = lock(&shared.state).version.clone();
    let Some(command) = commands::find(command_name).filter(|c| c.exists_in(&version)) else {
        return Handled::failed(ApiError::unauthorized(), None, false);
    };
    let (caller, latency, throttle) = {
        let state = lock(&shared.state);
        let Some(account) = params.get("apikey").and_then(|k| state.account_by_key(k)) else {
            return Handled::failed(ApiError::unauthorized(), None, false);
        };
        // `checkCommandAvailable`, before the signature: the dynamic role checker…
        if !access::may_call(account, command) {
            let refusal = access::refusal(&state.version, command_name, account);
            return Handled::failed(refusal, Some(account.name.clone()), false);
        }
        // …and the project: a `projectid` naming a project the account is no member of.
        let root_admin = account.role == Role::Admin && account.custom_role.is_none();
        if let Some(project) = params.sent("projectid").and_then(|id| state.project(id))
            && !root_admin
            && !project.members.contains(&account.name)
        {
            let refusal = access::project_refusal(command_name, &project.id);
            return Handled::failed(refusal, Some(account.name.clone()), false);
        }
        let verified = signing::verify(
            &params.raw,
            account.secret_key.expose(),
            &state.version,
            jiff::Timestamp::now(),
        );
        if !verified {
            return Handled::failed(ApiError::unauthorized(), None, false);
        }
        let caller = Caller {
            account: account.name.clone(),
            role: account.role,
        };
        (
            caller,
            state.settings.call_latency_ms,
            state.settings.throttle.clone(),
        )
    };
    let account = Some(caller.account.clone());
    if let Some(t) = throttle.filter(|_| caller.role != Role::Admin)
        && let Err(e) = lock(&shared.limiter).check(
            &caller.account,
            t.max,
            t.interval_secs.saturating_mul(1000),
            now_ms(),
        )
    {
        return Handled::failed(e, account, true);
    }
    let (extra, injected, job_faults) = {
        let faults = lock(&shared.faults);
        let job_faults = JobFaults {
            failure_rate: faults.job_failure_rate,
            never_finish_rate: faults.job_never_finish_rate,
            hung_networks: faults.hung_networks.clone(),
        };
        (
            faults.latency_for(command.name),
            faults.error_for(command.name),
            job_faults,
        )
    };
    if latency + extra > 0 {
        tokio::time::sleep(Duration::from_millis(latency + extra)).await;
    }
    // Parameter processing (`ParamProcessWorker.processParameters`, [`crate::binding`])
    // before the command's own checks.
    if let Some(listed) = listing::command(command.name) {
        let bound = {
            let state = lock(&shared.state);
            crate::binding::process(listed, &params.command, &params.raw, &state)
        };
        if let Err(e) = bound {
            return Handled::failed(e, account, true);
        }
    }
    if let Some(e) = injected {
        return Handled::failed(e, account, true);
    }
    let (outcome, new_jobs) = {
        let mut state = lock(&shared.state);
        let mut ctx = Ctx {
            state: &mut state,
            caller,
            params,
            job_faults,
            new_jobs: Vec::new(),
        };
        let outcome = (command.run)(&mut ctx);
        let new_jobs = std::mem::take(&mut ctx.new_jobs);
        if outcome.is_ok() && commands::is_mutating(command.name) {
            shared.persist(&state);
        }
        (outcome, new_jobs)
    };
    let job_id = new_jobs.first().cloned();
    for job in new_jobs {
        shared.spawn_job(job);
    }
    Handled {
        outcome,
        account,
        job_id,
        verified: true,
    }
}

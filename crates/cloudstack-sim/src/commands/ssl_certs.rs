//! SSL certificates and their assignment to load-balancer rules.
//!
//! * `uploadSslCert`, `listSslCerts`, `deleteSslCert` are synchronous `BaseCmd`s
//!   (`UploadSslCertCmd`, `ListSslCertsCmd`, `DeleteSslCertCmd` → `CertServiceImpl`).
//!   `UploadSslCertCmd.execute` answers every failure of `CertServiceImpl.uploadSslCert` as
//!   `ServerApiException(INTERNAL_ERROR, e.getMessage())`: 530 with the validation message
//!   ([`crate::certs::check`]; the chain's checks in `cert_chain`, which refuse
//!   any chain unless `enabledrevocationcheck=false` from 4.15). `certificate` and `privatekey` are at most 16384 characters,
//!   `certchain` 2097152 (`@Parameter(length)`, checked by `ParamProcessWorker`: 431 "…
//!   Value greater than max allowed length N for param: `<field>`", the Java field's name).
//!   A certificate that is not PEM at all is a message-less `NullPointerException`
//!   (`Preconditions.checkNotNull` of the `PemObject`): 530 with no `errortext`; a PEM block
//!   whose base64 does not decode is BouncyCastle's decoder text.
//! * `listSslCerts` and `deleteSslCert` wrap every failure of `CertServiceImpl` in `new
//!   CloudRuntimeException(e)` (`ListSslCertsCmd.execute`, `DeleteSslCertCmd.execute`):
//!   530, cs 0, the inner message for a root admin and `BaseCmd.USER_ERROR_MESSAGE` for
//!   others — access refusals included, never a 531. "Certificate in use by a
//!   loadbalancer(s) …" is one of them.
//! * The `sslcert` object has no `domainpath` (`SslCertResponse`).
//! * `assignCertToLoadBalancer` and `removeCertFromLoadBalancer` are `BaseAsyncCmd`s queued
//!   on the rule's network (`getSyncObjId`); their ids are resolved before (431), every other
//!   check runs in the job (`LoadBalancingRulesManagerImpl.assignCertToLoadBalancer`,
//!   `removeCertFromLoadBalancer`), in the server's order: rule and certificate still there
//!   (`java.security.InvalidParameterException` → 530), access to the rule (530), the same
//!   account (431 "Access denied for account `<id>`"), the network's `SslTermination`
//!   capability (431), no certificate bound yet unless `forced` (4.17; 431), protocol `ssl`
//!   (431 "Bad LB protocol: Expected ssl got `<protocol>`").
//! * Certificates carry no tags: `ResourceTag.ResourceObjectType` has no certificate type.

use super::access::job_denied;
use super::access::owner_fields;
use super::infra::ssl_termination;
use super::{Ctx, job_reply, lookup_required, resolve};
use crate::error::ApiError;
use crate::jobs::JobAction;
use crate::response::{Page, list_body};
use crate::state::{CertBinding, Owner, SslCert, State, new_id};
use serde_json::{Map, Value, json};

use super::access::Caller;

/// The `sslcert` object (`CertServiceImpl.createCertResponse`); never the key.
fn render_cert(state: &State, cert: &SslCert) -> Value {
    let mut out = Map::new();
    out.insert("id".into(), json!(cert.id));
    out.insert("name".into(), json!(cert.name));
    out.insert("certificate".into(), json!(cert.certificate));
    out.insert("fingerprint".into(), json!(cert.fingerprint));
    if let Some(chain) = &cert.chain {
        out.insert("certchain".into(), json!(chain));
    }
    owner_fields(state, &cert.owner, &mut out);
    // `SslCertResponse` has no `domainpath`.
    out.remove("domainpath");
    let rules: Vec<&str> = state
        .cert_bindings
        .iter()
        .filter(|b| b.cert_id == cert.id)
        .map(|b| b.rule_id.as_str())
        .collect();
    if !rules.is_empty() {
        out.insert("loadbalancerrulelist".into(), json!(rules));
    }
    Value::Object(out)
}

/// `ParamProcessWorker`'s length check of a STRING parameter.
fn check_length(ctx: &Ctx<'_>, name: &str, field: &str, max: usize) -> Result<(), ApiError> {
    match ctx.params.get(name) {
        Some(v) if v.chars().count() > max => Err(ApiError::param_bare(format!(
            "Unable to execute API command {} due to invalid value. Value greater than max allowed length {max} for param: {field}",
            ctx.params.command.to_lowercase()
        ))),
        _ => Ok(()),
    }
}

/// uploadSslCert.
pub fn upload_ssl_cert(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    check_length(ctx, "certificate", "cert", 16384)?;
    check_length(ctx, "privatekey", "key", 16384)?;
    check_length(ctx, "certchain", "chain", 2_097_152)?;
    check_length(ctx, "name", "name", 255)?;
    let p = ctx.params;
    let certificate = p.required("certificate")?.to_owned();
    let key = p.required("privatekey")?;
    let name = p.required("name")?.to_owned();
    let chain = p.text("certchain").map(str::to_owned);
    let owner = ctx.caller.owner_for_create(ctx.state, p)?;
    // `enabledrevocationcheck` (4.15+) defaults to true; before 4.15 there is no check.
    let revocation =
        ctx.state.version.at_least(4, 15) && p.bool("enabledrevocationcheck") != Some(false);
    let checked = crate::certs::check(
        &certificate,
        key,
        chain.as_deref(),
        revocation,
        jiff::Timestamp::now(),
    )
    .map_err(|text| ApiError::new(530, Some(9999), text))?;
    let cert = SslCert {
        id: new_id(),
        name,
        certificate,
        chain,
        fingerprint: checked.fingerprint,
        owner,
    };
    let rendered = render_cert(ctx.state, &cert);
    ctx.state.ssl_certs.push(cert);
    Ok(json!({"sslcert": rendered}))
}

/// listSslCerts (`CertServiceImpl.listSslCerts`): by `certid`, by `lbruleid` (the bound
/// certificate, or none), by `projectid`, else `accountid`'s certificates. Not paginated
/// (`BaseCmd`); only one of the filters may be given. Before 4.24 one of them is required:
/// "Invalid parameters either certificate ID or Account ID or Loadbalancer ID or Project ID
/// required" (from 4.24 none means the caller's). `ListSslCertsCmd.execute` wraps every
/// failure of `CertServiceImpl.listSslCerts` — these refusals and the access checks alike —
/// in `new CloudRuntimeException(e)`: 530, cs 0, the inner message for a root admin and the
/// generic text for anyone else ([`ApiError::wrapped`]), never a 531.
pub fn list_ssl_certs(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let p = ctx.params;
    let state = &*ctx.state;
    let cert_id = resolve(p, "certid", |i| state.ssl_certs.iter().any(|c| c.id == i))?;
    let lb_id = resolve(p, "lbruleid", |i| state.lb_rule(i).is_some())?;
    let project_id = resolve(p, "projectid", |i| state.project(i).is_some())?;
    let account_id = resolve(p, "accountid", |i| state.accounts.iter().any(|a| a.id == i))?;
    let given = [cert_id, lb_id, project_id, account_id]
        .iter()
        .filter(|x| x.is_some())
        .count();
    let admin = ctx.caller.is_admin();
    let refused = |text: &str| ApiError::wrapped(admin, text);
    let wrap = |e: ApiError| ApiError::wrapped(admin, &e.text);
    if given == 0 && !state.version.at_least(4, 24) {
        return Err(refused(
            "Invalid parameters either certificate ID or Account ID or Loadbalancer ID or Project ID required",
        ));
    }
    // The refusal of several filters came with 4.24; before, the first of certid,
    // lbruleid, projectid and accountid answers.
    if given > 1 && state.version.at_least(4, 24) {
        return Err(refused(
            "Only one of certid, lbid, projectid, or accountid/account can be specified",
        ));
    }
    let items: Vec<&SslCert> = if let Some(id) = cert_id {
        let cert = state.ssl_certs.iter().find(|c| c.id == id);
        cert.into_iter().collect()
    } else if let Some(rule_id) = lb_id {
        let rule = state.lb_rule(rule_id).expect("resolved");
        ctx.caller
            .check(state, &rule.owner, &format!("load balancer rule {rule_id}"))
            .map_err(wrap)?;
        state
            .cert_bindings
            .iter()
            .filter(|b| b.rule_id == rule_id)
            .filter_map(|b| state.ssl_certs.iter().find(|c| c.id == b.cert_id))
            .collect()
    } else {
        let owner = match (project_id, account_id) {
            (Some(project), _) => Owner::Project(project.to_owned()),
            (None, Some(account)) => Owner::Account(
                state
                    .accounts
                    .iter()
                    .find(|a| a.id == account)
                    .map(|a| a.name.clone())
                    .unwrap_or_default(),
            ),
            (None, None) => Owner::Account(ctx.caller.account.clone()),
        };
        state
            .ssl_certs
            .iter()
            .filter(|c| c.owner == owner)
            .collect()
    };
    if let Some(first) = items.first() {
        ctx.caller
            .check(
                state,
                &first.owner,
                &format!("SSL certificate {}", first.id),
            )
            .map_err(wrap)?;
    }
    let rendered = items.iter().map(|c| render_cert(state, c)).collect();
    Ok(list_body("sslcert", rendered, Page::all()))
}

/// deleteSslCert (`CertServiceImpl.deleteSslCert`): `DeleteSslCertCmd.execute` wraps every
/// failure — the access check and "Certificate in use by a loadbalancer(s) …" alike — in
/// `new CloudRuntimeException(e)`: 530, cs 0, the message for a root admin only.
pub fn delete_ssl_cert(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let admin = ctx.caller.is_admin();
    let cert = lookup_required(ctx.params, "id", |id| {
        state.ssl_certs.iter().find(|c| c.id == id)
    })?;
    ctx.caller
        .check(state, &cert.owner, &format!("SSL certificate {}", cert.id))
        .map_err(|e| ApiError::wrapped(admin, &e.text))?;
    let users: Vec<&str> = state
        .cert_bindings
        .iter()
        .filter(|b| b.cert_id == cert.id)
        .filter_map(|b| state.lb_rule(&b.rule_id).map(|r| r.name.as_str()))
        .collect();
    if !users.is_empty() {
        let names: String = users.iter().map(|n| format!("{n} ")).collect();
        return Err(ApiError::wrapped(
            admin,
            &format!("Certificate in use by a loadbalancer(s) {names}"),
        ));
    }
    let id = cert.id.clone();
    ctx.state.ssl_certs.retain(|c| c.id != id);
    Ok(json!({"success": true}))
}

/// assignCertToLoadBalancer: ids resolved now, the rest in the job.
pub fn assign_cert_to_load_balancer(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "lbruleid", |id| state.lb_rule(id))?;
    let cert = lookup_required(ctx.params, "certid", |id| {
        state.ssl_certs.iter().find(|c| c.id == id)
    })?;
    let forced = state.version.at_least(4, 17) && ctx.params.bool("forced") == Some(true);
    let (rule_id, network, cert_id) = (rule.id.clone(), rule.network_id.clone(), cert.id.clone());
    let job = ctx.start_job(
        Some(network),
        Some(("LoadBalancerRule", rule_id.clone())),
        JobAction::AssignCert {
            rule_id,
            cert_id,
            forced,
        },
    );
    Ok(job_reply(&job))
}

/// removeCertFromLoadBalancer: the id resolved now, the rest in the job.
pub fn remove_cert_from_load_balancer(ctx: &mut Ctx<'_>) -> Result<Value, ApiError> {
    let state = &*ctx.state;
    let rule = lookup_required(ctx.params, "lbruleid", |id| state.lb_rule(id))?;
    let (rule_id, network) = (rule.id.clone(), rule.network_id.clone());
    let job = ctx.start_job(
        Some(network),
        Some(("LoadBalancerRule", rule_id.clone())),
        JobAction::RemoveCert { rule_id },
    );
    Ok(job_reply(&job))
}

/// Job of assignCertToLoadBalancer, with the server's checks in the server's order.
pub fn finish_assign(
    state: &mut State,
    caller: &Caller,
    rule_id: &str,
    cert_id: &str,
    forced: bool,
) -> Result<Value, ApiError> {
    let rule = state
        .lb_rule(rule_id)
        .ok_or_else(|| ApiError::new(530, None, format!("Invalid load balancer id: {rule_id}")))?;
    let cert = state
        .ssl_certs
        .iter()
        .find(|c| c.id == cert_id)
        .ok_or_else(|| ApiError::new(530, None, format!("Invalid certificate id: {cert_id}")))?;
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("load balancer rule {rule_id}")));
    }
    if rule.owner != cert.owner {
        return Err(ApiError::param(format!(
            "Access denied for account {}",
            owner_text(&cert.owner)
        )));
    }
    let network = state.network(&rule.network_id);
    if !network.is_some_and(|n| ssl_termination(state, n)) {
        return Err(ApiError::param(
            "Ssl termination not supported by the loadbalancer",
        ));
    }
    let bound = state.cert_bindings.iter().any(|b| b.rule_id == rule_id);
    if bound && !forced {
        return Err(ApiError::param(
            "Another certificate is already bound to the LB",
        ));
    }
    if rule.protocol != "ssl" {
        return Err(ApiError::param(format!(
            "Bad LB protocol: Expected ssl got {}",
            rule.protocol
        )));
    }
    state.cert_bindings.retain(|b| b.rule_id != rule_id);
    state.cert_bindings.push(CertBinding {
        rule_id: rule_id.to_owned(),
        cert_id: cert_id.to_owned(),
    });
    // `assignCertToLoadBalancer` sets the rule to Add and applies the LB config again.
    super::lb::apply_rule(state, rule_id);
    Ok(super::success())
}

/// Job of removeCertFromLoadBalancer (`removeCertFromLoadBalancer`, 4.22 in
/// `LoadBalancingRulesManagerImpl`'s cert helper): a vanished rule or no certificate bound
/// is an `InvalidParameterValueException` (431 cs 4350; before 4.22
/// `java.security.InvalidParameterException`, 530), then the access check.
pub fn finish_remove(state: &mut State, caller: &Caller, rule_id: &str) -> Result<Value, ApiError> {
    let refusal = |text: String| {
        if state.version.at_least(4, 22) {
            ApiError::param(text)
        } else {
            ApiError::new(530, None, text)
        }
    };
    let rule = state
        .lb_rule(rule_id)
        .ok_or_else(|| refusal(format!("Invalid load balancer value: {rule_id}")))?;
    if !state.cert_bindings.iter().any(|b| b.rule_id == rule_id) {
        return Err(refusal(format!(
            "No certificate is bound to lb with id: {rule_id}"
        )));
    }
    if !caller.can_access(state, &rule.owner) {
        return Err(job_denied(caller, &format!("load balancer rule {rule_id}")));
    }
    state.cert_bindings.retain(|b| b.rule_id != rule_id);
    // `removeCertFromLoadBalancer` sets the rule to Add and applies the LB config again.
    super::lb::apply_rule(state, rule_id);
    Ok(super::success())
}

/// The account a certificate belongs to, as the refusal names it (the server prints the
/// internal account id; the simulator has none and prints the account's name).
fn owner_text(owner: &Owner) -> String {
    match owner {
        Owner::Account(name) => name.clone(),
        Owner::Project(id) => format!("project {id}"),
    }
}

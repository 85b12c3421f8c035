//! The filter in front of every path of the secure port, as the framework's
//! `WithAuthentication` then `WithAuthorization`: authenticate (a front proxy's request
//! headers, [`super::front_proxy`], then a verified client certificate,
//! [`super::client_cert`], then a bearer token, [`super::authn`]), then authorise
//! ([`super::authz`]), then serve.
//!
//! Refusals carry the API server's `Status` bodies and name nothing secret: a 401 is
//! `Unauthorized` (the token is never echoed), a 403 names the user and the path
//! (`forbidden: User "system:anonymous" cannot get path "/metrics"`), and when the API server
//! cannot be asked the answer is 503 — never "allow" — with the cause in the log only.

use std::path::Path;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::authn::{Authentication, TokenAuthenticator};
use super::authz::{AlwaysAllowPaths, Authorization, Authorizer};
use super::client_cert::ConnectionIdentity;
use super::front_proxy::RequestHeaderNames;
use crate::cli::serving::ServingArgs;

/// Delegated authentication and authorization.
#[derive(Debug)]
pub struct Delegation {
    /// Reviews tokens.
    pub authenticator: TokenAuthenticator,
    /// Reviews access.
    pub authorizer: Authorizer,
    /// Where a front proxy names the user.
    pub request_headers: RequestHeaderNames,
}

impl Delegation {
    /// From the flags: the reviews go through `--authentication-kubeconfig` and
    /// `--authorization-kubeconfig` when given, else through `default_client` (the
    /// controller manager's own client: in-cluster, or `--kubeconfig`).
    pub async fn from_args(
        args: &ServingArgs,
        default_client: &kube::Client,
    ) -> Result<Self, String> {
        let always_allow = AlwaysAllowPaths::parse(&args.authorization_always_allow_paths)?;
        let authn_client = match &args.authentication_kubeconfig {
            Some(path) => client_from(path, "--authentication-kubeconfig").await?,
            None => default_client.clone(),
        };
        let authz_client = match &args.authorization_kubeconfig {
            Some(path) => client_from(path, "--authorization-kubeconfig").await?,
            None => default_client.clone(),
        };
        Ok(Self {
            request_headers: RequestHeaderNames::from_args(args)?,
            authenticator: TokenAuthenticator::new(
                authn_client,
                args.authentication_token_webhook_cache_ttl,
            ),
            authorizer: Authorizer::new(
                authz_client,
                always_allow,
                args.authorization_webhook_cache_authorized_ttl,
                args.authorization_webhook_cache_unauthorized_ttl,
            ),
        })
    }
}

impl Delegation {
    /// Authentication by the connection's client certificate, in the framework's order: a
    /// front proxy's request headers, then the certificate's own user. A front proxy whose
    /// CommonName is not allowed, or a certificate that names no one, is refused; `None`
    /// without a certificate (bearer tokens decide).
    pub(crate) fn by_certificate(
        &self,
        identity: &ConnectionIdentity,
        headers: &axum::http::HeaderMap,
    ) -> Option<Authentication> {
        if identity.front_proxy == Some(false) {
            return Some(Authentication::Rejected);
        }
        if identity.front_proxy == Some(true)
            && let Some(user) = self.request_headers.user(headers)
        {
            return Some(Authentication::User(user));
        }
        match &identity.client_cert {
            Some(user) => Some(Authentication::User(user.clone())),
            None if identity.presented => Some(Authentication::Rejected),
            None => None,
        }
    }
}

async fn client_from(path: &Path, flag: &str) -> Result<kube::Client, String> {
    let kubeconfig = kube::config::Kubeconfig::read_from(path)
        .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .map_err(|error| format!("{flag} {}: {error}", path.display()))?;
    kube::Client::try_from(config).map_err(|error| format!("{flag} {}: {error}", path.display()))
}

/// A `metav1.Status` failure response.
fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    let body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {},
        "code": code.as_u16(),
    });
    (
        code,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn unavailable(path: &str, cause: &str) -> Response {
    tracing::warn!(
        path,
        cause,
        "cannot ask the Kubernetes API server about a request to the secure port; answering 503"
    );
    status(
        StatusCode::SERVICE_UNAVAILABLE,
        "ServiceUnavailable",
        "the Kubernetes API server could not be asked to authenticate or authorize this request; try again later",
    )
}

/// The middleware: authenticates, authorises, then hands the request on.
pub async fn guard(
    State(delegation): State<Arc<Delegation>>,
    request: Request,
    next: Next,
) -> Response {
    let path = request.uri().path().to_string();
    let identity = request
        .extensions()
        .get::<ConnectionIdentity>()
        .cloned()
        .unwrap_or_default();
    let authentication = match delegation.by_certificate(&identity, request.headers()) {
        Some(authentication) => authentication,
        None => {
            delegation
                .authenticator
                .authenticate(request.headers())
                .await
        }
    };
    let user = match authentication {
        Authentication::User(user) => user,
        Authentication::Rejected => {
            tracing::debug!(
                path,
                "refused a request with a token the API server does not vouch for"
            );
            return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
        Authentication::Unavailable(cause) => return unavailable(&path, &cause),
    };
    let verb = request.method().as_str().to_ascii_lowercase();
    match delegation.authorizer.authorize(&user, &verb, &path).await {
        Authorization::Allowed => next.run(request).await,
        Authorization::Denied => {
            tracing::debug!(user = %user.name, path, "refused a request the API server does not allow");
            status(
                StatusCode::FORBIDDEN,
                "Forbidden",
                &format!(
                    "forbidden: User {:?} cannot {verb} path {path:?}",
                    user.name
                ),
            )
        }
        Authorization::Unavailable(cause) => unavailable(&path, &cause),
    }
}

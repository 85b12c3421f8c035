//! Delegated authentication, as the framework's `DelegatingAuthenticatorConfig` with
//! anonymous requests on:
//!
//! * A bearer token (read as `bearertoken.Authenticator` reads it: the `Authorization`
//!   header trimmed, `Bearer` in any case, the second word the token) is sent to the API
//!   server in a `TokenReview`; the answer, authenticated or not, is cached for
//!   `--authentication-token-webhook-cache-ttl` (2 min, the kubelet's default), so a
//!   scrape every 15 s costs one review every 2 minutes. A token the API server does not
//!   vouch for is a 401, never anonymous.
//! * No bearer token: the anonymous user (`system:anonymous` in `system:unauthenticated`).
//! * No answer (the API server away, an error, no answer within `REVIEW_TIMEOUT`):
//!   unavailable, never anonymous; errors are not cached.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::api::{Api, PostParams};

use super::cache::ExpiringCache;

/// Time given to one review (the framework's `ClientTimeout`).
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    /// User name (`system:serviceaccount:monitoring:prometheus`).
    pub name: String,
    /// The user's uid, when the API server gives one.
    pub uid: String,
    /// Groups.
    pub groups: Vec<String>,
    /// Extra attributes the API server gives.
    pub extra: BTreeMap<String, Vec<String>>,
}

impl User {
    /// `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..Self::default()
        }
    }
}

/// The outcome of authenticating a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authentication {
    /// The user (anonymous without credentials).
    User(User),
    /// Credentials the API server does not vouch for: 401.
    Rejected,
    /// The API server could not be asked: 503. The reason is for the log.
    Unavailable(String),
}

/// The bearer token of a request, as `bearertoken.Authenticator` reads it.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().split(' ');
    let scheme = parts.next()?;
    let token = parts.next()?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Authenticates bearer tokens with TokenReviews, caching the answers.
pub struct TokenAuthenticator {
    client: kube::Client,
    ttl: Duration,
    timeout: Duration,
    cache: ExpiringCache<String, Option<User>>,
}

impl std::fmt::Debug for TokenAuthenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenAuthenticator")
            .field("ttl", &self.ttl)
            .field("timeout", &self.timeout)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl TokenAuthenticator {
    /// Reviews tokens through `client`, caching answers for `ttl`.
    pub fn new(client: kube::Client, ttl: Duration) -> Self {
        Self {
            client,
            ttl,
            timeout: REVIEW_TIMEOUT,
            cache: ExpiringCache::default(),
        }
    }

    /// The same, giving each review `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Who sent a request with these headers.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Authentication {
        let Some(token) = bearer_token(headers) else {
            return Authentication::User(User::anonymous());
        };
        let answer = match self.cache.get(&token.to_string()) {
            Some(answer) => answer,
            None => match self.review(token).await {
                Ok(answer) => {
                    self.cache
                        .insert(token.to_string(), answer.clone(), Instant::now() + self.ttl);
                    answer
                }
                Err(reason) => return Authentication::Unavailable(reason),
            },
        };
        answer.map_or(Authentication::Rejected, Authentication::User)
    }

    /// The API server's answer for `token`: its user, or none when it is not authenticated.
    async fn review(&self, token: &str) -> Result<Option<User>, String> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_string()),
                ..TokenReviewSpec::default()
            },
            ..TokenReview::default()
        };
        let api: Api<TokenReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| format!("no TokenReview answer within {:?}", self.timeout))?
                .map_err(|error| format!("TokenReview failed: {error}"))?;
        let Some(status) = answer.status.filter(|s| s.authenticated == Some(true)) else {
            return Ok(None);
        };
        let user = status.user.unwrap_or_default();
        Ok(Some(User {
            name: user.username.unwrap_or_default(),
            uid: user.uid.unwrap_or_default(),
            groups: user.groups.unwrap_or_default(),
            extra: user.extra.unwrap_or_default(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_is_read_as_bearertoken_go_reads_it() {
        let token = |value: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            }
            bearer_token(&headers).map(str::to_owned)
        };
        for (value, want) in [
            (Some("Bearer t1"), Some("t1")),
            (Some("  bearer t1 extra"), Some("t1")),
            (Some("BEARER t1"), Some("t1")),
            (Some("Bearer"), None),
            (Some("Bearer  t1"), None),
            (Some("Basic dTpw"), None),
            (None, None),
        ] {
            assert_eq!(token(value).as_deref(), want, "{value:?}");
        }
    }
}

//! Delegated authorization, as the framework's `DelegatingAuthorizationOptions` build it:
//! the `system:masters` group is allowed everything, the always-allow paths
//! (`--authorization-always-allow-paths`, default `/healthz,/readyz,/livez`; a trailing
//! `*` matches a prefix, the leading `/` is optional, as `path.NewAuthorizer` reads them)
//! are allowed to everyone, and anything else is a `SubjectAccessReview` on the
//! non-resource path and the lowercase method as verb. Answers are cached for
//! `--authorization-webhook-cache-authorized-ttl` (5 min) and `-unauthorized-ttl` (30 s),
//! the kubelet's defaults (the framework's are 10 s, shorter than a scrape interval);
//! errors are not cached and never allow.

use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};

use super::authn::{REVIEW_TIMEOUT, User};
use super::cache::ExpiringCache;

/// The group allowed everything without a review (`AlwaysAllowGroups`).
pub(crate) const PRIVILEGED_GROUP: &str = "system:masters";

/// The outcome of authorising a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Authorization {
    /// Serve it.
    Allowed,
    /// 403.
    Denied,
    /// The API server could not be asked: 503. The reason is for the log.
    Unavailable(String),
}

/// The always-allow paths, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AlwaysAllowPaths {
    exact: Vec<String>,
    prefixes: Vec<String>,
}

impl AlwaysAllowPaths {
    /// Parses the flag's values; a `*` anywhere but at the end is an error.
    pub fn parse(paths: &[String]) -> Result<Self, String> {
        let mut parsed = Self::default();
        for path in paths {
            let trimmed = path.trim().trim_start_matches('/');
            match trimmed.strip_suffix('*') {
                _ if trimmed.trim_end_matches('*').contains('*') || trimmed.ends_with("**") => {
                    return Err(format!(
                        "--authorization-always-allow-paths: only a trailing * is allowed in {path:?}"
                    ));
                }
                Some(prefix) => parsed.prefixes.push(prefix.to_string()),
                None => parsed.exact.push(trimmed.to_string()),
            }
        }
        Ok(parsed)
    }

    /// Whether `path` is always allowed.
    pub fn allows(&self, path: &str) -> bool {
        let path = path.trim_start_matches('/');
        self.exact.iter().any(|p| p == path) || self.prefixes.iter().any(|p| path.starts_with(p))
    }
}

/// Authorises requests with SubjectAccessReviews, caching the answers.
pub struct Authorizer {
    client: kube::Client,
    always_allow: AlwaysAllowPaths,
    allowed_ttl: Duration,
    denied_ttl: Duration,
    timeout: Duration,
    cache: ExpiringCache<String, bool>,
}

impl std::fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorizer")
            .field("always_allow", &self.always_allow)
            .field("allowed_ttl", &self.allowed_ttl)
            .field("denied_ttl", &self.denied_ttl)
            .field("timeout", &self.timeout)
            .field("cache", &self.cache)
            .finish_non_exhaustive()
    }
}

impl Authorizer {
    /// Reviews through `client`, caching allowed answers for `allowed_ttl` and denied ones
    /// for `denied_ttl`.
    pub fn new(
        client: kube::Client,
        always_allow: AlwaysAllowPaths,
        allowed_ttl: Duration,
        denied_ttl: Duration,
    ) -> Self {
        Self {
            client,
            always_allow,
            allowed_ttl,
            denied_ttl,
            timeout: REVIEW_TIMEOUT,
            cache: ExpiringCache::default(),
        }
    }

    /// The same, giving each review `timeout`.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Whether `user` may `verb` (the lowercase method) the non-resource `path`.
    pub async fn authorize(&self, user: &User, verb: &str, path: &str) -> Authorization {
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) || self.always_allow.allows(path) {
            return Authorization::Allowed;
        }
        let spec = SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|uid| !uid.is_empty()),
            groups: Some(user.groups.clone()),
            extra: Some(user.extra.clone()).filter(|extra| !extra.is_empty()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(path.to_string()),
                verb: Some(verb.to_string()),
            }),
            resource_attributes: None,
        };
        // The spec, as JSON, is the key (as the framework's webhook cache keys it).
        let key = serde_json::to_string(&spec).unwrap_or_default();
        let allowed = match self.cache.get(&key) {
            Some(allowed) => allowed,
            None => match self.review(spec).await {
                Ok(allowed) => {
                    let ttl = if allowed {
                        self.allowed_ttl
                    } else {
                        self.denied_ttl
                    };
                    self.cache.insert(key, allowed, Instant::now() + ttl);
                    allowed
                }
                Err(reason) => return Authorization::Unavailable(reason),
            },
        };
        if allowed {
            Authorization::Allowed
        } else {
            Authorization::Denied
        }
    }

    async fn review(&self, spec: SubjectAccessReviewSpec) -> Result<bool, String> {
        let review = SubjectAccessReview {
            spec,
            ..SubjectAccessReview::default()
        };
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let answer =
            tokio::time::timeout(self.timeout, api.create(&PostParams::default(), &review))
                .await
                .map_err(|_| format!("no SubjectAccessReview answer within {:?}", self.timeout))?
                .map_err(|error| format!("SubjectAccessReview failed: {error}"))?;
        Ok(answer
            .status
            .is_some_and(|s| s.allowed && s.denied != Some(true)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allow_paths_match_as_path_new_authorizer_matches() {
        let paths = |list: &[&str]| {
            AlwaysAllowPaths::parse(&list.iter().map(|p| p.to_string()).collect::<Vec<_>>())
        };
        let defaults = paths(&["/healthz", "/readyz", "/livez"]).unwrap();
        assert!(defaults.allows("/healthz") && defaults.allows("/livez"));
        assert!(!defaults.allows("/metrics") && !defaults.allows("/healthz/ping"));
        let prefixed = paths(&["healthz/*", "/debug*"]).unwrap();
        assert!(prefixed.allows("/healthz/ping") && prefixed.allows("/debug/pprof"));
        assert!(!prefixed.allows("/healthz"));
        let error = paths(&["/a*b"]).unwrap_err();
        assert!(
            error.starts_with("--authorization-always-allow-paths"),
            "{error}"
        );
        assert!(!paths(&[]).unwrap().allows("/healthz"));
    }
}

//! The state every handler and the access filter share — the store, faults and counters,
//! tokens and the log of refusals — in a module of its own so the filter and the handlers
//! need not import the router or each other.

use std::sync::Mutex;
use std::time::Duration;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};

use crate::auth::Tokens;
use crate::error::ApiError;
use crate::faults::Faults;
use crate::store::Store;

/// State shared by all handlers.
#[derive(Debug)]
pub struct Shared {
    /// The objects.
    pub store: Store,
    /// Fault injection and counters.
    pub faults: Faults,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Tokens and refusals.
    pub access: Access,
    /// Whether requests are authorised by RBAC (otherwise every authenticated or anonymous
    /// request is allowed, as with `--authorization-mode=AlwaysAllow`). Requests are
    /// authenticated either way.
    pub rbac: bool,
}

/// One refused request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    /// The user refused.
    pub user: String,
    /// `METHOD path?query`.
    pub request: String,
    /// The 401 or 403 Status message.
    pub message: String,
    /// 401 or 403.
    pub code: u16,
}

/// Authentication state and the log of refusals.
#[derive(Debug, Default)]
pub struct Access {
    /// Known bearer tokens.
    pub tokens: Tokens,
    denials: Mutex<Vec<Denial>>,
}

impl Access {
    /// Every refused request so far.
    pub fn denials(&self) -> Vec<Denial> {
        self.denials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn deny(&self, user: &str, request: &Request, error: ApiError) -> Response {
        tracing::debug!(user, uri = %request.uri(), message = %error.message, "request refused");
        self.denials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Denial {
                user: user.to_string(),
                request: format!("{} {}", request.method(), request.uri()),
                message: error.message.clone(),
                code: error.code,
            });
        error.into_response()
    }
}

//! The authentication and authorisation filter in front of every handler
//! (kube-apiserver's `WithAuthentication` then `WithAuthorization`): 401 for a bad token
//! whatever the authorization mode, then with RBAC on 403 with the real Status body for
//! anything RBAC does not grant (with RBAC off, as `--authorization-mode=AlwaysAllow`,
//! everything authenticated or anonymous is allowed). Every denial is recorded so tests
//! can assert that a controller met none. The authenticated user goes on with the request
//! (an [`axum::Extension`] of [`crate::auth::UserInfo`]).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::rbac::{self, Decision};
use crate::request_info::RequestInfo;
use crate::resources;
use crate::shared::Shared;

/// The middleware: authenticates, authorises, then hands the request on.
pub async fn guard(
    State(shared): State<Arc<Shared>>,
    mut request: Request,
    next: Next,
) -> Response {
    let access = &shared.access;
    let accounts = resources::find("", "v1", "serviceaccounts").expect("served");
    let user = match access.tokens.authenticate(request.headers(), |ns, name| {
        shared.store.get(accounts, ns, name).ok()
    }) {
        Ok(user) => user,
        Err(error) => return access.deny("", &request, error),
    };
    // `WithAuthentication` puts the user in the request's context
    // (`request.WithUser`), where handlers such as SelfSubjectAccessReview find it.
    request.extensions_mut().insert(user.clone());
    if !shared.rbac {
        return next.run(request).await;
    }
    let info = RequestInfo::parse(request.method(), request.uri());
    match rbac::authorize(&shared.store, &user, &info) {
        Decision::Allow => next.run(request).await,
        Decision::Deny(reason) => {
            let error = ApiError::forbidden(&info, &user.name, &reason);
            access.deny(&user.name, &request, error)
        }
    }
}

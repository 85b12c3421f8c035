//! Authentication, which runs whatever the authorization mode, as kube-apiserver has it
//! (the attributes a request is authorised on are in [`crate::request_info`]).
//!
//! * Bearer tokens (`Authorization: Bearer <token>`): the admin token the server makes at
//!   start (user `kubernetes-admin` in `system:masters`, like kubeadm's `admin.conf`),
//!   static tokens (`--token-auth-file`, `token,user,uid,"group1,group2"`) and
//!   ServiceAccount tokens issued by the TokenRequest API
//!   (`POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`, what
//!   `kubectl create token` calls). A ServiceAccount token authenticates as
//!   `system:serviceaccount:{ns}:{name}` with the groups `system:serviceaccounts`,
//!   `system:serviceaccounts:{ns}` and `system:authenticated`, until it expires or its
//!   ServiceAccount is deleted (`pkg/serviceaccount` `Validator`). Tokens are opaque
//!   random strings here, not signed JWTs.
//! * The token is read as `bearertoken.Authenticator` reads it
//!   (`staging/src/k8s.io/apiserver/pkg/authentication/request/bearertoken/bearertoken.go`):
//!   the `Authorization` header trimmed, split at spaces, `Bearer` in any case and the
//!   second word the token. A request without one (no header, another scheme such as
//!   `Basic`, an empty token) is anonymous (`system:anonymous`, `system:unauthenticated`);
//!   a token no one issued, expired, or whose ServiceAccount is gone is refused with 401
//!   `Unauthorized` (`pkg/endpoints/filters/authentication.go`), never anonymous
//!   (`union.NewFailOnError` in front of the anonymous authenticator). The ServiceAccount
//!   token authenticator is always on, as kube-apiserver requires its keys, so this holds
//!   with any authorization mode and before any token is issued.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::object::meta_str;
use crate::protobuf::{self, Field};

/// Group every authenticated user is in.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The group of the admin identity; bound to `cluster-admin`.
pub const MASTERS: &str = "system:masters";
/// Name of the admin identity.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// Lifetime of a TokenRequest token when the request names none (kube-apiserver's
/// default `expirationSeconds`).
pub const DEFAULT_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);
/// The audience tokens are issued for when the request names none.
pub const DEFAULT_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// Who sent a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserInfo {
    /// User name (`system:serviceaccount:kube-system:cloud-controller-manager`).
    pub name: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl UserInfo {
    /// The anonymous user.
    pub fn anonymous() -> Self {
        Self {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
        }
    }

    /// The user a ServiceAccount's tokens authenticate as.
    pub fn service_account(namespace: &str, name: &str) -> Self {
        Self {
            name: service_account_user(namespace, name),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                AUTHENTICATED.into(),
            ],
        }
    }
}

/// `system:serviceaccount:{namespace}:{name}`.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What a token stands for.
#[derive(Debug, Clone)]
enum TokenOwner {
    /// A fixed identity (admin, token file).
    Static(UserInfo),
    /// A ServiceAccount, valid while it exists with this uid, until `expires`.
    ServiceAccount {
        namespace: String,
        name: String,
        uid: String,
        expires: jiff::Timestamp,
    },
}

/// What a bearer token stands for ([`Tokens::review`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenVerdict {
    /// A valid token of this user.
    Valid(UserInfo),
    /// A token no one issued.
    Unknown,
    /// An issued token that expired or whose ServiceAccount is gone.
    Invalid,
}

/// The token table.
#[derive(Debug, Default)]
pub struct Tokens {
    tokens: Mutex<HashMap<String, TokenOwner>>,
}

fn new_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

impl Tokens {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, TokenOwner>> {
        self.tokens.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a static token for `user`.
    pub fn add_static(&self, token: &str, user: UserInfo) {
        self.lock()
            .insert(token.to_string(), TokenOwner::Static(user));
    }

    /// Issues a token for the ServiceAccount object `account`, valid for `lifetime`.
    pub fn issue(&self, account: &Value, lifetime: Duration) -> (String, jiff::Timestamp) {
        let token = new_token();
        let lifetime =
            jiff::SignedDuration::try_from(lifetime).unwrap_or(jiff::SignedDuration::MAX);
        let expires = jiff::Timestamp::now()
            .checked_add(lifetime)
            .unwrap_or(jiff::Timestamp::MAX);
        self.lock().insert(
            token.clone(),
            TokenOwner::ServiceAccount {
                namespace: meta_str(account, "namespace").to_string(),
                name: meta_str(account, "name").to_string(),
                uid: meta_str(account, "uid").to_string(),
                expires,
            },
        );
        (token, expires)
    }

    /// The user of a request: anonymous without a bearer token; 401 for a token that is
    /// unknown, expired or whose ServiceAccount is gone (`account` looks one up by
    /// namespace and name).
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        account: impl Fn(&str, &str) -> Option<Value>,
    ) -> Result<UserInfo, ApiError> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Ok(UserInfo::anonymous());
        };
        let value = String::from_utf8_lossy(value.as_bytes());
        let parts: Vec<&str> = value.trim().split(' ').collect();
        let token = match parts.as_slice() {
            [scheme, token, ..] if scheme.eq_ignore_ascii_case("bearer") && !token.is_empty() => {
                *token
            }
            _ => return Ok(UserInfo::anonymous()),
        };
        match self.review(token, account) {
            TokenVerdict::Valid(user) => Ok(user),
            TokenVerdict::Unknown | TokenVerdict::Invalid => Err(ApiError::unauthorized()),
        }
    }

    /// What `token` stands for: a user, a token no one issued, or one issued but no longer
    /// valid (expired, or its ServiceAccount is gone).
    pub fn review(
        &self,
        token: &str,
        account: impl Fn(&str, &str) -> Option<Value>,
    ) -> TokenVerdict {
        let Some(owner) = self.lock().get(token).cloned() else {
            return TokenVerdict::Unknown;
        };
        match owner {
            TokenOwner::Static(user) => TokenVerdict::Valid(user),
            TokenOwner::ServiceAccount {
                namespace,
                name,
                uid,
                expires,
            } => {
                let alive = account(&namespace, &name)
                    .is_some_and(|sa| meta_str(&sa, "uid") == uid)
                    && jiff::Timestamp::now() < expires;
                if alive {
                    TokenVerdict::Valid(UserInfo::service_account(&namespace, &name))
                } else {
                    TokenVerdict::Invalid
                }
            }
        }
    }
}

/// Parses a kube-apiserver `--token-auth-file`: `token,user,uid[,"group1,group2"]` per
/// line; blank lines and lines starting with `#` are skipped.
pub fn parse_token_file(text: &str) -> Result<Vec<(String, UserInfo)>, String> {
    let mut entries = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.splitn(4, ',');
        let token = fields.next().unwrap_or("").trim();
        let user = fields.next().unwrap_or("").trim();
        let _uid = fields.next();
        if token.is_empty() || user.is_empty() {
            return Err(format!(
                "line {}: expected token,user,uid[,\"groups\"]",
                number + 1
            ));
        }
        let mut groups: Vec<String> = fields
            .next()
            .map(|g| g.trim().trim_matches('"'))
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|g| !g.is_empty())
            .map(String::from)
            .collect();
        groups.push(AUTHENTICATED.into());
        entries.push((
            token.to_string(),
            UserInfo {
                name: user.to_string(),
                groups,
            },
        ));
    }
    Ok(entries)
}

/// The TokenRequest answer (`authentication.k8s.io/v1`).
pub fn token_request_response(
    account: &Value,
    request: &Value,
    token: &str,
    expires: jiff::Timestamp,
    lifetime: Duration,
) -> Value {
    let audiences = request
        .pointer("/spec/audiences")
        .filter(|a| a.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!([DEFAULT_AUDIENCE]));
    json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": meta_str(account, "name"),
            "namespace": meta_str(account, "namespace"),
            "creationTimestamp": null,
        },
        "spec": {
            "audiences": audiences,
            "expirationSeconds": lifetime.as_secs(),
            "boundObjectRef": request.pointer("/spec/boundObjectRef").cloned().unwrap_or(Value::Null),
        },
        "status": {
            "token": token,
            "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header forms of `bearertoken.Authenticator.AuthenticateRequest`.
    #[test]
    fn the_bearer_token_is_read_as_bearertoken_go_reads_it() {
        let tokens = Tokens::default();
        let ops = UserInfo {
            name: "ops".into(),
            groups: vec![AUTHENTICATED.into()],
        };
        tokens.add_static("t1", ops.clone());
        let user = |header: Option<&str>| {
            let mut headers = HeaderMap::new();
            if let Some(value) = header {
                headers.insert(header::AUTHORIZATION, value.parse().unwrap());
            }
            tokens.authenticate(&headers, |_, _| None)
        };
        for known in ["Bearer t1", "bearer t1", "  BEARER t1  ", "Bearer t1 extra"] {
            assert_eq!(user(Some(known)), Ok(ops.clone()), "{known:?}");
        }
        for anonymous in [
            None,
            Some(""),
            Some("Basic b3BzOnB3"),
            Some("Bearer"),
            Some("Bearer  t1"),
        ] {
            assert_eq!(user(anonymous), Ok(UserInfo::anonymous()), "{anonymous:?}");
        }
        assert_eq!(user(Some("Bearer t2")).unwrap_err().code, 401);
    }

    #[test]
    fn token_file_lines_become_users() {
        let users = parse_token_file("# comment\nt1,alice,1,\"dev,ops\"\n\nt2,bob,2\n").unwrap();
        assert_eq!(users[0].0, "t1");
        assert_eq!(users[0].1.groups, ["dev", "ops", AUTHENTICATED]);
        assert_eq!(users[1].1.name, "bob");
        assert!(parse_token_file("only-a-token\n").is_err());
    }
}

/// The `spec` of a TokenRequest sent as Kubernetes protobuf (`k8s\0` + `runtime.Unknown`
/// whose `raw` is the `authentication.k8s.io/v1` TokenRequest), as `kubectl create token`
/// sends it, rendered as JSON: `audiences` (field 1) and `expirationSeconds` (field 4).
pub fn token_request_from_protobuf(body: &[u8]) -> Option<Value> {
    let raw = protobuf::unknown_raw(body)?;
    let spec = protobuf::message(raw, 2)?;
    let mut audiences = Vec::new();
    let mut expiration = None;
    for (number, field) in spec.map(protobuf::fields).unwrap_or(Some(Vec::new()))? {
        match (number, field) {
            (1, Field::Bytes(audience)) => {
                audiences.push(String::from_utf8_lossy(audience).into_owned())
            }
            (4, Field::Varint(seconds)) => expiration = Some(seconds),
            _ => {}
        }
    }
    let mut spec = json!({ "audiences": audiences });
    if let Some(seconds) = expiration {
        spec["expirationSeconds"] = json!(seconds);
    }
    Some(json!({ "spec": spec }))
}

#[cfg(test)]
mod protobuf_tests {
    use super::*;

    #[test]
    fn a_protobuf_token_request_gives_its_spec() {
        // spec { audiences: "api", expirationSeconds: 3600 } inside TokenRequest inside Unknown.
        let spec = [&[0x0a, 3][..], b"api", &[0x20, 0x90, 0x1c]].concat();
        let request = [&[0x12, spec.len() as u8][..], &spec].concat();
        let unknown = [&[0x12, request.len() as u8][..], &request].concat();
        let body = [&b"k8s\0"[..], &unknown].concat();
        assert_eq!(
            token_request_from_protobuf(&body),
            Some(json!({ "spec": { "audiences": ["api"], "expirationSeconds": 3600 } }))
        );
        assert_eq!(token_request_from_protobuf(b"{}"), None);
    }
}

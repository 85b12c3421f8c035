//! Authentication, which runs whatever the authorization mode, and the attributes a
//! request is authorised on when RBAC is on, as kube-apiserver has them.
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
//! * [`RequestInfo::parse`] follows `RequestInfoFactory.NewRequestInfo`
//!   (`staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`): the verb from
//!   the method (`list`/`watch` for a GET without a name, `deletecollection` for a DELETE
//!   without one), namespace, resource, subresource and name from the path. A list or
//!   watch (any `watch` value but `0` or `false`) whose field selector requires
//!   `metadata.name` (`RequiresExactMatch`: the first `metadata.name=x` or `==x` term,
//!   never `!=`) is authorised on that name if it is a valid path segment; a selector
//!   that does not parse, like a label selector that does not, names nothing (the
//!   `ListOptions` decoding failed).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, Method, Uri, header};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::object::meta_str;
use crate::params;
use crate::selector::{FieldSelector, LabelSelector};
use crate::validation::path_segment_name_errors;

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

/// The attributes a request is authorised on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestInfo {
    /// A request for an API resource (`/api/v1/...`, `/apis/g/v/...`), not a path.
    pub is_resource_request: bool,
    /// The URL path.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`
    /// (for non-resource requests: the lowercase method).
    pub verb: String,
    /// API group (`""` for core).
    pub api_group: String,
    /// Namespace (`""` when cluster-scoped or across namespaces).
    pub namespace: String,
    /// Resource (plural).
    pub resource: String,
    /// Subresource (`status`, `token`).
    pub subresource: String,
    /// Object name.
    pub name: String,
}

/// Path segments directly below a namespace that are its subresources, not resources
/// (`namespaceSubresources` in requestinfo.go).
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl RequestInfo {
    /// The attributes of a request, as `RequestInfoFactory.NewRequestInfo` derives them.
    pub fn parse(method: &Method, uri: &Uri) -> Self {
        let path = uri.path().to_string();
        let mut info = Self {
            path: path.clone(),
            verb: method.as_str().to_lowercase(),
            ..Self::default()
        };
        let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
        if parts.len() < 3 || !matches!(parts[0], "api" | "apis") {
            return info;
        }
        let mut rest = &parts[1..];
        if parts[0] == "apis" {
            if rest.len() < 3 {
                return info;
            }
            info.api_group = rest[0].to_string();
            rest = &rest[1..];
        }
        info.is_resource_request = true;
        rest = &rest[1..];
        info.verb = match method.as_str() {
            "POST" => "create",
            "GET" | "HEAD" => "get",
            "PUT" => "update",
            "PATCH" => "patch",
            "DELETE" => "delete",
            _ => "",
        }
        .to_string();
        if rest.first() == Some(&"namespaces")
            && let Some(ns) = rest.get(1)
        {
            info.namespace = ns.to_string();
            if rest.len() > 2 && !NAMESPACE_SUBRESOURCES.contains(&rest[2]) {
                rest = &rest[2..];
            }
        }
        if let Some(resource) = rest.first() {
            info.resource = resource.to_string();
        }
        if let Some(name) = rest.get(1) {
            info.name = name.to_string();
        }
        if let Some(sub) = rest.get(2) {
            info.subresource = sub.to_string();
        }
        let query: HashMap<String, String> = uri
            .query()
            .map(|q| {
                axum::extract::Query::<HashMap<String, String>>::try_from_uri(
                    &format!("/?{q}").parse().unwrap_or_default(),
                )
                .map(|q| q.0)
                .unwrap_or_default()
            })
            .unwrap_or_default();
        if info.name.is_empty() && info.verb == "get" {
            info.verb = if params::flag(&query, "watch") {
                "watch"
            } else {
                "list"
            }
            .into();
            let labels_parse = query
                .get("labelSelector")
                .is_none_or(|s| LabelSelector::parse(s).is_ok());
            let fields = query
                .get("fieldSelector")
                .and_then(|s| FieldSelector::parse_any(s).ok());
            if let Some(name) = fields
                .as_ref()
                .filter(|_| labels_parse)
                .and_then(|f| f.requires_exact_match("metadata.name"))
                .filter(|name| path_segment_name_errors(name).is_empty())
            {
                info.name = name.to_string();
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        info
    }
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

    fn info(method: Method, uri: &str) -> RequestInfo {
        RequestInfo::parse(&method, &uri.parse().unwrap())
    }

    #[test]
    fn request_info_follows_new_request_info() {
        let i = info(
            Method::PATCH,
            "/api/v1/namespaces/default/services/web/status",
        );
        assert!(i.is_resource_request);
        assert_eq!(
            (
                &*i.verb,
                &*i.api_group,
                &*i.namespace,
                &*i.resource,
                &*i.name,
                &*i.subresource
            ),
            ("patch", "", "default", "services", "web", "status")
        );
        let i = info(
            Method::GET,
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?watch=true",
        );
        assert_eq!(
            (&*i.verb, &*i.api_group, &*i.resource),
            ("watch", "coordination.k8s.io", "leases")
        );
        let i = info(
            Method::GET,
            "/api/v1/nodes?fieldSelector=metadata.name%3Dn1",
        );
        assert_eq!((&*i.verb, &*i.name), ("list", "n1"));
        for (query, verb, name) in [
            ("fieldSelector=metadata.name%3D%3Dn1", "list", "n1"),
            ("fieldSelector=metadata.name%21%3Dn1", "list", ""),
            (
                "fieldSelector=spec.unschedulable%3Dfalse,metadata.name%3Dn1",
                "list",
                "n1",
            ),
            (
                "fieldSelector=metadata.name%3Dn2,metadata.name%3Dn1",
                "list",
                "n1",
            ),
            ("fieldSelector=metadata.name%3Da%25b", "list", ""),
            ("fieldSelector=metadata.name%3Dn1,oops", "list", ""),
            (
                "fieldSelector=metadata.name%3Dn1&labelSelector=a+in+b",
                "list",
                "",
            ),
            (
                "fieldSelector=metadata.name%3D%3Dn1&watch=yes",
                "watch",
                "n1",
            ),
            ("watch=False", "list", ""),
            ("watch=", "watch", ""),
        ] {
            let i = info(Method::GET, &format!("/api/v1/nodes?{query}"));
            assert_eq!((&*i.verb, &*i.name), (verb, name), "{query}");
        }
        let i = info(Method::DELETE, "/api/v1/namespaces/default/events");
        assert_eq!(i.verb, "deletecollection");
        let i = info(Method::GET, "/api/v1/namespaces/kube-system");
        assert_eq!(
            (&*i.resource, &*i.name, &*i.namespace),
            ("namespaces", "kube-system", "kube-system")
        );
        let i = info(Method::PUT, "/api/v1/namespaces/foo/finalize");
        assert_eq!(
            (&*i.resource, &*i.name, &*i.subresource),
            ("namespaces", "foo", "finalize")
        );
        let i = info(
            Method::POST,
            "/api/v1/namespaces/kube-system/serviceaccounts/ccm/token",
        );
        assert_eq!(
            (&*i.verb, &*i.resource, &*i.subresource),
            ("create", "serviceaccounts", "token")
        );
        for path in [
            "/api",
            "/api/v1",
            "/apis/rbac.authorization.k8s.io/v1",
            "/version",
            "/healthz",
        ] {
            let i = info(Method::GET, path);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!(i.verb, "get");
        }
    }

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

/// One protobuf field: a varint or a length-delimited value (64- and 32-bit values are
/// skipped).
#[derive(Debug, Clone, PartialEq)]
enum ProtoField<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *buf.get(*at)?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

fn proto_fields(buf: &[u8]) -> Option<Vec<(u64, ProtoField<'_>)>> {
    let mut fields = Vec::new();
    let mut at = 0;
    while at < buf.len() {
        let key = varint(buf, &mut at)?;
        let field = match key & 7 {
            0 => ProtoField::Varint(varint(buf, &mut at)?),
            2 => {
                let len = usize::try_from(varint(buf, &mut at)?).ok()?;
                let bytes = buf.get(at..at.checked_add(len)?)?;
                at += len;
                ProtoField::Bytes(bytes)
            }
            1 => {
                at += 8;
                continue;
            }
            5 => {
                at += 4;
                continue;
            }
            _ => return None,
        };
        fields.push((key >> 3, field));
    }
    Some(fields)
}

/// The `spec` of a TokenRequest sent as Kubernetes protobuf (`k8s\0` + `runtime.Unknown`
/// whose `raw` is the `authentication.k8s.io/v1` TokenRequest), as `kubectl create token`
/// sends it, rendered as JSON: `audiences` (field 1) and `expirationSeconds` (field 4).
pub fn token_request_from_protobuf(body: &[u8]) -> Option<Value> {
    let unknown = body.strip_prefix(b"k8s\0")?;
    let raw = proto_fields(unknown)?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (2, ProtoField::Bytes(raw)) => Some(raw),
            _ => None,
        })?;
    let spec = proto_fields(raw)?
        .into_iter()
        .find_map(|(n, f)| match (n, f) {
            (2, ProtoField::Bytes(spec)) => Some(spec),
            _ => None,
        });
    let mut audiences = Vec::new();
    let mut expiration = None;
    for (number, field) in spec.map(proto_fields).unwrap_or(Some(Vec::new()))? {
        match (number, field) {
            (1, ProtoField::Bytes(audience)) => {
                audiences.push(String::from_utf8_lossy(audience).into_owned())
            }
            (4, ProtoField::Varint(seconds)) => expiration = Some(seconds),
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

//! The TLS Secrets Services name (`…-tls-secret`): read when the Service is reconciled,
//! checked, and handed to the engine as plain PEM data ([`CertificateMaterial`]); and the
//! watch that re-runs the Services naming a Secret when it changes.
//!
//! A Secret that cannot be used — missing, of another type, without `tls.crt`/`tls.key`,
//! a key that is not the certificate's, an expired certificate, or no permission to read
//! Secrets — is a Warning naming the Secret and the reason; the engine then keeps the
//! certificates and TLS rules as they are. The Secret's data appears in no log, Event or
//! error: only the certificate's fingerprint does.

use k8s_openapi::api::core::v1::{Secret, Service};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, ResourceExt};

use crate::cloud::loadbalancer::certificates::PemMaterial;
use crate::cloud::loadbalancer::spec::LbSpec;
use crate::cloud::loadbalancer::tls_spec::{CertificateMaterial, CertificateSource};

/// The only Secret type read.
const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";

/// What the controller needs to read Secrets (named in the RBAC Warning).
const PERMISSION: &str = "get, list and watch on secrets (core API group)";

/// Reads the Secret `spec` names, if any, into `spec.tls.material`. Returns the warning
/// when the Secret cannot be used.
pub async fn fill(client: &kube::Client, spec: &mut LbSpec) -> Option<String> {
    let tls = spec.tls.as_mut()?;
    let CertificateSource::Secret(name) = &tls.spec.source else {
        return None;
    };
    let namespace = &spec.service.namespace;
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let what = format!("Secret {namespace}/{name}");
    let secret = match api.get_opt(name).await {
        Ok(Some(secret)) => secret,
        Ok(None) => {
            return Some(format!(
                "TLS: {what} not found; certificates are left as they are"
            ));
        }
        Err(kube::Error::Api(status)) if status.code == 403 => {
            return Some(format!(
                "TLS: cannot read {what}: the controller may not read Secrets (RBAC: grant {PERMISSION}, see docs/configuration.md); the certificate-id form needs no access; certificates are left as they are"
            ));
        }
        Err(error) => {
            return Some(format!(
                "TLS: cannot read {what}: {}; certificates are left as they are",
                redact(&error)
            ));
        }
    };
    match material(&secret, jiff::Timestamp::now()) {
        Ok(material) => {
            tls.material = Some(material);
            None
        }
        Err(reason) => Some(format!(
            "TLS: {what} cannot be used: {reason}; certificates are left as they are"
        )),
    }
}

/// The checked certificate of a `kubernetes.io/tls` Secret, or why it cannot be used.
pub fn material(secret: &Secret, now: jiff::Timestamp) -> Result<CertificateMaterial, String> {
    let kind = secret.type_.as_deref().unwrap_or("Opaque");
    if kind != TLS_SECRET_TYPE {
        return Err(format!("its type is {kind}, not {TLS_SECRET_TYPE}"));
    }
    let text = |key: &str| -> Result<String, String> {
        let bytes = secret
            .data
            .as_ref()
            .and_then(|d| d.get(key))
            .ok_or_else(|| format!("it has no {key}"))?;
        String::from_utf8(bytes.0.clone()).map_err(|_| format!("{key} is not PEM text"))
    };
    let crt = text("tls.crt")?;
    let key = text("tls.key")?;
    let pem = PemMaterial::from_tls_secret(&crt, key).map_err(|e| e.to_string())?;
    let inspected = pem.inspect(now).map_err(|e| e.to_string())?;
    Ok(CertificateMaterial { pem, inspected })
}

/// Whether the Service has ports whose TLS ends at the load balancer (`ssl` rules): its
/// status then says `ipMode: Proxy`, so kube-proxy does not short-circuit in-cluster
/// traffic to the load balancer's IP straight to pods that speak no TLS.
pub(crate) fn terminates_tls(spec: &LbSpec) -> bool {
    use crate::cloud::loadbalancer::vocabulary::LbProtocol;
    spec.rules.iter().any(|r| r.protocol == LbProtocol::Ssl)
}

/// A Kubernetes error without anything a response body might carry.
fn redact(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} {}", status.code, status.reason),
        _ => "the API server could not be reached".into(),
    }
}

/// Said by the reconcile of a Service that names a TLS Secret: the Secret watch starts
/// then (nothing polls the Services meanwhile, so an idle controller does not wake for it).
#[derive(Debug, Clone, Default)]
pub(crate) struct SecretsNamed(std::sync::Arc<tokio::sync::Notify>);

impl SecretsNamed {
    /// A Service names a TLS Secret (`…-tls-secret`).
    pub(crate) fn named(&self) {
        self.0.notify_one();
    }

    /// Whether `service` names a TLS Secret.
    pub(crate) fn names_one(service: &Service) -> bool {
        service
            .annotations()
            .contains_key(crate::cloud::loadbalancer::annotations::TLS_SECRET.key)
    }
}

/// The `kubernetes.io/tls` Secrets, as they change — watched only once a Service names
/// one (`named`, said by its reconcile), so a cluster without TLS Services never reads
/// Secrets (the RBAC that CloudStack Kubernetes Service installs grants none). Errors
/// back off.
pub(crate) fn watch_when_named(
    client: kube::Client,
    named: SecretsNamed,
) -> impl futures::Stream<Item = Result<Secret, kube::runtime::watcher::Error>> + Send + 'static {
    use futures::StreamExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let named = async move { named.0.notified().await };
    futures::stream::once(named).flat_map(move |()| {
        watcher::watcher(
            Api::<Secret>::all(client.clone()),
            watcher::Config::default().fields("type=kubernetes.io/tls"),
        )
        .default_backoff()
        .touched_objects()
    })
}

/// The Services (of `services`) that name Secret `secret` in its namespace.
pub(crate) fn services_naming(
    services: &Store<Service>,
    secret: &Secret,
) -> Vec<ObjectRef<Service>> {
    let (Some(namespace), name) = (secret.namespace(), secret.name_any()) else {
        return Vec::new();
    };
    let key = crate::cloud::loadbalancer::annotations::TLS_SECRET.key;
    services
        .state()
        .iter()
        .filter(|svc| svc.namespace().as_deref() == Some(namespace.as_str()))
        .filter(|svc| svc.annotations().get(key).is_some_and(|v| v.trim() == name))
        .map(|svc| ObjectRef::from_obj(svc.as_ref()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cloud::loadbalancer::ssl_fixtures::ssl_fixture;
    use k8s_openapi::ByteString;

    fn secret(kind: &str, crt: &str, key: &str) -> Secret {
        let read = |f: &str| ssl_fixture(f).as_bytes().to_vec();
        Secret {
            type_: Some(kind.into()),
            data: Some(
                [
                    ("tls.crt".to_string(), ByteString(read(crt))),
                    ("tls.key".to_string(), ByteString(read(key))),
                ]
                .into(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn a_tls_secret_gives_checked_material() {
        let s = secret(TLS_SECRET_TYPE, "leaf-a-cert.pem", "leaf-a-key.pem");
        let m = material(&s, jiff::Timestamp::now()).expect("usable");
        assert!(m.inspected.fingerprint.starts_with("3E:13:1F"));
    }

    #[test]
    fn unusable_secrets_say_why_without_the_key() {
        let now = jiff::Timestamp::now();
        let cases = [
            (
                secret("Opaque", "leaf-a-cert.pem", "leaf-a-key.pem"),
                "its type is Opaque",
            ),
            (
                secret(TLS_SECRET_TYPE, "leaf-a-cert.pem", "leaf-b-key.pem"),
                "does not belong",
            ),
            (
                secret(TLS_SECRET_TYPE, "expired-cert.pem", "expired-key.pem"),
                "expired",
            ),
        ];
        for (s, expected) in cases {
            let reason = material(&s, now).expect_err("unusable");
            assert!(reason.contains(expected), "{reason}");
            assert!(!reason.contains("PRIVATE"), "{reason}");
        }
        let mut empty = secret(TLS_SECRET_TYPE, "leaf-a-cert.pem", "leaf-a-key.pem");
        empty.data.as_mut().expect("data").remove("tls.key");
        assert_eq!(material(&empty, now).unwrap_err(), "it has no tls.key");
    }
}

//! Client certificates, as the framework's x509 authenticator reads them
//! (`k8s.io/apiserver/pkg/authentication/request/x509`, `CommonNameUserConversion`): a
//! certificate that a `--client-ca-file` authority signed (rustls checks the chain, the
//! validity and the client-auth usage) authenticates as its subject's CommonName, in the
//! groups of its Organizations. A certificate of a `--requestheader-client-ca-file`
//! authority marks a front proxy, whose request headers name the user
//! ([`super::front_proxy`]). A connection without a certificate goes on to bearer tokens;
//! one whose certificate neither authority signed fails its handshake.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

use super::authn::User;
use crate::cli::serving::ServingArgs;

/// Who a connection's client certificate says it is, attached to each of its requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ConnectionIdentity {
    /// The user of a certificate a `--client-ca-file` authority signed.
    pub client_cert: Option<User>,
    /// A certificate of a `--requestheader-client-ca-file` authority: whether its
    /// CommonName is one of `--requestheader-allowed-names` (any, when none are listed).
    pub front_proxy: Option<bool>,
    /// Whether a certificate was presented at all.
    pub presented: bool,
}

/// The client-certificate authorities: `--client-ca-file` and
/// `--requestheader-client-ca-file`.
pub struct ClientAuth {
    handshake: Arc<dyn ClientCertVerifier>,
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    front_proxy: Option<(Arc<dyn ClientCertVerifier>, Vec<String>)>,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("client_ca", &self.client_ca.is_some())
            .field(
                "front_proxy",
                &self.front_proxy.as_ref().map(|(_, names)| names),
            )
            .finish()
    }
}

impl ClientAuth {
    /// From the flags; `None` when neither authority file is given.
    pub fn from_args(args: &ServingArgs) -> Result<Option<Self>, String> {
        let client_ca = args
            .client_ca_file
            .as_deref()
            .map(|path| roots(path, "--client-ca-file"))
            .transpose()?;
        let front_proxy = args
            .requestheader_client_ca_file
            .as_deref()
            .map(|path| roots(path, "--requestheader-client-ca-file"))
            .transpose()?;
        let mut all = RootCertStore::empty();
        for store in client_ca.iter().chain(front_proxy.iter()) {
            all.roots.extend(store.roots.iter().cloned());
        }
        if all.is_empty() {
            return Ok(None);
        }
        Ok(Some(Self {
            handshake: verifier(all)?,
            client_ca: client_ca.map(verifier).transpose()?,
            front_proxy: front_proxy
                .map(verifier)
                .transpose()?
                .map(|v| (v, args.requestheader_allowed_names.clone())),
        }))
    }

    /// The verifier of the handshake: either authority, or no certificate.
    pub(crate) fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.handshake.clone()
    }

    /// Who the verified certificate `chain` (end entity first; empty when none was
    /// presented) says the connection is.
    pub(crate) fn identify(&self, chain: &[CertificateDer<'_>]) -> ConnectionIdentity {
        let Some((end_entity, intermediates)) = chain.split_first() else {
            return ConnectionIdentity::default();
        };
        let now = rustls::pki_types::UnixTime::now();
        let signed_by = |verifier: &Arc<dyn ClientCertVerifier>| {
            verifier
                .verify_client_cert(end_entity, intermediates, now)
                .is_ok()
        };
        let front_proxy = self
            .front_proxy
            .as_ref()
            .filter(|(verifier, _)| signed_by(verifier))
            .map(|(_, allowed)| {
                allowed.is_empty()
                    || user_of(end_entity).is_some_and(|user| allowed.contains(&user.name))
            });
        let client_cert = self
            .client_ca
            .as_ref()
            .filter(|verifier| signed_by(verifier))
            .and_then(|_| user_of(end_entity));
        ConnectionIdentity {
            client_cert,
            front_proxy,
            presented: true,
        }
    }
}

/// The authorities of a PEM file named by `flag`.
fn roots(path: &Path, flag: &str) -> Result<RootCertStore, String> {
    let problem = |what: &dyn std::fmt::Display| format!("{flag} {}: {what}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| problem(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(&e))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(problem(&"no usable certificate authority in the file"));
    }
    Ok(roots)
}

/// A verifier of client certificates signed by `roots`; connections without one pass.
fn verifier(roots: RootCertStore) -> Result<Arc<dyn ClientCertVerifier>, String> {
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| format!("client certificate authorities: {e}"))
}

/// The user of a verified client certificate: CommonName, Organizations as groups, and
/// `system:authenticated` (the framework's `AuthenticatedGroupAdder`). `None` when the
/// subject has no CommonName (the framework refuses it).
pub(crate) fn user_of(cert: &CertificateDer<'_>) -> Option<User> {
    let subject = subject(cert.as_ref())?;
    let mut name = None;
    let mut groups = Vec::new();
    for (oid, value) in attributes(subject)? {
        match oid {
            COMMON_NAME => name = Some(value),
            ORGANIZATION => groups.push(value),
            _ => {}
        }
    }
    let name = name.filter(|n| !n.is_empty())?;
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Some(User {
        name,
        groups,
        ..User::default()
    })
}

/// The DER of OID 2.5.4.3 (commonName).
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// The DER of OID 2.5.4.10 (organizationName).
const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// The subject Name of a certificate (the sixth field of `tbsCertificate`, after the
/// optional version).
fn subject(cert: &[u8]) -> Option<&[u8]> {
    let (0x30, certificate, _) = crate::der::item(cert)? else {
        return None;
    };
    let (0x30, mut tbs, _) = crate::der::item(certificate)? else {
        return None;
    };
    if tbs.first() == Some(&0xa0) {
        tbs = crate::der::item(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        tbs = crate::der::item(tbs)?.2;
    }
    match crate::der::item(tbs)? {
        (0x30, subject, _) => Some(subject),
        _ => None,
    }
}

/// The (OID, value) pairs of a Name whose values are strings.
fn attributes(mut name: &[u8]) -> Option<Vec<(&[u8], String)>> {
    let mut all = Vec::new();
    while !name.is_empty() {
        let (0x31, mut set, rest) = crate::der::item(name)? else {
            return None;
        };
        name = rest;
        while !set.is_empty() {
            let (0x30, pair, rest) = crate::der::item(set)? else {
                return None;
            };
            set = rest;
            let (0x06, oid, value) = crate::der::item(pair)? else {
                return None;
            };
            let (tag, value, _) = crate::der::item(value)?;
            // UTF8String, PrintableString, IA5String, T61String.
            if matches!(tag, 0x0c | 0x13 | 0x16 | 0x14) {
                all.push((oid, String::from_utf8_lossy(value).into_owned()));
            }
        }
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_user_is_the_common_name_in_the_organizations() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "prometheus");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "monitoring");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let user = user_of(cert.der()).expect("a user");
        assert_eq!(user.name, "prometheus");
        assert_eq!(user.groups, ["monitoring", "system:authenticated"]);

        let nameless = rcgen::CertificateParams::new(vec!["x.example".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        let empty = params.self_signed(&key).unwrap();
        assert_eq!(user_of(empty.der()), None, "no CommonName");
        // rcgen names a certificate "rcgen self signed cert" by default.
        assert!(user_of(nameless.der()).is_some());
        assert_eq!(user_of(&CertificateDer::from(vec![0x30, 0x01])), None);
    }
}

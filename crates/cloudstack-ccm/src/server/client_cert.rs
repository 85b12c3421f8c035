//! Client certificates, as the framework's x509 authenticator reads them
//! (`k8s.io/apiserver/pkg/authentication/request/x509`, `CommonNameUserConversion`): a
//! certificate that a `--client-ca-file` authority signed (rustls checks the chain, the
//! validity and the client-auth usage during the handshake) authenticates as its subject's
//! CommonName, in the groups of its Organizations. A connection without one goes on to
//! bearer tokens; one whose certificate does not verify fails its handshake.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;

use super::authn::User;

/// The user a verified client certificate stands for, attached to each request of its
/// connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertUser(pub User);

/// The verifier for `--client-ca-file`: certificates it signed are accepted, connections
/// without one too (they may carry a token).
pub fn verifier(path: &Path) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let problem =
        |what: &dyn std::fmt::Display| format!("--client-ca-file {}: {what}", path.display());
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| problem(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| problem(&e))?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(problem(&"no usable certificate authority in the file"));
    }
    WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        Arc::new(rustls::crypto::ring::default_provider()),
    )
    .allow_unauthenticated()
    .build()
    .map_err(|e| problem(&e))
}

/// The user of a verified client certificate: CommonName, Organizations as groups, and
/// `system:authenticated` (the framework's `AuthenticatedGroupAdder`). `None` when the
/// subject has no CommonName (the framework refuses it).
pub fn user_of(cert: &CertificateDer<'_>) -> Option<User> {
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

/// One DER element: (tag, content, rest).
fn element(der: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = der.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |len, byte| (len << 8) | usize::from(*byte));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The subject Name of a certificate (the sixth field of `tbsCertificate`, after the
/// optional version).
fn subject(cert: &[u8]) -> Option<&[u8]> {
    let (0x30, certificate, _) = element(cert)? else {
        return None;
    };
    let (0x30, mut tbs, _) = element(certificate)? else {
        return None;
    };
    if tbs.first() == Some(&0xa0) {
        tbs = element(tbs)?.2;
    }
    // serialNumber, signature, issuer, validity, then subject.
    for _ in 0..4 {
        tbs = element(tbs)?.2;
    }
    match element(tbs)? {
        (0x30, subject, _) => Some(subject),
        _ => None,
    }
}

/// The (OID, value) pairs of a Name whose values are strings.
fn attributes(mut name: &[u8]) -> Option<Vec<(&[u8], String)>> {
    let mut all = Vec::new();
    while !name.is_empty() {
        let (0x31, mut set, rest) = element(name)? else {
            return None;
        };
        name = rest;
        while !set.is_empty() {
            let (0x30, pair, rest) = element(set)? else {
                return None;
            };
            set = rest;
            let (0x06, oid, value) = element(pair)? else {
                return None;
            };
            let (tag, value, _) = element(value)?;
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

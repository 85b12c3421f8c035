//! TLS certificates for load-balancer rules, as the engine sees them: PEM material handed
//! over by the controller as plain data ([`PemMaterial`], whose `Debug` never shows the
//! key), the checks made before anything is sent to CloudStack (`PemMaterial::inspect`:
//! the same ones `CertServiceImpl.validate` makes, so a refusal is a clear Warning instead
//! of a 530 from the server), and the names under which the controller uploads and finds
//! its certificates again ([`certificate_name`], `parse_certificate_name`).
//!
//! CloudStack cannot tag certificates (`ResourceTag.ResourceObjectType` has no certificate
//! type), so ownership lives in the name: `cloudstack-ccm.<cluster>.<service UID>.<first 16
//! hex digits of the SHA-256 fingerprint>`. The full fingerprint is in every
//! `listSslCerts` item and tells an unchanged certificate from a renewed one.

use std::fmt;

use cloudstack::Secret;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// The prefix of every certificate name the controller uploads.
pub(crate) const NAME_PREFIX: &str = "cloudstack-ccm.";

/// A certificate with its private key and chain, as PEM text. `Debug` shows the
/// certificate's fingerprint and never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct PemMaterial {
    /// The end-entity certificate (the first PEM block of `tls.crt`).
    pub certificate: String,
    /// The intermediates after it in `tls.crt`, if any.
    pub chain: Option<String>,
    /// The private key (`tls.key`).
    pub key: Secret,
}

impl fmt::Debug for PemMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fingerprint = first_certificate(&self.certificate)
            .map(|der| fingerprint(der.as_ref()))
            .unwrap_or_else(|| "unreadable".into());
        f.debug_struct("PemMaterial")
            .field("fingerprint", &fingerprint)
            .field("chain", &self.chain.is_some())
            .field("key", &"***")
            .finish()
    }
}

/// A certificate that passed `PemMaterial::inspect`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspected {
    /// SHA-256 of the certificate's DER, upper-case hex pairs joined by colons (the form of
    /// `listSslCerts`' `fingerprint`).
    pub fingerprint: String,
    /// When the certificate expires.
    pub not_after: jiff::Timestamp,
}

/// Why a certificate cannot be used. The messages name the problem, never the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CertificateProblem {
    /// `tls.crt` holds no readable X.509 certificate.
    #[error("tls.crt holds no readable PEM certificate")]
    NoCertificate,
    /// `tls.key` holds no private key of a supported kind.
    #[error("tls.key holds no readable private key (PKCS#1, PKCS#8 or SEC1 PEM)")]
    NoKey,
    /// The key is not the certificate's.
    #[error("tls.key does not belong to the certificate in tls.crt")]
    KeyMismatch,
    /// The certificate is not valid yet.
    #[error("the certificate is not valid before {0}")]
    NotYetValid(jiff::Timestamp),
    /// The certificate has expired.
    #[error("the certificate expired at {0}")]
    Expired(jiff::Timestamp),
    /// The chain after the certificate in `tls.crt` does not hold its issuer: CloudStack
    /// would refuse it ("Invalid certificate chain").
    #[error("the chain after the certificate in tls.crt does not hold the certificate's issuer")]
    ChainWithoutIssuer,
}

impl PemMaterial {
    /// Splits `tls.crt` into the certificate and its chain (the PEM blocks after the first)
    /// and pairs them with `tls.key` (kept as a [`Secret`] from here on). The chain's block
    /// whose subject is the certificate's issuer goes first, the others keep their order:
    /// CloudStack reads only the chain's first certificate and refuses the chain unless it
    /// issued the certificate (`CertificateHelper.parseChain`,
    /// `CertServiceImpl.validateChain`), while TLS clients accept a bundle in any order.
    pub(crate) fn from_tls_secret(
        tls_crt: &str,
        tls_key: String,
    ) -> Result<Self, CertificateProblem> {
        let blocks: Vec<&str> = pem_blocks(tls_crt);
        let (first, rest) = blocks
            .split_first()
            .ok_or(CertificateProblem::NoCertificate)?;
        let mut rest = rest.to_vec();
        let issuer =
            first_certificate(first).and_then(|der| names(der.as_ref()).map(|n| n.0.to_vec()));
        if let Some(at) = rest.iter().position(|block| {
            first_certificate(block)
                .and_then(|der| names(der.as_ref()).map(|n| n.1.to_vec()))
                .is_some_and(|subject| Some(subject) == issuer)
        }) {
            let issuer_block = rest.remove(at);
            rest.insert(0, issuer_block);
        }
        Ok(PemMaterial {
            certificate: first.to_string(),
            chain: (!rest.is_empty()).then(|| rest.concat()),
            key: Secret::new(tls_key),
        })
    }

    /// Checks the certificate at `now`: it parses, it is within its validity, the key is
    /// its key (the public keys compared, whatever the algorithm — stricter than
    /// CloudStack, which compares only RSA keys), and a chain starts with the certificate's
    /// issuer unless the certificate is self-issued (as `CertServiceImpl.validateChain`
    /// demands; the issuer's signature is left to CloudStack).
    pub(crate) fn inspect(&self, now: jiff::Timestamp) -> Result<Inspected, CertificateProblem> {
        let der = first_certificate(&self.certificate).ok_or(CertificateProblem::NoCertificate)?;
        let (not_before, not_after, spki) =
            tbs_fields(der.as_ref()).ok_or(CertificateProblem::NoCertificate)?;
        let key = PrivateKeyDer::from_pem_slice(self.key.expose().as_bytes())
            .map_err(|_| CertificateProblem::NoKey)?;
        let signing = rustls::crypto::ring::sign::any_supported_type(&key)
            .map_err(|_| CertificateProblem::NoKey)?;
        if signing.public_key().as_ref().map(|k| k.as_ref()) != Some(spki) {
            return Err(CertificateProblem::KeyMismatch);
        }
        if now < not_before {
            return Err(CertificateProblem::NotYetValid(not_before));
        }
        if now > not_after {
            return Err(CertificateProblem::Expired(not_after));
        }
        if let Some(chain) = &self.chain {
            let (issuer, subject) = names(der.as_ref()).ok_or(CertificateProblem::NoCertificate)?;
            let first_subject = first_certificate(chain)
                .and_then(|first| names(first.as_ref()).map(|n| n.1.to_vec()));
            if issuer != subject && first_subject.as_deref() != Some(issuer) {
                return Err(CertificateProblem::ChainWithoutIssuer);
            }
        }
        Ok(Inspected {
            fingerprint: fingerprint(der.as_ref()),
            not_after,
        })
    }
}

/// The name a Service's certificate is uploaded under.
pub fn certificate_name(cluster: &str, service_uid: &str, fingerprint: &str) -> String {
    let short: String = fingerprint
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(16)
        .collect::<String>()
        .to_ascii_lowercase();
    format!("{NAME_PREFIX}{cluster}.{service_uid}.{short}")
}

/// The Service UID in a certificate name this cluster's controller gave, if it is one.
pub(crate) fn parse_certificate_name<'a>(cluster: &str, name: &'a str) -> Option<&'a str> {
    let rest = name.strip_prefix(NAME_PREFIX)?.strip_prefix(cluster)?;
    let rest = rest.strip_prefix('.')?;
    let (uid, short) = rest.rsplit_once('.')?;
    (short.len() == 16 && short.bytes().all(|b| b.is_ascii_hexdigit()) && !uid.is_empty())
        .then_some(uid)
}

/// The account's certificates, listed once per view of CloudStack (so a resync of N TLS
/// Services lists them once, not N times) and again after the controller changed any;
/// single flight: concurrent reconciles wait for one list. One key: `""`.
pub(crate) type CertificateCache =
    super::observe::shared_listing::SharedListing<Vec<cloudstack::SslCert>>;

/// Reads the certificates that matter to the Service `service_uid` into `observed`, from
/// `listed`, when it asks for TLS or has an `ssl` rule; else nothing. When the keys' role
/// may not call `listSslCerts`, nothing is read and `observed.certificates.listed` stays
/// false: nothing is planned for certificates (a deletion goes on without them).
pub(crate) async fn observe_for(
    cache: &CertificateCache,
    client: &cloudstack::Client,
    view: &std::sync::Arc<super::observe::account_view::AccountView>,
    (cluster, service_uid): (&str, &str),
    wants_tls: bool,
    observed: &mut super::observe::ObservedLb,
) -> Result<(), cloudstack::Error> {
    let has_ssl_rule = observed
        .rules
        .iter()
        .any(|r| r.protocol == super::vocabulary::LbProtocol::Ssl);
    if !wants_tls && !has_ssl_rule {
        return Ok(());
    }
    if !client.may_call(<cloudstack::ListSslCerts as cloudstack::Request>::COMMAND) {
        return Ok(());
    }
    let request = cloudstack::ListSslCerts::default();
    let listed = match cache
        .get(view, "", || client.list_ssl_certs(&request))
        .await
    {
        Ok(listed) => listed,
        Err(error) if error.is_command_refused() => return Ok(()),
        Err(error) => return Err(error),
    };
    let rule_ids: Vec<&str> = observed.rules.iter().map(|r| r.id.as_str()).collect();
    observed.certificates = observe(&listed, cluster, service_uid, &rule_ids);
    Ok(())
}

/// The certificates of `listed` that matter to the Service `service_uid` whose rules are
/// `rule_ids`: those assigned to its rules, and those this cluster's controller uploaded
/// for it.
pub fn observe(
    listed: &[cloudstack::SslCert],
    cluster: &str,
    service_uid: &str,
    rule_ids: &[&str],
) -> super::observe::ObservedCertificates {
    let mut out = super::observe::ObservedCertificates {
        listed: true,
        ..Default::default()
    };
    for cert in listed {
        let observed = super::observe::ObservedCertificate {
            id: cert.id.clone().unwrap_or_default(),
            name: cert.name.clone().unwrap_or_default(),
            fingerprint: cert.fingerprint.clone().unwrap_or_default(),
            rule_ids: cert.loadbalancerrulelist.clone(),
        };
        for rule in &observed.rule_ids {
            if rule_ids.contains(&rule.as_str()) {
                out.bound.insert(rule.clone(), observed.clone());
            }
        }
        if parse_certificate_name(cluster, &observed.name) == Some(service_uid) {
            out.ours.push(observed);
        }
    }
    out
}

/// SHA-256 of `der`, upper-case hex pairs joined by colons.
pub fn fingerprint(der: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The first certificate of a PEM text.
fn first_certificate(pem: &str) -> Option<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .and_then(Result::ok)
}

/// The `-----BEGIN CERTIFICATE-----` … `-----END CERTIFICATE-----` blocks of a PEM text,
/// each with its trailing newline.
fn pem_blocks(pem: &str) -> Vec<&str> {
    const BEGIN: &str = "-----BEGIN CERTIFICATE-----";
    const END: &str = "-----END CERTIFICATE-----";
    let mut out = Vec::new();
    let mut rest = pem;
    while let Some(start) = rest.find(BEGIN) {
        let Some(end) = rest[start..].find(END) else {
            break;
        };
        let mut stop = start + end + END.len();
        if rest[stop..].starts_with("\r\n") {
            stop += 2;
        } else if rest[stop..].starts_with('\n') {
            stop += 1;
        }
        out.push(&rest[start..stop]);
        rest = &rest[stop..];
    }
    out
}

/// `notBefore`, `notAfter` and the whole SubjectPublicKeyInfo of a DER certificate, v1 to
/// v3 (webpki reads the dates but does not give them out, and refuses v1 certificates,
/// which CloudStack accepts).
fn tbs_fields(der: &[u8]) -> Option<(jiff::Timestamp, jiff::Timestamp, &[u8])> {
    let (_, certificate, _) = crate::der::item(der)?;
    let (_, tbs, _) = crate::der::item(certificate)?;
    let (tag, _, mut rest) = crate::der::item(tbs)?;
    if tag == 0xA0 {
        rest = crate::der::item(rest)?.2; // explicit version, then the serial number
    }
    let (_, _, rest) = crate::der::item(rest)?; // signature algorithm
    let (_, _, rest) = crate::der::item(rest)?; // issuer
    let (_, validity, rest) = crate::der::item(rest)?;
    let (_, _, rest) = crate::der::item(rest)?; // subject
    let (_, _, after_spki) = crate::der::item(rest)?;
    let spki = &rest[..rest.len() - after_spki.len()];
    let (tag_before, before, next) = crate::der::item(validity)?;
    let (tag_after, after, _) = crate::der::item(next)?;
    Some((time(tag_before, before)?, time(tag_after, after)?, spki))
}

/// The issuer and subject Names (whole DER items) of a DER certificate.
fn names(der: &[u8]) -> Option<(&[u8], &[u8])> {
    let whole = |input: &'_ [u8], rest: &[u8]| input.len() - rest.len();
    let (_, certificate, _) = crate::der::item(der)?;
    let (_, tbs, _) = crate::der::item(certificate)?;
    let (tag, _, mut rest) = crate::der::item(tbs)?;
    if tag == 0xA0 {
        rest = crate::der::item(rest)?.2; // explicit version, then the serial number
    }
    let (_, _, rest) = crate::der::item(rest)?; // signature algorithm
    let (_, _, after_issuer) = crate::der::item(rest)?;
    let issuer = &rest[..whole(rest, after_issuer)];
    let (_, _, rest) = crate::der::item(after_issuer)?; // validity
    let (_, _, after_subject) = crate::der::item(rest)?;
    Some((issuer, &rest[..whole(rest, after_subject)]))
}

/// A DER UTCTime (0x17; a two-digit year below 50 is 20YY) or GeneralizedTime (0x18).
fn time(tag: u8, text: &[u8]) -> Option<jiff::Timestamp> {
    let text = std::str::from_utf8(text).ok()?;
    let full = match tag {
        0x17 if text.len() == 13 => {
            let year: u32 = text[..2].parse().ok()?;
            format!("{}{text}", if year < 50 { "20" } else { "19" })
        }
        0x18 if text.len() == 15 => text.to_owned(),
        _ => return None,
    };
    format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[0..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    )
    .parse()
    .ok()
}

#[cfg(test)]
#[path = "certificates_tests.rs"]
mod tests;

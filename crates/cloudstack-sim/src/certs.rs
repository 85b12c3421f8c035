//! What the management server checks in an uploaded certificate, as
//! `CertServiceImpl.validate` does (server/src/main/java/org/apache/cloudstack/network/ssl/
//! CertServiceImpl.java): the certificate parses as X.509 (`parseCertificate`, first PEM
//! block only), the key parses (`parsePrivateKey`: PKCS#1, PKCS#8 or SEC1 PEM), the
//! certificate is within its validity (`validateCert` → `X509Certificate.checkValidity`),
//! the key's algorithm is the certificate's and, for RSA only, the key signs what the
//! certificate's key verifies (`validateKeys`: other algorithms are not checked further), and
//! a chain, when given, parses (`CertificateHelper.parseChain`, before the validity) and leads
//! from the certificate to an anchor (`validateChain`, last): see `cert_chain`. The
//! fingerprint is `CertificateHelper.generateFingerPrint`:
//! SHA-256 of the DER, upper-case hex pairs joined by colons.
//!
//! Not modelled: encrypted keys (`password`).

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A certificate that passed the server's checks.
pub struct CheckedCert {
    /// `CertificateHelper.generateFingerPrint` of the certificate.
    pub fingerprint: String,
}

/// Why the server refuses an upload: the exception message `UploadSslCertCmd.execute`
/// answers as 530.
pub type Refusal = String;

/// Checks `certificate`, `key` and `chain` as `CertServiceImpl.validate` does, at `now`,
/// with `revocation` the command's `enabledrevocationcheck`.
pub fn check(
    certificate: &str,
    key: &str,
    chain: Option<&str>,
    revocation: bool,
    now: jiff::Timestamp,
) -> Result<CheckedCert, Refusal> {
    let der = first_certificate(certificate)?;
    let fields = tbs_fields(der.as_ref()).ok_or_else(|| {
        "Invalid Certificate format. Expected X509 certificate. Failed due to a malformed DER structure"
            .to_owned()
    })?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes())
        .map_err(|_| "Cannot parse private key".to_owned())?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key)
        .map_err(|e| format!("Parsing certificate/key failed: {e}"))?;
    let chain_first = chain.map(crate::cert_chain::parse_chain).transpose()?;
    let (not_before, not_after) = (fields.not_before, fields.not_after);
    if now > not_after {
        return Err(format!(
            "Parsing certificate/key failed: NotAfter: {}",
            java_date(not_after)
        ));
    }
    if now < not_before {
        return Err(format!(
            "Parsing certificate/key failed: NotBefore: {}",
            java_date(not_before)
        ));
    }
    let spki = fields.spki;
    let cert_algorithm = algorithm_of_spki(spki);
    let key_algorithm = signing.algorithm();
    if cert_algorithm != Some(key_algorithm) {
        return Err("Public and private key have different algorithms".into());
    }
    if key_algorithm == rustls::SignatureAlgorithm::RSA
        && signing.public_key().as_ref().map(|k| k.as_ref()) != Some(spki)
    {
        return Err("Bad public-private key".into());
    }
    if let Some(first) = chain_first {
        crate::cert_chain::validate_chain(der.as_ref(), &first, revocation)?;
    }
    Ok(CheckedCert {
        fingerprint: fingerprint(der.as_ref()),
    })
}

/// `CertServiceImpl.parseCertificate`: BouncyCastle's `PemReader.readPemObject` reads the
/// first PEM block. No block at all is a null `PemObject`, refused by
/// `Preconditions.checkNotNull` with a message-less `NullPointerException` — `UploadSslCertCmd`
/// answers it with no text (an empty refusal here). A block whose base64 does not decode is
/// BouncyCastle's `DecoderException`, which no `catch` narrows: its own text. Anything else
/// that is not an X.509 certificate is the `InvalidParameterValueException` "Invalid
/// Certificate format…".
fn first_certificate(certificate: &str) -> Result<CertificateDer<'static>, Refusal> {
    if !certificate.contains("-----BEGIN ") {
        return Err(String::new());
    }
    match CertificateDer::pem_slice_iter(certificate.as_bytes()).next() {
        Some(Ok(der)) => Ok(der),
        Some(Err(rustls::pki_types::pem::Error::Base64Decode(_))) => Err(
            "unable to decode base64 string: invalid characters encountered in base64 data".into(),
        ),
        Some(Err(e)) => Err(format!(
            "Invalid Certificate format. Expected X509 certificate. Failed due to {e}"
        )),
        None => Err(
            "Invalid Certificate format. Expected X509 certificate. Failed due to no PEM certificate"
                .into(),
        ),
    }
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

/// The algorithm of a SubjectPublicKeyInfo, from its algorithm OID.
fn algorithm_of_spki(spki: &[u8]) -> Option<rustls::SignatureAlgorithm> {
    const RSA: &[u8] = &[
        0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01,
    ];
    const EC: &[u8] = &[0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
    const ED25519: &[u8] = &[0x06, 0x03, 0x2B, 0x65, 0x70];
    let contains = |oid: &[u8]| spki.windows(oid.len()).any(|w| w == oid);
    if contains(RSA) {
        Some(rustls::SignatureAlgorithm::RSA)
    } else if contains(EC) {
        Some(rustls::SignatureAlgorithm::ECDSA)
    } else if contains(ED25519) {
        Some(rustls::SignatureAlgorithm::ED25519)
    } else {
        None
    }
}

/// `java.util.Date.toString()` in UTC: `Fri Jan 01 00:00:00 UTC 2021`.
fn java_date(at: jiff::Timestamp) -> String {
    at.to_zoned(jiff::tz::TimeZone::UTC)
        .strftime("%a %b %d %H:%M:%S UTC %Y")
        .to_string()
}

/// One DER item: (tag, contents, the rest).
fn der_item(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7F);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// What the checks read from a certificate's `tbsCertificate`.
struct TbsFields<'a> {
    not_before: jiff::Timestamp,
    not_after: jiff::Timestamp,
    /// The whole SubjectPublicKeyInfo (tag and length included).
    spki: &'a [u8],
}

/// Walks a DER certificate (v1 to v3, as Java's `CertificateFactory` accepts them) to its
/// validity and public key.
fn tbs_fields(der: &[u8]) -> Option<TbsFields<'_>> {
    let (_, certificate, _) = der_item(der)?;
    let (_, tbs, _) = der_item(certificate)?;
    let (tag, _, mut rest) = der_item(tbs)?;
    if tag == 0xA0 {
        // explicit version; the serial number follows
        rest = der_item(rest)?.2;
    }
    let (_, _, rest) = der_item(rest)?; // signature algorithm
    let (_, _, rest) = der_item(rest)?; // issuer
    let (_, validity, rest) = der_item(rest)?;
    let (_, _, rest) = der_item(rest)?; // subject
    let (_, _, after_spki) = der_item(rest)?;
    let spki = &rest[..rest.len() - after_spki.len()];
    let (tag_before, before, next) = der_item(validity)?;
    let (tag_after, after, _) = der_item(next)?;
    Some(TbsFields {
        not_before: time(tag_before, before)?,
        not_after: time(tag_after, after)?,
        spki,
    })
}

/// `notBefore` and `notAfter` of a DER certificate.
pub fn validity(der: &[u8]) -> Option<(jiff::Timestamp, jiff::Timestamp)> {
    tbs_fields(der).map(|f| (f.not_before, f.not_after))
}

/// A DER UTCTime (0x17, two-digit year: below 50 is 20YY) or GeneralizedTime (0x18).
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
    let iso = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[0..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    );
    iso.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEAF: &str = include_str!("../tests/fixtures/ssl/leaf-a-cert.pem");
    const EXPIRED: &str = include_str!("../tests/fixtures/ssl/expired-cert.pem");

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .expect("certificate")
            .as_ref()
            .to_vec()
    }

    #[test]
    fn validity_reads_utc_and_generalized_times() {
        let (before, after) = validity(&der(EXPIRED)).expect("validity");
        assert_eq!(before.to_string(), "2020-01-01T00:00:00Z");
        assert_eq!(after.to_string(), "2021-01-01T00:00:00Z");
        let (_, after) = validity(&der(LEAF)).expect("validity");
        assert_eq!(after.strftime("%Y").to_string(), "2126");
    }

    #[test]
    fn fingerprint_is_upper_case_colon_separated_sha256() {
        let print = fingerprint(b"abc");
        assert!(print.starts_with("BA:78:16:BF:8F:01:CF:EA"), "{print}");
        assert_eq!(print.len(), 32 * 3 - 1);
    }

    #[test]
    fn an_expired_certificate_is_refused_with_the_java_date() {
        let key = include_str!("../tests/fixtures/ssl/expired-key.pem");
        let refusal = check(EXPIRED, key, None, true, jiff::Timestamp::now())
            .err()
            .expect("refused");
        assert_eq!(
            refusal,
            "Parsing certificate/key failed: NotAfter: Fri Jan 01 00:00:00 UTC 2021"
        );
    }
}

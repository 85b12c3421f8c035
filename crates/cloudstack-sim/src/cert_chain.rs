//! The certificate chain of `uploadSslCert`, checked as the management server checks it
//! (server/src/main/java/org/apache/cloudstack/network/ssl/CertServiceImpl.java and
//! utils/src/main/java/com/cloud/utils/security/CertificateHelper.java):
//!
//! * [`parse_chain`] follows `CertificateHelper.parseChain`: BouncyCastle's `PemReader`
//!   reads the FIRST PEM block of the text, whatever its label, and only that block's
//!   content is decoded as certificates: every later block (a root after the intermediate,
//!   say) is ignored. No PEM block at all leaves `pemObject` null and `getContent()` throws a
//!   `NullPointerException`, which no `catch` of `CertServiceImpl.validate` handles:
//!   `UploadSslCertCmd.execute` answers its message (the helpful message of Java 14+; an
//!   empty text on Java 11). A block whose content holds no certificate is
//!   `IllegalStateException("Unable to decode certificate chain")`, also answered as is.
//!   A block without its end line is `PemReader`'s `IOException`, and content that is not
//!   a certificate a `CertificateException`: both caught by `validate` and answered as
//!   "Parsing certificate/key failed: …"; bad base64 is BouncyCastle's `DecoderException`
//!   ("unable to decode base64 string: …"), answered as is. After those prefixes the texts
//!   of the JDK's and BouncyCastle's parsers are not reproduced. Several certificates in
//!   the first block (Java reads them all as anchors) are not modelled: only the first
//!   counts, which refuses more, never less.
//! * [`validate_chain`] follows `CertServiceImpl.validateChain`: the certificate and the
//!   chain's certificates are all trust anchors and a PKIX path is built (BouncyCastle's
//!   `PKIXCertPathBuilderSpi`) from the certificate to an anchor that issued it: an anchor
//!   whose subject is the certificate's issuer (the DER names compared byte for byte, at
//!   least as strict as `X500Principal.equals`) and whose public key verifies the
//!   certificate's signature. So a self-signed certificate passes with any chain that
//!   parses, and a chain passes only when its first certificate signed the certificate. No
//!   path is `IllegalStateException("Invalid certificate chain")`.
//! * With revocation checking on (`enabledrevocationcheck`, 4.15+, default true) the path's
//!   certificate must be checked against a CRL; the server is given none and BouncyCastle
//!   fetches none (CRL distribution points are off by default), so the path fails with "No
//!   CRLs found" and the upload with "Invalid certificate chain"
//!   (`CertServiceTest.runUploadSslCertWithNoRevocationInfo`). The simulator models that
//!   default: a chain is accepted only with `enabledrevocationcheck=false`.
//!
//! Not modelled (each makes the real server refuse more, never less): the other PKIX
//! checks of the path (unknown critical extensions, name constraints, policies).

use base64::Engine as _;

/// Why the chain is refused: the text `UploadSslCertCmd.execute` answers as 530.
pub(crate) type Refusal = String;

/// `validateChain`'s refusal.
pub(crate) const INVALID_CHAIN: &str = "Invalid certificate chain";

/// The first certificate of the chain, as `CertificateHelper.parseChain` reads it.
pub(crate) fn parse_chain(chain: &str) -> Result<Vec<u8>, Refusal> {
    let content = first_pem_block(chain)?.ok_or_else(|| {
        r#"Cannot invoke "org.bouncycastle.util.io.pem.PemObject.getContent()" because "pemObject" is null"#
            .to_owned()
    })?;
    if content.first() != Some(&0x30) {
        return Err("Unable to decode certificate chain".into());
    }
    if Parsed::of(&content).is_none() {
        return Err("Parsing certificate/key failed: Could not parse certificate".into());
    }
    Ok(content)
}

/// `CertServiceImpl.validateChain` of the certificate `leaf` (DER) with the chain's first
/// certificate `first` (DER, from [`parse_chain`]).
pub(crate) fn validate_chain(leaf: &[u8], first: &[u8], revocation: bool) -> Result<(), Refusal> {
    let leaf_cert = Parsed::of(leaf).ok_or(INVALID_CHAIN)?;
    let anchors = [leaf, first];
    let issued = anchors
        .iter()
        .filter_map(|der| Parsed::of(der))
        .any(|anchor| anchor.subject == leaf_cert.issuer && anchor.signed(&leaf_cert));
    if !issued || revocation {
        return Err(INVALID_CHAIN.into());
    }
    Ok(())
}

/// BouncyCastle `PemReader.readPemObject`: the content of the block the first line
/// starting with `-----BEGIN ` opens (any label, up to its first `-`; a malformed first
/// BEGIN line is no block at all), header lines (with a `:`) skipped, up to the first line
/// containing `-----END <label>`; `None` when there is no block.
fn first_pem_block(text: &str) -> Result<Option<Vec<u8>>, Refusal> {
    let mut lines = text.lines();
    let Some(begin) = lines.by_ref().find(|l| l.starts_with("-----BEGIN ")) else {
        return Ok(None);
    };
    let rest = begin["-----BEGIN ".len()..].trim();
    let label = match rest.find('-') {
        Some(at) if at > 0 && rest.ends_with("-----") && rest.len() - at == 5 => &rest[..at],
        _ => return Ok(None),
    };
    let end = format!("-----END {label}");
    let mut body = String::new();
    let mut ended = false;
    for line in lines {
        if line.contains(':') {
            continue;
        }
        if line.contains(&end) {
            ended = true;
            break;
        }
        body.extend(line.chars().filter(|c| !c.is_whitespace()));
    }
    if !ended {
        return Err(format!("Parsing certificate/key failed: {end} not found"));
    }
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .map(Some)
        .map_err(|e| format!("unable to decode base64 string: {e}"))
}

/// One DER item: (tag, contents, the whole item, the rest).
type Item<'a> = (u8, &'a [u8], &'a [u8], &'a [u8]);

/// Reads one DER item off `input`.
fn item(input: &[u8]) -> Option<Item<'_>> {
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
    if rest.len() < len {
        return None;
    }
    let header = input.len() - rest.len();
    Some((tag, &rest[..len], &input[..header + len], &rest[len..]))
}

/// What the path check reads from a DER certificate.
struct Parsed<'a> {
    /// The whole `tbsCertificate` (what the signature covers).
    tbs: &'a [u8],
    /// The issuer Name (whole item).
    issuer: &'a [u8],
    /// The subject Name (whole item).
    subject: &'a [u8],
    /// The SubjectPublicKeyInfo's contents.
    spki: &'a [u8],
    /// The outer `signatureAlgorithm`'s OID contents.
    signature_oid: &'a [u8],
    /// The signature bits (the unused-bits octet removed).
    signature: &'a [u8],
}

impl<'a> Parsed<'a> {
    fn of(der: &'a [u8]) -> Option<Self> {
        let (0x30, certificate, _, _) = item(der)? else {
            return None;
        };
        let (0x30, tbs_body, tbs, rest) = item(certificate)? else {
            return None;
        };
        let (_, algorithm, _, rest) = item(rest)?;
        let (0x03, bits, _, _) = item(rest)? else {
            return None;
        };
        let (0x06, signature_oid, _, _) = item(algorithm)? else {
            return None;
        };
        let (tag, _, _, mut fields) = item(tbs_body)?;
        if tag == 0xA0 {
            fields = item(fields)?.3; // explicit version; the serial number follows
        }
        let (_, _, _, fields) = item(fields)?; // signature algorithm
        let (_, _, issuer, fields) = item(fields)?;
        let (_, _, _, fields) = item(fields)?; // validity
        let (_, _, subject, fields) = item(fields)?;
        let (0x30, spki, _, _) = item(fields)? else {
            return None;
        };
        let (&0, signature) = bits.split_first()? else {
            return None;
        };
        Some(Parsed {
            tbs,
            issuer,
            subject,
            spki,
            signature_oid,
            signature,
        })
    }

    /// Whether this certificate's key verifies `child`'s signature.
    fn signed(&self, child: &Parsed<'_>) -> bool {
        let Some((_, key_algorithm, _, rest)) = item(self.spki) else {
            return false;
        };
        let Some((0x03, bits, _, _)) = item(rest) else {
            return false;
        };
        let Some((&0, key)) = bits.split_first() else {
            return false;
        };
        let Some(algorithm) = verification(child.signature_oid, key_algorithm) else {
            return false;
        };
        ring::signature::UnparsedPublicKey::new(algorithm, key)
            .verify(child.tbs, child.signature)
            .is_ok()
    }
}

/// The verification of a signature algorithm (OID contents) with a key of
/// `key_algorithm` (the SPKI's AlgorithmIdentifier contents); `None` when unsupported.
fn verification(
    signature_oid: &[u8],
    key_algorithm: &[u8],
) -> Option<&'static dyn ring::signature::VerificationAlgorithm> {
    use ring::signature as sig;
    const RSA: &[u8] = &[0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x04, 0x03];
    const ED25519: &[u8] = &[0x2B, 0x65, 0x70];
    const P256: &[u8] = &[0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x2B, 0x81, 0x04, 0x00, 0x22];
    let has = |oid: &[u8]| key_algorithm.windows(oid.len()).any(|w| w == oid);
    match signature_oid {
        [rsa @ .., last] if rsa == RSA => match last {
            0x05 => Some(&sig::RSA_PKCS1_1024_8192_SHA1_FOR_LEGACY_USE_ONLY),
            0x0B => Some(&sig::RSA_PKCS1_1024_8192_SHA256_FOR_LEGACY_USE_ONLY),
            0x0C => Some(&sig::RSA_PKCS1_2048_8192_SHA384),
            0x0D => Some(&sig::RSA_PKCS1_1024_8192_SHA512_FOR_LEGACY_USE_ONLY),
            _ => None,
        },
        [ecdsa @ .., last] if ecdsa == ECDSA => match (has(P256), has(P384), last) {
            (true, _, 0x02) => Some(&sig::ECDSA_P256_SHA256_ASN1),
            (true, _, 0x03) => Some(&sig::ECDSA_P256_SHA384_ASN1),
            (_, true, 0x02) => Some(&sig::ECDSA_P384_SHA256_ASN1),
            (_, true, 0x03) => Some(&sig::ECDSA_P384_SHA384_ASN1),
            _ => None,
        },
        oid if oid == ED25519 => Some(&sig::ED25519),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEAF: &str = include_str!("../tests/fixtures/ssl/chain-leaf-cert.pem");
    const INTERMEDIATE: &str = include_str!("../tests/fixtures/ssl/chain-intermediate-cert.pem");
    const ROOT: &str = include_str!("../tests/fixtures/ssl/chain-root-cert.pem");
    const CA: &str = include_str!("../tests/fixtures/ssl/ca-cert.pem");

    fn der(pem: &str) -> Vec<u8> {
        first_pem_block(pem).unwrap().unwrap()
    }

    #[test]
    fn only_the_first_block_counts_and_it_must_sign_the_certificate() {
        let leaf = der(LEAF);
        let good = parse_chain(&format!("{INTERMEDIATE}{ROOT}")).unwrap();
        assert_eq!(validate_chain(&leaf, &good, false), Ok(()));
        let reversed = parse_chain(&format!("{ROOT}{INTERMEDIATE}")).unwrap();
        assert_eq!(
            validate_chain(&leaf, &reversed, false),
            Err(INVALID_CHAIN.into())
        );
        // the intermediate is signed by the root; the root by itself
        assert_eq!(
            validate_chain(&der(INTERMEDIATE), &der(ROOT), false),
            Ok(())
        );
        assert_eq!(validate_chain(&der(ROOT), &der(CA), false), Ok(()));
        assert_eq!(
            validate_chain(&leaf, &good, true),
            Err(INVALID_CHAIN.into()),
            "no CRL for the revocation check"
        );
    }

    #[test]
    fn unreadable_chains_are_refused_with_the_java_exception_texts() {
        assert!(parse_chain("garbage").unwrap_err().contains("pemObject"));
        assert!(
            parse_chain("-----BEGIN CERTIFICATE\n")
                .unwrap_err()
                .contains("pemObject"),
            "a malformed BEGIN line is no block"
        );
        let with_header = INTERMEDIATE.replacen('\n', "\nComment: the intermediate\n", 1);
        assert_eq!(parse_chain(&with_header), Ok(der(INTERMEDIATE)));
        assert_eq!(
            parse_chain("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n").unwrap_err(),
            "Unable to decode certificate chain"
        );
        assert_eq!(
            parse_chain("-----BEGIN CERTIFICATE-----\nMIIB\n").unwrap_err(),
            "Parsing certificate/key failed: -----END CERTIFICATE not found"
        );
    }
}

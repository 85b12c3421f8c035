//! TLS to the CloudStack endpoint: the `ca_file` trust settings and the one exception they
//! need, and recognising certificate failures in transport errors.
//!
//! A `ca_file` adds its certificates to the platform's trusted roots. Private CloudStack
//! installations most often serve a self-signed certificate that is its own CA
//! (`basicConstraints CA:TRUE`, what `openssl req -x509` makes by default); webpki refuses
//! such a certificate as a server certificate (`CaUsedAsEndEntity`), while Go's
//! `crypto/x509` accepts a server certificate that is itself one of the trusted roots.
//! [`PinnedOrWebPki`] does the same, and no more: a certificate that is byte for byte one
//! of the `ca_file`'s certificates is accepted after its validity period and the server
//! name have been checked; every other certificate goes through webpki with the
//! platform's roots and the `ca_file`'s certificates as trust anchors. Verification is never turned off here
//! (`ssl_no_verify` is a separate, explicit setting).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::Error;

/// Reads the PEM certificates of `path`: an unreadable file, a file without any
/// certificate and a malformed certificate are configuration errors naming the file.
pub fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let pem = std::fs::read(path)
        .map_err(|e| Error::Config(format!("ca-file {}: cannot read: {e}", path.display())))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::Config(format!(
                "ca-file {}: not a PEM certificate bundle: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "ca-file {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    for cert in &certs {
        rustls::server::ParsedCertificate::try_from(cert).map_err(|e| {
            Error::Config(format!(
                "ca-file {}: not a valid certificate: {e}",
                path.display()
            ))
        })?;
    }
    Ok(certs)
}

/// The rustls client configuration for `ca_file`'s certificates (see the module
/// documentation), with the process's crypto provider: the platform's trusted roots
/// plus the `ca_file`'s certificates.
pub fn client_config(
    ca_certs: Vec<CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, Error> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let mut roots = RootCertStore::empty();
    // Unreadable platform certificates are skipped, as the platform verifier does.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    for cert in &ca_certs {
        roots
            .add(cert.clone())
            .map_err(|e| Error::Config(format!("ca-file: not a usable CA certificate: {e}")))?;
    }
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| Error::Config(format!("ca-file: cannot build the TLS verifier: {e}")))?;
    let verifier = PinnedOrWebPki {
        webpki,
        pinned: ca_certs,
        provider: provider.clone(),
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS versions: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

/// Accepts a server certificate that exactly equals one of the configured certificates
/// (after checking its validity period and the server name), else verifies it with
/// webpki against the platform's roots and the configured certificates.
#[derive(Debug)]
struct PinnedOrWebPki {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl PinnedOrWebPki {
    /// Checks `end_entity`, which equals a configured certificate: valid now and for
    /// `server_name`. Path building (anchored at the certificate itself) checks the
    /// validity period before the basic constraints, so its only acceptable failure is
    /// `CaUsedAsEndEntity`: a self-signed CA certificate serving as its own server
    /// certificate, the case this verifier exists for.
    fn verify_pinned(
        &self,
        end_entity: &CertificateDer<'_>,
        server_name: &ServerName<'_>,
        now: UnixTime,
    ) -> Result<(), rustls::Error> {
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        let mut anchor = RootCertStore::empty();
        anchor.add(end_entity.clone().into_owned())?;
        let algorithms = self.provider.signature_verification_algorithms.all;
        match rustls::client::verify_server_cert_signed_by_trust_anchor(
            &parsed,
            &anchor,
            &[],
            now,
            algorithms,
        ) {
            Ok(()) => {}
            Err(error) if is_ca_used_as_end_entity(&error) => {}
            Err(error) => return Err(error),
        }
        rustls::client::verify_server_name(&parsed, server_name)
    }
}

impl ServerCertVerifier for PinnedOrWebPki {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.pinned.iter().any(|pinned| pinned == end_entity) {
            self.verify_pinned(end_entity, server_name, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        self.webpki
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            .map_err(|error| {
                // webpki looks at the certificate's own constraints before its issuer: a
                // self-signed CA certificate that is not configured is, first of all, not
                // trusted.
                if is_ca_used_as_end_entity(&error) {
                    rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)
                } else {
                    error
                }
            })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Whether webpki refused the certificate as a CA certificate serving as a server's.
fn is_ca_used_as_end_entity(error: &rustls::Error) -> bool {
    matches!(
        error,
        rustls::Error::InvalidCertificate(CertificateError::Other(other))
            if other
                .0
                .downcast_ref::<webpki::Error>()
                .is_some_and(|e| matches!(e, webpki::Error::CaUsedAsEndEntity))
    )
}

/// The TLS failure behind a transport error, if any: a rustls error found in its cause
/// chain (an untrusted, expired or wrongly named certificate, a failed handshake). I/O
/// errors are opened by hand: one wrapping another reports its inner error's cause as
/// its own, skipping the inner error itself.
pub fn tls_failure(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        cause = match current.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => current.source(),
        };
    }
    None
}

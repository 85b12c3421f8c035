//! TLS to the CloudStack endpoint: the `ca_file` trust settings and the one exception they
//! need, and recognising certificate failures in transport errors.
//!
//! A `ca_file` adds its certificates to the platform's trusted roots. Private CloudStack
//! installations most often serve a self-signed certificate that is its own CA
//! (`basicConstraints CA:TRUE`, what `openssl req -x509` makes by default); webpki refuses
//! such a certificate as a server certificate (`CaUsedAsEndEntity`), while Go's
//! `crypto/x509` accepts a server certificate that is itself one of the trusted roots.
//! [`PinnedOrPlatform`] does the same, and no more: a certificate that is byte for byte one
//! of the `ca_file`'s self-signed certificates is accepted after its validity period and
//! the server name have been checked; every other certificate goes through the platform
//! verifier with the `ca_file` as extra roots. Verification is never turned off here
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
        .map_err(|e| Error::Config(format!("ca_file {}: cannot read: {e}", path.display())))?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::Config(format!(
                "ca_file {}: not a PEM certificate bundle: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "ca_file {}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
            path.display()
        )));
    }
    for cert in &certs {
        rustls::server::ParsedCertificate::try_from(cert).map_err(|e| {
            Error::Config(format!(
                "ca_file {}: not a valid certificate: {e}",
                path.display()
            ))
        })?;
    }
    Ok(certs)
}

/// The rustls client configuration for `ca_file`'s certificates (see the module
/// documentation), with the process's crypto provider.
pub fn client_config(
    ca_certs: Vec<CertificateDer<'static>>,
) -> Result<rustls::ClientConfig, Error> {
    let provider = CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
    let platform = rustls_platform_verifier::Verifier::new_with_extra_roots(
        ca_certs.clone(),
        provider.clone(),
    )
    .map_err(|e| Error::Config(format!("ca_file: cannot build the TLS verifier: {e}")))?;
    let verifier = PinnedOrPlatform {
        platform: Arc::new(platform),
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
/// (after checking its validity period and the server name), else asks the platform
/// verifier.
#[derive(Debug)]
struct PinnedOrPlatform {
    platform: Arc<dyn ServerCertVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    provider: Arc<CryptoProvider>,
}

impl PinnedOrPlatform {
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
            Err(rustls::Error::InvalidCertificate(CertificateError::Other(other)))
                if other
                    .0
                    .downcast_ref::<webpki::Error>()
                    .is_some_and(|e| matches!(e, webpki::Error::CaUsedAsEndEntity)) => {}
            Err(error) => return Err(error),
        }
        rustls::client::verify_server_name(&parsed, server_name)
    }
}

impl ServerCertVerifier for PinnedOrPlatform {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.platform.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => Ok(verified),
            Err(error) => {
                if self.pinned.iter().any(|pinned| pinned == end_entity) {
                    self.verify_pinned(end_entity, server_name, now)?;
                    return Ok(ServerCertVerified::assertion());
                }
                Err(error)
            }
        }
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

/// The TLS failure behind a transport error, if any: a rustls error found in its cause
/// chain (an untrusted, expired or wrongly named certificate, a failed handshake).
pub fn tls_failure(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = current.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(tls) = inner.downcast_ref::<rustls::Error>()
        {
            return Some(tls.to_string());
        }
        cause = current.source();
    }
    None
}

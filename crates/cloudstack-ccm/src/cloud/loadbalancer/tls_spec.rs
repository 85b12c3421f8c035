//! What a Service asks for TLS termination (`…-tls-secret` or `…-tls-certificate-id`, and
//! `…-tls-ports`), read from its annotations. An unreadable value is an error, never a
//! fallback: the fallback would serve a port the user asked to be HTTPS as plain TCP.

use super::annotations::{self as ann, AnnotationError, Annotations};
use super::certificates::{Inspected, PemMaterial};
use super::vocabulary::LbProtocol;

/// Where a Service's certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertificateSource {
    /// A `kubernetes.io/tls` Secret in the Service's namespace, by name.
    Secret(String),
    /// A certificate already uploaded to CloudStack, by id (never deleted by us).
    CloudStackId(String),
}

/// TLS termination asked for by a Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSpec {
    /// The certificate.
    pub source: CertificateSource,
    /// The Service ports whose rules terminate TLS (protocol `ssl`).
    pub ports: Vec<u16>,
}

/// A certificate read from a Secret and checked, handed to the engine by the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateMaterial {
    /// The PEM text (its `Debug` hides the key).
    pub pem: PemMaterial,
    /// What the checks found (the fingerprint above all).
    pub inspected: Inspected,
}

/// TLS termination as the engine plans it: the spec's part, plus the certificate the
/// controller read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsTermination {
    /// What the Service asks for.
    pub spec: TlsSpec,
    /// The Secret's certificate, checked; `None` for the certificate-id form, and when the
    /// Secret cannot be used (then the certificates and TLS rules stay as they are and no
    /// new TLS rule is made).
    pub material: Option<CertificateMaterial>,
}

/// Reads the TLS annotations: `None` when the Service asks for no TLS termination.
pub(crate) fn read_tls(annotations: &Annotations<'_>) -> Result<Option<TlsSpec>, AnnotationError> {
    let secret = annotations.get(&ann::TLS_SECRET, ann::parse_secret_name)?;
    let id = annotations.get(&ann::TLS_CERTIFICATE_ID, ann::parse_uuid)?;
    let source = match (secret, id) {
        (None, None) => return Ok(None),
        (Some(secret), None) => CertificateSource::Secret(secret),
        (None, Some(id)) => CertificateSource::CloudStackId(id),
        (Some(_), Some(_)) => {
            return Err(AnnotationError {
                key: ann::TLS_CERTIFICATE_ID.key.to_string(),
                value: annotations
                    .raw(&ann::TLS_CERTIFICATE_ID)
                    .unwrap_or_default()
                    .to_string(),
                reason: format!("set together with {}; use one of them", ann::TLS_SECRET.key),
            });
        }
    };
    let ports_text = annotations
        .raw(&ann::TLS_PORTS)
        .unwrap_or(ann::TLS_PORTS.default);
    let ports = ann::parse_port_list(ann::TLS_PORTS.key, ports_text)?;
    Ok(Some(TlsSpec { source, ports }))
}

/// Which of the Service's ports (`(port, protocol)`) terminate TLS: the TLS ports that
/// are TCP (or PROXY-protocol) ports of the Service — the load balancer speaks TLS to the
/// client and plain TCP to the backends. A TLS port the Service does not have, or a UDP
/// one, is a warning.
pub(crate) fn ssl_ports(
    service_ports: &[(u16, LbProtocol)],
    tls_ports: &[u16],
    warnings: &mut Vec<String>,
) -> Vec<u16> {
    let mut out = Vec::new();
    for port in tls_ports {
        match service_ports.iter().find(|(p, _)| p == port) {
            None => warnings.push(format!(
                "annotation {}: the Service has no port {port}",
                ann::TLS_PORTS.key
            )),
            Some((_, LbProtocol::Udp)) => warnings.push(format!(
                "annotation {}: port {port} is UDP and cannot terminate TLS",
                ann::TLS_PORTS.key
            )),
            Some(_) => out.push(*port),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn read(pairs: &[(&str, &str)]) -> Result<Option<TlsSpec>, AnnotationError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read_tls(&Annotations::new(Some(&map)))
    }

    #[test]
    fn no_tls_annotation_asks_for_nothing() {
        assert_eq!(read(&[]), Ok(None));
        assert_eq!(read(&[(ann::TLS_PORTS.key, "443")]), Ok(None));
    }

    #[test]
    fn a_secret_or_an_id_with_ports_defaulting_to_443() {
        assert_eq!(
            read(&[(ann::TLS_SECRET.key, "shop-tls")]),
            Ok(Some(TlsSpec {
                source: CertificateSource::Secret("shop-tls".into()),
                ports: vec![443],
            }))
        );
        let id = "1D3A7C2E-5B4F-4E8A-9C61-2F0B8D7E6A15";
        assert_eq!(
            read(&[
                (ann::TLS_CERTIFICATE_ID.key, id),
                (ann::TLS_PORTS.key, "8443,443")
            ]),
            Ok(Some(TlsSpec {
                source: CertificateSource::CloudStackId(id.to_ascii_lowercase()),
                ports: vec![8443, 443],
            }))
        );
    }

    #[test]
    fn bad_or_conflicting_values_are_errors_naming_the_annotation() {
        let both = read(&[
            (ann::TLS_SECRET.key, "shop-tls"),
            (
                ann::TLS_CERTIFICATE_ID.key,
                "1d3a7c2e-5b4f-4e8a-9c61-2f0b8d7e6a15",
            ),
        ])
        .unwrap_err();
        assert_eq!(both.key, ann::TLS_CERTIFICATE_ID.key);
        let ports = read(&[(ann::TLS_SECRET.key, "s"), (ann::TLS_PORTS.key, "https")]).unwrap_err();
        assert_eq!(
            (ports.key.as_str(), ports.value.as_str()),
            (ann::TLS_PORTS.key, "https")
        );
        let secret = read(&[(ann::TLS_SECRET.key, "Bad_Name")]).unwrap_err();
        assert_eq!(secret.key, ann::TLS_SECRET.key);
    }
}

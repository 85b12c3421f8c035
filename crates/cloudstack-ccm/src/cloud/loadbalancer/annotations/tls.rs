//! The TLS-termination annotations: where the certificate comes from (a `kubernetes.io/tls`
//! Secret in the Service's namespace, or a certificate already uploaded to CloudStack) and
//! which ports terminate TLS. Their parse functions sit next to them.

use super::{Annotation, AnnotationError, AnnotationKind, Origin, SetBy};

/// `…-tls-secret`: the `kubernetes.io/tls` Secret whose certificate the load balancer serves.
pub static TLS_SECRET: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-tls-secret",
    kind: AnnotationKind::SecretName,
    default: "",
    description: "Terminate TLS at the load balancer with the certificate of this Secret (type `kubernetes.io/tls`, in the Service's namespace; `tls.crt` may carry the chain after the certificate, in any order: the certificate's issuer is sent first, as CloudStack reads only the chain's first certificate, and a chain without the issuer is a Warning; `ca.crt` is not used). The certificate is uploaded to CloudStack, named after the Service's UID and its fingerprint, and follows the Secret's renewals (swapped in one job, then the old one deleted). The status then reports `ipMode: Proxy`, so in-cluster clients go through the load balancer too. Needs read access to Secrets (see configuration.md). Not with `…-tls-certificate-id`.",
    example: "shop-tls",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "Providers with the `SslTermination` capability: NetScaler; the Virtual Router from CloudStack 4.22. Elsewhere a Warning and no rule for the TLS ports.",
};

/// `…-tls-certificate-id`: a certificate already uploaded to CloudStack.
pub static TLS_CERTIFICATE_ID: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-tls-certificate-id",
    kind: AnnotationKind::Uuid,
    default: "",
    description: "Terminate TLS with this certificate, already uploaded to CloudStack (`uploadSslCert`) in the controller's account or project. The controller assigns it and never deletes it. Needs no access to Secrets. Not with `…-tls-secret`.",
    example: "1d3a7c2e-5b4f-4e8a-9c61-2f0b8d7e6a15",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `…-tls-secret`.",
};

/// `…-tls-ports`: the Service ports whose rules terminate TLS (protocol `ssl`).
pub static TLS_PORTS: Annotation = Annotation {
    key: "service.beta.kubernetes.io/cloudstack-load-balancer-tls-ports",
    kind: AnnotationKind::PortList,
    default: "443",
    description: "Service ports (`port`, comma-separated) whose load-balancer rules terminate TLS (protocol `ssl`, the certificate attached, plain TCP to the backends). The other ports stay as they are. Only read with `…-tls-secret` or `…-tls-certificate-id`.",
    example: "443,8443",
    origin: Origin::CloudstackCcm,
    set_by: SetBy::User,
    support: "As `…-tls-secret`.",
};

/// Parses a Secret name: a DNS subdomain (RFC 1123, at most 253 characters, lower case).
pub(crate) fn parse_secret_name(key: &str, value: &str) -> Result<String, AnnotationError> {
    let name = value.trim();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(AnnotationError::new(
            key,
            value,
            "expected a Secret name (lower-case DNS subdomain)",
        ));
    }
    Ok(name.to_string())
}

/// Parses comma-separated ports (1–65535); repeats are dropped, the order kept.
pub(crate) fn parse_port_list(key: &str, value: &str) -> Result<Vec<u16>, AnnotationError> {
    let mut out = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let port = entry
            .parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                AnnotationError::new(key, value, format!("{entry:?} is not a port (1-65535)"))
            })?;
        if !out.contains(&port) {
            out.push(port);
        }
    }
    if out.is_empty() {
        return Err(AnnotationError::new(
            key,
            value,
            "expected at least one port",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_names_are_dns_subdomains() {
        let k = TLS_SECRET.key;
        assert_eq!(parse_secret_name(k, " shop-tls ").unwrap(), "shop-tls");
        assert_eq!(parse_secret_name(k, "a.b-c.d").unwrap(), "a.b-c.d");
        for bad in ["", "Shop", "-a", "a_b", "a..b", &"a".repeat(254)] {
            let err = parse_secret_name(k, bad).expect_err(bad);
            assert_eq!((err.key.as_str(), err.value.as_str()), (k, bad));
        }
    }

    #[test]
    fn port_lists_keep_order_and_drop_repeats() {
        let k = TLS_PORTS.key;
        assert_eq!(parse_port_list(k, "443").unwrap(), vec![443]);
        assert_eq!(
            parse_port_list(k, "8443, 443,8443").unwrap(),
            vec![8443, 443]
        );
        for bad in ["", "0", "65536", "https", "443,x", " , "] {
            let err = parse_port_list(k, bad).expect_err(bad);
            assert!(err.to_string().contains(&format!("{bad:?}")), "{err}");
        }
    }
}

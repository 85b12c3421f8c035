//! The framework's secure-serving, delegated authentication and authorization flags
//! (`k8s.io/apiserver` `SecureServingOptions`, `DelegatingAuthenticationOptions`,
//! `DelegatingAuthorizationOptions`), with their defaults, and the one flag of our own:
//! `--insecure-plain-http`.
//!
//! A value rustls cannot honour (TLS 1.0 or 1.1, a cipher suite it does not implement) is
//! a command-line error naming the flag.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgAction, Args};
use rustls::SupportedCipherSuite;
use rustls::crypto::ring::cipher_suite as suites;

use super::values::{parse_duration, parse_go_bool};

/// The lowest TLS version served (`--tls-min-version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMinVersion {
    /// TLS 1.2 and 1.3 (`VersionTLS12`, the default: rustls has nothing older).
    #[default]
    Tls12,
    /// TLS 1.3 only (`VersionTLS13`).
    Tls13,
}

/// The secure-serving and delegation flags.
#[derive(Debug, Clone, Args)]
pub struct ServingArgs {
    /// Serve /healthz, /readyz and /metrics over plain HTTP with no authentication or
    /// authorization, as before HTTPS was served. Not for production: anyone who reaches
    /// the port reads the metrics.
    #[arg(global = true, long, value_name = "BOOL", action = ArgAction::Set, num_args = 0..=1, require_equals = true,
          default_value = "false", default_missing_value = "true", value_parser = parse_go_bool)]
    pub insecure_plain_http: bool,

    /// The serving certificate (PEM, the certificate first, then its chain). Re-read when it
    /// changes on disk. Without it, a self-signed certificate is made.
    #[arg(global = true, long, value_name = "PATH")]
    pub tls_cert_file: Option<PathBuf>,

    /// The private key of --tls-cert-file (PEM).
    #[arg(global = true, long, value_name = "PATH")]
    pub tls_private_key_file: Option<PathBuf>,

    /// Where the self-signed certificate is kept (cloud-controller-manager.crt and .key),
    /// when --tls-cert-file is not given; kept in memory when this is empty.
    #[arg(global = true, long, value_name = "DIR")]
    pub cert_dir: Option<PathBuf>,

    /// The lowest TLS version served: VersionTLS12 or VersionTLS13.
    #[arg(global = true, long, value_name = "VERSION", default_value = "VersionTLS12", value_parser = parse_tls_version)]
    pub tls_min_version: TlsMinVersion,

    /// The TLS 1.2 cipher suites offered (Go names, comma-separated); TLS 1.3 suites are
    /// always all offered, as in Go. Default: every suite rustls implements (ECDHE with
    /// AES-GCM or ChaCha20-Poly1305).
    #[arg(global = true, long, value_name = "NAMES", value_delimiter = ',', value_parser = parse_cipher_suite)]
    pub tls_cipher_suites: Vec<SupportedCipherSuite>,

    /// Client certificates signed by these authorities (PEM) authenticate as their
    /// CommonName, in the groups of their Organizations.
    #[arg(global = true, long, value_name = "PATH")]
    pub client_ca_file: Option<PathBuf>,

    /// Authorities (PEM) of front proxies: a client certificate they signed lets the
    /// request headers name the user (--requestheader-username-headers, ...).
    #[arg(global = true, long, value_name = "PATH")]
    pub requestheader_client_ca_file: Option<PathBuf>,

    /// CommonNames of the front proxies' certificates allowed to name users (any, when
    /// empty).
    #[arg(global = true, long, value_name = "NAMES", value_delimiter = ',')]
    pub requestheader_allowed_names: Vec<String>,

    /// Request headers naming the user behind a front proxy (the first non-empty wins).
    #[arg(
        global = true,
        long,
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-user"
    )]
    pub requestheader_username_headers: Vec<String>,

    /// Request headers naming the groups of the user behind a front proxy.
    #[arg(
        global = true,
        long,
        value_name = "HEADERS",
        value_delimiter = ',',
        default_value = "x-remote-group"
    )]
    pub requestheader_group_headers: Vec<String>,

    /// Prefixes of the request headers carrying extra attributes of the user behind a
    /// front proxy.
    #[arg(
        global = true,
        long,
        value_name = "PREFIXES",
        value_delimiter = ',',
        default_value = "x-remote-extra-"
    )]
    pub requestheader_extra_headers_prefix: Vec<String>,

    /// kubeconfig of the API server that reviews tokens (TokenReview); default: the
    /// in-cluster configuration or --kubeconfig.
    #[arg(global = true, long, value_name = "PATH")]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// How long a token's review is cached. The default is the kubelet's (the controller
    /// manager framework's is 10s): long enough that a scrape every 15 s or 30 s is
    /// answered from the cache.
    #[arg(global = true, long, value_name = "DURATION", default_value = "2m", value_parser = parse_duration)]
    pub authentication_token_webhook_cache_ttl: Duration,

    /// kubeconfig of the API server that authorises requests (SubjectAccessReview);
    /// default: the in-cluster configuration or --kubeconfig.
    #[arg(global = true, long, value_name = "PATH")]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// How long an "allowed" answer is cached (the kubelet's default; the framework's is
    /// 10s).
    #[arg(global = true, long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration)]
    pub authorization_webhook_cache_authorized_ttl: Duration,

    /// How long a "denied" answer is cached (the kubelet's default; the framework's is
    /// 10s).
    #[arg(global = true, long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub authorization_webhook_cache_unauthorized_ttl: Duration,

    /// Paths served to everyone without asking the API server (a trailing `*` matches a
    /// prefix).
    #[arg(
        global = true,
        long,
        value_name = "PATHS",
        value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez"
    )]
    pub authorization_always_allow_paths: Vec<String>,
}

fn parse_tls_version(text: &str) -> Result<TlsMinVersion, String> {
    match text {
        "VersionTLS12" => Ok(TlsMinVersion::Tls12),
        "VersionTLS13" => Ok(TlsMinVersion::Tls13),
        "VersionTLS10" | "VersionTLS11" => Err(format!(
            "{text} cannot be honoured: rustls serves TLS 1.2 and 1.3 only (use VersionTLS12 or VersionTLS13)"
        )),
        _ => Err(format!(
            "{text:?} is not a TLS version (VersionTLS12 or VersionTLS13)"
        )),
    }
}

/// The cipher suites rustls (ring) implements, by their Go names (`tls.CipherSuiteName`,
/// with Go's aliases without the `_SHA256` of the ChaCha20 suites).
const CIPHER_SUITES: &[(&str, SupportedCipherSuite)] = &[
    ("TLS_AES_128_GCM_SHA256", suites::TLS13_AES_128_GCM_SHA256),
    ("TLS_AES_256_GCM_SHA384", suites::TLS13_AES_256_GCM_SHA384),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        suites::TLS13_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        suites::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        suites::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        suites::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        suites::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        suites::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
];

fn parse_cipher_suite(text: &str) -> Result<SupportedCipherSuite, String> {
    let name = text.trim();
    CIPHER_SUITES
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, suite)| *suite)
        .ok_or_else(|| {
            format!(
                "{name} cannot be honoured: rustls implements only ECDHE with AES-GCM or ChaCha20-Poly1305 ({})",
                CIPHER_SUITES
                    .iter()
                    .map(|(known, _)| *known)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_suites_rustls_cannot_honour_are_refused() {
        assert_eq!(parse_tls_version("VersionTLS13"), Ok(TlsMinVersion::Tls13));
        let error = parse_tls_version("VersionTLS10").unwrap_err();
        assert!(error.contains("TLS 1.2 and 1.3 only"), "{error}");
        assert!(parse_tls_version("1.2").is_err());
        assert_eq!(
            parse_cipher_suite("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305")
                .unwrap()
                .suite(),
            suites::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256.suite()
        );
        let error = parse_cipher_suite("TLS_RSA_WITH_AES_128_CBC_SHA").unwrap_err();
        assert!(
            error.starts_with("TLS_RSA_WITH_AES_128_CBC_SHA cannot be honoured"),
            "{error}"
        );
    }
}

//! The serving certificate and the rustls configuration of the secure port, as the
//! framework's `SecureServingOptions` provide them:
//!
//! * `--tls-cert-file` and `--tls-private-key-file`: read at start (an unreadable or
//!   mismatched pair is a start-up error naming the flag) and read again when inotify
//!   reports a change in their directories (every minute besides; every
//!   `CERT_POLL_INTERVAL` where inotify is not available): a changed pair is served from
//!   the next handshake on; a changed pair that does not load is logged once and the
//!   previous one kept.
//! * Otherwise a self-signed certificate for `localhost`, the host's name and addresses
//!   (from `/etc/hosts`, where the kubelet writes the pod's), loopback and a specific bind
//!   address: kept in memory, or in `--cert-dir` as `cloud-controller-manager.crt` and
//!   `.key` (reused when they are there, written when not).
//! * `--tls-min-version` and `--tls-cipher-suites` restrict the ring provider's versions
//!   and TLS 1.2 suites; HTTP/1.1 is the only ALPN protocol.
//! * `--client-ca-file` and `--requestheader-client-ca-file`: client certificates they
//!   signed are asked for and checked ([`super::client_cert`]); connections without one
//!   are still served.
//! * A self-signed certificate this process made is renewed after `SELF_SIGNED_RENEWAL`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::client_cert::ClientAuth;
use crate::cli::serving::{ServingArgs, TlsMinVersion};
use crate::file_watch::FileChanges;

/// How often `--tls-cert-file` and its key are read again where inotify is not available.
pub(crate) const CERT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// How long a self-signed certificate is valid.
const SELF_SIGNED_VALIDITY_DAYS: i64 = 365;

/// When a self-signed certificate made by this process is replaced by a new one (a month
/// before it expires, so a process that runs for years never serves an expired one).
pub(crate) const SELF_SIGNED_RENEWAL: Duration = Duration::from_secs(335 * 24 * 3600);

/// The base name of the self-signed pair in `--cert-dir` (the framework's `PairName`).
const PAIR_NAME: &str = "cloud-controller-manager";

/// A TLS set-up error, naming the flag and the file; never the key's content.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or parsed.
    #[error("{flag} {path}: {problem}")]
    File {
        /// The flag naming the file.
        flag: &'static str,
        /// The file.
        path: String,
        /// What is wrong.
        problem: String,
    },
    /// The configuration is refused by rustls or the certificate could not be made.
    #[error("{0}")]
    Config(String),
}

fn file_error(flag: &'static str, path: &Path, problem: impl ToString) -> TlsError {
    TlsError::File {
        flag,
        path: path.display().to_string(),
        problem: problem.to_string(),
    }
}

/// The certificate served now; swapped when the files change.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

impl ServingCert {
    fn new(key: CertifiedKey) -> Self {
        Self {
            current: RwLock::new(Arc::new(key)),
        }
    }

    /// The certificate and key served now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn replace(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(key);
    }
}

/// A certificate file pair to watch.
#[derive(Debug, Clone)]
struct WatchedPair {
    cert: PathBuf,
    key: PathBuf,
    cert_flag: &'static str,
    key_flag: &'static str,
}

/// The PEM bytes of a pair as last read.
#[derive(Clone, PartialEq, Eq)]
struct PemPair {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl std::fmt::Debug for PemPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PemPair { .. }")
    }
}

/// A pair of files served, and their bytes as last read.
#[derive(Debug, Clone)]
struct Watched {
    pair: WatchedPair,
    seen: PemPair,
}

/// The secure port's TLS: the rustls configuration and, for files, what to watch.
#[derive(Debug, Clone)]
pub struct Tls {
    /// The rustls configuration (its certificate resolver is [`Tls::cert`]).
    pub config: Arc<ServerConfig>,
    /// The certificate served.
    pub cert: Arc<ServingCert>,
    /// The client-certificate authorities, if any.
    pub client_auth: Option<Arc<ClientAuth>>,
    watched: Option<Watched>,
    renewal: Option<Renewal>,
}

/// What a self-signed certificate made by this process is renewed with.
#[derive(Debug, Clone)]
struct Renewal {
    names: Vec<String>,
    pair: Option<WatchedPair>,
}

/// Builds the TLS of the secure port from the flags; `bind` is the bind address (named in
/// a self-signed certificate when it is a specific one).
pub fn from_args(args: &ServingArgs, bind: IpAddr) -> Result<Tls, TlsError> {
    let (key, source) = match (&args.tls_cert_file, &args.tls_private_key_file) {
        (Some(cert), Some(key)) => {
            let pair = WatchedPair {
                cert: cert.clone(),
                key: key.clone(),
                cert_flag: "--tls-cert-file",
                key_flag: "--tls-private-key-file",
            };
            let (certified, seen) = load_pair(&pair)?;
            (certified, Source::Files(Watched { pair, seen }))
        }
        (Some(_), None) => {
            return Err(TlsError::Config(
                "--tls-private-key-file is required with --tls-cert-file".into(),
            ));
        }
        (None, Some(_)) => {
            return Err(TlsError::Config(
                "--tls-cert-file is required with --tls-private-key-file".into(),
            ));
        }
        (None, None) => self_signed(args.cert_dir.as_deref(), bind)?,
    };
    let cert = Arc::new(ServingCert::new(key));
    let client_auth = ClientAuth::from_args(args)
        .map_err(TlsError::Config)?
        .map(Arc::new);
    let config = server_config(args, cert.clone(), client_auth.as_deref())?;
    let (watched, renewal) = match source {
        Source::Files(watched) => (Some(watched), None),
        Source::Made(renewal) => (None, Some(renewal)),
    };
    Ok(Tls {
        config,
        cert,
        client_auth,
        watched,
        renewal,
    })
}

/// Where the served certificate comes from.
enum Source {
    /// Files, watched for changes.
    Files(Watched),
    /// Made by this process, renewed before it expires.
    Made(Renewal),
}

/// The ring provider restricted to `--tls-cipher-suites` (TLS 1.3 suites always kept).
fn provider(args: &ServingArgs) -> CryptoProvider {
    let mut provider = rustls::crypto::ring::default_provider();
    if !args.tls_cipher_suites.is_empty() {
        provider.cipher_suites.retain(|suite| {
            suite.tls13().is_some()
                || args
                    .tls_cipher_suites
                    .iter()
                    .any(|wanted| wanted.suite() == suite.suite())
        });
    }
    provider
}

fn server_config(
    args: &ServingArgs,
    cert: Arc<ServingCert>,
    client_auth: Option<&ClientAuth>,
) -> Result<Arc<ServerConfig>, TlsError> {
    let versions: &[&'static rustls::SupportedProtocolVersion] = match args.tls_min_version {
        TlsMinVersion::Tls12 => &[&rustls::version::TLS13, &rustls::version::TLS12],
        TlsMinVersion::Tls13 => &[&rustls::version::TLS13],
    };
    let builder = ServerConfig::builder_with_provider(Arc::new(provider(args)))
        .with_protocol_versions(versions)
        .map_err(|error| {
            TlsError::Config(format!(
                "--tls-min-version and --tls-cipher-suites leave nothing to serve: {error}"
            ))
        })?;
    let builder = match client_auth {
        Some(auth) => builder.with_client_cert_verifier(auth.handshake_verifier()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(cert);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Reads and checks a certificate and key pair; returns it and the bytes read.
fn load_pair(pair: &WatchedPair) -> Result<(CertifiedKey, PemPair), TlsError> {
    let cert_pem =
        std::fs::read(&pair.cert).map_err(|e| file_error(pair.cert_flag, &pair.cert, e))?;
    let key_pem = std::fs::read(&pair.key).map_err(|e| file_error(pair.key_flag, &pair.key, e))?;
    let key = certified_key(&cert_pem, &key_pem, pair)?;
    Ok((
        key,
        PemPair {
            cert: cert_pem,
            key: key_pem,
        },
    ))
}

fn certified_key(
    cert_pem: &[u8],
    key_pem: &[u8],
    pair: &WatchedPair,
) -> Result<CertifiedKey, TlsError> {
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            file_error(
                pair.cert_flag,
                &pair.cert,
                format!("not PEM certificates: {e}"),
            )
        })?;
    if chain.is_empty() {
        return Err(file_error(
            pair.cert_flag,
            &pair.cert,
            "no certificate in the file",
        ));
    }
    // The error of a key that does not parse names no part of it.
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .map_err(|_| file_error(pair.key_flag, &pair.key, "no PEM private key in the file"))?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        file_error(
            pair.key_flag,
            &pair.key,
            format!(
                "does not match {} {}: {e}",
                pair.cert_flag,
                pair.cert.display()
            ),
        )
    })
}

/// The names a self-signed certificate is made for: `localhost`, the host name and the
/// host's addresses in `/etc/hosts`, loopback, and `bind` when it is a specific address.
pub fn self_signed_names(bind: IpAddr) -> Vec<String> {
    let mut names = vec!["localhost".to_string()];
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty());
    if let Some(hostname) = &hostname {
        names.push(hostname.clone());
        let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
        for line in hosts.lines() {
            let line = line.split('#').next().unwrap_or("");
            let mut fields = line.split_whitespace();
            let Some(address) = fields.next().and_then(|a| a.parse::<IpAddr>().ok()) else {
                continue;
            };
            if fields.any(|name| name == hostname) && !address.is_loopback() {
                names.push(address.to_string());
            }
        }
    }
    names.push("127.0.0.1".into());
    names.push("::1".into());
    if !bind.is_unspecified() {
        names.push(bind.to_string());
    }
    let mut unique = Vec::new();
    for name in names {
        if !unique.contains(&name) {
            unique.push(name);
        }
    }
    unique
}

/// A self-signed certificate, from or into `cert_dir` when given.
fn self_signed(cert_dir: Option<&Path>, bind: IpAddr) -> Result<(CertifiedKey, Source), TlsError> {
    let pair = cert_dir.map(|dir| WatchedPair {
        cert: dir.join(format!("{PAIR_NAME}.crt")),
        key: dir.join(format!("{PAIR_NAME}.key")),
        cert_flag: "--cert-dir",
        key_flag: "--cert-dir",
    });
    if let Some(pair) = &pair
        && pair.cert.exists()
        && pair.key.exists()
    {
        let (key, seen) = load_pair(pair)?;
        tracing::info!(certificate = %pair.cert.display(), "serving the certificate kept in --cert-dir");
        return Ok((
            key,
            Source::Files(Watched {
                pair: pair.clone(),
                seen,
            }),
        ));
    }
    let names = self_signed_names(bind);
    let key = make_self_signed(&names, pair.as_ref())?;
    match &pair {
        Some(pair) => {
            tracing::info!(certificate = %pair.cert.display(), ?names, "wrote a self-signed certificate to --cert-dir")
        }
        None => tracing::info!(?names, "serving a self-signed certificate made in memory"),
    }
    Ok((key, Source::Made(Renewal { names, pair })))
}

/// Makes a self-signed certificate for `names`, written to `pair` when given.
fn make_self_signed(
    names: &[String],
    pair: Option<&WatchedPair>,
) -> Result<CertifiedKey, TlsError> {
    let (cert_pem, key_pem) = generate(names)?;
    let pair_for_check = pair.cloned().unwrap_or(WatchedPair {
        cert: PathBuf::from("(in memory)"),
        key: PathBuf::from("(in memory)"),
        cert_flag: "self-signed certificate",
        key_flag: "self-signed certificate",
    });
    let key = certified_key(cert_pem.as_bytes(), key_pem.as_bytes(), &pair_for_check)?;
    if let Some(pair) = pair {
        write_pair(pair, &cert_pem, &key_pem)?;
    }
    Ok(key)
}

/// A self-signed certificate for `names`, valid from a day ago for a year, as PEM.
fn generate(names: &[String]) -> Result<(String, String), TlsError> {
    let problem =
        |e: rcgen::Error| TlsError::Config(format!("cannot make a self-signed certificate: {e}"));
    let mut params = rcgen::CertificateParams::new(names.to_vec()).map_err(problem)?;
    let today = jiff::Zoned::now().date();
    let from = today.yesterday().unwrap_or(today);
    let until = today.saturating_add(jiff::Span::new().days(SELF_SIGNED_VALIDITY_DAYS));
    let ymd = |d: jiff::civil::Date| {
        rcgen::date_time_ymd(i32::from(d.year()), d.month() as u8, d.day() as u8)
    };
    params.not_before = ymd(from);
    params.not_after = ymd(until);
    params.distinguished_name.push(
        rcgen::DnType::CommonName,
        format!(
            "{}@self-signed",
            names.get(1).map_or("localhost", String::as_str)
        ),
    );
    let key = rcgen::KeyPair::generate().map_err(problem)?;
    let cert = params.self_signed(&key).map_err(problem)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn write_pair(pair: &WatchedPair, cert_pem: &str, key_pem: &str) -> Result<(), TlsError> {
    if let Some(dir) = pair.cert.parent() {
        std::fs::create_dir_all(dir).map_err(|e| file_error("--cert-dir", dir, e))?;
    }
    std::fs::write(&pair.cert, cert_pem).map_err(|e| file_error("--cert-dir", &pair.cert, e))?;
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&pair.key)
        .map_err(|e| file_error("--cert-dir", &pair.key, e))?;
    file.write_all(key_pem.as_bytes())
        .map_err(|e| file_error("--cert-dir", &pair.key, e))
}

impl Tls {
    /// Keeps the certificate current until the task is aborted: reads the certificate
    /// files (if any) when they change ([`FileChanges`]; every `CERT_POLL_INTERVAL` where
    /// inotify is not available) and serves a changed pair from the next handshake on, or
    /// renews a self-signed certificate this process made after `SELF_SIGNED_RENEWAL`.
    pub fn watch(&self) -> Option<tokio::task::JoinHandle<()>> {
        if let Some(renewal) = self.renewal.clone() {
            return Some(tokio::spawn(renew(renewal, self.cert.clone())));
        }
        let Watched { pair, mut seen } = self.watched.clone()?;
        let cert = self.cert.clone();
        Some(tokio::spawn(async move {
            let mut changes = FileChanges::new(
                vec![pair.cert.clone(), pair.key.clone()],
                CERT_POLL_INTERVAL,
            );
            let mut first = true;
            loop {
                // Read once at the start (a change since the load is not missed), then
                // after each change.
                if !std::mem::take(&mut first) {
                    changes.next().await;
                }
                let (Ok(cert_pem), Ok(key_pem)) = (
                    tokio::fs::read(&pair.cert).await,
                    tokio::fs::read(&pair.key).await,
                ) else {
                    continue;
                };
                let read = PemPair {
                    cert: cert_pem,
                    key: key_pem,
                };
                if read == seen {
                    continue;
                }
                match certified_key(&read.cert, &read.key, &pair) {
                    Ok(key) => {
                        cert.replace(key);
                        tracing::info!(certificate = %pair.cert.display(), "serving the changed certificate");
                    }
                    Err(error) => tracing::warn!(
                        %error,
                        "the changed certificate does not load; still serving the previous one"
                    ),
                }
                seen = read;
            }
        }))
    }
}

/// Replaces the self-signed certificate with a new one every [`SELF_SIGNED_RENEWAL`]
/// (an hour later when making one fails).
async fn renew(renewal: Renewal, cert: Arc<ServingCert>) {
    let mut wait = SELF_SIGNED_RENEWAL;
    loop {
        tokio::time::sleep(wait).await;
        match make_self_signed(&renewal.names, renewal.pair.as_ref()) {
            Ok(key) => {
                cert.replace(key);
                wait = SELF_SIGNED_RENEWAL;
                tracing::info!("renewed the self-signed serving certificate");
            }
            Err(error) => {
                wait = Duration::from_secs(3600);
                tracing::warn!(%error, "cannot renew the self-signed serving certificate; trying again in an hour");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(flags: &[&str]) -> ServingArgs {
        let args = std::iter::once("cloudstack-ccm")
            .chain(flags.iter().copied())
            .map(std::ffi::OsString::from);
        crate::cli::Cli::parse_with_warnings(args)
            .unwrap()
            .cli
            .manager
            .serving
    }

    #[tokio::test(start_paused = true)]
    async fn a_self_signed_certificate_is_renewed_before_it_expires() {
        let tls = from_args(&args(&[]), IpAddr::from([127, 0, 0, 1])).unwrap();
        let first = tls.cert.current().cert[0].clone();
        let _task = tls.watch().expect("a renewal task");
        tokio::time::sleep(SELF_SIGNED_RENEWAL - Duration::from_secs(60)).await;
        assert_eq!(tls.cert.current().cert[0], first, "not before its time");
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_ne!(tls.cert.current().cert[0], first, "renewed");
        assert!(SELF_SIGNED_RENEWAL.as_secs() < SELF_SIGNED_VALIDITY_DAYS as u64 * 24 * 3600);
    }
}

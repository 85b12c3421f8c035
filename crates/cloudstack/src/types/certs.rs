//! SSL certificates (`listSslCerts` / `uploadSslCert` items, `SslCertResponse`).

use super::de::response;

response! {
    /// An uploaded certificate. CloudStack never returns the private key.
    SslCert {
        /// Certificate id.
        id: Option<String>,
        /// Name given at upload.
        name: Option<String>,
        /// Certificate PEM.
        certificate: Option<String>,
        /// Chain PEM, when one was uploaded.
        certchain: Option<String>,
        /// SHA-256 of the certificate's DER: upper-case hex pairs joined by colons.
        fingerprint: Option<String>,
        /// Ids of the LB rules the certificate is assigned to.
        loadbalancerrulelist: Vec<String>,
        /// Owning account.
        account: Option<String>,
        /// Owning domain id.
        domainid: Option<String>,
        /// Owning domain name.
        domain: Option<String>,
        /// Owning project id.
        projectid: Option<String>,
        /// Owning project name.
        project: Option<String>,
    }
}

//! Requests for SSL certificates and their assignment to load-balancer rules.

use super::request;
use crate::Secret;

request! {
    /// `uploadSslCert` (synchronous). The key is a [`Secret`]: the request's `Debug` shows
    /// `***` for it. Sent as a POST form, so no part of it is in a URL.
    UploadSslCert => "uploadSslCert" {
        /// Certificate PEM (required, at most 16384 characters).
        certificate: String,
        /// Private key PEM (required, at most 16384 characters).
        privatekey: Secret,
        /// Name (required; names are not unique).
        name: String,
        /// Chain of intermediates PEM (at most 2097152 characters).
        certchain: Option<String>,
        /// Password of an encrypted key.
        password: Option<Secret>,
        /// Project owning the certificate (filled from the client configuration when unset).
        projectid: Option<String>,
        /// Check the chain's revocation (4.15+; server default true).
        enabledrevocationcheck: Option<bool>,
    }
}

request! {
    /// `listSslCerts` (synchronous, not paginated). Exactly one of `certid`, `lbruleid`,
    /// `projectid`, `accountid`: CloudStack before 4.24 refuses a call naming none
    /// (`CertServiceImpl.listSslCerts`), every version one naming two.
    /// [`crate::Client::list_ssl_certs`] fills in the owner when none is set.
    ListSslCerts => "listSslCerts" {
        /// Certificate id.
        certid: Option<String>,
        /// The certificate bound to this LB rule (`ApiConstants.LBID`).
        lbruleid: Option<String>,
        /// A project's certificates.
        projectid: Option<String>,
        /// An account's certificates (by account id).
        accountid: Option<String>,
    }
}

request! {
    /// `deleteSslCert` (synchronous). Refused while the certificate is assigned to a rule.
    DeleteSslCert => "deleteSslCert" {
        /// Certificate id (required).
        id: String,
    }
}

request! {
    /// `assignCertToLoadBalancer` (async, queued on the rule's network).
    AssignCertToLoadBalancer => "assignCertToLoadBalancer" {
        /// LB rule id (required; the rule's protocol must be `ssl`; `ApiConstants.LBID`).
        lbruleid: String,
        /// Certificate id (required).
        certid: String,
        /// Replace a certificate already bound (4.17+).
        forced: Option<bool>,
    }
}

request! {
    /// `removeCertFromLoadBalancer` (async, queued on the rule's network).
    RemoveCertFromLoadBalancer => "removeCertFromLoadBalancer" {
        /// LB rule id (required; `ApiConstants.LBID`).
        lbruleid: String,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::Request as _;

    #[test]
    fn the_key_is_sent_but_never_shown() {
        let request = UploadSslCert {
            certificate: "CERT".into(),
            privatekey: Secret::new("KEYBODY"),
            name: "n".into(),
            password: Some(Secret::new("PASSWORD")),
            ..Default::default()
        };
        let shown = format!("{request:?}");
        assert!(
            !shown.contains("KEYBODY") && !shown.contains("PASSWORD"),
            "{shown}"
        );
        let params = request.to_params();
        assert_eq!(params.get("privatekey"), Some("KEYBODY"));
        assert_eq!(params.get("password"), Some("PASSWORD"));
        assert!(!params.contains("certchain"));
    }
}

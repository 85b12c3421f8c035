//! SSL certificates and their assignment to load-balancer rules.

use crate::requests::{
    AssignCertToLoadBalancer, DeleteSslCert, ListSslCerts, RemoveCertFromLoadBalancer, Request,
    UploadSslCert,
};
use crate::types::SslCert;
use crate::{Client, Error};

impl Client {
    /// `uploadSslCert`: the stored certificate (with its id and fingerprint).
    pub async fn upload_ssl_cert(&self, request: &UploadSslCert) -> Result<SslCert, Error> {
        let inner = self
            .call(UploadSslCert::COMMAND, request.to_params())
            .await?;
        decode(UploadSslCert::COMMAND, inner.get("sslcert").cloned())
    }

    /// `listSslCerts`, in one call (the command has no pages). Without a filter and with a
    /// project configured, the project's certificates.
    pub async fn list_ssl_certs(&self, request: &ListSslCerts) -> Result<Vec<SslCert>, Error> {
        let mut request = request.clone();
        if request.certid.is_none()
            && request.lbid.is_none()
            && request.accountid.is_none()
            && request.projectid.is_none()
        {
            request.projectid = self.config().project_id.clone();
        }
        let inner = self
            .call(ListSslCerts::COMMAND, request.to_params())
            .await?;
        match inner.get("sslcert") {
            None => Ok(Vec::new()),
            items => decode(ListSslCerts::COMMAND, items.cloned()),
        }
    }

    /// `deleteSslCert`.
    pub async fn delete_ssl_cert(&self, request: &DeleteSslCert) -> Result<(), Error> {
        self.call(DeleteSslCert::COMMAND, request.to_params())
            .await
            .map(drop)
    }

    /// `assignCertToLoadBalancer`, once its job succeeded.
    pub async fn assign_cert_to_load_balancer(
        &self,
        request: &AssignCertToLoadBalancer,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }

    /// `removeCertFromLoadBalancer`, once its job succeeded.
    pub async fn remove_cert_from_load_balancer(
        &self,
        request: &RemoveCertFromLoadBalancer,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }
}

/// Decodes a reply's object or array.
fn decode<T: serde::de::DeserializeOwned>(
    command: &str,
    value: Option<serde_json::Value>,
) -> Result<T, Error> {
    let value = value.ok_or_else(|| Error::Decode {
        command: command.to_owned(),
        detail: "no sslcert in the reply".into(),
    })?;
    serde_json::from_value(value).map_err(|e| Error::Decode {
        command: command.to_owned(),
        detail: format!("sslcert: {e}"),
    })
}

//! SSL certificates and their assignment to load-balancer rules.

use crate::requests::{
    AssignCertToLoadBalancer, DeleteSslCert, ListSslCerts, RemoveCertFromLoadBalancer, Request,
    UploadSslCert,
};
use crate::types::SslCert;
use crate::{Client, Error, job_object};

impl Client {
    /// `uploadSslCert`: the stored certificate (with its id and fingerprint).
    pub async fn upload_ssl_cert(&self, request: &UploadSslCert) -> Result<SslCert, Error> {
        let inner = self
            .call(UploadSslCert::COMMAND, request.to_params())
            .await?;
        job_object(UploadSslCert::COMMAND, inner, "sslcert")
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
        if inner.get("sslcert").is_none() {
            return Ok(Vec::new());
        }
        job_object(ListSslCerts::COMMAND, inner, "sslcert")
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

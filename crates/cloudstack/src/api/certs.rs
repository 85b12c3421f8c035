//! SSL certificates and their assignment to load-balancer rules.

use crate::requests::{
    AssignCertToLoadBalancer, DeleteSslCert, ListAccounts, ListSslCerts,
    RemoveCertFromLoadBalancer, Request, UploadSslCert,
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

    /// `listSslCerts`, in one call (the command has no pages). Without a filter, the
    /// certificates of the owner the client acts for: the configured project's, else the
    /// keys' account's (learnt with [`Client::identify_account`] when not known yet) —
    /// CloudStack before 4.24 refuses a call that names no owner.
    pub async fn list_ssl_certs(&self, request: &ListSslCerts) -> Result<Vec<SslCert>, Error> {
        let mut request = request.clone();
        if request.certid.is_none()
            && request.lbruleid.is_none()
            && request.accountid.is_none()
            && request.projectid.is_none()
        {
            match &self.config().project_id {
                Some(project) => request.projectid = Some(project.clone()),
                None => request.accountid = Some(self.own_account_id().await?),
            }
        }
        let inner = self
            .call(ListSslCerts::COMMAND, request.to_params())
            .await?;
        if inner.get("sslcert").is_none() {
            return Ok(Vec::new());
        }
        job_object(ListSslCerts::COMMAND, inner, "sslcert")
    }

    /// The id of the keys' account, asking CloudStack once when it is not known yet.
    async fn own_account_id(&self) -> Result<String, Error> {
        if let Some(id) = self.account_id() {
            return Ok(id);
        }
        self.identify_account().await?;
        self.account_id().ok_or_else(|| Error::Decode {
            command: ListAccounts::COMMAND.to_owned(),
            detail: "the answer names no single account with an id".into(),
        })
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

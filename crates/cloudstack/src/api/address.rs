//! Public IP addresses.

use crate::requests::{AssociateIpAddress, DisassociateIpAddress, ListPublicIpAddresses, Request};
use crate::types::PublicIpAddress;
use crate::{AsyncStart, Client, Error};

impl Client {
    /// `listPublicIpAddresses`, all pages.
    pub async fn list_public_ip_addresses(
        &self,
        request: &ListPublicIpAddresses,
    ) -> Result<Vec<PublicIpAddress>, Error> {
        self.list_request(request, "publicipaddress").await
    }

    /// `associateIpAddress`: acquires an address and returns it once the job finished.
    pub async fn associate_ip_address(
        &self,
        request: &AssociateIpAddress,
    ) -> Result<PublicIpAddress, Error> {
        self.create_request(request, "ipaddress").await
    }

    /// `associateIpAddress` without waiting: `id` is the new address id, known at once.
    pub async fn associate_ip_address_begin(
        &self,
        request: &AssociateIpAddress,
    ) -> Result<AsyncStart, Error> {
        self.begin_request(request).await
    }

    /// Waits for an `associateIpAddress` job started with [`Client::associate_ip_address_begin`].
    pub async fn associate_ip_address_finish(
        &self,
        start: &AsyncStart,
    ) -> Result<PublicIpAddress, Error> {
        self.wait_job_object(AssociateIpAddress::COMMAND, &start.jobid, "ipaddress")
            .await
    }

    /// `disassociateIpAddress`: releases an address.
    pub async fn disassociate_ip_address(
        &self,
        request: &DisassociateIpAddress,
    ) -> Result<(), Error> {
        self.run_request(request).await
    }
}

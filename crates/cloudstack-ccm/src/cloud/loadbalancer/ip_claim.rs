//! The crash-safe public-IP protocol: a public IP the controller associates is on
//! record on its Service from before CloudStack allocates it, so a process killed at any
//! instant finds it again after restart, and neither leaks it nor associates a second.
//!
//! 1. **Claim.** A free address of the network's zone is picked (one
//!    page of `listPublicIpAddresses`, at random among those no running plan of this
//!    process picked: [`PickedAddresses`]) and recorded on the Service as its claim
//!    ([`IpRecorder::claim`]) before anything is asked of CloudStack. When CloudStack
//!    lists no free address it picks one itself, unclaimed.
//! 2. **Associate.** `associateIpAddress` asks for the claimed address. A refusal (a 4xx
//!    answer) allocated nothing: the claim is dropped, so whoever holds the address later
//!    is not taken for us. Any other failure may have been accepted: the claim stays.
//! 3. **Record.** As soon as the reply names the IP id it is recorded on the Service
//!    ([`IpRecorder::record`]), before the job is awaited. If recording fails the IP is
//!    released again and the step fails; if the job fails, CloudStack released the
//!    address, and the record is forgotten ([`IpRecorder::forget`]).
//! 4. **Adopt.** After a crash between 1 and 3, the next observation finds the claimed
//!    address allocated to the account with nothing of anyone else on it; the planner
//!    then plans `AdoptClaimedIp` instead of a new association, and its id is recorded
//!    as associated by the controller (no CloudStack call).
//! 5. **Take.** Its ownership tags go on the address in one `createTags`
//!    ([`IpClaims::take`]), the Service's UID among them: before anything is built on
//!    an adopted address (or a recorded one not tagged so yet), beside the rules on one
//!    the plan has just associated (it was free; only a stale claim of another Service
//!    can name it, and the Service that loses then deletes the rules it built there). A claim does not make an
//!    address ours alone: two processes may each believe they lead for a while (a
//!    leader cut off from the API server acts until its renew deadline), each with its
//!    own [`PickedAddresses`], and a claim the old leader wrote may name an address it
//!    then released and someone else associated. CloudStack keeps one value per tag key
//!    and resource (the unique key of `resource_tags`; a second is refused with "tag …
//!    already on …"), so of two Services that both hold an address exactly one takes it.
//!    The other reads the address's tags once (only then), forgets its record and claim
//!    (it releases nothing: the address is the winner's) and claims a new address; an
//!    observation that finds the recorded address tagged for another Service does the
//!    same ([`super::observe::TakenIp`]). An address associated and then abandoned is
//!    taken by the Service whose claim names it, or released with the Service that
//!    recorded it.
//! 6. **Give back.** When CloudStack refuses the plan for good before any of its rules
//!    stands on the IP it has just associated, [`IpClaims::release_unused`] releases the
//!    IP and forgets its record, so a load balancer that cannot be built holds no
//!    address.
//!
//! [`super::apply`] runs these as the plan's IP steps; the Service controller records
//! through an [`IpRecorder`] that writes the Service's annotations.

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Mutex;

use cloudstack::{
    AddressSummary, AssociateIpAddress, CreateTags, DisassociateIpAddress, ListPublicIpAddresses,
    PublicIpAddress, Request,
};
use futures::future::BoxFuture;

pub use super::apply::error::RecordError;
use super::apply::error::{ApplyError, created_id, failed, gone_is_fine};
use super::apply::phase::{PhaseSteps, run_tagging};
use super::plan::{AssociateTarget, Step};
use crate::cloud::job_queue::PlanTicket;
use crate::cloud::tags::{TAG_SERVICE_UID, tag_map};

/// Free addresses read per page when a new address is claimed. A page is enough to pick
/// from while fewer plans than this run at once; reading the whole free pool of a zone
/// (thousands of addresses in a large one) for every new load balancer held megabytes per
/// concurrent claim.
pub(crate) const CLAIM_PAGE_SIZE: u32 = 100;

/// The public IP a plan associated, as recorded on the Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedIp {
    /// The IP id.
    pub ip_id: String,
    /// The controller associated it (so it may release it).
    pub associated_by_controller: bool,
    /// The network the rules live in.
    pub network_id: Option<String>,
}

/// Records a newly associated IP on its Service, before the association finishes.
pub trait IpRecorder: Send + Sync {
    /// Records `ip`; an error stops the plan (and the IP is released again).
    fn record<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>>;
    /// Records `address` as the Service's claim, before it is associated: after a crash
    /// the address is found again whether or not CloudStack allocated it. `None` removes
    /// the claim (CloudStack refused the association: whoever holds the address later is
    /// not us).
    fn claim<'a>(&'a self, address: Option<IpAddr>) -> BoxFuture<'a, Result<(), RecordError>>;
    /// Removes the record of `ip` and the claim: its association job failed, so CloudStack
    /// released the address and may hand it to someone else.
    fn forget<'a>(&'a self, ip: &'a RecordedIp) -> BoxFuture<'a, Result<(), RecordError>>;
}

/// Addresses picked by plans still running in this process, so two Services being
/// provisioned at once do not pick the same free address (the second association would
/// be refused and that Service would wait for its retry).
#[derive(Debug, Default)]
pub(crate) struct PickedAddresses(Mutex<HashSet<IpAddr>>);

impl PickedAddresses {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<IpAddr>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Picks one of `free` at random that no running plan picked, and marks it.
    fn pick(&self, free: &[IpAddr]) -> Option<IpAddr> {
        let mut picked = self.lock();
        let candidates: Vec<IpAddr> = free
            .iter()
            .filter(|address| !picked.contains(address))
            .copied()
            .collect();
        let address = *candidates.get(rand::random_range(0..candidates.len().max(1)))?;
        picked.insert(address);
        Some(address)
    }
}

/// The addresses one run picked, released when the run ends (however it ends).
struct RunPicks<'a> {
    shared: &'a PickedAddresses,
    mine: Mutex<Vec<IpAddr>>,
}

impl RunPicks<'_> {
    /// Picks one of `free` (see [`PickedAddresses::pick`]) and keeps it until the run ends.
    fn pick(&self, free: &[IpAddr]) -> Option<IpAddr> {
        let address = self.shared.pick(free)?;
        self.mine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(address);
        Some(address)
    }
}

impl Drop for RunPicks<'_> {
    fn drop(&mut self) {
        let mine = std::mem::take(&mut *self.mine.lock().unwrap_or_else(|e| e.into_inner()));
        let mut shared = self.shared.lock();
        for address in mine {
            shared.remove(&address);
        }
    }
}

/// The IP protocol's part of one plan run.
pub(super) struct IpClaims<'a> {
    client: &'a cloudstack::Client,
    ticket: &'a PlanTicket,
    recorder: &'a dyn IpRecorder,
    /// The zone of the plan's network, where a new address is claimed.
    zone_id: Option<&'a str>,
    picks: RunPicks<'a>,
}

impl<'a> IpClaims<'a> {
    /// The protocol for one run of a plan: jobs queue with `ticket`, records go through
    /// `recorder`, a new address is claimed in `zone_id` (one not in `picked`).
    pub(super) fn new(
        client: &'a cloudstack::Client,
        ticket: &'a PlanTicket,
        picked: &'a PickedAddresses,
        recorder: &'a dyn IpRecorder,
        zone_id: Option<&'a str>,
    ) -> Self {
        IpClaims {
            client,
            ticket,
            recorder,
            zone_id,
            picks: RunPicks {
                shared: picked,
                mine: Mutex::new(Vec::new()),
            },
        }
    }

    /// Step `AssociateIp`: claims a free address unless `address` names one, associates
    /// it and records its id (steps 1–3). `replacing` is the id of the address recorded
    /// on the Service that another Service took: its record goes first (step 5). Returns
    /// the IP id and address, and the IP as the job returned it.
    pub(super) async fn associate(
        &self,
        step: &Step,
        target: &AssociateTarget,
        address: Option<IpAddr>,
        replacing: Option<&str>,
    ) -> Result<(String, IpAddr, PublicIpAddress), ApplyError> {
        if let Some(id) = replacing {
            self.recorder
                .forget(&RecordedIp {
                    ip_id: id.to_string(),
                    associated_by_controller: true,
                    network_id: None,
                })
                .await
                .map_err(ApplyError::Record)?;
            tracing::info!(ip_id = %id, "the recorded IP is another Service's; claiming a new one");
        }
        let address = match address {
            Some(address) => Some(address),
            None => self.claim_free_ip(step).await?,
        };
        self.associate_ip(step, target, address).await
    }

    /// Step `AdoptClaimedIp` (step 4): records `id` as associated by the controller.
    pub(super) async fn adopt(&self, target: &AssociateTarget, id: &str) -> Result<(), ApplyError> {
        let record = RecordedIp {
            ip_id: id.to_string(),
            associated_by_controller: true,
            network_id: match target {
                AssociateTarget::Network(id) => Some(id.clone()),
                AssociateTarget::Vpc(_) => None,
            },
        };
        self.recorder
            .record(&record)
            .await
            .map_err(ApplyError::Record)
    }

    /// Step 5: `createTags` of the IP's ownership tags (`request`, the Service's UID
    /// `service_uid` among them) on IP `ip_id`. When CloudStack refuses, the IP's tags
    /// are read again (one call): our UID on it means an earlier try went through; another
    /// Service's UID means that Service took the address first, so the Service forgets
    /// its record and claim (releasing nothing) and the step fails with
    /// [`ApplyError::IpTaken`]: the next plan claims a new address. True when this call
    /// put the tags on, false when an earlier try had.
    pub(super) async fn take(
        &self,
        step: &Step,
        request: &CreateTags,
        ip_id: &str,
        service_uid: &str,
        phase: &PhaseSteps,
    ) -> Result<bool, ApplyError> {
        let refused = match run_tagging(self.client, request, phase).await {
            Ok(()) => return Ok(true),
            Err(err) => err,
        };
        let owner = match ip_owner(self.client, ip_id).await {
            Ok(owner) => owner,
            Err(read) => {
                tracing::warn!(ip_id, error = %read, "cannot read the tags of an IP that could not be tagged");
                None
            }
        };
        match owner {
            Some(owner) if owner == service_uid => Ok(false),
            Some(owner) => {
                let record = RecordedIp {
                    ip_id: ip_id.to_string(),
                    associated_by_controller: true,
                    network_id: None,
                };
                if let Err(detail) = self.recorder.forget(&record).await {
                    tracing::warn!(ip_id, error = %detail, "cannot forget an IP another Service took");
                }
                tracing::warn!(ip_id, owner = %owner, "another Service took the IP first; a new one is claimed");
                Err(ApplyError::IpTaken {
                    step: step.to_string(),
                    ip_id: ip_id.to_string(),
                    owner,
                })
            }
            None => Err(failed(step)(refused)),
        }
    }

    /// Step 6: releases the IP `id` this plan associated and forgets its record. False
    /// when the release failed (logged; the IP stays recorded and goes with the Service).
    pub(super) async fn release_unused(&self, id: &str, address: IpAddr) -> bool {
        let step = Step::ReleaseIp {
            id: id.to_string(),
            address,
        };
        if let Err(release_err) = self.release(&step, id).await {
            tracing::warn!(ip_id = %id, error = %release_err, "cannot release the IP of a refused load balancer");
            return false;
        }
        let record = RecordedIp {
            ip_id: id.to_string(),
            associated_by_controller: true,
            network_id: None,
        };
        if let Err(detail) = self.recorder.forget(&record).await {
            tracing::warn!(ip_id = %id, error = %detail, "cannot forget a released IP");
        }
        tracing::info!(ip_id = %id, %address, "released the IP of a load balancer CloudStack refused");
        true
    }

    /// `disassociateIpAddress` on the network's queue; an IP already gone is fine.
    async fn release(&self, step: &Step, id: &str) -> Result<(), ApplyError> {
        let request = DisassociateIpAddress {
            id: id.to_string(),
            ..Default::default()
        };
        gone_is_fine(
            self.ticket
                .run(
                    self.client,
                    DisassociateIpAddress::COMMAND,
                    request.to_params(),
                )
                .await
                .map(drop),
        )
        .map_err(failed(step))
    }

    /// Picks a free address of the zone ([`pick_free_address`]) and records it on the
    /// Service before it is associated. `None` when CloudStack lists no free address:
    /// CloudStack then picks one itself.
    async fn claim_free_ip(&self, step: &Step) -> Result<Option<IpAddr>, ApplyError> {
        let picked = pick_free_address(self.client, self.zone_id, &self.picks)
            .await
            .map_err(failed(step))?;
        let Some(address) = picked else {
            tracing::warn!(
                zone = self.zone_id.unwrap_or_default(),
                "no free public IP listed; CloudStack picks one, unclaimed"
            );
            return Ok(None);
        };
        self.recorder
            .claim(Some(address))
            .await
            .map_err(ApplyError::Record)?;
        Ok(Some(address))
    }

    /// `associateIpAddress`: record the id on the Service as soon as the reply names it,
    /// then wait for the job. If recording fails the IP is released again, so nothing
    /// leaks.
    async fn associate_ip(
        &self,
        step: &Step,
        target: &AssociateTarget,
        address: Option<IpAddr>,
    ) -> Result<(String, IpAddr, PublicIpAddress), ApplyError> {
        let (client, recorder) = (self.client, self.recorder);
        let (request, network_id) = associate_request(target, address);
        let job = match self
            .ticket
            .submit(client, AssociateIpAddress::COMMAND, request.to_params())
            .await
        {
            Ok(job) => job,
            Err(err) => {
                // Refused (a 4xx answer): nothing was allocated, and a claimed address must
                // not be taken for ours when someone else acquires it later. Any other
                // failure may have been accepted, so the claim stays to find it again.
                let refused = matches!(&err, cloudstack::Error::Api { http_status, .. }
                    if (400..500).contains(http_status));
                if refused
                    && address.is_some()
                    && let Err(detail) = recorder.claim(None).await
                {
                    tracing::warn!(error = %detail, "cannot drop the claim of a refused IP association");
                }
                return Err(failed(step)(err));
            }
        };
        let id = created_id(step, &job, "IP")?;
        let record = RecordedIp {
            ip_id: id.clone(),
            associated_by_controller: true,
            network_id,
        };
        let recorded = recorder.record(&record).await;
        let finished = job.wait(client).await.and_then(|result| {
            cloudstack::job_object::<PublicIpAddress>(
                AssociateIpAddress::COMMAND,
                result,
                "ipaddress",
            )
        });
        if recorded.is_ok()
            && let Err(cloudstack::Error::JobFailed { .. }) = &finished
            && let Err(detail) = recorder.forget(&record).await
        {
            tracing::warn!(ip_id = %id, error = %detail, "cannot forget an IP whose association failed");
        }
        let finished = finished.map_err(failed(step));
        if let Err(err) = recorded {
            if let Err(release_err) = self.release(step, &id).await {
                tracing::warn!(ip_id = %id, error = %release_err, "cannot release an IP that could not be recorded");
            }
            return Err(ApplyError::Record(err));
        }
        let ip = finished?;
        let parsed = ip
            .ipaddress
            .as_deref()
            .and_then(|a| a.parse::<IpAddr>().ok())
            .or(address);
        let address = parsed.ok_or_else(|| ApplyError::Unresolved {
            step: step.to_string(),
            detail: "the job result carried no address".into(),
        })?;
        Ok((id, address, ip))
    }
}

/// The `associateIpAddress` request for `target` (asking for `address` when given), and
/// the network to record with the IP (none for a VPC).
fn associate_request(
    target: &AssociateTarget,
    address: Option<IpAddr>,
) -> (AssociateIpAddress, Option<String>) {
    let (networkid, vpcid, network_id) = match target {
        AssociateTarget::Network(id) => (Some(id.clone()), None, Some(id.clone())),
        AssociateTarget::Vpc(id) => (None, Some(id.clone()), None),
    };
    let request = AssociateIpAddress {
        networkid,
        vpcid,
        ipaddress: address.map(|a| a.to_string()),
        ..Default::default()
    };
    (request, network_id)
}

/// The UID of the Service whose ownership tag IP `ip_id` carries (one call).
async fn ip_owner(
    client: &cloudstack::Client,
    ip_id: &str,
) -> Result<Option<String>, cloudstack::Error> {
    let request = ListPublicIpAddresses {
        id: Some(ip_id.to_string()),
        listall: Some(true),
        ..Default::default()
    };
    let found = client.list_public_ip_addresses(&request).await?;
    Ok(found
        .iter()
        .find(|ip| ip.id.as_deref() == Some(ip_id))
        .and_then(|ip| tag_map(&ip.tags).remove(TAG_SERVICE_UID)))
}

/// Picks a free address of zone `zone_id` (all zones when `None`): reads a page of
/// [`CLAIM_PAGE_SIZE`] addresses (`allocatedonly=false`, state `Free`) and picks one at
/// random among those no running plan of this process picked (so two Services rarely pick
/// the same one, and never two of ours). The next page is read only when every address of
/// a page is picked already. `None` when no listed free address is left.
async fn pick_free_address(
    client: &cloudstack::Client,
    zone_id: Option<&str>,
    picks: &RunPicks<'_>,
) -> Result<Option<IpAddr>, cloudstack::Error> {
    let request = ListPublicIpAddresses {
        allocatedonly: Some(false),
        state: Some("Free".into()),
        zoneid: zone_id.map(str::to_string),
        ..Default::default()
    };
    let mut page = 1;
    loop {
        let (listed, count) = client
            .list_one_page::<AddressSummary>(
                ListPublicIpAddresses::COMMAND,
                "publicipaddress",
                request.to_params(),
                page,
                CLAIM_PAGE_SIZE,
            )
            .await?;
        let free: Vec<IpAddr> = listed
            .iter()
            .filter(|ip| !ip.is_allocated())
            .filter(|ip| {
                ip.state
                    .as_deref()
                    .is_none_or(|s| s.eq_ignore_ascii_case("free"))
            })
            .filter_map(|ip| ip.ipaddress.as_deref()?.parse().ok())
            .collect();
        if let Some(address) = picks.pick(&free) {
            return Ok(Some(address));
        }
        let read = u64::from(page) * u64::from(CLAIM_PAGE_SIZE);
        let more = match count {
            Some(total) => read < total,
            None => listed.len() == CLAIM_PAGE_SIZE as usize,
        };
        if listed.is_empty() || !more {
            return Ok(None);
        }
        page += 1;
    }
}

#[cfg(test)]
#[path = "ip_claim_tests.rs"]
mod tests;

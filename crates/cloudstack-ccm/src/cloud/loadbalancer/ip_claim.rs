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
//! 5. **Give back.** When CloudStack refuses the plan for good before any of its rules
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
    AddressSummary, AssociateIpAddress, DisassociateIpAddress, ListPublicIpAddresses,
    PublicIpAddress, Request,
};
use futures::future::BoxFuture;

pub use super::apply::error::RecordError;
use super::apply::error::{ApplyError, created_id, failed, gone_is_fine};
use super::plan::{AssociateTarget, Step};
use crate::cloud::job_queue::PlanTicket;

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
    /// it and records its id (steps 1–3). Returns the IP id and address, and the IP as the
    /// job returned it.
    pub(super) async fn associate(
        &self,
        step: &Step,
        target: &AssociateTarget,
        address: Option<IpAddr>,
    ) -> Result<(String, IpAddr, PublicIpAddress), ApplyError> {
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

    /// Step 5: releases the IP `id` this plan associated and forgets its record. False
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
            id: Some(id.to_string()),
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
mod tests {
    use super::*;

    #[test]
    fn running_plans_never_pick_the_same_free_address() {
        let picked = PickedAddresses::default();
        let free: Vec<IpAddr> = ["203.0.113.1", "203.0.113.2"]
            .iter()
            .map(|a| a.parse().expect("address"))
            .collect();
        let first = picked.pick(&free).expect("one is free");
        let second = picked.pick(&free).expect("the other is free");
        assert_ne!(first, second);
        assert_eq!(picked.pick(&free), None, "both are being associated");
        {
            let run = RunPicks {
                shared: &picked,
                mine: Mutex::new(vec![first]),
            };
            drop(run);
        }
        assert_eq!(
            picked.pick(&free),
            Some(first),
            "released when its run ended"
        );
    }

    #[test]
    fn a_run_releases_what_it_picked() {
        let picked = PickedAddresses::default();
        let free: Vec<IpAddr> = vec!["203.0.113.1".parse().expect("address")];
        {
            let run = RunPicks {
                shared: &picked,
                mine: Mutex::new(Vec::new()),
            };
            assert_eq!(run.pick(&free), Some(free[0]));
            assert_eq!(picked.pick(&free), None, "held while the run lasts");
        }
        assert_eq!(picked.pick(&free), Some(free[0]));
    }

    /// The `listPublicIpAddresses` calls the simulator answered.
    fn address_lists(sim: &cloudstack_sim::SimServer) -> usize {
        sim.call_log()
            .iter()
            .filter(|call| call.command == ListPublicIpAddresses::COMMAND)
            .count()
    }

    #[tokio::test]
    async fn a_claim_reads_one_page_of_free_addresses_and_the_next_only_when_it_is_all_picked() {
        // The small zone has 200 addresses, a few allocated: two pages of free ones.
        let (sim, client) = super::super::simulated_cloud(cloudstack_sim::Scenario::small()).await;
        let picked = PickedAddresses::default();
        let run = RunPicks {
            shared: &picked,
            mine: Mutex::default(),
        };
        let first = pick_free_address(&client, None, &run)
            .await
            .expect("listed")
            .expect("a free address");
        assert_eq!(address_lists(&sim), 1, "one page is enough");

        let request = ListPublicIpAddresses {
            allocatedonly: Some(false),
            state: Some("Free".into()),
            ..Default::default()
        };
        let free: Vec<AddressSummary> = client
            .list_public_ip_addresses(&request)
            .await
            .expect("every free address")
            .into_iter()
            .map(|ip| AddressSummary {
                ipaddress: ip.ipaddress,
                allocated: ip.allocated,
                state: ip.state,
            })
            .collect();
        assert!(
            free.len() > CLAIM_PAGE_SIZE as usize,
            "the zone has more free addresses than a page"
        );
        let on_first_page: Vec<IpAddr> = free[..CLAIM_PAGE_SIZE as usize]
            .iter()
            .filter_map(|ip| ip.ipaddress.as_deref()?.parse().ok())
            .collect();
        assert!(on_first_page.contains(&first), "picked from the first page");
        picked.lock().extend(on_first_page.iter().copied());
        let calls = address_lists(&sim);
        let second = pick_free_address(&client, None, &run)
            .await
            .expect("listed")
            .expect("a free address on the second page");
        assert!(!on_first_page.contains(&second));
        assert_eq!(
            address_lists(&sim) - calls,
            2,
            "the second page is read once the first is all picked"
        );

        picked.lock().extend(
            free.iter()
                .filter_map(|ip| ip.ipaddress.as_deref()?.parse::<IpAddr>().ok()),
        );
        assert_eq!(
            pick_free_address(&client, None, &run)
                .await
                .expect("listed"),
            None,
            "every free address is picked"
        );
    }

    #[test]
    fn an_association_asks_for_the_claimed_address_on_its_target() {
        let address: IpAddr = "203.0.113.7".parse().expect("address");
        let (request, network) =
            associate_request(&AssociateTarget::Network("net-1".into()), Some(address));
        assert_eq!(request.networkid.as_deref(), Some("net-1"));
        assert_eq!(request.vpcid, None);
        assert_eq!(request.ipaddress.as_deref(), Some("203.0.113.7"));
        assert_eq!(network.as_deref(), Some("net-1"), "recorded with the IP");
        let (request, network) = associate_request(&AssociateTarget::Vpc("vpc-1".into()), None);
        assert_eq!(request.vpcid.as_deref(), Some("vpc-1"));
        assert_eq!(request.networkid, None);
        assert_eq!(request.ipaddress, None, "CloudStack picks one");
        assert_eq!(network, None, "a VPC tier is not recorded as the network");
    }
}

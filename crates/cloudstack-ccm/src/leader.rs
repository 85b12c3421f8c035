//! Lease-based leader election with client-go `LeaseLock` semantics, on the same Lease as
//! the Go CCM (`kube-system/cloud-controller-manager`), so two implementations running side
//! by side never both act.
//!
//! * GET the Lease; create it when absent.
//! * A Lease held by someone else is valid until `leaseDurationSeconds` after this replica
//!   last *saw its record change* (local clock, as client-go: immune to clock skew).
//! * Acquire a free, released or expired Lease (`leaseTransitions` + 1) and renew a held one
//!   with `replace` and the fetched `resourceVersion`; a 409 means another replica won.
//! * Renew every retry period; step down when renewal has not succeeded for the renew
//!   deadline, or at once when another holder shows up.
//! * Stepping down drops the leading future at once (every mutation stops before another
//!   candidate may acquire the Lease, which it can only do a lease duration after the last
//!   renewal it saw), then campaigns again: the process lives on, and whatever the caller
//!   keeps outside the leading future (caches, state) serves the next [`Term`].
//! * On graceful shutdown release the Lease (empty `holderIdentity`), so a standby takes
//!   over after one retry period instead of a full lease duration.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::metrics::Metrics;

/// Settings of one elector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Namespace of the Lease (`kube-system`).
    pub namespace: String,
    /// Name of the Lease (`cloud-controller-manager`).
    pub name: String,
    /// This replica's identity, written to `holderIdentity`.
    pub identity: String,
    /// How long a Lease is valid without renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before stepping down (10 s).
    pub renew_deadline: Duration,
    /// Interval between attempts (2 s).
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// The Go CCM's Lease (`kube-system/cloud-controller-manager`), client-go's default
    /// timings and the identity from [`default_identity`].
    pub fn new(
        namespace: impl Into<String>,
        name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// `<hostname>_<random uuid>`, like the Kubernetes controller managers.
pub fn default_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "cloudstack-ccm".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// Where this replica stands in the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionState {
    /// The Lease has not been read yet.
    Starting,
    /// Another replica leads; this one waits, ready to take over.
    Standby,
    /// This replica leads and runs the controllers.
    Leading,
    /// Election ended (shutdown).
    Stopped,
}

/// A shared, cheap-to-clone view of the election state, for `/readyz` and metrics.
#[derive(Clone)]
pub struct LeaderStatus {
    state: Arc<watch::Sender<ElectionState>>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for LeaderStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("LeaderStatus").field(&self.state()).finish()
    }
}

impl Default for LeaderStatus {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaderStatus {
    /// A status in [`ElectionState::Starting`].
    pub fn new() -> Self {
        LeaderStatus {
            state: Arc::new(watch::Sender::new(ElectionState::Starting)),
            metrics: None,
        }
    }

    /// Also mirror the state into the `leader` gauge of `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        metrics.set_leader(self.is_leading());
        self.metrics = Some(metrics);
        self
    }

    /// The current state.
    pub fn state(&self) -> ElectionState {
        *self.state.borrow()
    }

    /// Whether this replica leads.
    pub(crate) fn is_leading(&self) -> bool {
        self.state() == ElectionState::Leading
    }

    /// Sets the state (the elector does this; without election, set `Leading` once).
    pub fn set(&self, state: ElectionState) {
        self.state.send_replace(state);
        if let Some(metrics) = &self.metrics {
            metrics.set_leader(state == ElectionState::Leading);
        }
    }

    /// Waits until the state satisfies `predicate` and returns it.
    pub async fn wait_for(&self, predicate: impl Fn(ElectionState) -> bool) -> ElectionState {
        let mut rx = self.state.subscribe();
        *rx.wait_for(|s| predicate(*s))
            .await
            .expect("the sender lives in self")
    }
}

/// One stretch of leadership, given to the leading closure of [`LeaderElector::run`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// 1 for the first time this replica leads, then 2, 3, ...
    pub number: u64,
    /// Whether this term continues the previous one: this replica led before, and the
    /// Lease still named it when it was acquired again, so no other replica can have
    /// led in between (acquiring it would have written its own `holderIdentity`). What
    /// the previous term learnt of the world is then as good as at its end.
    pub continued: bool,
}

/// How a [`LeaderElector::run`] ended.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Shutdown was requested while this replica did not lead (never, or no more).
    ShutdownWhileStandby,
    /// This replica led; the leading future ended with this value and the Lease was released.
    Finished(T),
    /// This replica led; the leading future did not stop within the renew deadline after
    /// shutdown, was dropped, and the Lease was released.
    Abandoned,
}

/// The result of one acquire-or-renew attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This replica holds the Lease (newly acquired or renewed).
    Held,
    /// Another replica holds a valid Lease.
    HeldBy(String),
    /// Another replica wrote the Lease first (HTTP 409).
    Conflict,
}

/// One replica's elector. Build with [`LeaderElector::new`], then [`LeaderElector::run`].
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    status: LeaderStatus,
    observed: Option<(LeaseSpec, Instant)>,
    /// Whether the Lease named this replica when it last held it after an attempt.
    claimed_own: bool,
}

fn micro_now() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

fn seconds(duration: Duration) -> i32 {
    i32::try_from(duration.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl LeaderElector {
    /// An elector for `config` that reports into `status`.
    pub fn new(client: kube::Client, config: LeaseConfig, status: LeaderStatus) -> Self {
        let api = Api::namespaced(client, &config.namespace);
        LeaderElector {
            api,
            config,
            status,
            observed: None,
            claimed_own: false,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// The shared status.
    pub fn status(&self) -> LeaderStatus {
        self.status.clone()
    }

    /// Reads the Lease (`None` when it does not exist) and notes when its record last changed.
    pub async fn fetch(&mut self) -> Result<Option<Lease>, kube::Error> {
        let lease = self.api.get_opt(&self.config.name).await?;
        if let Some(lease) = &lease {
            let spec = lease.spec.clone().unwrap_or_default();
            if self.observed.as_ref().is_none_or(|(seen, _)| *seen != spec) {
                self.observed = Some((spec, Instant::now()));
            }
        }
        Ok(lease)
    }

    /// Tries to acquire or renew, given `current`, the Lease as returned by [`Self::fetch`].
    pub async fn try_claim(&mut self, current: Option<Lease>) -> Result<Attempt, kube::Error> {
        let now = micro_now();
        let Some(lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(seconds(self.config.lease_duration)),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.claimed_own = false;
                    self.observed = Some((created.spec.unwrap_or_default(), Instant::now()));
                    Ok(Attempt::Held)
                }
                Err(error) if is_conflict(&error) => Ok(Attempt::Conflict),
                Err(error) => Err(error),
            };
        };
        let old = lease.spec.clone().unwrap_or_default();
        let holder = old.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.config.identity;
        if !holder.is_empty() && !ours && self.observed_valid(&old) {
            return Ok(Attempt::HeldBy(holder));
        }
        let mut spec = old.clone();
        spec.holder_identity = Some(self.config.identity.clone());
        spec.lease_duration_seconds = Some(seconds(self.config.lease_duration));
        spec.renew_time = Some(now.clone());
        if !ours {
            spec.acquire_time = Some(now);
            spec.lease_transitions = Some(old.lease_transitions.unwrap_or(0) + 1);
        }
        let updated = Lease {
            metadata: lease.metadata,
            spec: Some(spec),
        };
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &updated)
            .await
        {
            Ok(replaced) => {
                self.claimed_own = ours;
                self.observed = Some((replaced.spec.unwrap_or_default(), Instant::now()));
                Ok(Attempt::Held)
            }
            Err(error) if is_conflict(&error) => Ok(Attempt::Conflict),
            Err(error) => Err(error),
        }
    }

    /// Whether `record` (the Lease as last fetched) is still valid by the local clock.
    fn observed_valid(&self, record: &LeaseSpec) -> bool {
        let duration = Duration::from_secs(
            u64::try_from(record.lease_duration_seconds.unwrap_or(0)).unwrap_or(0),
        );
        match &self.observed {
            Some((_, seen_at)) => seen_at.elapsed() < duration,
            None => true,
        }
    }

    /// One full attempt: [`Self::fetch`] then [`Self::try_claim`].
    pub async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        let current = self.fetch().await?;
        self.try_claim(current).await
    }

    /// Gives the Lease up if this replica holds it: empty holder, 1 s duration, so another
    /// replica can take it at its next attempt.
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = micro_now();
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.acquire_time = Some(now.clone());
        spec.renew_time = Some(now);
        let released = Lease {
            metadata: lease.metadata,
            spec: Some(spec),
        };
        self.api
            .replace(&self.config.name, &PostParams::default(), &released)
            .await?;
        Ok(())
    }

    /// A retry period with client-go's jitter (up to +120 %), for the acquire loop.
    fn jittered_retry(&self) -> Duration {
        let factor: f64 = rand::rng().random_range(0.0..1.2);
        self.config.retry_period.mul_f64(1.0 + factor)
    }

    /// Campaigns for the Lease and runs `lead(term)` while leading, as many terms as it
    /// takes, until shutdown.
    ///
    /// * `shutdown` resolving while not leading: returns [`Outcome::ShutdownWhileStandby`].
    /// * `lead(term)` finishing: releases the Lease, returns [`Outcome::Finished`].
    /// * `shutdown` resolving while leading: keeps renewing while the leading future winds
    ///   down (it must watch its own shutdown signal), up to the renew deadline, then releases.
    /// * Renewal failing past the renew deadline, or another holder: drops the leading
    ///   future at once, logs why, stands by and campaigns again; the next `lead` gets a
    ///   [`Term`] saying whether anyone else can have led in between.
    pub async fn run<F, Fut, T>(
        mut self,
        mut lead: F,
        shutdown: impl Future<Output = ()>,
    ) -> Outcome<T>
    where
        F: FnMut(Term) -> Fut,
        Fut: Future<Output = T>,
    {
        let mut shutdown = std::pin::pin!(shutdown);
        let identity = self.config.identity.clone();
        let mut terms = 0;
        loop {
            tracing::info!(lease = %self.lease_name(), %identity, "waiting to acquire the leader lease");
            if !self.campaign(shutdown.as_mut()).await {
                self.status.set(ElectionState::Stopped);
                return Outcome::ShutdownWhileStandby;
            }
            terms += 1;
            let term = Term {
                number: terms,
                continued: terms > 1 && self.claimed_own,
            };
            tracing::info!(lease = %self.lease_name(), %identity, term = term.number, continued = term.continued, "acquired the leader lease");
            self.status.set(ElectionState::Leading);
            match self.lead(lead(term), shutdown.as_mut()).await {
                Ok(outcome) => {
                    self.status.set(ElectionState::Stopped);
                    match self.release().await {
                        Ok(()) => {
                            tracing::info!(lease = %self.lease_name(), "released the leader lease")
                        }
                        Err(error) => {
                            tracing::warn!(lease = %self.lease_name(), %error, "cannot release the leader lease")
                        }
                    }
                    return outcome;
                }
                Err(reason) => {
                    self.status.set(ElectionState::Standby);
                    tracing::error!(lease = %self.lease_name(), %reason, "lost the leader lease: every controller stopped; caches kept; campaigning again");
                }
            }
        }
    }

    /// Tries to acquire the Lease every (jittered) retry period until it is held (`true`)
    /// or `shutdown` resolves (`false`).
    async fn campaign(
        &mut self,
        mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> bool {
        loop {
            let attempt = tokio::select! {
                _ = &mut shutdown => return false,
                attempt = self.try_acquire_or_renew() => attempt,
            };
            match attempt {
                Ok(Attempt::Held) => return true,
                Ok(Attempt::HeldBy(holder)) => {
                    if self.status.state() != ElectionState::Standby {
                        tracing::info!(lease = %self.lease_name(), %holder, "standing by: the lease is held by another replica");
                    }
                    self.status.set(ElectionState::Standby);
                }
                Ok(Attempt::Conflict) => tracing::debug!("lost a race for the lease; retrying"),
                Err(error) => {
                    tracing::warn!(lease = %self.lease_name(), %error, "cannot read or write the leader lease")
                }
            }
            tokio::select! {
                _ = &mut shutdown => return false,
                _ = tokio::time::sleep(self.jittered_retry()) => {}
            }
        }
    }

    /// The leading phase: renews while `leading` runs. An error says why leadership was
    /// lost; `leading` is dropped by then.
    async fn lead<T>(
        &mut self,
        leading: impl Future<Output = T>,
        mut shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
    ) -> Result<Outcome<T>, String> {
        let grace_period = self.config.renew_deadline;
        let mut leading = std::pin::pin!(leading);
        let mut renewing = std::pin::pin!(self.keep_renewing());
        let mut stop_by: Option<Instant> = None;
        loop {
            let grace = async move {
                match stop_by {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                value = &mut leading => return Ok(Outcome::Finished(value)),
                lost = &mut renewing => return Err(lost),
                _ = &mut shutdown, if stop_by.is_none() => {
                    tracing::info!("shutdown requested; waiting for the controllers to stop");
                    stop_by = Some(Instant::now() + grace_period);
                }
                _ = grace => {
                    tracing::warn!("controllers did not stop within the renew deadline; abandoning them");
                    return Ok(Outcome::Abandoned);
                }
            }
        }
    }

    /// Renews every retry period; returns only when leadership is lost, with the reason.
    ///
    /// The renew deadline is a deadline, as client-go's (a context timeout): leadership
    /// ends the instant it passes, not at the next attempt after it.
    async fn keep_renewing(&mut self) -> String {
        let mut last_renewal = Instant::now();
        loop {
            let deadline = last_renewal + self.config.renew_deadline;
            match tokio::time::timeout_at(deadline, self.renew_once()).await {
                Ok(None) => last_renewal = Instant::now(),
                Ok(Some(holder)) => return format!("the lease is now held by {holder}"),
                Err(_) => {
                    let deadline = self.config.renew_deadline;
                    return format!("renewal failed for {deadline:?} (the renew deadline)");
                }
            }
        }
    }

    /// Waits a retry period and tries to renew, again until it is renewed (`None`) or
    /// another replica holds the Lease (`Some(holder)`).
    async fn renew_once(&mut self) -> Option<String> {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            match self.try_acquire_or_renew().await {
                Ok(Attempt::Held) => return None,
                Ok(Attempt::HeldBy(holder)) => return Some(holder),
                Ok(Attempt::Conflict) => {
                    tracing::warn!("conflict renewing the leader lease; retrying")
                }
                Err(error) => tracing::warn!(%error, "cannot renew the leader lease"),
            }
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }
}

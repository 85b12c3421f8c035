//! The knobs of the service controller: from the [`Context`] in production, shorter in
//! tests.

use std::time::Duration;

use crate::cloud::loadbalancer::capabilities::ServerFeatures;
use crate::cloud::loadbalancer::ensure::EngineSettings;
use crate::cloud::loadbalancer::spec::SpecOptions;
use crate::controllers::Context;

/// Per-rule members and policies are read again after this many resync periods, which
/// bounds how long a membership change made by hand in CloudStack goes unnoticed.
const DETAILS_MAX_AGE_IN_RESYNCS: u32 = 10;

/// How the service controller runs.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Every Service is re-synced this often; the shared view of CloudStack is renewed
    /// at the same pace (`--service-resync-period`, 100 s).
    pub resync_period: Duration,
    /// Services reconciled at the same time (`--concurrent-service-syncs`).
    pub concurrency: u16,
    /// First retry delay after a failure (5 s).
    pub backoff_base: Duration,
    /// Longest retry delay (5 min).
    pub backoff_max: Duration,
    /// How long Node changes are collected before one re-sync of every Service.
    pub node_debounce: Duration,
    /// How long a rule's cached members and policies are used.
    pub details_max_age: Duration,
    /// How long endpoint changes of one `externalTrafficPolicy: Local` Service are
    /// collected before one reconcile (the latest endpoints win).
    pub endpoint_coalesce: Duration,
}

impl Settings {
    /// The production settings from the shared context.
    pub(crate) fn from_context(ctx: &Context) -> Settings {
        let resync_period = ctx.service_resync_period;
        Settings {
            resync_period,
            concurrency: u16::try_from(ctx.concurrent_service_syncs.max(1)).unwrap_or(u16::MAX),
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(300),
            node_debounce: Duration::from_millis(500),
            details_max_age: resync_period.saturating_mul(DETAILS_MAX_AGE_IN_RESYNCS),
            endpoint_coalesce: Duration::from_secs(2),
        }
    }

    /// The engine settings for this context.
    pub fn engine(&self, ctx: &Context) -> EngineSettings {
        let version = &ctx.server_version;
        EngineSettings {
            cluster_name: ctx.cluster_name.clone(),
            server: ServerFeatures::for_version(version.major(), version.minor(), version.patch()),
            view_max_age: self.resync_period,
            details_max_age: self.details_max_age,
        }
    }
}

/// What `LbSpec::from_service` needs from the context.
pub fn spec_options(ctx: &Context) -> SpecOptions {
    SpecOptions {
        cluster_name: ctx.cluster_name.clone(),
        load_balancer_class: ctx.load_balancer_class.clone(),
    }
}

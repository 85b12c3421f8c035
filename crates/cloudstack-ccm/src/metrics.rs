//! Prometheus metrics of the controller manager, served on `/metrics`.
//!
//! Every metric is prefixed `cloudstack_ccm_`:
//!
//! | metric | labels | what |
//! |---|---|---|
//! | `cloudstack_api_calls_total` | `command`, `result` | CloudStack HTTP calls (every retry and job poll); `result` is `ok`, an error code, `transport` or `decode` |
//! | `cloudstack_api_call_duration_seconds` | `command` | latency of those calls |
//! | `cloudstack_async_job_duration_seconds` | `command`, `result` | async jobs from start to end; `result` is `succeeded` or `failed` |
//! | `inventory_refreshes_total` | `result` | VM inventory refreshes (`ok` / `error`) |
//! | `inventory_lookups_total` | `result` | node lookups answered from the cache (`hit`) or needing a refresh (`miss`) |
//! | `reconciles_total` | `controller`, `result` | reconciliations per controller: `ok` (`RESULT_OK`), `error` (`RESULT_ERROR`), or a controller's own outcome |
//! | `reconcile_duration_seconds` | `controller` | time of one reconciliation |
//! | `leader` | | 1 while this replica holds the lease, else 0 |
//! | `cloudstack_credentials_refused` | | 1 while CloudStack refuses the keys in use (calls held, one probe every few seconds), else 0 |
//! | `cloudstack_command_refusals_total` | `command` | commands CloudStack refused to the keys' role (432), counted once per refusal learnt (a refused command is not asked again for 30 min, or until the keys change) |
//! | `cloud_config_reloads_total` | `result` | cloud-config changes and `SIGHUP`s: `applied`, `unchanged`, `restart_required`, `invalid` (does not parse, bad `ca-file`), `rejected` (CloudStack refused the new keys or did not answer) |

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// The `result` of a reconciliation (`reconciles_total`) or an inventory refresh that
/// succeeded. Every controller counts success under this one label.
pub(crate) const RESULT_OK: &str = "ok";

/// The `result` of a reconciliation or an inventory refresh that failed.
pub(crate) const RESULT_ERROR: &str = "error";

/// The content type of [`Metrics::encode`]'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Labels `command` and `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandResult {
    command: String,
    result: String,
}

/// Label `command`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CommandLabel {
    command: String,
}

/// Label `result`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// Labels `controller` and `result` (static names: counting allocates nothing, which
/// matters for the node monitor's per-Node count every few seconds).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerResult {
    controller: &'static str,
    result: &'static str,
}

/// Label `controller`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: &'static str,
}

/// Label `kind`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Buckets from 5 ms to about 20 s, for API calls and reconciliations.
fn call_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 13))
}

/// Buckets from 100 ms to about 14 min, for async jobs.
fn job_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.1, 2.0, 14))
}

/// The metrics registry and every metric. Share it as `Arc<Metrics>`; all methods take `&self`.
pub struct Metrics {
    registry: Registry,
    calls: Family<CommandResult, Counter>,
    call_duration: HistogramFamily<CommandLabel>,
    job_duration: HistogramFamily<CommandResult>,
    inventory_refreshes: Family<ResultLabel, Counter>,
    inventory_lookups: Family<ResultLabel, Counter>,
    reconciles: Family<ControllerResult, Counter>,
    reconcile_duration: HistogramFamily<ControllerLabel>,
    leader: Gauge,
    orphans: Family<KindLabel, Gauge>,
    credentials_refused: Gauge,
    command_refusals: Family<CommandLabel, Counter>,
    reloads: Family<ResultLabel, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// A registry with every metric registered at zero.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("cloudstack_ccm");
        let metrics = Metrics {
            calls: Family::default(),
            call_duration: Family::new_with_constructor(call_histogram),
            job_duration: Family::new_with_constructor(job_histogram),
            inventory_refreshes: Family::default(),
            inventory_lookups: Family::default(),
            reconciles: Family::default(),
            reconcile_duration: Family::new_with_constructor(call_histogram),
            leader: Gauge::default(),
            orphans: Family::default(),
            credentials_refused: Gauge::default(),
            command_refusals: Family::default(),
            reloads: Family::default(),
            registry: Registry::default(),
        };
        registry.register(
            "cloudstack_api_calls",
            "CloudStack API calls by command and result",
            metrics.calls.clone(),
        );
        registry.register(
            "cloudstack_api_call_duration_seconds",
            "Latency of CloudStack API calls by command",
            metrics.call_duration.clone(),
        );
        registry.register(
            "cloudstack_async_job_duration_seconds",
            "Duration of CloudStack async jobs by command and result",
            metrics.job_duration.clone(),
        );
        registry.register(
            "inventory_refreshes",
            "Refreshes of the VM inventory by result",
            metrics.inventory_refreshes.clone(),
        );
        registry.register(
            "inventory_lookups",
            "Inventory lookups answered from the cache (hit) or not (miss)",
            metrics.inventory_lookups.clone(),
        );
        registry.register(
            "reconciles",
            "Reconciliations by controller and result",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciliations by controller",
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "leader",
            "Whether this replica holds the leader lease (1) or not (0)",
            metrics.leader.clone(),
        );
        registry.register(
            "orphaned_resources",
            "CloudStack objects tagged for this cluster whose Service or Node is gone, by kind",
            metrics.orphans.clone(),
        );
        registry.register(
            "cloudstack_credentials_refused",
            "Whether CloudStack refuses the keys in use (1) or not (0)",
            metrics.credentials_refused.clone(),
        );
        registry.register(
            "cloudstack_command_refusals",
            "Commands CloudStack refused to the role of the keys in use (432), once per refusal learnt",
            metrics.command_refusals.clone(),
        );
        registry.register(
            "cloud_config_reloads",
            "cloud-config reloads by result",
            metrics.reloads.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// Sets the refused-credentials gauge.
    pub(crate) fn set_credentials_refused(&self, refused: bool) {
        self.credentials_refused.set(i64::from(refused));
    }

    /// Counts one refusal of `command` to the keys' role.
    pub(crate) fn command_refused(&self, command: &str) {
        self.command_refusals
            .get_or_create(&CommandLabel {
                command: command.to_owned(),
            })
            .inc();
    }

    /// Counts one cloud-config reload with `result` (`applied`, `unchanged`,
    /// `restart_required`, `invalid`, `rejected`).
    pub(crate) fn cloud_config_reload(&self, result: &'static str) {
        self.reloads.get_or_create(&ResultLabel { result }).inc();
    }

    /// Sets the number of orphaned objects of `kind` (`public_ip`, `static_route`, …).
    pub(crate) fn set_orphans(&self, kind: &'static str, count: usize) {
        self.orphans
            .get_or_create(&KindLabel { kind })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Counts one reconciliation of `controller` (`"node"`, `"node-lifecycle"`, `"service"`,
    /// `"route"`) with `result` (`RESULT_OK`, `RESULT_ERROR`, or a short reason).
    pub fn reconcile(&self, controller: &'static str, result: &'static str) {
        let labels = ControllerResult { controller, result };
        self.reconciles.get_or_create(&labels).inc();
    }

    /// Records how long one reconciliation of `controller` took.
    pub(crate) fn reconcile_duration(&self, controller: &'static str, duration: Duration) {
        let labels = ControllerLabel { controller };
        self.reconcile_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// Counts one inventory refresh, successful or not.
    pub(crate) fn inventory_refresh(&self, succeeded: bool) {
        let result = if succeeded { RESULT_OK } else { RESULT_ERROR };
        self.inventory_refreshes
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Counts one lookup answered from the inventory cache.
    pub(crate) fn inventory_hit(&self) {
        self.inventory_lookups
            .get_or_create(&ResultLabel { result: "hit" })
            .inc();
    }

    /// Counts one lookup the inventory cache could not answer.
    pub(crate) fn inventory_miss(&self) {
        self.inventory_lookups
            .get_or_create(&ResultLabel { result: "miss" })
            .inc();
    }

    /// Sets the leader gauge.
    pub(crate) fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Counts one CloudStack HTTP call and records its latency.
    pub(crate) fn cloudstack_call(&self, command: &str, result: &str, latency: Duration) {
        let labels = CommandResult {
            command: command.to_owned(),
            result: result.to_owned(),
        };
        self.calls.get_or_create(&labels).inc();
        let command = CommandLabel {
            command: labels.command,
        };
        self.call_duration
            .get_or_create(&command)
            .observe(latency.as_secs_f64());
    }

    /// Records one finished CloudStack async job.
    pub(crate) fn cloudstack_job(&self, command: &str, succeeded: bool, duration: Duration) {
        let result = if succeeded { "succeeded" } else { "failed" };
        let labels = CommandResult {
            command: command.to_owned(),
            result: result.to_owned(),
        };
        self.job_duration
            .get_or_create(&labels)
            .observe(duration.as_secs_f64());
    }

    /// The metrics in the OpenMetrics text format (`CONTENT_TYPE`).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("writing to a String cannot fail");
        text
    }
}

impl cloudstack::CallObserver for Metrics {
    fn on_call(&self, command: &str, outcome: &cloudstack::CallOutcome, latency: Duration) {
        self.cloudstack_call(command, &outcome.label(), latency);
    }

    fn on_job(&self, command: &str, succeeded: bool, duration: Duration) {
        self.cloudstack_job(command, succeeded, duration);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use cloudstack::{CallObserver, CallOutcome};

    use super::Metrics;

    #[test]
    fn every_metric_is_encoded_with_labels() {
        let metrics = Metrics::new();
        metrics.reconcile("node", "ok");
        metrics.reconcile("node", "ok");
        metrics.reconcile_duration("node", Duration::from_millis(20));
        metrics.inventory_refresh(true);
        metrics.inventory_hit();
        metrics.inventory_miss();
        metrics.set_leader(true);
        metrics.on_call(
            "listVirtualMachines",
            &CallOutcome::Ok,
            Duration::from_millis(12),
        );
        metrics.on_call(
            "listVirtualMachines",
            &CallOutcome::ApiError(431),
            Duration::from_millis(3),
        );
        metrics.on_job("createLoadBalancerRule", true, Duration::from_secs(2));
        metrics.set_credentials_refused(true);
        metrics.cloud_config_reload("applied");
        let text = metrics.encode();
        for line in [
            "cloudstack_ccm_reconciles_total{controller=\"node\",result=\"ok\"} 2",
            "cloudstack_ccm_inventory_refreshes_total{result=\"ok\"} 1",
            "cloudstack_ccm_inventory_lookups_total{result=\"hit\"} 1",
            "cloudstack_ccm_inventory_lookups_total{result=\"miss\"} 1",
            "cloudstack_ccm_leader 1",
            "cloudstack_ccm_cloudstack_api_calls_total{command=\"listVirtualMachines\",result=\"ok\"} 1",
            "cloudstack_ccm_cloudstack_api_calls_total{command=\"listVirtualMachines\",result=\"431\"} 1",
            "cloudstack_ccm_cloudstack_api_call_duration_seconds_count{command=\"listVirtualMachines\"} 2",
            "cloudstack_ccm_cloudstack_async_job_duration_seconds_count{command=\"createLoadBalancerRule\",result=\"succeeded\"} 1",
            "cloudstack_ccm_reconcile_duration_seconds_count{controller=\"node\"} 1",
            "cloudstack_ccm_cloudstack_credentials_refused 1",
            "cloudstack_ccm_cloud_config_reloads_total{result=\"applied\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn leader_gauge_follows_state() {
        let metrics = Metrics::new();
        assert!(metrics.encode().contains("cloudstack_ccm_leader 0"));
        metrics.set_leader(true);
        metrics.set_leader(false);
        assert!(metrics.encode().contains("cloudstack_ccm_leader 0"));
    }
}

//! Where the end-to-end tests run: the in-process doubles (the default: a simulator and a
//! fake API server started by each test) or remote endpoints (a real Kubernetes cluster and
//! a real CloudStack, or the doubles started as separate processes).
//!
//! Remote mode is chosen by the environment:
//!
//! | variable | meaning |
//! |---|---|
//! | `CCM_E2E_KUBECONFIG` | kubeconfig of the cluster (required) |
//! | `CCM_E2E_CLOUD_CONFIG` | gcfg cloud-config of the CloudStack account (required) |
//! | `CCM_E2E_VMS` | comma-separated names of existing Running VMs on one network (default: the account's Running VMs on the network of the first one, by name) |
//! | `CCM_E2E_NETWORK` | network (id or name) whose VMs to use when `CCM_E2E_VMS` is unset |
//! | `CCM_E2E_WAIT_SECONDS` | timeout of every wait (default 120) |
//!
//! In remote mode the tests use only what a real server offers: the CloudStack API with the
//! account's keys, the Kubernetes API, and counters kept in this process (the CloudStack
//! client's call observer, a layer on the `kube::Client`). Tests that need a facility only a
//! double has (simulator state, `/sim` admin calls, fault injection, the fake API server's
//! store or counters) call [`skip_in_remote_mode`] first.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cloudstack::{CallObserver, CallOutcome, ListVirtualMachines};
use fake_apiserver::Verb;

/// Kubeconfig of the cluster to test against.
pub const ENV_KUBECONFIG: &str = "CCM_E2E_KUBECONFIG";
/// cloud-config (gcfg) of the CloudStack account to test with.
pub const ENV_CLOUD_CONFIG: &str = "CCM_E2E_CLOUD_CONFIG";
/// Names of existing VMs the tests use as nodes.
pub const ENV_VMS: &str = "CCM_E2E_VMS";
/// Network whose VMs the tests use when [`ENV_VMS`] is unset.
pub const ENV_NETWORK: &str = "CCM_E2E_NETWORK";
/// Timeout of every wait in remote mode, in seconds.
pub const ENV_WAIT_SECONDS: &str = "CCM_E2E_WAIT_SECONDS";
/// The line a test prints when it skips itself in remote mode.
pub const SKIP_LINE: &str = "skipped in real-endpoint mode";
/// The line a test prints when it has passed in remote mode (counted by `.ci/e2e-remote`).
pub const PASS_LINE: &str = "passed in real-endpoint mode";

/// The remote endpoints named by the environment.
#[derive(Debug, Clone)]
pub struct RemoteSettings {
    /// [`ENV_KUBECONFIG`].
    pub kubeconfig: PathBuf,
    /// [`ENV_CLOUD_CONFIG`].
    pub cloud_config: PathBuf,
    /// [`ENV_VMS`], empty when unset.
    pub vms: Vec<String>,
    /// [`ENV_NETWORK`].
    pub network: Option<String>,
    /// Timeout of every wait.
    pub wait: Duration,
}

impl RemoteSettings {
    /// The settings when both [`ENV_KUBECONFIG`] and [`ENV_CLOUD_CONFIG`] are set; `None`
    /// when neither is; a panic naming the missing one when only one is.
    pub fn from_env() -> Option<Self> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        match (var(ENV_KUBECONFIG), var(ENV_CLOUD_CONFIG)) {
            (None, None) => None,
            (Some(kubeconfig), Some(cloud_config)) => Some(Self {
                kubeconfig: kubeconfig.into(),
                cloud_config: cloud_config.into(),
                vms: var(ENV_VMS)
                    .map(|list| {
                        list.split(',')
                            .map(str::trim)
                            .filter(|name| !name.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                network: var(ENV_NETWORK),
                wait: Duration::from_secs(
                    var(ENV_WAIT_SECONDS)
                        .map(|s| {
                            s.parse()
                                .unwrap_or_else(|_| panic!("{ENV_WAIT_SECONDS}={s:?} is no number"))
                        })
                        .unwrap_or(120),
                ),
            }),
            (Some(_), None) => panic!("{ENV_KUBECONFIG} is set but {ENV_CLOUD_CONFIG} is not"),
            (None, Some(_)) => panic!("{ENV_CLOUD_CONFIG} is set but {ENV_KUBECONFIG} is not"),
        }
    }
}

/// True (after printing `skipped in real-endpoint mode: <why>`) when the tests run against
/// remote endpoints; the caller then returns. `why` names the double-only facility needed.
pub fn skip_in_remote_mode(why: &str) -> bool {
    if RemoteSettings::from_env().is_none() {
        return false;
    }
    println!("{SKIP_LINE}: {}: {why}", current_test());
    true
}

/// Prints that one check of a test running in remote mode is left out, and why.
pub fn skip_check_in_remote_mode(check: &str, why: &str) {
    println!("{SKIP_LINE}: {}: check {check:?}: {why}", current_test());
}

/// The running test's name (libtest names the thread after it).
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed test")
        .to_string()
}

/// A double started in this process, absent in remote mode. Dereferencing an absent one
/// panics: a test reaching it in remote mode forgot to call [`skip_in_remote_mode`].
pub struct Double<T> {
    inner: Option<T>,
    what: &'static str,
}

impl<T> Double<T> {
    /// A double started in this process.
    pub fn local(inner: T, what: &'static str) -> Self {
        Self {
            inner: Some(inner),
            what,
        }
    }

    /// No double: the endpoint is remote.
    pub fn remote(what: &'static str) -> Self {
        Self { inner: None, what }
    }
}

impl<T> Deref for Double<T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.inner.as_ref().unwrap_or_else(|| {
            panic!(
                "{}: the {} is a double-only facility, absent in real-endpoint mode; \
                 the test must call skip_in_remote_mode first",
                current_test(),
                self.what
            )
        })
    }
}

/// Counts CloudStack calls per command as the client reports them (every HTTP call,
/// retries and job polls included) and passes each report on to `next` (the metrics).
pub struct CallCounter {
    counts: Mutex<BTreeMap<String, u64>>,
    next: Arc<dyn CallObserver>,
}

impl CallCounter {
    /// A counter forwarding to `next`.
    pub fn new(next: Arc<dyn CallObserver>) -> Self {
        Self {
            counts: Mutex::new(BTreeMap::new()),
            next,
        }
    }

    /// Calls per command since creation or the last [`CallCounter::reset`].
    pub fn counts(&self) -> BTreeMap<String, u64> {
        self.counts.lock().expect("call counter lock").clone()
    }

    /// Forgets the counts.
    pub fn reset(&self) {
        self.counts.lock().expect("call counter lock").clear();
    }
}

impl CallObserver for CallCounter {
    fn on_call(&self, command: &str, outcome: &CallOutcome, latency: Duration) {
        *self
            .counts
            .lock()
            .expect("call counter lock")
            .entry(command.to_string())
            .or_default() += 1;
        self.next.on_call(command, outcome, latency);
    }

    fn on_job(&self, command: &str, succeeded: bool, duration: Duration) {
        self.next.on_job(command, succeeded, duration);
    }
}

/// One Kubernetes API request as this process sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeRequest {
    /// What the request does.
    pub verb: Verb,
    /// The resource, with a subresource after a slash (`nodes/status`).
    pub resource: String,
    /// The object's name, for requests about one object.
    pub name: Option<String>,
}

/// The Kubernetes API requests a `kube::Client` sent (see [`KubeRequestLog::client`]).
#[derive(Debug, Clone, Default)]
pub struct KubeRequestLog {
    requests: Arc<Mutex<Vec<KubeRequest>>>,
}

impl KubeRequestLog {
    /// A client of the cluster in `kubeconfig` whose every request is logged here.
    pub async fn client(&self, kubeconfig: &std::path::Path) -> kube::Client {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig)
            .unwrap_or_else(|e| panic!("reading kubeconfig {}: {e}", kubeconfig.display()));
        let config = kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .expect("a usable kubeconfig");
        let log = self.clone();
        let layer =
            tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
                log.record(request.method(), request.uri());
                request
            });
        kube::client::ClientBuilder::try_from(config)
            .expect("a Kubernetes client from the kubeconfig")
            .with_layer(&layer)
            .build()
    }

    fn record(&self, method: &http::Method, uri: &http::Uri) {
        if let Some(request) = classify(method, uri) {
            self.requests
                .lock()
                .expect("request log lock")
                .push(request);
        }
    }

    /// Requests with `verb` on `resource` about an object whose name contains `marker`.
    pub fn count(&self, verb: Verb, resource: &str, marker: &str) -> usize {
        self.requests
            .lock()
            .expect("request log lock")
            .iter()
            .filter(|r| {
                r.verb == verb
                    && r.resource == resource
                    && r.name.as_deref().is_some_and(|name| name.contains(marker))
            })
            .count()
    }
}

/// What a request to the Kubernetes API does: `/api/v1/...` or `/apis/<g>/<v>/...`,
/// optionally under `namespaces/<ns>/`.
fn classify(method: &http::Method, uri: &http::Uri) -> Option<KubeRequest> {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let mut rest = match segments.first() {
        Some(&"api") => segments.get(2..)?,
        Some(&"apis") => segments.get(3..)?,
        _ => return None,
    };
    if rest.first() == Some(&"namespaces") && rest.len() >= 3 {
        rest = &rest[2..];
    }
    let resource = match rest.get(2) {
        Some(sub) => format!("{}/{sub}", rest.first()?),
        None => (*rest.first()?).to_string(),
    };
    let name = rest.get(1).map(|s| (*s).to_string());
    let watch = uri.query().is_some_and(|q| q.contains("watch=true"));
    let verb = match *method {
        http::Method::GET if watch => Verb::Watch,
        http::Method::GET if name.is_some() => Verb::Get,
        http::Method::GET => Verb::List,
        http::Method::POST => Verb::Create,
        http::Method::PUT => Verb::Update,
        http::Method::PATCH => Verb::Patch,
        http::Method::DELETE => Verb::Delete,
        _ => return None,
    };
    Some(KubeRequest {
        verb,
        resource,
        name,
    })
}

/// An existing VM of the environment, as the CloudStack API describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmFacts {
    /// VM id.
    pub id: String,
    /// VM name.
    pub name: String,
    /// Zone name.
    pub zone: String,
    /// Service offering name (the instance type).
    pub offering: String,
    /// IPv4 address of the default NIC.
    pub ipv4: String,
    /// Network of the default NIC.
    pub network_id: String,
    /// Name of that network.
    pub network_name: String,
}

impl VmFacts {
    /// Facts of a VM from a `listVirtualMachines` answer.
    pub fn from_api(vm: &cloudstack::VirtualMachine) -> Option<Self> {
        let nic = vm
            .nic
            .iter()
            .find(|nic| nic.isdefault == Some(true))
            .or_else(|| vm.nic.first())?;
        Some(Self {
            id: vm.id.clone()?,
            name: vm.name.clone()?,
            zone: vm.zonename.clone().unwrap_or_default(),
            offering: vm.serviceofferingname.clone().unwrap_or_default(),
            ipv4: nic.ipaddress.clone().unwrap_or_default(),
            network_id: nic.networkid.clone().unwrap_or_default(),
            network_name: nic.networkname.clone().unwrap_or_default(),
        })
    }
}

/// The VMs the tests use as nodes: those named in `settings.vms`, else the account's
/// Running VMs on `settings.network` (or on the network of the first one by name).
pub async fn environment_vms(
    client: &cloudstack::Client,
    settings: &RemoteSettings,
) -> Vec<VmFacts> {
    let request = ListVirtualMachines {
        details: vec!["min".into(), "nics".into(), "servoff".into()],
        ..ListVirtualMachines::default()
    };
    let list = |request: ListVirtualMachines| async move {
        client
            .list_virtual_machines(&request)
            .await
            .expect("listing the account's VMs")
            .iter()
            .filter_map(VmFacts::from_api)
            .collect::<Vec<_>>()
    };
    let mut chosen: Vec<VmFacts> = if settings.vms.is_empty() {
        let mut running = list(ListVirtualMachines {
            state: Some("Running".into()),
            ..request
        })
        .await;
        running.sort_by(|a, b| a.name.cmp(&b.name));
        let network = settings
            .network
            .clone()
            .or_else(|| running.first().map(|vm| vm.network_id.clone()));
        running
            .into_iter()
            .filter(|vm| {
                network
                    .as_deref()
                    .is_none_or(|n| vm.network_id == n || vm.network_name == n)
            })
            .collect()
    } else {
        let listed = list(request).await;
        settings
            .vms
            .iter()
            .map(|name| {
                listed
                    .iter()
                    .find(|vm| vm.name.eq_ignore_ascii_case(name))
                    .cloned()
                    .unwrap_or_else(|| panic!("{ENV_VMS} names {name:?}: no such VM"))
            })
            .collect()
    };
    chosen.dedup_by(|a, b| a.id == b.id);
    chosen
}

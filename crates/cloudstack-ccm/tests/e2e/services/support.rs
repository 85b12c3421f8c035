//! Helpers of the LoadBalancer Service end-to-end tests, on top of the shared harness:
//! start the service controller with short periods, create nodes for simulator VMs and
//! LoadBalancer Services, wait (always with a timeout) for status and Events, and read
//! what the simulator holds for a Service.
//!
//! In remote mode (see `common::target`) Service names get the test's unique prefix, what
//! CloudStack holds is read through its API with the account's keys, and every Service a
//! test created is deleted (its finalizer awaited) at [`LbTest::stop`].

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name;
use cloudstack_ccm::controllers::service::{self, Settings};
use cloudstack_sim::Scenario;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use kube::Api;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::common::{Harness, HarnessOptions, Target, TestNode, eventually};

/// The namespace of every test Service.
pub const NAMESPACE: &str = "default";

/// Fast settings: a long resync unless a test asks for a short one.
pub fn fast_settings(resync: Duration) -> Settings {
    Settings {
        resync_period: resync,
        concurrency: 8,
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        node_debounce: Duration::from_millis(50),
        details_max_age: Duration::from_secs(600),
        endpoint_coalesce: Duration::from_millis(100),
    }
}

/// A harness with the service controller running (`resync` between full resyncs).
pub struct LbTest {
    /// The shared harness.
    pub h: Harness,
    /// Services created through [`LbTest::create`] (by real name), deleted at stop in
    /// remote mode.
    created: Mutex<Vec<String>>,
}

/// A service controller on a shutdown of its own (a process of its own, as far as the
/// test is concerned): it can be stopped, or killed, and another started on fresh caches.
pub struct OwnController {
    trigger: cloudstack_ccm::controllers::ShutdownTrigger,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl OwnController {
    /// Starts a service controller for `t` with `resync` and caches of its own.
    pub fn start(t: &LbTest, resync: Duration) -> Self {
        let (trigger, shutdown) = cloudstack_ccm::controllers::shutdown_channel();
        let task = tokio::spawn(service::run_with(
            t.h.ctx.clone(),
            fast_settings(resync),
            t.h.new_caches(),
            shutdown,
        ));
        Self { trigger, task }
    }

    /// Stops it and waits until it has stopped cleanly.
    pub async fn stop(self) {
        self.trigger.trigger();
        self.task
            .await
            .expect("the service controller does not panic")
            .expect("the service controller stops cleanly");
    }

    /// Kills it where it stands (a crash: no shutdown runs).
    pub fn kill(self) {
        self.task.abort();
    }
}

impl LbTest {
    /// Starts `scenario` (jobs of a few milliseconds) and the service controller, with a
    /// Node for each VM named in `nodes`.
    pub async fn start(scenario: Scenario, nodes: &[&str], resync: Duration) -> LbTest {
        let mut t = LbTest::prepare(scenario, nodes, resync).await;
        t.start_controller(resync);
        t
    }

    /// Like [`LbTest::start`] without starting the controller (to prepare a cloud first).
    pub async fn prepare(mut scenario: Scenario, nodes: &[&str], resync: Duration) -> LbTest {
        scenario.settings.job_duration_ms = 2;
        let h = Harness::start_with(HarnessOptions {
            scenario,
            service_resync_period: resync,
            ..HarnessOptions::default()
        })
        .await;
        for name in nodes {
            add_node(&h, name).await;
        }
        LbTest::from_harness(h)
    }

    /// Wraps a harness the caller prepared (its own options, Nodes already added).
    pub fn from_harness(h: Harness) -> LbTest {
        LbTest {
            h,
            created: Mutex::new(Vec::new()),
        }
    }

    /// Starts the service controller.
    pub fn start_controller(&mut self, resync: Duration) {
        let settings = fast_settings(resync);
        self.h
            .spawn(move |ctx, caches, shutdown| service::run_with(ctx, settings, caches, shutdown));
    }

    /// A CloudStack client of `account` on the simulator (to act "by hand").
    /// In remote mode the account of the cloud-config stands for the scenario's
    /// [`crate::common::ACCOUNT`]; no other account's keys are known there.
    pub fn client_of(&self, account: &str) -> cloudstack::Client {
        if let Some(client) = probe(&self.h) {
            assert_eq!(
                account,
                crate::common::ACCOUNT,
                "only the cloud-config's account is known in real-endpoint mode"
            );
            return client.clone();
        }
        let (key, secret) = self.h.sim.credentials(account).expect("account exists");
        let config =
            cloudstack::ClientConfig::new(self.h.sim.api_url(), key.expose(), secret.expose());
        cloudstack::Client::new(config).expect("client")
    }

    /// The id of simulator network `name`.
    pub fn network_id(&self, name: &str) -> String {
        self.h.sim.with_state(|s| {
            s.networks
                .iter()
                .find(|n| n.name == name)
                .map(|n| n.id.clone())
                .expect("network exists")
        })
    }

    /// The Service API of the test namespace.
    pub fn services(&self) -> Api<Service> {
        Api::namespaced(self.h.kube.clone(), NAMESPACE)
    }

    /// Creates `service` (named [`Harness::object_name`] of its name).
    pub async fn create(&self, service: &Service) -> Service {
        let mut service = service.clone();
        let name = self
            .h
            .object_name(service.metadata.name.as_deref().unwrap_or_default());
        service.metadata.name = Some(name.clone());
        self.created.lock().expect("created lock").push(name);
        self.services()
            .create(&PostParams::default(), &service)
            .await
            .expect("creating the Service")
    }

    /// Reads Service `name`, if it exists.
    pub async fn get(&self, name: &str) -> Option<Service> {
        self.services()
            .get_opt(&self.h.object_name(name))
            .await
            .expect("reading the Service")
    }

    /// Merge-patches Service `name`.
    pub async fn patch(&self, name: &str, patch: Value) -> Service {
        self.services()
            .patch(
                &self.h.object_name(name),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .expect("patching the Service")
    }

    /// Deletes Service `name`.
    pub async fn delete(&self, name: &str) {
        self.services()
            .delete(&self.h.object_name(name), &DeleteParams::default())
            .await
            .expect("deleting the Service");
    }

    /// Waits until Service `name` satisfies `check`.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Service) -> bool,
    ) -> Service {
        eventually(&format!("Service {name} {what}"), self.h.wait(), || async {
            self.get(name).await.filter(|s| check(s))
        })
        .await
    }

    /// Waits until Service `name` reports an ingress IP; returns it.
    pub async fn wait_for_ip(&self, name: &str) -> String {
        let service = self
            .wait_for(name, "has an ingress IP", |s| ingress_ip(s).is_some())
            .await;
        ingress_ip(&service).expect("checked above")
    }

    /// Waits until Service `name` is gone.
    pub async fn wait_gone(&self, name: &str) {
        eventually(
            &format!("Service {name} deleted"),
            self.h.wait(),
            || async { self.get(name).await.is_none().then_some(()) },
        )
        .await
    }

    /// The UID of Service `name`.
    pub async fn uid(&self, name: &str) -> String {
        self.get(name)
            .await
            .and_then(|s| s.metadata.uid)
            .expect("the Service has a UID")
    }

    /// The simulator's rules of Service `name` (by its load-balancer name prefix).
    pub async fn rules(&self, name: &str) -> Vec<RuleView> {
        let prefix = format!("{}-", default_lb_name(&self.uid(name).await));
        rules_with_prefix(&self.h, &prefix)
    }

    /// The simulator's rules of the Service with UID `uid` (also after it is gone).
    pub fn rules_of_uid(&self, uid: &str) -> Vec<RuleView> {
        rules_with_prefix(&self.h, &format!("{}-", default_lb_name(uid)))
    }

    /// Waits until the rules of Service `name` satisfy `check`.
    pub async fn wait_rules(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&[RuleView]) -> bool,
    ) -> Vec<RuleView> {
        let prefix = format!("{}-", default_lb_name(&self.uid(name).await));
        eventually(
            &format!("rules of {name} {what}"),
            self.h.wait(),
            || async {
                let rules = rules_with_prefix(&self.h, &prefix);
                check(&rules).then_some(rules)
            },
        )
        .await
    }

    /// Waits for an Event `reason` about Service `name` whose note contains `text`.
    pub async fn wait_event(&self, name: &str, reason: &str, text: &str) -> Value {
        eventually(
            &format!("Event {reason} about {name} mentioning {text:?}"),
            self.h.wait(),
            || async {
                let events = if self.h.is_remote() {
                    self.h.events_about_object(&self.h.object_name(name)).await
                } else {
                    self.h.events_about(name)
                };
                events.into_iter().find(|e| {
                    crate::common::event_reason(e) == Some(reason)
                        && crate::common::event_note(e).contains(text)
                })
            },
        )
        .await
    }

    /// Stops the controllers; in remote mode first deletes every Service the test created
    /// and waits until the controller has removed its finalizer (its cloud resources gone).
    pub async fn stop(self) {
        if self.h.is_remote() {
            let created = self.created.lock().expect("created lock").clone();
            for name in &created {
                match self.services().delete(name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(status)) if status.code == 404 => {}
                    Err(e) => panic!("deleting Service {name}: {e}"),
                }
            }
            for name in &created {
                eventually(
                    &format!("Service {name} deleted at cleanup"),
                    self.h.wait(),
                    || async {
                        self.services()
                            .get_opt(name)
                            .await
                            .expect("reading the Service")
                            .is_none()
                            .then_some(())
                    },
                )
                .await;
            }
        }
        self.h.stop().await;
    }
}

/// The reasons of the Events about Service `name`.
pub fn reasons(t: &LbTest, name: &str) -> Vec<String> {
    t.h.events_about(name)
        .iter()
        .filter_map(|e| crate::common::event_reason(e).map(str::to_string))
        .collect()
}

/// Creates an initialised Node for simulator VM `name` (providerID from the VM id; in
/// remote mode for the environment's VM standing for `name`).
pub async fn add_node(h: &Harness, name: &str) {
    let provider_id = format!("external-cloudstack://{}", h.vm_id(name));
    h.create_node(
        TestNode::new(name)
            .provider_id(&provider_id)
            .initialised()
            .ready(true),
    )
    .await;
}

/// A rule as the simulator holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleView {
    /// Rule id.
    pub id: String,
    /// Rule name.
    pub name: String,
    /// Protocol.
    pub protocol: String,
    /// Public port.
    pub public_port: u16,
    /// Private port.
    pub private_port: u16,
    /// Algorithm.
    pub algorithm: String,
    /// Public IP id.
    pub ip_id: String,
    /// Network id.
    pub network_id: String,
    /// `cidrlist` as stored.
    pub cidrs: Vec<String>,
    /// Member VM names, sorted.
    pub members: Vec<String>,
    /// Tags as `key -> value`.
    pub tags: BTreeMap<String, String>,
}

/// Runs a read of the remote CloudStack from a synchronous helper (the Service tests run
/// on a multi-threaded runtime).
fn remote_read<T>(read: impl Future<Output = T>) -> T {
    tokio::task::block_in_place(|| tokio::runtime::Handle::current().block_on(read))
}

/// The probe client of a remote harness (uncounted), `None` in process.
fn probe(h: &Harness) -> Option<&cloudstack::Client> {
    match &h.target {
        Target::InProcess => None,
        Target::Remote(remote) => Some(&remote.probe),
    }
}

/// A CloudStack `cidrlist` (space- or comma-separated) as a list.
fn split_cidrs(list: Option<&str>) -> Vec<String> {
    list.unwrap_or_default()
        .split([' ', ','])
        .filter(|c| !c.is_empty())
        .map(str::to_string)
        .collect()
}

/// The account's rules whose name starts with `prefix`, read through the API.
async fn remote_rules(client: &cloudstack::Client, prefix: &str) -> Vec<RuleView> {
    let listed = client
        .list_load_balancer_rules(&cloudstack::ListLoadBalancerRules::default())
        .await
        .expect("listing load-balancer rules");
    let mut rules = Vec::new();
    for rule in listed {
        let (Some(id), Some(name)) = (rule.id.clone(), rule.name.clone()) else {
            continue;
        };
        if !name.starts_with(prefix) {
            continue;
        }
        let request = cloudstack::ListLoadBalancerRuleInstances {
            id: id.clone(),
            ..Default::default()
        };
        let instances = match client.list_load_balancer_rule_instances(&request).await {
            Ok(instances) => instances,
            // The rule went between the two reads (the API gives no snapshot): not listed.
            Err(error) if error.code() == Some(431) => continue,
            Err(error) => panic!("listing the members of rule {name}: {error}"),
        };
        let mut members: Vec<String> = instances.iter().filter_map(|vm| vm.name.clone()).collect();
        members.sort();
        rules.push(RuleView {
            id,
            name,
            protocol: rule.protocol.clone().unwrap_or_default(),
            public_port: rule.publicport.unwrap_or_default() as u16,
            private_port: rule.privateport.unwrap_or_default() as u16,
            algorithm: rule.algorithm.clone().unwrap_or_default(),
            ip_id: rule.publicipid.clone().unwrap_or_default(),
            network_id: rule.networkid.clone().unwrap_or_default(),
            cidrs: split_cidrs(rule.cidrlist.as_deref()),
            members,
            tags: rule
                .tags
                .iter()
                .filter_map(|t| Some((t.key.clone()?, t.value.clone()?)))
                .collect(),
        });
    }
    rules
}

/// The rules whose name starts with `prefix`, sorted by public port: the simulator's
/// state in process, the CloudStack API in remote mode.
pub fn rules_with_prefix(h: &Harness, prefix: &str) -> Vec<RuleView> {
    if let Some(client) = probe(h) {
        let mut rules = remote_read(remote_rules(client, prefix));
        rules.sort_by_key(|r| r.public_port);
        return rules;
    }
    let mut rules = h.sim.with_state(|state| {
        state
            .lb_rules
            .iter()
            .filter(|r| r.name.starts_with(prefix))
            .map(|r| {
                let mut members: Vec<String> = r
                    .members
                    .iter()
                    .filter_map(|m| {
                        state
                            .vms
                            .iter()
                            .find(|vm| vm.id == m.vm_id)
                            .map(|vm| vm.name.clone())
                    })
                    .collect();
                members.sort();
                RuleView {
                    id: r.id.clone(),
                    name: r.name.clone(),
                    protocol: r.protocol.clone(),
                    public_port: r.public_port,
                    private_port: r.private_port,
                    algorithm: r.algorithm.clone(),
                    ip_id: r.ip_id.clone(),
                    network_id: r.network_id.clone(),
                    cidrs: r.cidrs.clone().unwrap_or_default(),
                    members,
                    tags: state
                        .tags
                        .iter()
                        .filter(|t| t.resource_id == r.id)
                        .map(|t| (t.key.clone(), t.value.clone()))
                        .collect(),
                }
            })
            .collect::<Vec<_>>()
    });
    rules.sort_by_key(|r| r.public_port);
    rules
}

/// The state of public IP `id` (`Allocated`, `Free`, …), if it exists: in remote mode as
/// `listPublicIpAddresses id=… allocatedonly=false` shows it (`None` when it is not listed).
pub fn ip_state(h: &Harness, id: &str) -> Option<String> {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListPublicIpAddresses {
            id: Some(id.to_string()),
            allocatedonly: Some(false),
            ..Default::default()
        };
        return match remote_read(client.list_public_ip_addresses(&request)) {
            Ok(list) => list.first().and_then(|ip| ip.state.clone()),
            Err(error) if error.code() == Some(431) => None,
            Err(error) => panic!("listing public IP {id}: {error}"),
        };
    }
    h.sim.with_state(|state| {
        state
            .ips
            .iter()
            .find(|ip| ip.id == id)
            .map(|ip| ip.state.clone())
    })
}

/// The id of public address `address` (the account's, in remote mode).
pub fn ip_id_of(h: &Harness, address: &str) -> String {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListPublicIpAddresses {
            ipaddress: Some(address.to_string()),
            ..Default::default()
        };
        return remote_read(client.list_public_ip_addresses(&request))
            .unwrap_or_else(|e| panic!("listing public IP {address}: {e}"))
            .first()
            .and_then(|ip| ip.id.clone())
            .unwrap_or_else(|| panic!("no public IP {address} in the account"));
    }
    h.sim
        .with_state(|state| {
            state
                .ips
                .iter()
                .find(|ip| ip.address == address)
                .map(|ip| ip.id.clone())
        })
        .unwrap_or_else(|| panic!("no public IP {address} in the simulator"))
}

/// Firewall rules on IP `ip_id`: (protocol, start port, CIDRs), sorted.
pub fn firewall_rules(h: &Harness, ip_id: &str) -> Vec<(String, i64, Vec<String>)> {
    if let Some(client) = probe(h) {
        let request = cloudstack::ListFirewallRules {
            ipaddressid: Some(ip_id.to_string()),
            ..Default::default()
        };
        let mut rules: Vec<(String, i64, Vec<String>)> =
            match remote_read(client.list_firewall_rules(&request)) {
                Ok(list) => list
                    .iter()
                    .map(|f| {
                        (
                            f.protocol.clone().unwrap_or_default(),
                            f.startport.map_or(-1, i64::from),
                            split_cidrs(f.cidrlist.as_deref()),
                        )
                    })
                    .collect(),
                // A released address has no rules.
                Err(error) if error.code() == Some(431) => Vec::new(),
                Err(error) => panic!("listing firewall rules of IP {ip_id}: {error}"),
            };
        rules.sort();
        return rules;
    }
    let mut rules = h.sim.with_state(|state| {
        state
            .firewall_rules
            .iter()
            .filter(|f| f.ip_id == ip_id)
            .map(|f| {
                (
                    f.protocol.clone(),
                    f.start_port.unwrap_or(-1),
                    f.cidrs.clone(),
                )
            })
            .collect::<Vec<_>>()
    });
    rules.sort();
    rules
}

/// Mutating CloudStack calls by command since the last reset.
pub fn mutating_counts(h: &Harness) -> BTreeMap<String, u64> {
    h.cloudstack_call_counts()
        .into_iter()
        .filter(|(command, count)| *count > 0 && !cloudstack::is_read(command))
        .collect()
}

/// The first ingress IP of a Service.
pub fn ingress_ip(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

/// The first ingress entry's `ipMode`.
pub fn ingress_ip_mode(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip_mode
        .clone()
}

/// An annotation of a Service.
pub fn annotation<'a>(service: &'a Service, key: &str) -> Option<&'a str> {
    service
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

/// Whether the Service carries the cleanup finalizer.
pub fn has_finalizer(service: &Service) -> bool {
    service::finalizer::has_finalizer(service)
}

/// A LoadBalancer Service named `name` with `(protocol, port, node port)` ports.
pub fn lb_service(name: &str, ports: &[(&str, i32, i32)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ports: Some(
                ports
                    .iter()
                    .map(|(protocol, port, node_port)| ServicePort {
                        name: Some(format!("{}-{port}", protocol.to_ascii_lowercase())),
                        protocol: Some((*protocol).to_string()),
                        port: *port,
                        node_port: Some(*node_port),
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// Adds annotations to a Service under construction.
pub fn with_annotations(mut service: Service, annotations: &[(&str, &str)]) -> Service {
    let map = service
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new);
    for (key, value) in annotations {
        map.insert((*key).to_string(), (*value).to_string());
    }
    service
}

/// A JSON merge patch setting the Service's ports.
pub fn ports_patch(ports: &[(&str, i32, i32)]) -> Value {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(protocol, port, node_port)| {
            serde_json::json!({
                "name": format!("{}-{port}", protocol.to_ascii_lowercase()),
                "protocol": protocol,
                "port": port,
                "nodePort": node_port,
            })
        })
        .collect();
    serde_json::json!({ "spec": { "ports": ports } })
}

/// Waits a little for a controller that should NOT act: lets a few reconciles happen.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Milliseconds since the Unix epoch, on the simulator's clock (for [`failing_calls`]).
pub fn sim_now_ms() -> u64 {
    cloudstack_sim::jobs::now_ms()
}

/// The CloudStack calls that failed since `since_ms` (simulator clock): answers with an
/// error status, and async jobs that ended in failure, as `command: error`.
pub fn failing_calls(h: &Harness, since_ms: u64) -> Vec<String> {
    let mut failed: Vec<String> = h
        .sim
        .call_log()
        .into_iter()
        .filter(|call| call.at_ms >= since_ms && call.status >= 400)
        .map(|call| format!("{}: {}", call.command, call.error.unwrap_or_default()))
        .collect();
    h.sim.with_state(|state| {
        for job in &state.jobs {
            if job.created_ms >= since_ms && job.status == 2 {
                let text = job
                    .result
                    .as_ref()
                    .and_then(|r| r.get("errortext"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                failed.push(format!("{} (job): {text}", job.command));
            }
        }
    });
    failed
}

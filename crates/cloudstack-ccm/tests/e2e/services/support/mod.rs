//! Helpers of the LoadBalancer Service end-to-end tests, on top of the shared harness:
//! start the service controller with short periods, create nodes for simulator VMs and
//! LoadBalancer Services, wait (always with a timeout) for status and Events, and read
//! what the simulator holds for a Service.
//!
//! In remote mode (see `common::target`) Service names get the test's unique prefix, what
//! CloudStack holds is read through its API with the account's keys, and every Service a
//! test created is deleted (its finalizer awaited) at [`LbTest::stop`].
//!
//! This module holds [`LbTest`] and the controller it starts; `cloud` reads what CloudStack
//! holds, `objects` builds and reads Service objects.

mod cloud;
mod objects;

use std::sync::Mutex;
use std::time::Duration;

use cloudstack_ccm::cloud::loadbalancer::vocabulary::default_lb_name;
use cloudstack_ccm::controllers::service::{self, Settings};
use cloudstack_sim::Scenario;
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::Value;

use crate::common::{Harness, HarnessOptions, TestNode, eventually};
use cloud::probe;

pub use crate::common::failing_calls;
pub use cloud::{
    RuleView, firewall_rules, ip_id_of, ip_state, mutating_counts, rules_with_prefix, sim_now_ms,
};
pub use objects::{
    annotation, has_finalizer, ingress_ip, ingress_ip_mode, lb_service, ports_patch, settle,
    supported_condition, with_annotations,
};

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

    /// `cloudstack-ccm orphans --delete` over the cluster (routing firewall rules
    /// included); its report.
    pub async fn delete_orphans(&self) -> cloudstack_ccm::orphans::OrphanReport {
        let scope = cloudstack_ccm::orphans::Scope {
            cluster: &self.h.ctx.cluster_name,
            node_names: None,
            cluster_cidrs: &[],
            routing_firewall: cloudstack_ccm::cloud::orphans::RoutingFirewall::Listed,
        };
        cloudstack_ccm::orphans::report(&self.h.ctx.cloudstack, &self.h.kube, scope, true)
            .await
            .expect("orphan report")
    }

    /// Waits until Service `name` has the `LoadBalancerSupported` condition; returns its
    /// (status, reason, message).
    pub async fn wait_condition(&self, name: &str) -> (String, String, String) {
        let service = self
            .wait_for(name, "has the LoadBalancerSupported condition", |s| {
                supported_condition(s).is_some()
            })
            .await;
        supported_condition(&service).expect("condition")
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

//! The one Event recorder every controller uses: core v1 Events, posted and updated as
//! client-go's `tools/record` package does it.
//!
//! * Events go to `/api/v1/namespaces/{ns}/events` (the object's namespace, `default` for
//!   cluster-scoped objects), with `source.component` and `reportingComponent` naming the
//!   controller: the RBAC that CloudStack Kubernetes Service installs grants `events` in
//!   the core group only (create, patch, update), so `events.k8s.io` would be refused.
//! * An Event that repeats — same source, object, type, reason **and message**
//!   (`getEventKey` in client-go's `events_cache.go`) — is not posted again: the existing
//!   Event's `count` and `lastTimestamp` are updated with a strategic merge patch
//!   (`EventLogger.eventObserve`, `recordEvent`). A new message is a new Event, so
//!   `kubectl describe` shows the current cause next to the old one.
//! * From the `SIMILAR_EVENT_LIMIT`th different message for the same object, type and
//!   reason within `SIMILAR_EVENT_WINDOW` on, they are folded into one Event with the message
//!   `(combined from similar events): <latest>` (`EventAggregator`), so a message that
//!   varies every time cannot flood the namespace.
//! * If the Event to patch is gone (404), it is created again (`recordEvent`).
//!
//! Not modelled: client-go's spam filter (a token bucket per object) and its retries of
//! a failed post; a failure is returned for the caller to log.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};

pub use kube::runtime::events::{Event, EventType, Reporter};

/// Distinct messages of one object, type and reason before they are combined
/// (client-go `defaultAggregateMaxEvents`).
pub(crate) const SIMILAR_EVENT_LIMIT: usize = 10;
/// The window in which similar messages are counted (client-go
/// `defaultAggregateIntervalInSeconds`).
pub(crate) const SIMILAR_EVENT_WINDOW: Duration = Duration::from_secs(600);
/// Events remembered for aggregation (client-go `maxLruCacheEntries`).
const CACHE_SIZE: usize = 4096;
/// The prefix of a combined message (client-go `EventAggregatorByReasonMessageFunc`).
const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// What is remembered of a posted Event.
#[derive(Debug, Clone)]
struct Observed {
    name: String,
    count: i32,
    first_timestamp: Option<Time>,
}

/// Messages seen for one object, type and reason.
#[derive(Debug, Clone)]
struct Similar {
    messages: Vec<String>,
    last: Instant,
}

/// The correlator's memory, bounded to [`CACHE_SIZE`] entries each (oldest dropped first).
#[derive(Debug, Default)]
struct Correlator {
    observed: HashMap<String, Observed>,
    observed_order: VecDeque<String>,
    similar: HashMap<String, Similar>,
    similar_order: VecDeque<String>,
}

/// Inserts or updates `key`; a new key is remembered last and the oldest dropped beyond
/// [`CACHE_SIZE`].
fn remember<V>(map: &mut HashMap<String, V>, order: &mut VecDeque<String>, key: String, value: V) {
    if map.insert(key.clone(), value).is_none() {
        order.push_back(key);
        while order.len() > CACHE_SIZE {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }
}

impl Correlator {
    /// `EventAggregator.EventAggregate`: the message to record (combined once too many
    /// similar messages were seen).
    fn aggregate(&mut self, similar_key: &str, message: &str, now: Instant) -> String {
        let mut entry = self
            .similar
            .get(similar_key)
            .filter(|s| now.duration_since(s.last) <= SIMILAR_EVENT_WINDOW)
            .cloned()
            .unwrap_or(Similar {
                messages: Vec::new(),
                last: now,
            });
        entry.last = now;
        if !entry.messages.iter().any(|m| m == message) {
            entry.messages.push(message.to_string());
        }
        let combine = entry.messages.len() >= SIMILAR_EVENT_LIMIT;
        remember(
            &mut self.similar,
            &mut self.similar_order,
            similar_key.to_string(),
            entry,
        );
        if combine {
            format!("{COMBINED_PREFIX}{message}")
        } else {
            message.to_string()
        }
    }
}

/// Posts Events about Kubernetes objects for one controller (see the module docs).
/// Clones share the correlator.
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    reporter: Reporter,
    correlator: Arc<Mutex<Correlator>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

/// The key of "similar" Events: source, object, type and reason (`EventAggregatorByReasonFunc`).
fn similar_key(reporter: &Reporter, reference: &ObjectReference, event: &Event) -> String {
    [
        reporter.controller.as_str(),
        reporter.instance.as_deref().unwrap_or(""),
        reference.kind.as_deref().unwrap_or(""),
        reference.namespace.as_deref().unwrap_or(""),
        reference.name.as_deref().unwrap_or(""),
        reference.field_path.as_deref().unwrap_or(""),
        reference.uid.as_deref().unwrap_or(""),
        reference.api_version.as_deref().unwrap_or(""),
        type_name(event.type_),
        event.reason.as_str(),
    ]
    .join("\u{0}")
}

fn type_name(type_: EventType) -> &'static str {
    match type_ {
        EventType::Normal => "Normal",
        EventType::Warning => "Warning",
    }
}

fn now() -> Time {
    Time(jiff::Timestamp::now())
}

impl Recorder {
    /// A recorder posting as `reporter.controller` (and `reporter.instance`, the host).
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            correlator: Arc::new(Mutex::new(Correlator::default())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Correlator> {
        self.correlator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `event` about the object `reference`: a new core v1 Event, or a patch of
    /// the count and last timestamp of the same Event posted before.
    pub async fn publish(
        &self,
        event: &Event,
        reference: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let namespace = reference
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_string());
        let api: Api<CoreEvent> = Api::namespaced(self.client.clone(), &namespace);
        let similar = similar_key(&self.reporter, reference, event);
        let note = event.note.clone().unwrap_or_default();
        let timestamp = now();
        let (message, key, previous) = {
            let mut correlator = self.lock();
            let message = correlator.aggregate(&similar, &note, Instant::now());
            // A combined Event is one Event per object, type and reason whose message is
            // the latest; any other Event is keyed by its message too.
            let key = if message.starts_with(COMBINED_PREFIX) {
                format!("{similar}\u{0}{COMBINED_PREFIX}")
            } else {
                format!("{similar}\u{0}{message}")
            };
            let previous = correlator.observed.get(&key).cloned();
            (message, key, previous)
        };
        let mut stored = None;
        if let Some(previous) = &previous {
            let patch = serde_json::json!({
                "count": previous.count + 1,
                "lastTimestamp": timestamp,
                "message": message,
            });
            match api
                .patch(
                    &previous.name,
                    &PatchParams::default(),
                    &Patch::Strategic(&patch),
                )
                .await
            {
                Ok(patched) => stored = Some(patched),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => return Err(error),
            }
        }
        let stored = match stored {
            Some(stored) => stored,
            None => {
                let reference_name = reference.name.as_deref().unwrap_or("");
                let nanos = timestamp.0.as_nanosecond();
                let name = previous
                    .as_ref()
                    .map(|p| p.name.clone())
                    .unwrap_or_else(|| format!("{reference_name}.{nanos:x}"));
                let created = CoreEvent {
                    metadata: ObjectMeta {
                        name: Some(name),
                        namespace: Some(namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    involved_object: reference.clone(),
                    reason: Some(event.reason.clone()),
                    message: Some(message.clone()),
                    type_: Some(type_name(event.type_).to_string()),
                    action: Some(event.action.clone()).filter(|a| !a.is_empty()),
                    count: Some(previous.as_ref().map_or(1, |p| p.count + 1)),
                    first_timestamp: Some(
                        previous
                            .as_ref()
                            .and_then(|p| p.first_timestamp.clone())
                            .unwrap_or_else(|| timestamp.clone()),
                    ),
                    last_timestamp: Some(timestamp.clone()),
                    source: Some(EventSource {
                        component: Some(self.reporter.controller.clone()),
                        host: self.reporter.instance.clone(),
                    }),
                    reporting_component: Some(self.reporter.controller.clone()),
                    reporting_instance: self.reporter.instance.clone(),
                    related: event.secondary.clone(),
                    ..CoreEvent::default()
                };
                api.create(&PostParams::default(), &created).await?
            }
        };
        let observed = Observed {
            name: stored.metadata.name.clone().unwrap_or_default(),
            count: stored.count.unwrap_or(1),
            first_timestamp: stored.first_timestamp.clone(),
        };
        let mut correlator = self.lock();
        let correlator = &mut *correlator;
        remember(
            &mut correlator.observed,
            &mut correlator.observed_order,
            key,
            observed,
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn similar_messages_are_combined_after_the_limit() {
        let mut correlator = Correlator::default();
        let start = Instant::now();
        for i in 0..SIMILAR_EVENT_LIMIT - 1 {
            let message = format!("error {i}");
            assert_eq!(correlator.aggregate("k", &message, start), message);
        }
        assert_eq!(
            correlator.aggregate("k", "error 9", start),
            "(combined from similar events): error 9"
        );
        assert_eq!(
            correlator.aggregate("other", "error 9", start),
            "error 9",
            "another object or reason is counted apart"
        );
        let later = start + SIMILAR_EVENT_WINDOW + Duration::from_secs(1);
        assert_eq!(
            correlator.aggregate("k", "error 10", later),
            "error 10",
            "the window starts again"
        );
    }

    #[test]
    fn the_cache_is_bounded() {
        let mut map = HashMap::new();
        let mut order = VecDeque::new();
        for i in 0..CACHE_SIZE + 10 {
            remember(&mut map, &mut order, i.to_string(), i);
        }
        assert_eq!(map.len(), CACHE_SIZE);
        assert!(!map.contains_key("0"));
        assert!(map.contains_key(&(CACHE_SIZE + 9).to_string()));
    }
}

//! Watch streams: JSON lines of `{type, object}` (ADDED, MODIFIED, DELETED, BOOKMARK,
//! ERROR) with replay from history, 410 Gone for compacted versions, bookmarks and
//! `timeoutSeconds`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::error::ApiError;
use crate::store::{Change, Selection, Store, WatchStart, to_view};
use crate::table;

/// Parameters of one watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    /// What to watch.
    pub selection: Selection,
    /// Where to start.
    pub start: WatchStart,
    /// Send periodic BOOKMARK events.
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: mark the end of the initial state with a bookmark.
    pub send_initial_events: bool,
    /// End the stream after this long.
    pub timeout: Duration,
    /// Interval between bookmarks.
    pub bookmark_interval: Duration,
    /// Send each object as a one-row `meta.k8s.io/v1` Table (`kubectl get -w`), with this
    /// `includeObject`.
    pub table: Option<Option<String>>,
}

impl WatchRequest {
    /// A stored object as this watch sends it.
    fn render(&self, stored: &Value) -> Value {
        let kind = self.selection.kind;
        match &self.table {
            None => to_view(kind, stored).into_owned(),
            Some(include) => {
                let metadata = json!({ "resourceVersion": stored["metadata"]["resourceVersion"] });
                table::table(
                    kind,
                    std::slice::from_ref(stored),
                    metadata,
                    include.as_deref(),
                )
            }
        }
    }
}

fn line(event_type: &str, object: &Value) -> Result<Bytes, Infallible> {
    let mut text = json!({ "type": event_type, "object": object }).to_string();
    text.push('\n');
    Ok(Bytes::from(text))
}

fn bookmark(request: &WatchRequest, resource_version: u64, initial_events_end: bool) -> Value {
    let kind = request.selection.kind;
    let mut metadata = json!({ "resourceVersion": resource_version.to_string() });
    if initial_events_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    json!({ "kind": kind.kind, "apiVersion": kind.api_version(), "metadata": metadata })
}

fn streaming(receiver: mpsc::Receiver<Result<Bytes, Infallible>>) -> Response {
    Response::builder()
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(ReceiverStream::new(receiver)))
        .expect("static response parts are valid")
}

/// Starts a watch and returns the streaming response.
pub fn serve(store: &Store, request: WatchRequest) -> Response {
    let (sender, receiver) = mpsc::channel(64);
    let subscription = match store.watch(&request.selection, request.start) {
        Ok(subscription) => subscription,
        Err(error) => {
            tokio::spawn(send_error(sender, error));
            return streaming(receiver);
        }
    };
    tokio::spawn(run(sender, request, subscription));
    streaming(receiver)
}

async fn send_error(sender: mpsc::Sender<Result<Bytes, Infallible>>, error: ApiError) {
    let _ = sender.send(line("ERROR", &error.status_body())).await;
}

async fn run(
    sender: mpsc::Sender<Result<Bytes, Infallible>>,
    request: WatchRequest,
    mut subscription: crate::store::Subscription,
) {
    let mut last_rv = subscription.resource_version;
    for change in std::mem::take(&mut subscription.initial) {
        last_rv = last_rv.max(change.resource_version);
        if sender
            .send(line(
                change.event_type.as_str(),
                &request.render(&change.object),
            ))
            .await
            .is_err()
        {
            return;
        }
    }
    if request.send_initial_events {
        let end = bookmark(&request, last_rv, true);
        if sender.send(line("BOOKMARK", &end)).await.is_err() {
            return;
        }
    }
    let deadline = tokio::time::sleep(request.timeout);
    tokio::pin!(deadline);
    let mut ticks = tokio::time::interval(request.bookmark_interval);
    ticks.tick().await;
    loop {
        tokio::select! {
            _ = &mut deadline => return,
            _ = sender.closed() => return,
            change = subscription.live.recv() => {
                let Some(change): Option<Arc<Change>> = change else { return };
                last_rv = last_rv.max(change.resource_version);
                if request.selection.matches(change.kind, &change.object)
                    && sender.send(line(change.event_type.as_str(), &request.render(&change.object))).await.is_err()
                {
                    return;
                }
            }
            _ = ticks.tick(), if request.bookmarks => {
                if sender.send(line("BOOKMARK", &bookmark(&request, last_rv, false))).await.is_err() {
                    return;
                }
            }
        }
    }
}

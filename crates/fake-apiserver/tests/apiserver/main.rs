//! The fake Kubernetes API server's tests, one test binary with a module per area: CRUD
//! and its conflicts, watches, outages and partitions, discovery, Events, RBAC, the review APIs, `kubectl`
//! against it, and a kube-runtime controller on top of it.

mod common;

mod crud;
mod discovery;
mod endpoints;
mod events;
mod kubectl;
mod outage;
mod rbac;
mod reviews;
mod runtime;
mod self_reviews;
mod watch;

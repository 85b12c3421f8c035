//! The fake Kubernetes API server's tests, one test binary with a module per area: CRUD
//! and its conflicts, watches, discovery, Events, RBAC, `kubectl` against it, and a
//! kube-runtime controller on top of it.

mod common;

mod crud;
mod discovery;
mod events;
mod kubectl;
mod rbac;
mod reviews;
mod runtime;
mod watch;

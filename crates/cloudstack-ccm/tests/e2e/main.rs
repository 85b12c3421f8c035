//! The controller manager's end-to-end tests, one test binary with a module per area:
//! the binary's command line and subcommands, the node controllers, the service
//! controller (`services::*`), the route controller, orphans, the health and metrics
//! server and its HTTPS with delegated access (`secure_serving`), leader election, RBAC,
//! TLS, and reliability under crashes, faults and bad input (`reliability::*`).
//!
//! Every test talks HTTP to `cloudstack-sim` and `fake-apiserver`, or to real endpoints
//! when the environment names them (see [`common::target`] and docs/testing.md). One
//! suite runs with a module path as the filter: `cargo test -p cloudstack-ccm --test e2e
//! -- services::lifecycle::`.

mod common;
mod reliability;
mod services;

mod check;
mod cli;
mod demo;
mod demo_serve;
mod deploy_manifests;
mod event_recorder;
mod keys;
mod leader;
mod node_cache_shared;
mod node_lifecycle;
mod nodes;
mod orphans;
mod rbac;
mod routes;
mod secure_serving;
mod server;
mod startup_order;
mod startup_scope;
mod tls;

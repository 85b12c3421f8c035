//! The CloudStack simulator's tests, one test binary with a module per area: the API's
//! protocol (signing, errors, async jobs and their queues), roles and what a key may call,
//! reads and project scoping, load-balancer, firewall, ACL and static-route rules and their conflicts, the tier a VPC
//! address serves, the network kinds (ROUTED, shared, NSX, Netris) and routing firewall
//! rules, VM lifecycle, the `/sim` admin API, scenario files, the binary's command
//! line, and the Debian `cs` client against it. Each behaviour's source in CloudStack is
//! named in the crate docs.

mod common;

mod admin_api;
mod api_access;
mod api_conflicts;
mod api_fidelity;
mod api_job_failures;
mod api_jobs;
mod api_lb;
mod api_protocol;
mod api_queue;
mod api_reads;
mod api_routes;
mod api_rule_state;
mod api_rules;
mod api_scoping;
mod api_source_codes;
mod api_ssl_certs;
mod api_ssl_chains;
mod api_vpc_tiers;
mod binary_cli;
mod network_kinds;
mod python_cs;
mod scenario_file;
mod vm_lifecycle;

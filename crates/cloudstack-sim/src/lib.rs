//! A simulator of the Apache CloudStack management-server API for the subset a Kubernetes
//! cloud controller manager uses: real HTTP, real signature checks, the server's envelopes,
//! errors and paging, async jobs serialised per network, a version knob, rate limiting,
//! fault injection and introspection under `/sim/…`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), cloudstack_sim::SimError> {
//! let sim = cloudstack_sim::SimServer::start(cloudstack_sim::Scenario::small()).await?;
//! println!("{}", sim.api_url());
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod admin;
mod build_state;
pub mod commands;
pub mod error;
pub mod faults;
mod http_api;
pub mod jobs;
pub mod params;
pub mod response;
pub mod scenario;
mod scenario_small;
mod server;
pub mod signing;
pub mod state;
pub mod version;

pub use error::ApiError;
pub use faults::{CallRecord, ErrorFault, Faults};
pub use scenario::{
    AccountSpec, AclListSpec, IpRange, LbProvider, NetworkSpec, NicSpec, OfferingSpec, ProjectSpec,
    Role, Scenario, ScenarioError, Secret, Settings, Throttle, VmSpec, VpcSpec, ZoneSpec,
};
pub use scenario_small::{
    SMALL_ACL, SMALL_NETSCALER_NETWORK, SMALL_NETWORK, SMALL_PROJECT, SMALL_TIER, SMALL_VPC,
    SMALL_ZONE,
};
pub use server::{SimError, SimOptions, SimServer, Simulator};
pub use version::Version;

//! The load-balancer engine: spec -> observe -> plan -> apply.
//!
//! [`vocabulary`] holds the words every step shares (protocols, algorithms, stickiness
//! methods, rule names); [`capabilities`] what a network's load-balancer provider and
//! the server allow.

pub mod annotations;
pub mod apply;
pub mod capabilities;
pub mod ensure;
pub mod ip_claim;
pub mod job_queue;
pub mod observe;
pub mod plan;
pub mod spec;
pub mod vocabulary;

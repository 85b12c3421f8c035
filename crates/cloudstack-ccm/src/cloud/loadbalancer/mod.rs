//! The load-balancer engine: spec -> observe -> plan -> apply.

pub mod annotations;
pub mod apply;
pub mod observe;
pub mod plan;
pub mod spec;

//! Everything that watches and writes Kubernetes objects.

pub mod node;
pub mod node_lifecycle;
pub mod service;

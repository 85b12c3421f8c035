//! The CloudStack client's tests, one test binary with a module per concern: request
//! signing, the wire format against real CloudStack response samples (`tests/fixtures`),
//! errors, async jobs and pagination, each against a small CloudStack-like HTTP server
//! ([`support`]) that checks signatures as the real server does.

mod support;

mod errors;
mod fixtures;
mod jobs;
mod pagination;
mod signing;
mod wire;

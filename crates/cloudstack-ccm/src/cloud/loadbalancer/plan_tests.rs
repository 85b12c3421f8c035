//! Plan unit tests.

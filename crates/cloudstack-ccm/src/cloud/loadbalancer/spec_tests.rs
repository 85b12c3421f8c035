//! Spec unit tests.

//! config (to be written).

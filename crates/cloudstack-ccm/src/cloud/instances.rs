//! instances (to be written).

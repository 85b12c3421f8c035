//! cli (to be written).

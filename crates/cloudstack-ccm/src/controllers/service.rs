//! service (to be written).

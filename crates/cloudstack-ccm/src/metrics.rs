//! metrics (to be written).

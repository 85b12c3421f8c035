//! inventory (to be written).

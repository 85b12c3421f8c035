//! observe (to be written).

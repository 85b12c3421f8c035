//! capabilities (to be written).

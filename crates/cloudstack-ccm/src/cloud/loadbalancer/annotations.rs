//! annotations (to be written).

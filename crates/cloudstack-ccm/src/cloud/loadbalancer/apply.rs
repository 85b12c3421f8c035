//! apply (to be written).

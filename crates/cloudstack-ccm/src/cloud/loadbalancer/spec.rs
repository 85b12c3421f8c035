//! spec (to be written).

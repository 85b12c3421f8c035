//! provider_id (to be written).

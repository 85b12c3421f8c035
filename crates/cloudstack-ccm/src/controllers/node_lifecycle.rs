//! node_lifecycle (to be written).

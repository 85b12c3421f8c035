//! node (to be written).

//! leader (to be written).

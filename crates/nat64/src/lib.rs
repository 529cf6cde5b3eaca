//! nat64: not yet written.

//! lab: not yet written.

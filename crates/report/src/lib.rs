//! report: not yet written.

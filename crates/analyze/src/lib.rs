//! analyze: not yet written.

//! apps: not yet written.

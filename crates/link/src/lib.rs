//! link: not yet written.

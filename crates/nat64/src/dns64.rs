//! DNS64 (RFC 6147): not yet written.

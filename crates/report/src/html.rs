//! html: page builder (next commit).

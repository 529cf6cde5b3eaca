//! The files of a run directory, written as the lab runs: the sinks (the `sinks` crate) and
//! the summary's types (`labnet::run_dir`), under the name the engine and the demos use.

pub use labnet::run_dir::{
    DelaySummary, DnsQuerySummary, DnsSummary, EngineSummary, LinkSummary, Nat64Summary,
    SubQueueSummary, Summary,
};
pub use sinks::{prepare_dir, write_json, Captures, FileId, Opening, Reserve};

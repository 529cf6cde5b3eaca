//! The real-time shell of latencylab: it builds a lab of hosts in network namespaces joined by
//! TUN devices, moves every packet through the pure link models on the monotonic clock, writes
//! captures and link logs, starts and stops programs, and always cleans up.
//!
//! This crate owns the lab's syscalls; the logic it drives (links, queues, the lab's
//! specification, schedule and stop rules) lives in the pure crates and is tested there in
//! simulated time. Here the tests are end to end, in real namespaces (see `tests/`). Two jobs
//! with a small interface have crates of their own: the program launcher (`launcher`, a process
//! forked at lab start) and the capture and log files (`sinks`); `owner` decides who owns
//! what is written for the user.
//!
//! Layout: what a lab is comes from `labnet` (re-exported as [`config`]), its files from
//! [`files`]; [`netns`] (namespaces, TUN devices, addresses, routes, sysctls), [`engine`] (the
//! event loop, which drives the NAT64 and DNS64 endpoints of `labnet`), [`runner`] (a lab from
//! start to end), [`process`] (processes in hosts, seen from outside), [`output`] (the sinks
//! and the summary's types, by their old names), [`cleanup`] (leftovers of earlier labs),
//! [`userns`] (labs without root).

pub mod cleanup;
pub mod engine;
mod event_loop;
pub mod files;
pub mod netns;
pub mod output;
pub mod process;
pub mod runner;
mod starter;
pub mod sys;
pub mod userns;

/// Who owns the files written for the user (the `owner` crate, under its old name here).
pub use ::owner;

pub use labnet::live;
/// The lab's specification, from the pure core (kept under its old name for callers).
pub use labnet::spec as config;
pub use labnet::{dns_tcp, translator, LabConfig, UsageError};
pub use runner::{
    block_stop_signals, restore_signals, run_lab, run_lab_live, RunOptions, RunResult,
};

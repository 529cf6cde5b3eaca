//! latencylab's demos: each one is a whole experiment behind one command. It builds the labs
//! (one per variant, same seed and duration), runs the reference traffic programs in them,
//! reads back what they measured (JSON lines, link logs, `summary.json`, the sender's capture
//! through the analyzer), and leaves `results.json`, PNG charts and a self-contained
//! `report.html` next to each run's raw lab output.
//!
//! Every demo is one entry of [`params::DEMOS`]: its help, its parameters (typed, with their
//! defaults, each one an option of `latencylab demo NAME` and a sweep axis), and its module's
//! two functions, `runs` (its labs, which `--export` writes as run files) and `run` (the whole
//! experiment). The CLI builds each demo's command from that entry, so a demo is added by
//! writing its module and its entry, nothing else.
//!
//! This crate decides what to run and what to show; it owns no network code (that is `lab`),
//! no measurement (the `apps` programs and `analyze`) and no drawing primitives (`report`).
//! Like the CLI it is an entry point, so its errors are `anyhow` with context.
//!
//! - [`bufferbloat`]: FIFO against CoDel + ECN on a home line (experiment E3).
//! - [`l4s`]: a video call beside busy TCP flows: classic FIFO, L4S DualQ, and a path that
//!   bleaches ECN (experiment E6).
//! - [`http_parallel`]: a sharded page over 36, 6 and 1 HTTP/1.1 connections and over
//!   HTTP/2, beside headless Chromium (experiment E10).
//! - [`hol_blocking`]: one page over HTTP/1.1, HTTP/2 and HTTP/3 under random and bursty
//!   loss, beside headless Chromium on QUIC.
//! - [`pipelining`]: a 159-resource page over 6 HTTP/1.1 connections with and without
//!   pipelining, at two RTTs (experiment E11).
//! - [`conn_reuse`]: a news page whose requests take whichever HTTP/1.1 connection frees up
//!   first, against waiting for the one opened for them (experiment E12).
//! - [`cwnd_reuse`]: clicks on a photo page's links over the idle connection idle longest or
//!   the one that moved the largest burst (experiment E13).
//! - [`notsent_lowat`]: screen sharing over a DSL uplink, with and without TCP_NOTSENT_LOWAT
//!   (experiment E4).
//! - [`tfo`]: short requests with and without TCP Fast Open (experiment E5).
//! - [`nagle`]: a message in two writes over a satellite: Nagle on, TCP_NODELAY, writev
//!   (experiment E7).
//! - [`delayed_ack`]: a bulk upload in non-MSS-sized writes into a small receive window, the
//!   receiver deferring its ACKs or not (experiment E8).
//! - [`pps`]: a bulk download through a hop with a packets-per-second ceiling, at MTU 1500
//!   and 9000 (experiment E9).
//! - [`fallback`]: a phone whose Wi-Fi goes dark while cellular works: plain connect, an
//!   RFC 8305 race with a Better Route probe, MPTCP (experiment E2).
//! - [`nat64`]: one small client per class of app on an IPv6-only network, through
//!   `ipv6-check`, and again with 464XLAT (experiment E1).
//! - [`handshake_cdf`]: handshake times over a browsing session to servers at a measured
//!   spread of RTTs (experiment E14).
//! - [`responsiveness`]: RPM on the bufferbloat demo's home line under FIFO, CoDel,
//!   FQ-CoDel, PIE and DualPI2, each loaded round trip taken apart queue by queue.

pub mod bufferbloat;
mod chromium;
mod common;
pub mod conn_reuse;
pub mod cwnd_reuse;
pub mod delayed_ack;
pub mod fallback;
pub mod handshake_cdf;
pub mod hol_blocking;
pub mod http_parallel;
pub mod l4s;
pub mod nagle;
pub mod nat64;
pub mod notsent_lowat;
pub mod params;
pub mod pipelining;
pub mod pps;
pub mod responsiveness;
pub mod tfo;
mod web_common;

pub use common::Progress;
pub use common::{
    analyze_captures, export, reanalysing, run_lab, set_lab_runner, set_reanalyse, Check,
    LabRunner, Outcome, Report, Run, Unreproducible,
};
pub use params::Args;

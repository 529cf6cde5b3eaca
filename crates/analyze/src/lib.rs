//! analyze: reads pcap and pcapng captures and says where the delay came from.
//!
//! Pure: bytes in, data out. No clocks, sockets or threads; the caller opens files and hands
//! in any `io::Read`. Pipeline: [`capture`] turns a file into records, [`link`] into IP
//! packets, [`analyzer::Analyzer`] routes them to [`tcp`] connections and [`udp`] flows per
//! vantage point (reading QUIC's visible headers in them with [`quic`]), [`diagnose`] names the causes of delay, and [`json`] / [`text`] present the
//! resulting [`model::Analysis`]. [`ladder`] pairs one connection seen in two captures into the
//! packets of a ladder diagram. Plots and HTML are the `report` crate's job, not this one's.
//!
//! ```no_run
//! let mut a = analyze::Analyzer::new(analyze::Options::default());
//! a.add_capture("x.pcap", std::fs::File::open("x.pcap").unwrap()).unwrap();
//! let analysis = a.finish();
//! print!("{}", analyze::text::summary(&analysis));
//! ```
//!
//! RFCs to read before editing: RFC 9293 (TCP), RFC 7323 (window scale, timestamps),
//! RFC 2018 (SACK), RFC 6298 (RTT, Karn's rule), RFC 5681 (duplicate ACKs), RFC 6675 (loss
//! recovery), RFC 3168 and RFC 9768 (ECN, AccECN), RFC 7413 (TFO); draft-ietf-opsawg-pcap
//! and draft-ietf-opsawg-pcapng for the file formats.

pub mod analyzer;
mod budget;
pub mod capture;
mod diagnose;
pub mod filter;
mod frames;
pub mod handshakes;
mod headers;
pub mod json;
pub mod ladder;
pub mod link;
pub mod model;
pub mod quic;
mod stories;
pub mod synth;
mod tcp;
pub mod tcpopt;
pub mod text;
mod udp;

pub use analyzer::{
    analyze_bytes, finish_chunked, Analyzer, Chunk, ChunkConsumer, ChunkMeta, ChunkedCapture, Item,
    Options, ShardAnalyzer, ShardResult, Splitter,
};
pub use capture::CaptureError;
pub use filter::{Filter, FilterError};
pub use model::*;

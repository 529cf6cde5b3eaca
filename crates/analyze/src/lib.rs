//! analyze: reads pcap and pcapng captures and says where the delay came from.
//!
//! Pure: bytes in, data out. No clocks, sockets or threads; the caller opens files and hands
//! in any `io::Read`. Pipeline: [`capture`] turns a file into IP packets with a time and a
//! vantage point, [`tcp`] and [`udp`] rebuild flows per direction, [`diagnose`] names the
//! causes of delay, and [`json`] / [`text`] present the resulting [`model::Analysis`].
//! Plots and HTML are the `report` crate's job, not this one's.
//!
//! RFCs to read before editing: RFC 9293 (TCP), RFC 7323 (window scale, timestamps),
//! RFC 2018 (SACK), RFC 6298 (RTT, Karn's rule), RFC 5681 (duplicate ACKs), RFC 3168 and
//! RFC 9768 (ECN, AccECN), RFC 7413 (TFO); draft-ietf-opsawg-pcap and
//! draft-ietf-opsawg-pcapng for the file formats.

pub mod capture;
pub mod link;
pub mod model;

pub use model::*;

//! The bytes layer of latencylab: time and units, packets and their headers, ECN, flow keys and
//! pcap writing.
//!
//! Everything here is pure: no clocks, no sockets, no threads. Time is the [`Instant`] /
//! [`Duration`] pair of [`time`], always passed in by the caller. Untrusted bytes go through
//! checked parsing and come back as [`PacketError`] values, never a panic.
//!
//! RFCs to read before editing: RFC 791 (IPv4), RFC 8200 (IPv6), RFC 3168 (ECN),
//! RFC 1624 (incremental checksum update), RFC 9293 (TCP), RFC 768 (UDP).

pub mod build;
pub mod checksum;
pub mod ecn;
pub mod flow;
pub mod gso;
pub mod packet;
pub mod pcap;
pub mod time;
pub mod units;

#[cfg(test)]
mod testing;

pub use ecn::Ecn;
pub use flow::{FlowKey, IpProto};
pub use packet::{Packet, PacketError};
pub use time::{Duration, Instant};
pub use units::{Rate, UnitError};

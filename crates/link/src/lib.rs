//! One direction of an emulated link, as a pure state machine, and a routed network of them.
//!
//! A [`Link`] is what a packet crosses between two nodes: an entry check (link down or black
//! hole, drop filters, a narrow MTU, the loss model), the queue discipline, the transmitter (a
//! constant rate with exact serialization time, or a Mahimahi packet-delivery trace, and a
//! packets-per-second ceiling), then the wire (corruption, propagation delay with jitter,
//! reordering, duplication) and slots at the far end ([`impair`] has the parameters). It is fed with
//! `enqueue(now, packet)`, asked with `poll(now)` for the packets that have arrived at the far
//! end, and tells the caller when to come back with `next_wakeup()`. Every packet event goes to an
//! observer, so the lab can log it.
//!
//! A [`net::Network`] joins links and nodes: each node routes a packet by destination address to
//! the next link or delivers it to an endpoint (a host interface), so a packet crosses each link
//! of its path with that link's queue. Nothing here reads a clock or touches a socket.

pub mod capacity;
pub mod filter;
pub mod impair;
pub mod jitter;
pub mod link;
pub mod loss;
pub mod mtu;
pub mod net;
mod overtaking;
pub mod stats;

pub use capacity::{Capacity, Trace, TraceError};
pub use filter::{Filter, FilterError};
pub use impair::{Duplicate, Impairments, NarrowLink, PacketRate, ParseError, Reorder, Slot, Slow};
pub use jitter::{Distribution, Jitter};
pub use link::{Event, EventKind, Link, LinkParams, Observer};
pub use loss::{LossModel, LossState};
pub use stats::{Asked, Got, LinkStats, Percentiles};

/// Why a packet did not cross a link.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropCause {
    /// The loss model chose it.
    Loss,
    /// The link was down (switched off by a run file's schedule).
    Down,
    /// The link was a black hole: up, but carrying nothing.
    Blackhole,
    /// A drop filter matched it.
    Filter,
    /// Larger than a narrow link's MTU (the router in front answered or fragmented it).
    TooBig,
    /// The node had no route for its destination (it was not for a lab host).
    NoRoute,
    /// The queue discipline dropped it.
    Qdisc(qdisc::Cause),
}

impl DropCause {
    pub const fn name(self) -> &'static str {
        match self {
            DropCause::Loss => "loss",
            DropCause::Down => "down",
            DropCause::Blackhole => "blackhole",
            DropCause::Filter => "filter",
            DropCause::TooBig => "too_big",
            DropCause::NoRoute => "no_route",
            DropCause::Qdisc(c) => c.name(),
        }
    }
}

//! congestion: the congestion control of latencylab's real-time transport (the `call`
//! program), as pure state machines with `now` passed in.
//!
//! - [`Controller`]: a rate-based controller with two behaviours. *L4S* is Prague-style and
//!   scalable: an EWMA α of the fraction of CE-marked packets (gain 1/16, RFC 8257 §3.3), a rate
//!   cut by α/2 at most once per virtual RTT, additive increase made RTT-independent with a
//!   25 ms reference RTT, and a Reno-like halving on loss. *Classic* is a legacy real-time
//!   video sender, the Google Congestion Control of WebRTC ([`gcc`], draft-ietf-rmcat-gcc-02):
//!   it holds its rate through up to 10 % loss. *Not-ECT*, the fallback of an L4S sender, is
//!   Reno: halve on loss, at most once per RTT.
//! - [`EcnValidator`]: ECN validation in the spirit of RFC 9000 §13.4.2: the peer's ECN counts
//!   must account for the packets it reports, with the codepoint that was sent. Bleaching,
//!   re-marking or missing counts make the controller fall back to Not-ECT classic mode, with
//!   an [`Event`] saying when and why.
//! - [`Pacer`]: spaces packets at the pacing rate.
//!
//! RFCs to read before editing: RFC 8257 (DCTCP), RFC 9330/9331/9332 (L4S architecture, ECN
//! identifier, DualQ), draft-briscoe-iccrg-prague-congestion-control (Prague), RFC 3168 (ECN),
//! RFC 5681 (Reno), RFC 6298 (RTT estimation), RFC 9000 §13.4 (ECN validation),
//! draft-ietf-rmcat-gcc-02 (GCC).
//!
//! Not here: sockets, clocks, packet formats, how the peer counts ECN (the `apps` crate).

pub mod controller;
pub mod gcc;
pub mod pacer;
pub mod validation;

pub use controller::{Controller, Event, Feedback, Mode, Params, Stats};
pub use gcc::{Gcc, GccParams};
pub use pacer::Pacer;
pub use validation::{EcnCounts, EcnState, EcnValidator, FailReason};

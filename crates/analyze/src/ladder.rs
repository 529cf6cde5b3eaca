//! The data of a ladder (message-sequence) diagram: one TCP connection seen in two captures,
//! one at each end, turned into arrows, each packet from the moment it left one host (in that
//! host's capture) to the moment it reached the other (in the other's). SYNs, data segments,
//! FINs and pure ACKs are arrows; an ACK that rode on one of the others is part of its arrow.
//! RSTs, and ACKs that repeat the previous number (duplicate ACKs, window updates), are not in
//! the analyzer's series and are no arrows.
//!
//! It needs the per-packet series (`Options::keep_series`) and two captures whose clocks agree,
//! as the hosts of a lab do: a packet is matched across the captures by its sequence or ACK
//! number and flags, each copy that arrived to the last copy sent no later. It finds the
//! connections seen at both ends ([`both_ends`]) and which part of one to show ([`Window`]); it
//! draws nothing (`report` does).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::net::SocketAddr;
use std::ops::RangeInclusive;

use wire::{Duration, Instant};

use crate::model::{Analysis, Connection, Dir, Direction, Segment, Vantage};

/// An ACK sent within this long of a segment (data, SYN or FIN) from the same host counts as
/// riding on it: a pure ACK followed microseconds later by data carrying the same ACK is one
/// event on a diagram's scale, and the series keep the ACK only where its number changed.
const RIDES_NS: u64 = 20_000;

const FLAG_FIN: u8 = 0x01;
const FLAG_SYN: u8 = 0x02;
const FLAG_ACK: u8 = 0x10;

/// How many arrows [`Window::Opening`] shows by default: twenty lines and their labels still
/// read apart on a 900-pixel-wide chart, and they hold a handshake with the first exchange or
/// two of a request/response protocol, or the handshake, the request and the first flight of
/// a download.
pub const OPENING_ARROWS: usize = 20;

/// One packet as an arrow between the two hosts.
#[derive(Clone, Debug, PartialEq)]
pub struct Arrow {
    /// [`Dir::AtoB`]: it left the connection's host `a` for `b`.
    pub dir: Dir,
    /// When it left, in the sender's capture.
    pub depart: Instant,
    /// When it arrived, in the receiver's capture.
    pub arrive: Instant,
    pub packet: Packet,
}

/// What an arrow carried. One segment can be several arrows with the same times: a SYN with
/// data (TCP Fast Open) is a [`Packet::Syn`] and a [`Packet::Data`], data with a FIN a
/// [`Packet::Data`] and a [`Packet::Fin`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// A SYN; with `ack`, the SYN-ACK.
    Syn { ack: bool },
    /// Payload: relative sequence numbers `seq..seq + len` of the sender's direction.
    Data { seq: u64, len: u32 },
    /// A FIN, at relative sequence number `seq` of the sender's direction.
    Fin { seq: u64 },
    /// No payload, SYN or FIN: the cumulative ACK `ack`, in the relative sequence space of the
    /// other direction (1 acknowledges the SYN-ACK).
    PureAck { ack: u64 },
}

/// Which part of a connection a ladder shows, on host `a`'s clock: an arrow is in it when
/// host `a` sent or received it within the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// From the connection's first packet until host `a` has sent or received `arrows`
    /// arrows: its handshake and first exchanges.
    Opening { arrows: usize },
    /// From `from` to `to` (both included) after [`Analysis::epoch`], the first packet of all
    /// captures, which is where every plot's time axis starts.
    Span { from: Duration, to: Duration },
}

impl Default for Window {
    fn default() -> Window {
        Window::Opening {
            arrows: OPENING_ARROWS,
        }
    }
}

/// A time window that cannot be read; the message quotes it and shows one that can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowError {
    /// No `..` between two times.
    NotARange(String),
    /// One end is no time with a unit.
    NotATime { value: String, end: String },
    /// The end is not after the start.
    Backwards(String),
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (value, why) = match self {
            WindowError::NotARange(v) => (v, "it is not FROM..TO".to_string()),
            WindowError::NotATime { value, end } => {
                (value, format!("'{end}' is no time with a unit"))
            }
            WindowError::Backwards(v) => (v, "its end is not after its start".to_string()),
        };
        write!(
            f,
            "cannot read '{value}' as a time window: {why} (try 1.2s..1.5s: from and to, in \
             time since the first packet of all captures)"
        )
    }
}

impl std::error::Error for WindowError {}

impl Window {
    /// Reads a [`Window::Span`] written `FROM..TO`, each a time with its unit: `1.2s..1.5s`,
    /// `800ms..1s`.
    pub fn parse_span(s: &str) -> Result<Window, WindowError> {
        let (from, to) = s
            .split_once("..")
            .ok_or_else(|| WindowError::NotARange(s.to_string()))?;
        let time = |end: &str| {
            wire::units::parse_time(end.trim()).map_err(|_| WindowError::NotATime {
                value: s.to_string(),
                end: end.trim().to_string(),
            })
        };
        let (from, to) = (time(from)?, time(to)?);
        if to <= from {
            return Err(WindowError::Backwards(s.to_string()));
        }
        Ok(Window::Span { from, to })
    }
}

/// The connection to `server_port` as the captures `at_a` and `at_b` (indices in
/// [`Analysis::captures`]) saw it: in each, the one whose responder (`b`) has that port and
/// that carried the most data from `a`. `None` when either capture lacks it.
pub fn by_server_port(
    a: &Analysis,
    at_a: usize,
    at_b: usize,
    server_port: u16,
) -> Option<(&Connection, &Connection)> {
    let seen_in = |capture: usize| {
        a.connections
            .iter()
            .filter(|c| c.vantage.capture == capture && c.b.port() == server_port)
            .max_by_key(|c| c.a2b.stats.data_bytes)
    };
    Some((seen_in(at_a)?, seen_in(at_b)?))
}

/// Every connection seen at two or more vantage points (captures, or interfaces of one), as
/// indices into [`Analysis::connections`]: (the view nearest host `a`, the view nearest host
/// `b`), in the order of the first. Views are the same connection when they have the same `a`
/// and `b` (a 4-tuple used again after a close pairs its k-th connection at one point with
/// its k-th at another). Nearest `a` is the view that saw the connection's first packet
/// first, nearest `b` the one that saw it last: a packet from `a` reaches every point on its
/// way to `b` in order.
pub fn both_ends(a: &Analysis) -> Vec<(usize, usize)> {
    type Views = BTreeMap<Vantage, Vec<usize>>;
    let mut by_tuple: BTreeMap<(SocketAddr, SocketAddr), Views> = BTreeMap::new();
    // Connections are in order of their first packet, so each list is too.
    for (i, c) in a.connections.iter().enumerate() {
        by_tuple
            .entry((c.a, c.b))
            .or_default()
            .entry(c.vantage)
            .or_default()
            .push(i);
    }
    let mut out = Vec::new();
    for views in by_tuple.values().filter(|v| v.len() > 1) {
        let most = views.values().map(Vec::len).max().unwrap_or(0);
        for k in 0..most {
            let kth: Vec<usize> = views.values().filter_map(|v| v.get(k).copied()).collect();
            let first_seen = |i: &usize| (a.connections[*i].first_time, *i);
            if let (Some(&near_a), Some(&near_b)) = (
                kth.iter().min_by_key(|i| first_seen(i)),
                kth.iter().max_by_key(|i| first_seen(i)),
            ) {
                if near_a != near_b {
                    out.push((near_a, near_b));
                }
            }
        }
    }
    out.sort_unstable();
    out
}

/// The arrows of one connection that `window` shows, `at_a` as host `a`'s capture saw it and
/// `at_b` as host `b`'s, in order of departure; `epoch` is the analysis's
/// ([`Analysis::epoch`]), from which [`Window::Span`] counts.
pub fn select(epoch: Instant, at_a: &Connection, at_b: &Connection, window: Window) -> Vec<Arrow> {
    let all = all_arrows(at_a, at_b);
    let range = match window {
        Window::Span { from, to } => (epoch + from)..=(epoch + to),
        Window::Opening { arrows } => match opening(at_a.first_time, &all, arrows) {
            Some(r) => r,
            None => return Vec::new(),
        },
    };
    within(all, &range)
}

/// The window that holds the first `n` arrows host `a` saw: from the connection's `first`
/// packet in its capture to the moment it sent or received the `n`-th arrow (all of them
/// when there are fewer). `None` when there is no arrow or `n` is 0.
fn opening(first: Instant, all: &[(Instant, Arrow)], n: usize) -> Option<RangeInclusive<Instant>> {
    let mut seen: Vec<Instant> = all.iter().map(|(t, _)| *t).collect();
    seen.sort_unstable();
    let last = seen.get(n.checked_sub(1)?).or(seen.last())?;
    Some(first..=*last)
}

/// The arrows of one connection, `at_a` as host `a`'s capture saw it and `at_b` as host `b`'s
/// (the same `a` and `b` in both), in order of departure. An arrow is kept when host `a`'s
/// capture saw it, sent or received, within `window` (on that capture's clock); a packet the
/// other capture never saw is no arrow.
pub fn arrows(at_a: &Connection, at_b: &Connection, window: RangeInclusive<Instant>) -> Vec<Arrow> {
    within(all_arrows(at_a, at_b), &window)
}

fn within(all: Vec<(Instant, Arrow)>, window: &RangeInclusive<Instant>) -> Vec<Arrow> {
    all.into_iter()
        .filter(|(seen_at_a, _)| window.contains(seen_at_a))
        .map(|(_, arrow)| arrow)
        .collect()
}

/// Every arrow of the connection with the moment host `a`'s capture saw it, in order of
/// departure (the arrows of one segment in the order of its sequence space: SYN, data, FIN).
fn all_arrows(at_a: &Connection, at_b: &Connection) -> Vec<(Instant, Arrow)> {
    let mut out = Vec::new();
    let mut push = |dir: Dir, depart: Instant, arrive: Instant, packet: Packet| {
        let seen_at_a = if dir == Dir::AtoB { depart } else { arrive };
        let arrow = Arrow {
            dir,
            depart,
            arrive,
            packet,
        };
        out.push((seen_at_a, arrow));
    };
    // Segments leave in the sender's capture and arrive in the receiver's.
    for (dir, sent, recvd) in [
        (Dir::AtoB, &at_a.a2b, &at_b.a2b),
        (Dir::BtoA, &at_b.b2a, &at_a.b2a),
    ] {
        for (depart, arrive, (seq, len, flags)) in pair(copies(sent), copies(recvd)) {
            let syn = flags & FLAG_SYN != 0;
            if syn {
                let ack = flags & FLAG_ACK != 0;
                push(dir, depart, arrive, Packet::Syn { ack });
            }
            // The SYN takes one sequence number before the data.
            let data = seq + u64::from(syn);
            if len > 0 {
                push(dir, depart, arrive, Packet::Data { seq: data, len });
            }
            if flags & FLAG_FIN != 0 {
                let fin = data + u64::from(len);
                push(dir, depart, arrive, Packet::Fin { seq: fin });
            }
        }
    }
    // A direction's `acks` are what the other side sent about its data: the receiver of the
    // data sends them (in its capture) and the data's sender gets them. An ACK that rode on a
    // segment of its sender's is that segment's arrow.
    for (dir, sent, recvd, own) in [
        (Dir::BtoA, &at_b.a2b, &at_a.a2b, &at_b.b2a),
        (Dir::AtoB, &at_a.b2a, &at_b.b2a, &at_a.a2b),
    ] {
        let pure = sent
            .series
            .acks
            .iter()
            .filter(|p| !rides_on_segment(p.time, &own.series.segments))
            .map(|p| (p.seq, p.time));
        let got = recvd.series.acks.iter().map(|p| (p.seq, p.time));
        for (depart, arrive, ack) in pair(pure, got) {
            push(dir, depart, arrive, Packet::PureAck { ack });
        }
    }
    // Stable: one segment's arrows keep their order.
    out.sort_by_key(|(_, a)| a.depart);
    out
}

/// A direction's segments as (what identifies one across captures, when it was seen). Of the
/// flags, SYN, FIN and ACK say what a segment is; PSH and ECN's ECE and CWR do not.
fn copies(d: &Direction) -> impl Iterator<Item = ((u64, u32, u8), Instant)> + '_ {
    let flags = FLAG_SYN | FLAG_FIN | FLAG_ACK;
    d.series
        .segments
        .iter()
        .map(move |g| ((g.seq, g.len, g.flags & flags), g.time))
}

/// Each copy of a packet that arrived (`recvd`: key, time), paired with the last copy of it
/// that left no later (`sent`): (departure, arrival, key), in the order of `recvd`. A copy
/// sent again before the first arrived (a retransmission of a lost one) is the one that
/// arrived; a copy that never arrived pairs with nothing.
fn pair<K: Copy + Eq + Hash>(
    sent: impl IntoIterator<Item = (K, Instant)>,
    recvd: impl IntoIterator<Item = (K, Instant)>,
) -> Vec<(Instant, Instant, K)> {
    let mut departures: HashMap<K, Vec<Instant>> = HashMap::new();
    for (k, t) in sent {
        departures.entry(k).or_default().push(t);
    }
    for times in departures.values_mut() {
        times.sort_unstable();
    }
    recvd
        .into_iter()
        .filter_map(|(k, arrive)| {
            let times = departures.get(&k)?;
            let before = times.partition_point(|&t| t <= arrive).checked_sub(1)?;
            Some((times[before], arrive, k))
        })
        .collect()
}

/// Whether a segment (in time order) left within [`RIDES_NS`] of `t`.
fn rides_on_segment(t: Instant, segments: &[Segment]) -> bool {
    let from = t.as_nanos().saturating_sub(RIDES_NS);
    let i = segments.partition_point(|g| g.time.as_nanos() < from);
    segments
        .get(i)
        .is_some_and(|g| g.time.as_nanos() <= t.as_nanos() + RIDES_NS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, Tcp, ACK, FIN, PSH, SYN};
    use crate::{Analyzer, Options};

    const MS: u64 = 1_000_000;
    const T0: u64 = 1_700_000_000_000_000_000;
    /// One-way delay between the hosts.
    const ONE_WAY_MS: u64 = 100;
    const PORT: u16 = 5206;

    fn at(ms: u64) -> Instant {
        Instant::from_nanos(T0 + ms * MS)
    }

    /// One connection recorded at both ends: the client's capture and the server's.
    struct TwoEnds {
        client: SocketAddr,
        server: SocketAddr,
        client_seq: u32,
        server_seq: u32,
        at_client: Packets,
        at_server: Packets,
    }

    impl TwoEnds {
        /// SYN at 0 ms, SYN-ACK at 100 ms, ACK at 200 ms (leaving times).
        fn open(client_port: u16) -> TwoEnds {
            TwoEnds::open_with_isn(client_port, 1000)
        }

        fn open_with_isn(client_port: u16, client_isn: u32) -> TwoEnds {
            let mut e = TwoEnds {
                client: SocketAddr::from(([10, 0, 0, 1], client_port)),
                server: SocketAddr::from(([10, 0, 0, 2], PORT)),
                client_seq: client_isn,
                server_seq: 9000,
                at_client: Vec::new(),
                at_server: Vec::new(),
            };
            e.send(true, 0, SYN, 0, true);
            e.send(false, ONE_WAY_MS, SYN | ACK, 0, true);
            e.send(true, 2 * ONE_WAY_MS, ACK, 0, true);
            e
        }

        /// A packet leaving at `ms` with `len` payload bytes, acknowledging all the other side
        /// sent before; in the receiver's capture one way later unless it is `lost`.
        fn send(&mut self, from_client: bool, ms: u64, flags: u8, len: u32, arrives: bool) {
            let (src, dst, seq, ack) = if from_client {
                (self.client, self.server, self.client_seq, self.server_seq)
            } else {
                (self.server, self.client, self.server_seq, self.client_seq)
            };
            let mut p = Tcp::new(src, dst, seq, ack, flags);
            p.payload_len = len as usize;
            let bytes = p.build();
            let next = seq.wrapping_add(len + u32::from(flags & (SYN | FIN) != 0));
            let (sent, recvd) = if from_client {
                self.client_seq = next;
                (&mut self.at_client, &mut self.at_server)
            } else {
                self.server_seq = next;
                (&mut self.at_server, &mut self.at_client)
            };
            let t = T0 + ms * MS;
            sent.push((t, bytes.clone()));
            if arrives {
                recvd.push((t + ONE_WAY_MS * MS, bytes));
            }
        }

        fn data(&mut self, from_client: bool, ms: u64, len: u32) {
            self.send(from_client, ms, ACK | PSH, len, true);
        }

        fn ack(&mut self, from_client: bool, ms: u64) {
            self.send(from_client, ms, ACK, 0, true);
        }

        fn analysis(self) -> Analysis {
            analysis_of(vec![
                ("client.pcap", self.at_client),
                ("server.pcap", self.at_server),
            ])
        }
    }

    /// Packets as (time ns, IP datagram), as `synth::pcap` takes them.
    type Packets = Vec<(u64, Vec<u8>)>;

    fn analysis_of(captures: Vec<(&str, Packets)>) -> Analysis {
        let opts = Options {
            keep_series: true,
            ..Options::default()
        };
        let mut an = Analyzer::new(opts);
        for (name, mut packets) in captures {
            packets.sort_by_key(|(t, _)| *t);
            an.add_capture(name, &synth::pcap(packets)[..]).unwrap();
        }
        an.finish()
    }

    /// A 70-byte request in two writes, the second held until the first is ACKed (delayed by
    /// 40 ms), and a 70-byte reply that carries the ACK of the request; the client ACKs it
    /// 40 ms after it arrived.
    fn request_in_two_writes() -> Analysis {
        let mut e = TwoEnds::open(40000);
        e.data(true, 300, 28);
        e.ack(false, 440);
        e.data(true, 540, 42);
        e.data(false, 640, 70);
        e.ack(true, 780);
        e.analysis()
    }

    fn all_arrows(a: &Analysis) -> Vec<Arrow> {
        let (c, s) = by_server_port(a, 0, 1, PORT).unwrap();
        arrows(c, s, at(0)..=at(10_000))
    }

    fn arrow(dir: Dir, depart_ms: u64, packet: Packet) -> Arrow {
        Arrow {
            dir,
            depart: at(depart_ms),
            arrive: at(depart_ms + ONE_WAY_MS),
            packet,
        }
    }

    /// The handshake of [`TwoEnds::open`] as arrows.
    fn handshake() -> Vec<Arrow> {
        vec![
            arrow(Dir::AtoB, 0, Packet::Syn { ack: false }),
            arrow(Dir::BtoA, 100, Packet::Syn { ack: true }),
            arrow(Dir::AtoB, 200, Packet::PureAck { ack: 1 }),
        ]
    }

    #[test]
    fn each_packet_is_an_arrow_from_its_senders_capture_to_its_receivers_in_departure_order() {
        let got = all_arrows(&request_in_two_writes());
        let mut want = handshake();
        want.extend([
            arrow(Dir::AtoB, 300, Packet::Data { seq: 1, len: 28 }),
            arrow(Dir::BtoA, 440, Packet::PureAck { ack: 29 }),
            arrow(Dir::AtoB, 540, Packet::Data { seq: 29, len: 42 }),
            arrow(Dir::BtoA, 640, Packet::Data { seq: 1, len: 70 }),
            arrow(Dir::AtoB, 780, Packet::PureAck { ack: 71 }),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn an_ack_riding_on_a_segment_is_no_arrow_of_its_own() {
        let got = all_arrows(&request_in_two_writes());
        // The reply acknowledged the whole request (71): no pure ACK says so.
        assert!(!got.contains(&arrow(Dir::BtoA, 640, Packet::PureAck { ack: 71 })));
        // Nor does one acknowledge the SYN beside the SYN-ACK.
        assert!(!got.iter().any(|a| a.dir == Dir::BtoA
            && a.depart == at(100)
            && matches!(a.packet, Packet::PureAck { .. })));
    }

    #[test]
    fn the_close_is_a_fin_each_way_and_a_fin_on_data_is_a_second_arrow_beside_it() {
        let mut e = TwoEnds::open(40000);
        e.data(true, 300, 28);
        // The server answers with its last bytes and its FIN in one segment.
        e.send(false, 400, ACK | PSH | FIN, 70, true);
        e.send(true, 500, ACK | FIN, 0, true);
        e.ack(false, 600);
        let got = all_arrows(&e.analysis());
        let mut want = handshake();
        want.extend([
            arrow(Dir::AtoB, 300, Packet::Data { seq: 1, len: 28 }),
            arrow(Dir::BtoA, 400, Packet::Data { seq: 1, len: 70 }),
            arrow(Dir::BtoA, 400, Packet::Fin { seq: 71 }),
            arrow(Dir::AtoB, 500, Packet::Fin { seq: 29 }),
            // The FIN takes a sequence number of its own: 30 acknowledges it.
            arrow(Dir::BtoA, 600, Packet::PureAck { ack: 30 }),
        ]);
        assert_eq!(got, want);
    }

    #[test]
    fn the_window_keeps_what_host_a_sent_or_received_within_it() {
        let a = request_in_two_writes();
        let (c, s) = by_server_port(&a, 0, 1, PORT).unwrap();
        // The client sent the second write at 540 ms and received the server's ACK at 540 ms;
        // the reply reached it at 740 ms, after the window.
        let got = arrows(c, s, at(540)..=at(600));
        assert_eq!(
            got,
            vec![
                arrow(Dir::BtoA, 440, Packet::PureAck { ack: 29 }),
                arrow(Dir::AtoB, 540, Packet::Data { seq: 29, len: 42 }),
            ]
        );
    }

    #[test]
    fn a_segment_the_other_capture_never_saw_is_no_arrow() {
        let mut e = TwoEnds::open(40000);
        e.send(true, 300, ACK | PSH, 28, false);
        e.data(true, 310, 42);
        let got = all_arrows(&e.analysis());
        assert_eq!(
            got[3..],
            [arrow(Dir::AtoB, 310, Packet::Data { seq: 29, len: 42 })]
        );
    }

    #[test]
    fn a_lost_segment_sent_again_is_one_arrow_from_the_copy_that_arrived() {
        let mut e = TwoEnds::open(40000);
        let seq = e.client_seq;
        e.send(true, 300, ACK | PSH, 28, false);
        e.client_seq = seq;
        e.send(true, 700, ACK | PSH, 28, true);
        let got = all_arrows(&e.analysis());
        assert_eq!(
            got[3..],
            [arrow(Dir::AtoB, 700, Packet::Data { seq: 1, len: 28 })]
        );
    }

    #[test]
    fn the_opening_holds_the_first_arrows_host_a_saw_from_the_connections_first_packet() {
        let a = request_in_two_writes();
        let (c, s) = by_server_port(&a, 0, 1, PORT).unwrap();
        let opening = |n| select(a.epoch, c, s, Window::Opening { arrows: n });
        // Seen at the client: the SYN at 0 ms, the SYN-ACK and the ACK at 200, the first
        // write at 300.
        let mut want = handshake();
        want.push(arrow(Dir::AtoB, 300, Packet::Data { seq: 1, len: 28 }));
        assert_eq!(opening(4), want);
        // The fifth, the server's ACK of the first write, reached the client at 540 ms, when
        // the second write left: both are in.
        assert_eq!(opening(5).len(), 6, "{:#?}", opening(5));
        assert_eq!(opening(100), all_arrows(&a));
        assert_eq!(opening(0), []);
    }

    #[test]
    fn a_span_counts_from_the_first_packet_of_all_captures() {
        let a = request_in_two_writes();
        let (c, s) = by_server_port(&a, 0, 1, PORT).unwrap();
        assert_eq!(a.epoch, at(0));
        let span = Window::Span {
            from: Duration::from_millis(540),
            to: Duration::from_millis(600),
        };
        assert_eq!(select(a.epoch, c, s, span), arrows(c, s, at(540)..=at(600)));
    }

    #[test]
    fn a_span_is_read_as_two_times_with_units_the_second_later() {
        let ms = Duration::from_millis;
        assert_eq!(
            Window::parse_span("1.2s..1.5s"),
            Ok(Window::Span {
                from: ms(1200),
                to: ms(1500)
            })
        );
        assert_eq!(
            Window::parse_span("800ms .. 1s"),
            Ok(Window::Span {
                from: ms(800),
                to: ms(1000)
            })
        );
        let err = |s| Window::parse_span(s).unwrap_err();
        assert_eq!(err("1.5s"), WindowError::NotARange("1.5s".into()));
        assert_eq!(
            err("1.2..1.5s"),
            WindowError::NotATime {
                value: "1.2..1.5s".into(),
                end: "1.2".into()
            }
        );
        assert_eq!(err("2s..1s"), WindowError::Backwards("2s..1s".into()));
        assert_eq!(err("1s..1s"), WindowError::Backwards("1s..1s".into()));
        let msg = err("1.2..1.5").to_string();
        assert!(
            msg.contains("'1.2..1.5'") && msg.contains("try 1.2s..1.5s"),
            "{msg}"
        );
    }

    #[test]
    fn both_ends_pairs_each_connection_the_view_that_saw_it_first_as_host_a() {
        let mut e = TwoEnds::open(40000);
        e.data(true, 300, 70);
        e.send(true, 400, ACK | FIN, 0, true);
        e.send(false, 500, ACK | FIN, 0, true);
        e.ack(true, 600);
        // A connection the server's capture missed, and the first one's 4-tuple used again
        // (a new ISN) 5 s later.
        let mut only_client = TwoEnds::open(40001);
        let mut reused = TwoEnds::open_with_isn(40000, 70_000);
        for (t, _) in reused.at_client.iter_mut().chain(&mut reused.at_server) {
            *t += 5_000 * MS;
        }
        e.at_client.append(&mut only_client.at_client);
        e.at_client.append(&mut reused.at_client);
        e.at_server.append(&mut reused.at_server);
        // The server's capture given first.
        let a = analysis_of(vec![
            ("server.pcap", e.at_server),
            ("client.pcap", e.at_client),
        ]);
        assert_eq!(a.connections.len(), 5);
        let pairs = both_ends(&a);
        assert_eq!(pairs.len(), 2, "{pairs:?}");
        for ((near_a, near_b), start_ms) in pairs.into_iter().zip([0, 5_000]) {
            let (ca, cb) = (&a.connections[near_a], &a.connections[near_b]);
            assert_eq!((ca.vantage.capture, cb.vantage.capture), (1, 0));
            assert_eq!((ca.a, ca.b), (cb.a, cb.b));
            assert_eq!(ca.a.port(), 40000);
            // The k-th use of the 4-tuple at one end with the k-th at the other.
            assert_eq!(ca.first_time, at(start_ms));
            assert_eq!(cb.first_time, at(start_ms + ONE_WAY_MS));
        }
        let one = analysis_of(vec![("client.pcap", TwoEnds::open(40000).at_client)]);
        assert_eq!(both_ends(&one), []);
    }

    #[test]
    fn by_server_port_takes_each_captures_busiest_connection_to_the_port() {
        let mut e = TwoEnds::open(40000);
        e.data(true, 300, 70);
        let mut idle = TwoEnds::open(40001);
        idle.ack(true, 400);
        e.at_client.append(&mut idle.at_client);
        e.at_server.append(&mut idle.at_server);
        let a = e.analysis();
        assert_eq!(a.connections.len(), 4);
        let (c, s) = by_server_port(&a, 0, 1, PORT).unwrap();
        assert_eq!((c.vantage.capture, s.vantage.capture), (0, 1));
        assert_eq!((c.a.port(), s.a.port()), (40000, 40000));
        // Seen from the server's end, swapped.
        let (s, c) = by_server_port(&a, 1, 0, PORT).unwrap();
        assert_eq!((c.vantage.capture, s.vantage.capture), (0, 1));
        assert!(by_server_port(&a, 0, 1, 80).is_none());
        assert!(by_server_port(&a, 0, 2, PORT).is_none());
    }
}

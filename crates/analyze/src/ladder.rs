//! The data of a ladder (message-sequence) diagram: one TCP connection seen in two captures,
//! one at each end, turned into arrows, each packet from the moment it left one host (in that
//! host's capture) to the moment it reached the other (in the other's). Data segments and pure
//! ACKs are arrows; an ACK that rode on data is part of the data's arrow, and the handshake is
//! left out.
//!
//! It needs the per-packet series (`Options::keep_series`) and two captures whose clocks agree,
//! as the hosts of a lab do: an arrow is matched across the captures by its sequence or ACK
//! number and by arriving no earlier than it left. It does not choose which part of the
//! connection to show (the caller's window does) and it draws nothing (`report` does).

use std::ops::RangeInclusive;

use wire::Instant;

use crate::model::{Analysis, Connection, Dir, Segment, SeqPoint};

/// An ACK sent within this long of a data segment from the same host counts as riding on it:
/// a pure ACK followed microseconds later by data carrying the same ACK is one event on a
/// diagram's scale, and the series keep the ACK only where its number changed.
const RIDES_NS: u64 = 20_000;

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

/// What an arrow carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// Payload: relative sequence numbers `seq..seq + len` of the sender's direction.
    Data { seq: u64, len: u32 },
    /// No payload: the cumulative ACK `ack`, in the relative sequence space of the other
    /// direction.
    PureAck { ack: u64 },
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

/// The arrows of one connection, `at_a` as host `a`'s capture saw it and `at_b` as host `b`'s
/// (the same `a` and `b` in both), in order of departure. An arrow is kept when host `a`'s
/// capture saw it, sent or received, within `window` (on that capture's clock); a packet the
/// other capture never saw is no arrow.
pub fn arrows(at_a: &Connection, at_b: &Connection, window: RangeInclusive<Instant>) -> Vec<Arrow> {
    let mut out = Vec::new();
    let mut keep = |dir: Dir, depart: Instant, arrive: Instant, packet: Packet| {
        let seen_at_a = if dir == Dir::AtoB { depart } else { arrive };
        if window.contains(&seen_at_a) {
            out.push(Arrow {
                dir,
                depart,
                arrive,
                packet,
            });
        }
    };
    // Data leaves in the sender's capture and arrives in the receiver's.
    for (dir, sent, recvd) in [
        (Dir::AtoB, &at_a.a2b, &at_b.a2b),
        (Dir::BtoA, &at_b.b2a, &at_a.b2a),
    ] {
        for g in sent.series.segments.iter().filter(|g| g.len > 0) {
            let arrival = recvd
                .series
                .segments
                .iter()
                .find(|r| r.seq == g.seq && r.len == g.len && r.time >= g.time);
            if let Some(r) = arrival {
                let packet = Packet::Data {
                    seq: g.seq,
                    len: g.len,
                };
                keep(dir, g.time, r.time, packet);
            }
        }
    }
    // A direction's `acks` are what the other side sent about its data: the receiver of the
    // data sends them (in its capture) and the data's sender gets them. Acknowledging 1 is
    // acknowledging the SYN: the handshake, not drawn.
    for (dir, sent, recvd, own_data) in [
        (Dir::BtoA, &at_b.a2b, &at_a.a2b, &at_b.b2a),
        (Dir::AtoB, &at_a.b2a, &at_b.b2a, &at_a.a2b),
    ] {
        for p in sent.series.acks.iter().filter(|p| p.seq > 1) {
            if rides_on_data(p, &own_data.series.segments) {
                continue;
            }
            let arrival = recvd
                .series
                .acks
                .iter()
                .find(|r| r.seq == p.seq && r.time >= p.time);
            if let Some(r) = arrival {
                keep(dir, p.time, r.time, Packet::PureAck { ack: p.seq });
            }
        }
    }
    out.sort_by_key(|a| a.depart);
    out
}

fn rides_on_data(ack: &SeqPoint, data: &[Segment]) -> bool {
    data.iter()
        .any(|g| g.len > 0 && ack.time.as_nanos().abs_diff(g.time.as_nanos()) <= RIDES_NS)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::synth::{self, Tcp, ACK, PSH, SYN};
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
        at_client: Vec<(u64, Vec<u8>)>,
        at_server: Vec<(u64, Vec<u8>)>,
    }

    impl TwoEnds {
        /// SYN at 0 ms, SYN-ACK at 100 ms, ACK at 200 ms (leaving times).
        fn open(client_port: u16) -> TwoEnds {
            let mut e = TwoEnds {
                client: SocketAddr::from(([10, 0, 0, 1], client_port)),
                server: SocketAddr::from(([10, 0, 0, 2], PORT)),
                client_seq: 1000,
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
            let next = seq.wrapping_add(len + u32::from(flags & SYN != 0));
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
            let opts = Options {
                keep_series: true,
                ..Options::default()
            };
            let mut an = Analyzer::new(opts);
            an.add_capture("client.pcap", &synth::pcap(self.at_client)[..])
                .unwrap();
            an.add_capture("server.pcap", &synth::pcap(self.at_server)[..])
                .unwrap();
            an.finish()
        }
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

    #[test]
    fn each_packet_is_an_arrow_from_its_senders_capture_to_its_receivers_in_departure_order() {
        let got = all_arrows(&request_in_two_writes());
        let want = vec![
            arrow(Dir::AtoB, 300, Packet::Data { seq: 1, len: 28 }),
            arrow(Dir::BtoA, 440, Packet::PureAck { ack: 29 }),
            arrow(Dir::AtoB, 540, Packet::Data { seq: 29, len: 42 }),
            arrow(Dir::BtoA, 640, Packet::Data { seq: 1, len: 70 }),
            arrow(Dir::AtoB, 780, Packet::PureAck { ack: 71 }),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn an_ack_riding_on_data_and_the_handshake_are_no_arrows_of_their_own() {
        let got = all_arrows(&request_in_two_writes());
        // The reply acknowledged the whole request (71): no pure ACK says so.
        assert!(!got.contains(&arrow(Dir::BtoA, 640, Packet::PureAck { ack: 71 })));
        // The handshake's last ACK left at 200 ms.
        assert!(got.iter().all(|a| a.depart > at(200)), "{got:#?}");
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
            got,
            vec![arrow(Dir::AtoB, 310, Packet::Data { seq: 29, len: 42 })]
        );
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

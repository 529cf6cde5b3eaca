//! DNS over TCP (RFC 7766) for the lab's virtual DNS64, straight from the packets: just enough
//! TCP (RFC 9293) to accept a connection, read length-prefixed queries, send the answers and
//! close. Pure logic: segments in, segments out, no socket.
//!
//! What it does: the three-way handshake (its SYN-ACK carries no options, so the client sends
//! at most 536-byte segments and expects no more from it), in-order data with a cumulative ACK,
//! answers sent as soon as a whole query is in, retransmission of everything sent when the
//! client repeats data it already sent (its retransmission timer is the only one: this side
//! keeps none), FIN answered with FIN-ACK, RST for segments of unknown connections.
//!
//! What it does not do: out-of-order reassembly (a segment past a gap is dropped and the
//! client's retransmission fills the gap), window scaling, options, keepalive, timers. A lab's
//! DNS exchanges are a few hundred bytes, which this is enough for.

use std::collections::{HashMap, VecDeque};
use std::net::Ipv6Addr;

/// Segment flags (RFC 9293 §3.1).
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
const HEADER_BYTES: usize = 20;
/// Largest segment sent: RFC 9293 §3.7.1's default MSS, since the SYN-ACK has no MSS option
/// and the client's own MSS option is not read.
const MSS_BYTES: usize = 536;
/// Connections kept at once; the oldest goes when a new one would exceed it.
const MAX_CONNECTIONS: usize = 256;
/// A query buffered past this is a misbehaving client: the connection is reset.
const MAX_QUERY_BYTES: usize = 2 + 65_535;
const WINDOW: u16 = 65_535;

struct Conn {
    /// Our initial sequence number.
    isn: u32,
    /// The next byte expected from the client.
    rcv_nxt: u32,
    /// Query bytes received and not yet answered.
    inbuf: Vec<u8>,
    /// Every byte sent so far (after the SYN): answers with their length prefix.
    sent: Vec<u8>,
}

/// A TCP segment to send, as (local port, remote port, seq, ack, flags, payload).
pub struct Segment {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: Vec<u8>,
}

impl Segment {
    /// The segment's header, to build the packet with (`wire::build::Ip::tcp`).
    pub fn header(&self) -> wire::build::Tcp {
        let t = wire::build::Tcp::new(self.sport, self.dport, self.seq)
            .flags(self.flags & !ACK)
            .window(WINDOW);
        if self.flags & ACK != 0 {
            t.ack(self.ack)
        } else {
            t
        }
    }
}

#[derive(Default)]
pub struct TcpDns {
    conns: HashMap<(Ipv6Addr, u16), Conn>,
    /// Connection keys in the order they were opened, for eviction.
    order: VecDeque<(Ipv6Addr, u16)>,
    /// Queries answered.
    pub answered: u64,
    /// Resets sent (segments of unknown connections, oversized queries).
    pub resets: u64,
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

impl TcpDns {
    /// Handles one segment (header and payload, checksum already checked) from `remote`;
    /// `answer` turns one DNS message into its answer. Segments to send are appended to `out`.
    pub fn segment(
        &mut self,
        remote: Ipv6Addr,
        seg: &[u8],
        mut answer: impl FnMut(&[u8]) -> Option<Vec<u8>>,
        out: &mut Vec<Segment>,
    ) {
        if seg.len() < HEADER_BYTES {
            return;
        }
        let (rport, lport) = (
            u16::from_be_bytes([seg[0], seg[1]]),
            u16::from_be_bytes([seg[2], seg[3]]),
        );
        let (seq, ack, flags) = (be32(&seg[4..8]), be32(&seg[8..12]), seg[13]);
        let data_offset = usize::from(seg[12] >> 4) * 4;
        if data_offset < HEADER_BYTES || data_offset > seg.len() {
            return;
        }
        let payload = &seg[data_offset..];
        let key = (remote, rport);
        let reply = |seq: u32, ack: u32, flags: u8, payload: Vec<u8>| Segment {
            sport: lport,
            dport: rport,
            seq,
            ack,
            flags,
            payload,
        };
        if flags & RST != 0 {
            self.conns.remove(&key);
            return;
        }
        if flags & SYN != 0 && flags & ACK == 0 {
            let isn = initial_seq(remote, rport, seq);
            if !self.conns.contains_key(&key) {
                if self.conns.len() >= MAX_CONNECTIONS {
                    while let Some(old) = self.order.pop_front() {
                        if self.conns.remove(&old).is_some() {
                            break;
                        }
                    }
                }
                self.order.push_back(key);
            }
            // A repeated SYN (our SYN-ACK was lost) gets the same answer again.
            self.conns.insert(
                key,
                Conn {
                    isn,
                    rcv_nxt: seq.wrapping_add(1),
                    inbuf: Vec::new(),
                    sent: Vec::new(),
                },
            );
            out.push(reply(isn, seq.wrapping_add(1), SYN | ACK, Vec::new()));
            return;
        }
        let Some(c) = self.conns.get_mut(&key) else {
            // RFC 9293 §3.10.7.1: a segment for no connection is answered with a reset.
            self.resets += 1;
            if flags & ACK != 0 {
                out.push(reply(ack, 0, RST, Vec::new()));
            } else {
                let len = payload.len() as u32 + u32::from(flags & (SYN | FIN) != 0);
                out.push(reply(0, seq.wrapping_add(len), RST | ACK, Vec::new()));
            }
            return;
        };
        let snd_base = c.isn.wrapping_add(1);
        let sent_before = c.sent.len();
        let mut resend = false;
        if !payload.is_empty() {
            if seq == c.rcv_nxt {
                c.inbuf.extend_from_slice(payload);
                c.rcv_nxt = c.rcv_nxt.wrapping_add(payload.len() as u32);
            } else if c.rcv_nxt.wrapping_sub(seq) as i32 > 0 {
                // Data we already have: our answer (which acknowledged it) was lost.
                resend = true;
            }
        }
        // Answer every whole query: a 2-byte length, then the message (RFC 7766 §8).
        while c.inbuf.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([c.inbuf[0], c.inbuf[1]]));
            if c.inbuf.len() < 2 + len {
                break;
            }
            if let Some(a) = answer(&c.inbuf[2..2 + len]) {
                c.sent.extend_from_slice(&(a.len() as u16).to_be_bytes());
                c.sent.extend_from_slice(&a);
                self.answered += 1;
            }
            c.inbuf.drain(..2 + len);
        }
        if c.inbuf.len() > MAX_QUERY_BYTES {
            self.conns.remove(&key);
            self.resets += 1;
            out.push(reply(
                snd_base.wrapping_add(sent_before as u32),
                0,
                RST,
                Vec::new(),
            ));
            return;
        }
        let from = if resend { 0 } else { sent_before };
        let mut at = from;
        while at < c.sent.len() {
            let end = (at + MSS_BYTES).min(c.sent.len());
            let flags = if end == c.sent.len() { ACK | PSH } else { ACK };
            out.push(reply(
                snd_base.wrapping_add(at as u32),
                c.rcv_nxt,
                flags,
                c.sent[at..end].to_vec(),
            ));
            at = end;
        }
        let fin = flags & FIN != 0 && seq.wrapping_add(payload.len() as u32) == c.rcv_nxt;
        if fin {
            // The client is done: acknowledge its FIN with ours and forget the connection (a
            // lost FIN-ACK makes the client repeat its FIN, which then gets a reset).
            let seq_out = snd_base.wrapping_add(c.sent.len() as u32);
            let ack_out = c.rcv_nxt.wrapping_add(1);
            self.conns.remove(&key);
            out.push(reply(seq_out, ack_out, FIN | ACK, Vec::new()));
        } else if !payload.is_empty() && at == from {
            // Data with nothing to answer yet (half a query): acknowledge it.
            out.push(reply(
                snd_base.wrapping_add(c.sent.len() as u32),
                c.rcv_nxt,
                ACK,
                Vec::new(),
            ));
        }
    }
}

/// An initial sequence number that differs per connection (RFC 6528's intent) and repeats for
/// a repeated SYN. Not secret: the lab is closed.
fn initial_seq(remote: Ipv6Addr, port: u16, their_seq: u32) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in remote
        .octets()
        .iter()
        .chain(&port.to_be_bytes())
        .chain(&their_seq.to_be_bytes())
    {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    (h >> 32) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const CLIENT: Ipv6Addr = Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, 1, 0, 0, 0, 1);

    /// A segment from the client's port 40000 to port 53 (the TCP header and payload only).
    fn seg(seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
        let p = wire::build::Ip::v6(CLIENT, Ipv6Addr::LOCALHOST)
            .tcp(&segment(seq, ack, flags).header(), payload);
        p[40..].to_vec()
    }

    /// A segment from the client's port 40000 to port 53, without payload.
    pub(crate) fn segment(seq: u32, ack: u32, flags: u8) -> Segment {
        Segment {
            sport: 40000,
            dport: 53,
            seq,
            ack,
            flags,
            payload: Vec::new(),
        }
    }

    /// Answers a message with its bytes reversed, so the test can tell which query it answers.
    fn echo(q: &[u8]) -> Option<Vec<u8>> {
        Some(q.iter().rev().copied().collect())
    }

    fn feed(t: &mut TcpDns, s: Vec<u8>) -> Vec<Segment> {
        let mut out = Vec::new();
        t.segment(CLIENT, &s, echo, &mut out);
        out
    }

    #[test]
    fn a_query_split_over_two_segments_is_answered_once_whole_and_fin_is_answered() {
        let mut t = TcpDns::default();
        let synack = feed(&mut t, seg(1000, 0, SYN, b""));
        assert_eq!(synack.len(), 1);
        assert_eq!((synack[0].flags, synack[0].ack), (SYN | ACK, 1001));
        let isn = synack[0].seq;
        // 2-byte length 3, then "abc", split after "a".
        let first = feed(&mut t, seg(1001, isn + 1, ACK, &[0, 3, b'a']));
        assert_eq!(first.len(), 1, "a pure ACK for half a query");
        assert_eq!((first[0].flags, first[0].ack), (ACK, 1004));
        assert!(first[0].payload.is_empty());
        let ans = feed(&mut t, seg(1004, isn + 1, ACK | PSH, b"bc"));
        assert_eq!(ans.len(), 1);
        assert_eq!(ans[0].payload, vec![0, 3, b'c', b'b', b'a']);
        assert_eq!((ans[0].seq, ans[0].ack), (isn + 1, 1006));
        assert_eq!(t.answered, 1);
        let fin = feed(&mut t, seg(1006, isn + 6, FIN | ACK, b""));
        assert_eq!(fin.len(), 1);
        assert_eq!(
            (fin[0].flags, fin[0].seq, fin[0].ack),
            (FIN | ACK, isn + 6, 1007)
        );
        // The connection is gone: anything more gets a reset.
        let rst = feed(&mut t, seg(1007, isn + 7, ACK, b""));
        assert_eq!((rst[0].flags, rst[0].seq), (RST, isn + 7));
    }

    #[test]
    fn repeated_query_bytes_make_the_lost_answer_go_again_in_mss_sized_segments() {
        let mut t = TcpDns::default();
        let isn = feed(&mut t, seg(0, 0, SYN, b""))[0].seq;
        let mut q = vec![0x03, 0x20];
        q.extend(std::iter::repeat_n(7u8, 800));
        let ans = feed(&mut t, seg(1, isn + 1, ACK, &q));
        assert_eq!(
            ans.iter().map(|s| s.payload.len()).collect::<Vec<_>>(),
            vec![536, 266]
        );
        assert_eq!(ans[1].seq, isn + 1 + 536);
        let again = feed(&mut t, seg(1, isn + 1, ACK, &q));
        assert_eq!(again.len(), 2);
        assert_eq!(again[0].seq, isn + 1);
        assert_eq!(t.answered, 1, "answered once, sent twice");
    }

    #[test]
    fn segments_of_unknown_connections_get_resets_and_garbage_nothing() {
        let mut t = TcpDns::default();
        let r = feed(&mut t, seg(5, 77, ACK, b"xy"));
        assert_eq!((r[0].flags, r[0].seq), (RST, 77));
        let r = feed(&mut t, seg(5, 0, 0, b"xy"));
        assert_eq!((r[0].flags, r[0].ack), (RST | ACK, 7));
        assert!(feed(&mut t, seg(5, 0, RST, b"")).is_empty());
        assert!(feed(&mut t, vec![0; 10]).is_empty());
        let mut bad_offset = seg(5, 0, ACK, b"");
        bad_offset[12] = 15 << 4;
        assert!(feed(&mut t, bad_offset).is_empty());
        assert_eq!(t.resets, 2);
    }

    #[test]
    fn the_oldest_connection_goes_when_the_table_is_full() {
        let mut t = TcpDns::default();
        for i in 0..=MAX_CONNECTIONS as u32 {
            let mut s = seg(i, 0, SYN, b"");
            s[0..2].copy_from_slice(&(i as u16).to_be_bytes());
            feed(&mut t, s);
        }
        assert_eq!(t.conns.len(), MAX_CONNECTIONS);
        assert!(!t.conns.contains_key(&(CLIENT, 0)));
        assert!(t.conns.contains_key(&(CLIENT, MAX_CONNECTIONS as u16)));
    }
}

//! Synthetic TCP traffic for tests and the benchmark: a packet builder and a small
//! discrete-event model of one bulk transfer over a bottleneck, recorded at either end.
//!
//! Not a TCP implementation: the sender keeps a fixed window of segments in flight (the
//! receiver's advertised window), retransmits on the third duplicate ACK (then one SACK hole
//! per further duplicate ACK, RFC 6675 style) or on a timeout, and the receiver ACKs every
//! segment with SACK blocks. That is enough to produce realistic queues, losses, SACK,
//! retransmission timeouts, ECN marks and bleaching, deterministically.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::net::{IpAddr, SocketAddr};

use wire::build::{self, Ip};
use wire::Ecn;

pub use wire::build::tcp_option;

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const ECE: u8 = 0x40;
pub const CWR: u8 = 0x80;

/// One TCP packet to build.
#[derive(Clone, Debug)]
pub struct Tcp {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// The AE bit (AccECN).
    pub ae: bool,
    pub window: u16,
    /// Raw option bytes (padded to 4 by the builder).
    pub options: Vec<u8>,
    pub payload_len: usize,
    pub ecn: Ecn,
}

impl Tcp {
    pub fn new(src: SocketAddr, dst: SocketAddr, seq: u32, ack: u32, flags: u8) -> Tcp {
        Tcp {
            src,
            dst,
            seq,
            ack,
            flags,
            ae: false,
            window: 65535,
            options: Vec::new(),
            payload_len: 0,
            ecn: Ecn::NotEct,
        }
    }

    /// The IP datagram, with its lengths and checksums right. A segment between an IPv4 and
    /// an IPv6 address goes over IPv6, the IPv4 one written as IPv4-mapped.
    pub fn build(&self) -> Vec<u8> {
        let v6 = |a: IpAddr| match a {
            IpAddr::V6(v) => v,
            IpAddr::V4(v) => v.to_ipv6_mapped(),
        };
        let (src, dst) = (self.src.ip(), self.dst.ip());
        let ip = Ip::between(src, dst)
            .unwrap_or_else(|| Ip::v6(v6(src), v6(dst)))
            .ecn(self.ecn);
        let mut seg = build::Tcp::new(self.src.port(), self.dst.port(), self.seq)
            .flags(self.flags & !ACK)
            .window(self.window);
        if self.flags & ACK != 0 {
            seg = seg.ack(self.ack);
        }
        if self.ae {
            seg = seg.ae();
        }
        // Payload bytes: a recognisable pattern.
        let payload: Vec<u8> = (0..self.payload_len).map(|i| (i % 251) as u8).collect();
        ip.tcp_with_options(&seg, &self.options, &payload)
    }
}

/// Writes (time ns, datagram) pairs as a nanosecond LINKTYPE_RAW pcap, sorted by time.
pub fn pcap(mut pkts: Vec<(u64, Vec<u8>)>) -> Vec<u8> {
    pkts.sort_by_key(|p| p.0);
    let mut w = wire::pcap::PcapWriter::new(Vec::new()).expect("writing to memory");
    for (t, p) in &pkts {
        w.write(*t, p).expect("writing to memory");
    }
    w.into_inner()
}

/// Where the model records packets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Vantage {
    /// At the sender: data when sent, ACKs when they arrive.
    Sender,
    /// At the receiver: data when it arrives, ACKs when sent.
    Receiver,
}

/// A bulk transfer from `client` to `server` through one bottleneck.
#[derive(Clone, Debug)]
pub struct Bulk {
    pub client: SocketAddr,
    pub server: SocketAddr,
    pub isn_client: u32,
    pub isn_server: u32,
    /// Start time, ns.
    pub start_ns: u64,
    pub bytes: u64,
    pub mss: u32,
    /// Receiver's window in segments (the sender keeps this many in flight).
    pub window_segments: u32,
    /// Bottleneck rate, bytes per second.
    pub rate_bytes_per_s: u64,
    /// Base round-trip time (propagation both ways), ns.
    pub base_rtt_ns: u64,
    /// Segment numbers (0-based) dropped at their first transmission.
    pub drop_first_tx: BTreeSet<u64>,
    /// Segment numbers whose first retransmission is dropped too (forcing a timeout).
    pub drop_second_tx: BTreeSet<u64>,
    /// Retransmission timeout, ns.
    pub rto_ns: u64,
    /// Negotiate classic ECN and send data ECT(0).
    pub ecn: bool,
    /// Bottleneck queue (in segments) above which ECT packets are CE-marked.
    pub ce_threshold_segments: u64,
    /// The path clears the ECN field (bleaching) on the way to the receiver.
    pub bleach: bool,
    pub vantage: Vantage,
    /// Data segments carry a TCP timestamp (TSval from a 1 kHz clock, as Linux's).
    pub timestamps: bool,
}

impl Bulk {
    pub fn new(client: SocketAddr, server: SocketAddr) -> Bulk {
        Bulk {
            client,
            server,
            isn_client: 1_000_000,
            isn_server: 5_000_000,
            start_ns: 1_700_000_000_000_000_000,
            bytes: 1_000_000,
            mss: 1448,
            window_segments: 20,
            rate_bytes_per_s: 10_000_000 / 8 * 8,
            base_rtt_ns: 20_000_000,
            drop_first_tx: BTreeSet::new(),
            drop_second_tx: BTreeSet::new(),
            rto_ns: 250_000_000,
            ecn: false,
            ce_threshold_segments: u64::MAX,
            bleach: false,
            vantage: Vantage::Sender,
            timestamps: false,
        }
    }

    /// Runs the model and returns the recorded packets (time ns, IP datagram).
    pub fn run(&self) -> Vec<(u64, Vec<u8>)> {
        let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
        let (c, s) = (self.client, self.server);
        let half = self.base_rtt_ns / 2;
        let at_sender = self.vantage == Vantage::Sender;
        let rec = |out: &mut Vec<(u64, Vec<u8>)>,
                   t_send: u64,
                   t_arrive: u64,
                   from_client: bool,
                   p: Tcp| {
            // Data goes client -> server; the sender is the client.
            let t = if from_client == at_sender {
                t_send
            } else {
                t_arrive
            };
            out.push((t, p.build()));
        };
        let nseg = self.bytes.div_ceil(u64::from(self.mss));
        let seg_len = |i: u64| -> usize {
            (self.bytes - i * u64::from(self.mss)).min(u64::from(self.mss)) as usize
        };
        let cseq = |i: u64| {
            self.isn_client
                .wrapping_add(1)
                .wrapping_add((i * u64::from(self.mss)) as u32)
        };
        let sack_opts = {
            let mut o = tcp_option::mss(self.mss as u16);
            o.extend(tcp_option::sack_permitted());
            o.extend(tcp_option::wscale(7));
            o
        };
        let window_bytes = u64::from(self.window_segments) * u64::from(self.mss);
        let raw_window = (window_bytes >> 7).min(65535) as u16;
        // Handshake.
        let t0 = self.start_ns;
        let mut syn = Tcp::new(
            c,
            s,
            self.isn_client,
            0,
            SYN | if self.ecn { ECE | CWR } else { 0 },
        );
        syn.options = sack_opts.clone();
        rec(&mut out, t0, t0 + half, true, syn);
        let mut synack = Tcp::new(
            s,
            c,
            self.isn_server,
            self.isn_client.wrapping_add(1),
            SYN | ACK | if self.ecn { ECE } else { 0 },
        );
        synack.options = sack_opts;
        rec(&mut out, t0 + half, t0 + 2 * half, false, synack);
        let ack_no_data = self.isn_server.wrapping_add(1);
        let mut hs_ack = Tcp::new(c, s, cseq(0), ack_no_data, ACK);
        hs_ack.window = 65535;
        let t1 = t0 + 2 * half;
        rec(&mut out, t1, t1 + half, true, hs_ack);

        // Events: (time, order, kind). Kinds: 0 = data arrives at receiver (seg, ecn),
        // 1 = ACK arrives at sender (cum, sacks).
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
        enum Ev {
            Arrive {
                seg: u64,
                ecn: u8,
            },
            Ack {
                cum: u64,
                sacks: Vec<(u64, u64)>,
                ece: bool,
            },
            Timer {
                cum: u64,
            },
        }
        let mut q: BinaryHeap<Reverse<(u64, u64, Ev)>> = BinaryHeap::new();
        let mut order = 0u64;
        let mut now = t1;
        let mut next_new = 0u64;
        let mut cum_acked = 0u64; // segments
        let mut dupacks = 0u32;
        let mut retransmitted: BTreeSet<u64> = BTreeSet::new();
        let mut tx_count: Vec<u8> = vec![0; nseg as usize];
        let mut sacked: BTreeSet<u64> = BTreeSet::new();
        let mut link_free = now;
        let ser_ns = u64::from(self.mss) * 1_000_000_000 / self.rate_bytes_per_s.max(1);
        let mut rcv_next = 0u64;
        let mut rcv_ooo: BTreeSet<u64> = BTreeSet::new();
        let mut ece_pending = false;
        let mut cwr_next = false;
        let mut last_progress = now;

        let send = |seg: u64,
                    now: u64,
                    link_free: &mut u64,
                    tx_count: &mut Vec<u8>,
                    q: &mut BinaryHeap<Reverse<(u64, u64, Ev)>>,
                    order: &mut u64,
                    out: &mut Vec<(u64, Vec<u8>)>,
                    cwr: bool| {
            let n = tx_count[seg as usize];
            tx_count[seg as usize] = n.saturating_add(1);
            let mut p = Tcp::new(
                c,
                s,
                cseq(seg),
                ack_no_data,
                ACK | PSH | if cwr { CWR } else { 0 },
            );
            p.window = 65535;
            p.payload_len = seg_len(seg);
            if self.timestamps {
                // A 1 kHz clock with an arbitrary origin (Linux randomises it per connection).
                p.options =
                    tcp_option::timestamps(((now / 1_000_000) as u32).wrapping_add(0x5a5a_0000), 0);
            }
            p.ecn = if self.ecn { Ecn::Ect0 } else { Ecn::NotEct };
            let queue_segments = link_free.saturating_sub(now) / ser_ns.max(1);
            let dep = (*link_free).max(now) + ser_ns;
            *link_free = dep;
            let arrive = dep + half;
            let dropped = (n == 0 && self.drop_first_tx.contains(&seg))
                || (n == 1 && self.drop_second_tx.contains(&seg));
            let mut arr_ecn = p.ecn;
            if self.ecn && queue_segments >= self.ce_threshold_segments {
                arr_ecn = Ecn::Ce;
            }
            if self.bleach {
                arr_ecn = Ecn::NotEct;
            }
            if at_sender {
                out.push((now, p.build()));
            } else if !dropped {
                let mut pa = p.clone();
                pa.ecn = arr_ecn;
                out.push((arrive, pa.build()));
            }
            if !dropped {
                *order += 1;
                q.push(Reverse((
                    arrive,
                    *order,
                    Ev::Arrive {
                        seg,
                        ecn: arr_ecn.bits(),
                    },
                )));
            }
        };

        loop {
            // The sender fills its window with new data.
            while next_new < nseg && next_new < cum_acked + u64::from(self.window_segments) {
                send(
                    next_new,
                    now,
                    &mut link_free,
                    &mut tx_count,
                    &mut q,
                    &mut order,
                    &mut out,
                    cwr_next,
                );
                cwr_next = false;
                next_new += 1;
                order += 1;
                q.push(Reverse((
                    now + self.rto_ns,
                    order,
                    Ev::Timer { cum: cum_acked },
                )));
            }
            let Some(Reverse((t, _, ev))) = q.pop() else {
                break;
            };
            now = t;
            match ev {
                Ev::Arrive { seg, ecn } => {
                    if ecn == Ecn::Ce.bits() {
                        ece_pending = true;
                    }
                    if seg == rcv_next {
                        rcv_next += 1;
                        while rcv_ooo.remove(&rcv_next) {
                            rcv_next += 1;
                        }
                    } else if seg > rcv_next {
                        rcv_ooo.insert(seg);
                    }
                    // SACK blocks: runs of out-of-order segments, most recent first.
                    let mut blocks: Vec<(u64, u64)> = Vec::new();
                    for &x in &rcv_ooo {
                        match blocks.last_mut() {
                            Some(b) if b.1 == x => b.1 = x + 1,
                            _ => blocks.push((x, x + 1)),
                        }
                    }
                    blocks.reverse();
                    blocks.truncate(3);
                    let ack_seq = |i: u64| -> u32 {
                        let b = (i * u64::from(self.mss)).min(self.bytes);
                        self.isn_client.wrapping_add(1).wrapping_add(b as u32)
                    };
                    let mut a = Tcp::new(
                        s,
                        c,
                        ack_no_data,
                        ack_seq(rcv_next),
                        ACK | if ece_pending { ECE } else { 0 },
                    );
                    a.window = raw_window;
                    if !blocks.is_empty() {
                        a.options = tcp_option::sack(
                            &blocks
                                .iter()
                                .map(|&(l, r)| (ack_seq(l), ack_seq(r)))
                                .collect::<Vec<_>>(),
                        );
                    }
                    rec(&mut out, now, now + half, false, a);
                    order += 1;
                    q.push(Reverse((
                        now + half,
                        order,
                        Ev::Ack {
                            cum: rcv_next,
                            sacks: blocks,
                            ece: ece_pending,
                        },
                    )));
                }
                Ev::Ack { cum, sacks, ece } => {
                    if ece && self.ecn {
                        cwr_next = true;
                        ece_pending = false;
                    }
                    for (l, r) in &sacks {
                        for x in *l..*r {
                            sacked.insert(x);
                        }
                    }
                    if cum > cum_acked {
                        cum_acked = cum;
                        dupacks = 0;
                        last_progress = now;
                        order += 1;
                        q.push(Reverse((now + self.rto_ns, order, Ev::Timer { cum })));
                    } else if cum < nseg {
                        dupacks += 1;
                        if dupacks >= 3 {
                            // Retransmit the lowest hole not yet retransmitted.
                            // RFC 6675 §4 IsLost: three SACKed segments above it.
                            let hole = (cum_acked..next_new).find(|x| {
                                !sacked.contains(x)
                                    && !retransmitted.contains(x)
                                    && sacked.range(x + 1..).take(3).count() == 3
                            });
                            if let Some(h) = hole {
                                retransmitted.insert(h);
                                send(
                                    h,
                                    now,
                                    &mut link_free,
                                    &mut tx_count,
                                    &mut q,
                                    &mut order,
                                    &mut out,
                                    false,
                                );
                            }
                        }
                    }
                    if cum_acked >= nseg {
                        // Done: FIN both ways.
                        let fin =
                            Tcp::new(c, s, cseq(nseg).wrapping_add(0), ack_no_data, FIN | ACK);
                        let mut fin = fin;
                        fin.seq = self
                            .isn_client
                            .wrapping_add(1)
                            .wrapping_add(self.bytes as u32);
                        rec(&mut out, now, now + half, true, fin);
                        let mut fin2 = Tcp::new(
                            s,
                            c,
                            ack_no_data,
                            self.isn_client
                                .wrapping_add(2)
                                .wrapping_add(self.bytes as u32),
                            FIN | ACK,
                        );
                        fin2.window = raw_window;
                        rec(&mut out, now + half, now + 2 * half, false, fin2);
                        let last = Tcp::new(
                            c,
                            s,
                            self.isn_client
                                .wrapping_add(2)
                                .wrapping_add(self.bytes as u32),
                            ack_no_data.wrapping_add(1),
                            ACK,
                        );
                        rec(&mut out, now + 2 * half, now + 3 * half, true, last);
                        break;
                    }
                }
                Ev::Timer { cum } => {
                    if cum == cum_acked && cum_acked < nseg && now - last_progress >= self.rto_ns {
                        // Timeout: retransmit the first unacknowledged segment.
                        retransmitted.insert(cum_acked);
                        send(
                            cum_acked,
                            now,
                            &mut link_free,
                            &mut tx_count,
                            &mut q,
                            &mut order,
                            &mut out,
                            false,
                        );
                        last_progress = now;
                        order += 1;
                        q.push(Reverse((now + 2 * self.rto_ns, order, Ev::Timer { cum })));
                    }
                }
            }
        }
        out
    }
}

//! The analyzer: captures in, [`Analysis`] out.
//!
//! Two halves. The front reads each capture ([`crate::capture`]), strips the link layer
//! ([`crate::link`]) and hands each IP datagram as an [`Item`] to the shard that keeps its
//! connection, chosen by a hash of the address pair, which it reads from the raw bytes at
//! fixed offsets for unfragmented TCP and UDP (other datagrams are parsed to find it). A
//! [`ShardAnalyzer`] parses the IP and transport headers ([`crate::headers`]) and the TCP
//! options ([`crate::tcpopt`]), applies the filter, and feeds the TCP connection or UDP flow
//! the packet belongs to, keyed by vantage point and address pair. A SYN on a 4-tuple whose
//! connection was closed or reset starts a new connection. Problems in the middle of a file
//! become warnings naming the packet number; the analysis keeps what it read. It does not open
//! files, print, or start threads.
//!
//! [`Analyzer`] joins the two halves on one thread. [`Splitter`] is the front alone, for a
//! caller that runs shards on several threads: the result of [`Splitter::finish`] over any
//! number of shards is the same as one [`Analyzer`]'s.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use wire::packet::{TcpHeader, Transport};
use wire::{Ecn, Instant};

use crate::capture::{CaptureError, CaptureReader, RawPacket, RECORDS_ANY};
use crate::diagnose;
use crate::filter::Filter;
use crate::headers;
use crate::link;
use crate::model::*;
use crate::tcp::{TcpConn, TcpPacket};
use crate::tcpopt;
use crate::udp::UdpState;

/// How to analyze.
#[derive(Clone, Debug)]
pub struct Options {
    /// Keep the per-packet time-sequence series (for plots). Memory then grows with the
    /// number of packets; without it, with the number of connections.
    pub keep_series: bool,
    /// Only connections and flows matching this.
    pub filter: Option<Filter>,
    /// Most warnings kept (the rest are counted per capture).
    pub max_warnings: usize,
    /// Closed connections are finished and dropped before the first IP packet whose captured
    /// bytes start at or after each multiple of this many bytes of a capture; a pcap read on
    /// several threads is read in parts of this size ([`ChunkedCapture`]). By position in the
    /// file rather than by count of packets, so that a part read by itself knows where the
    /// sweeps fall in it. At least 4096.
    pub part_bytes: u64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep_series: false,
            filter: None,
            max_warnings: 100,
            part_bytes: PART_BYTES,
        }
    }
}

/// A fast, non-cryptographic hasher for flow keys (inputs are not adversarial enough to
/// matter for a one-shot offline analysis, and SipHash is a third of the per-packet cost).
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// [`Options::part_bytes`]'s default: parts big enough that finding each one's first record
/// and handing it over cost nothing next to reading it, small enough that a few per thread
/// in memory at once stay far below the file.
pub const PART_BYTES: u64 = 4 << 20;
/// How often (in IP packets) closed connections are swept when packets come one by one
/// ([`Analyzer::add_packet`]), without a file.
const SWEEP_EVERY_PACKETS: u32 = 65_536;
/// How often (in bytes of input) a reader of a capture in memory is told how far it got.
pub const PROGRESS_STEP_BYTES: u64 = 4 << 20;
/// How long after its last packet a closed connection is finished: a reused 4-tuple within
/// this time still starts a new connection (see `TcpConn::is_reuse_by`).
const SWEEP_AFTER_CLOSE: wire::Duration = wire::Duration::from_secs(30);

/// One end of a flow, in a form that hashes and compares in a few instructions: an IPv4
/// address in the low 32 bits or an IPv6 address, and the port with the family above it (so
/// that 10.0.0.1 and ::a00:1 differ).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct End {
    ip: u128,
    port_family: u32,
}

impl End {
    fn new(ip: IpAddr, port: u16) -> End {
        match ip {
            IpAddr::V4(a) => End {
                ip: u128::from(u32::from(a)),
                port_family: u32::from(port),
            },
            IpAddr::V6(a) => End {
                ip: u128::from(a),
                port_family: u32::from(port) | 1 << 16,
            },
        }
    }
    fn of(s: SocketAddr) -> End {
        End::new(s.ip(), s.port())
    }
    /// The inverse of [`End::new`].
    fn socket(self) -> SocketAddr {
        let port = self.port_family as u16;
        if self.port_family >> 16 == 1 {
            SocketAddr::new(IpAddr::V6(Ipv6Addr::from(self.ip)), port)
        } else {
            SocketAddr::new(IpAddr::V4(Ipv4Addr::from(self.ip as u32)), port)
        }
    }
}

/// (vantage, lower end, higher end): both directions of a flow map to one key.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Key {
    vantage: u64,
    lo: End,
    hi: End,
}

impl Hash for Key {
    /// One word for the hasher, mixed from every field with independent multiplies (a chain
    /// of one multiply per field showed in profiles on packets that miss the last-connection
    /// cache), then folded so that its low bits, which pick the table's bucket, depend on all
    /// of them. [`pair_shard`] keeps its own hash: the split must not depend on this one.
    fn hash<H: Hasher>(&self, h: &mut H) {
        let fold = |ip: u128| ip as u64 ^ ((ip >> 64) as u64).rotate_left(29);
        let ports = u64::from(self.lo.port_family) << 32 | u64::from(self.hi.port_family);
        let x = fold(self.lo.ip).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ fold(self.hi.ip).wrapping_mul(0xc2b2_ae3d_27d4_eb4f)
            ^ ports.wrapping_mul(0x1656_67b1_9e37_79f9)
            ^ self.vantage;
        h.write_u64(x ^ (x >> 32));
    }
}

impl Key {
    fn new(v: Vantage, x: End, y: End) -> Key {
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        Key {
            vantage: vantage_word(v),
            lo,
            hi,
        }
    }
}

/// Which of `count` shards keeps the flow between ends `x` and `y`: by the address pair
/// alone, so that both directions (a sum of one hash per end, which does not depend on their
/// order) and every vantage point of a connection fall in the same one (and `ecn_bleached`
/// still sees both views). Every thread of a parallel reading computes it for every packet:
/// two independent multiplies, one to mix, and a multiply rather than a division to scale
/// the result to `count`.
#[inline]
fn pair_shard(x: End, y: End, count: u32) -> u32 {
    if count <= 1 {
        return 0;
    }
    let end = |e: End| {
        let ip = e.ip as u64 ^ ((e.ip >> 64) as u64).rotate_left(29);
        // The port in the low bits: a multiply spreads low bits up, never down.
        (ip.rotate_left(20) ^ u64::from(e.port_family)).wrapping_mul(0xd6e8_feb8_6659_fd93)
    };
    let sum = end(x).wrapping_add(end(y));
    let mixed = (sum ^ (sum >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (((mixed >> 32) * u64::from(count)) >> 32) as u32
}

/// A vantage point as one word, for keys.
fn vantage_word(v: Vantage) -> u64 {
    (v.capture as u64) << 32 | u64::from(v.interface)
}

/// One direction of a flow at one vantage point, as [`Recent`] finds it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct Way {
    vantage: u64,
    src: End,
    dst: End,
}

/// Which of `count` shards keeps the flow of IP datagram `ip`: [`pair_shard`] of its address
/// pair, read at fixed offsets from an unfragmented IPv4 datagram or an IPv6 one without
/// extension headers that carries TCP or UDP (where [`headers::parse`] finds them too), and
/// from the full parse otherwise. Datagrams that are neither TCP nor UDP go to shard 0.
fn shard_of(ip: &[u8], count: u32) -> u32 {
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let be16 = |b: &[u8]| u16::from_be_bytes([b[0], b[1]]);
    let ends = match ip.first().map(|b| b >> 4) {
        Some(4) => {
            let hlen = usize::from(ip[0] & 0x0f) * 4;
            match ip.get(..hlen + 4) {
                Some(d)
                    if hlen >= 20 && matches!(d[9], 6 | 17) && d[6] & 0x3f == 0 && d[7] == 0 =>
                {
                    Some((
                        End {
                            ip: u128::from(be32(&d[12..])),
                            port_family: u32::from(be16(&d[hlen..])),
                        },
                        End {
                            ip: u128::from(be32(&d[16..])),
                            port_family: u32::from(be16(&d[hlen + 2..])),
                        },
                    ))
                }
                _ => None,
            }
        }
        Some(6) => match ip.get(..44) {
            Some(d) if matches!(d[6], 6 | 17) => {
                let addr = |o: usize| {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&d[o..o + 16]);
                    u128::from_be_bytes(b)
                };
                Some((
                    End {
                        ip: addr(8),
                        port_family: u32::from(be16(&d[40..])) | 1 << 16,
                    },
                    End {
                        ip: addr(24),
                        port_family: u32::from(be16(&d[42..])) | 1 << 16,
                    },
                ))
            }
            _ => None,
        },
        _ => None,
    };
    let (x, y) = match ends {
        Some(e) => e,
        None => match headers::parse(ip) {
            Ok(h) => match h.transport {
                Transport::Tcp(t) => (
                    End::new(h.ip.src, t.src_port),
                    End::new(h.ip.dst, t.dst_port),
                ),
                Transport::Udp {
                    src_port, dst_port, ..
                } => (End::new(h.ip.src, src_port), End::new(h.ip.dst, dst_port)),
                _ => return 0,
            },
            Err(_) => return 0,
        },
    };
    pair_shard(x, y, count)
}

/// One IP datagram on its way from the front ([`Splitter`]) to the shard that keeps its
/// connection ([`ShardAnalyzer`]), which parses it; or the front's signal to finish closed
/// connections. `'a` is the capture's bytes (the datagram is read in place). Small, so that
/// handing it over costs little next to the parse.
pub struct Item<'a>(ItemKind<'a>);

enum ItemKind<'a> {
    Packet {
        vantage: Vantage,
        /// The record's number, for warnings.
        number: u64,
        time: Instant,
        /// The IP datagram as captured.
        ip: &'a [u8],
    },
    Sweep(Instant),
}

/// A TCP packet with its headers parsed, inside a shard.
struct TcpItem<'a> {
    vantage: Vantage,
    /// The record's number in its capture (Wireshark's frame number).
    number: u64,
    time: Instant,
    src: End,
    dst: End,
    h: TcpHeader,
    ecn: Ecn,
    ttl: u8,
    ip_header_len: usize,
    /// The IP datagram as captured.
    ip: &'a [u8],
}

/// Warnings kept (the first `max` in capture and packet order) and the number left out per
/// capture: the front keeps its own, and each shard those about the datagrams it parsed;
/// [`Front::into_analysis`] merges them into what one reader would have kept.
#[derive(Clone, Debug, Default)]
struct Warnings {
    max: usize,
    kept: Vec<Warning>,
    /// Indexed by capture.
    dropped: Vec<u64>,
}

impl Warnings {
    fn new(max: usize) -> Warnings {
        Warnings {
            max,
            ..Warnings::default()
        }
    }

    fn warn(&mut self, capture: usize, packet: u64, message: String) {
        if self.kept.len() < self.max {
            self.kept.push(Warning {
                capture,
                packet,
                message,
            });
        } else {
            self.count_dropped(capture, 1);
        }
    }

    fn count_dropped(&mut self, capture: usize, n: u64) {
        if self.dropped.len() <= capture {
            self.dropped.resize(capture + 1, 0);
        }
        self.dropped[capture] += n;
    }

    /// Joins `others` into these: each set holds the first of its own warnings in capture and
    /// packet order (a reader warns in that order), so the first `max` of the union sorted
    /// that way are the first `max` overall.
    fn merge(&mut self, others: Vec<Warnings>) {
        for o in others {
            self.kept.extend(o.kept);
            for (c, &n) in o.dropped.iter().enumerate() {
                if n > 0 {
                    self.count_dropped(c, n);
                }
            }
        }
        // Stable: one packet's warnings stay in the order they were given.
        self.kept.sort_by_key(|w| (w.capture, w.packet));
        for w in self.kept.split_off(self.kept.len().min(self.max)) {
            self.count_dropped(w.capture, 1);
        }
    }
}

/// The front: capture summaries, warnings about records and link layers, the epoch and the
/// sweep clock, which are the same however many shards there are.
struct Front {
    epoch: Option<Instant>,
    captures: Vec<CaptureSummary>,
    warnings: Warnings,
    /// IP packets since the last sweep of closed connections (packets fed one by one).
    since_sweep: u32,
    /// Offset in the current capture at or after which the next IP packet is preceded by a
    /// sweep.
    next_sweep: u64,
    /// [`Options::part_bytes`].
    part_bytes: u64,
}

impl Front {
    fn new(opts: &Options) -> Front {
        Front {
            epoch: None,
            captures: Vec::new(),
            warnings: Warnings::new(opts.max_warnings),
            since_sweep: 0,
            next_sweep: opts.part_bytes.max(4096),
            part_bytes: opts.part_bytes.max(4096),
        }
    }

    /// Reads a whole capture; `each(front, vantage, number, time, offset, ip)` gets every IP
    /// datagram, `offset` being where it starts in the (uncompressed) input, and `progress`
    /// the offset reached every [`PROGRESS_STEP_BYTES`] (everything before it was handed out).
    fn read_capture(
        &mut self,
        name: &str,
        mut rd: CaptureReader<'_>,
        progress: &mut dyn FnMut(u64),
        mut each: impl FnMut(&mut Front, Vantage, u64, Instant, (u64, u64), &[u8]),
    ) {
        let cap = self.captures.len();
        self.captures.push(CaptureSummary {
            name: name.to_string(),
            format: rd.format_name(),
            ..CaptureSummary::default()
        });
        self.next_sweep = self.part_bytes;
        if let Some(e) = self.walk_any(cap, &mut rd, u64::MAX, progress, &mut each) {
            let n = e.packet();
            self.warn(cap, n, format!("{e}; the rest of the file is ignored"));
        }
        self.captures[cap].interfaces = rd.interfaces();
    }

    /// [`Front::walk`] with the loop for the reader's record layout, chosen once for the
    /// file: 4 to 7 are a pcap in memory in either byte order and timestamp unit
    /// (`RECORDS_PCAP_IN_MEMORY` and its bits).
    fn walk_any(
        &mut self,
        cap: usize,
        rd: &mut CaptureReader<'_>,
        stop_at: u64,
        progress: &mut dyn FnMut(u64),
        each: &mut impl FnMut(&mut Front, Vantage, u64, Instant, (u64, u64), &[u8]),
    ) -> Option<CaptureError> {
        match rd.records() {
            4 => self.walk::<4>(cap, rd, stop_at, progress, each),
            5 => self.walk::<5>(cap, rd, stop_at, progress, each),
            6 => self.walk::<6>(cap, rd, stop_at, progress, each),
            7 => self.walk::<7>(cap, rd, stop_at, progress, each),
            _ => self.walk::<RECORDS_ANY>(cap, rd, stop_at, progress, each),
        }
    }

    /// [`Front::read_capture`]'s loop over the records of capture `cap`, which lie as
    /// `RECORDS` says ([`CaptureReader::records`]), until the end of the file, an error
    /// (returned), or the first record that starts at or after `stop_at`.
    fn walk<const RECORDS: u8>(
        &mut self,
        cap: usize,
        rd: &mut CaptureReader<'_>,
        stop_at: u64,
        progress: &mut dyn FnMut(u64),
        each: &mut impl FnMut(&mut Front, Vantage, u64, Instant, (u64, u64), &[u8]),
    ) -> Option<CaptureError> {
        let mut next_progress = PROGRESS_STEP_BYTES;
        let mut unsupported: Vec<u32> = Vec::new();
        loop {
            if stop_at != u64::MAX && rd.position() >= stop_at {
                return None;
            }
            let p: RawPacket<'_> = match rd.next_fixed::<RECORDS>() {
                Ok(Some(p)) => p,
                Ok(None) => return None,
                Err(e) => return Some(e),
            };
            if p.offset >= next_progress {
                next_progress = p.offset + PROGRESS_STEP_BYTES;
                progress(p.offset);
            }
            let s = &mut self.captures[cap];
            s.packets += 1;
            s.captured_bytes += p.data.len() as u64;
            let vantage = Vantage {
                capture: cap,
                interface: p.interface,
            };
            let (number, time) = (p.number, p.time);
            match link::ip_payload(p.linktype, p.data) {
                Ok(Some(ip)) => {
                    s.ip_packets += 1;
                    // The datagram lies inside the record's bytes.
                    let inside = (ip.as_ptr() as usize).wrapping_sub(p.data.as_ptr() as usize);
                    let offset = p.offset + inside.min(p.data.len()) as u64;
                    each(self, vantage, number, time, (p.offset, offset), ip);
                }
                Ok(None) => s.non_ip_packets += 1,
                Err(link::LinkError::Unsupported(t)) => {
                    s.non_ip_packets += 1;
                    if !unsupported.contains(&t) {
                        unsupported.push(t);
                        let msg = link::LinkError::Unsupported(t).to_string();
                        self.warn(cap, number, format!("{msg}; its packets are skipped"));
                    }
                }
                Err(e) => {
                    s.non_ip_packets += 1;
                    self.warn(cap, number, e.to_string());
                }
            }
        }
    }

    fn warn(&mut self, capture: usize, packet: u64, message: String) {
        self.warnings.warn(capture, packet, message);
    }

    /// One IP datagram: handed to `sink` with the index of the shard (of `count`) that keeps
    /// its flow.
    /// `offset`: where the datagram's record's captured bytes start in the capture (None for
    /// packets fed one by one, swept by count).
    #[allow(clippy::too_many_arguments)]
    fn packet<'a>(
        &mut self,
        vantage: Vantage,
        number: u64,
        time: Instant,
        offset: Option<u64>,
        ip: &'a [u8],
        count: u32,
        sink: &mut impl FnMut(u32, Item<'a>),
    ) {
        self.epoch = Some(self.epoch.map_or(time, |e| e.min(time)));
        let sweep = match offset {
            Some(at) => {
                let due = at >= self.next_sweep;
                if due {
                    self.next_sweep = (at / self.part_bytes + 1) * self.part_bytes;
                }
                due
            }
            None => {
                self.since_sweep += 1;
                let due = self.since_sweep >= SWEEP_EVERY_PACKETS;
                if due {
                    self.since_sweep = 0;
                }
                due
            }
        };
        if sweep {
            for shard in 0..count {
                sink(shard, Item(ItemKind::Sweep(time)));
            }
        }
        let shard = if count <= 1 { 0 } else { shard_of(ip, count) };
        sink(
            shard,
            Item(ItemKind::Packet {
                vantage,
                number,
                time,
                ip,
            }),
        );
    }

    fn into_analysis(mut self, mut parts: Vec<ShardResult>) -> Analysis {
        let mut connections = Vec::new();
        let mut udp = Vec::new();
        let mut warnings = Vec::new();
        let one = parts.len() == 1;
        for p in parts.drain(..) {
            connections.extend(p.connections);
            udp.extend(p.udp);
            warnings.push(p.warnings);
        }
        self.warnings.merge(warnings);
        for (c, &n) in self.warnings.dropped.iter().enumerate() {
            if let Some(s) = self.captures.get_mut(c) {
                s.warnings_dropped += n;
            }
        }
        if !one {
            connections.sort_by_key(|c| (c.first_time, c.vantage, c.a, c.b));
            udp.sort_by_key(|u| (u.first_time, u.vantage, u.a, u.b));
        }
        Analysis {
            epoch: self.epoch.unwrap_or_default(),
            captures: self.captures,
            connections,
            udp,
            warnings: self.warnings.kept,
        }
    }
}

/// The directions of a few recently used connections, each in the slot its vantage point,
/// source and destination pick, with the connection's index and the side that sends that way:
/// packets of a handful of busy connections, interleaved, find theirs without ordering the
/// ends into a [`Key`] or a hash-table probe.
#[derive(Default)]
struct Recent([Option<(Way, usize, usize)>; RECENT_SLOTS]);

/// A power of two: the slot is the top bits of a multiplicative hash.
const RECENT_SLOTS: usize = 32;

impl Recent {
    #[inline]
    fn slot(w: &Way) -> usize {
        let x = u64::from(w.src.port_family) << 32
            ^ u64::from(w.dst.port_family)
            ^ w.src.ip as u64
            ^ (w.dst.ip as u64).rotate_left(16);
        (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - RECENT_SLOTS.trailing_zeros())) as usize
    }

    /// The connection's index and the sending side.
    #[inline]
    fn get(&self, w: &Way) -> Option<(usize, usize)> {
        match &self.0[Recent::slot(w)] {
            Some((way, i, side)) if way == w => Some((*i, *side)),
            _ => None,
        }
    }

    fn put(&mut self, w: Way, i: usize, side: usize) {
        self.0[Recent::slot(&w)] = Some((w, i, side));
    }
}

/// The connections and flows of one shard: everything per connection, nothing per capture.
pub struct ShardAnalyzer {
    keep_series: bool,
    filter: Option<Filter>,
    /// Warnings about the datagrams this shard parsed.
    warnings: Warnings,
    /// Live connections, with their keys and their `a` ends, found through `tcp_index` (or
    /// `recent`, the connections of the last packets, one per slot).
    tcp: Vec<(Key, End, TcpConn)>,
    tcp_index: FastMap<Key, usize>,
    recent: Recent,
    tcp_done: Vec<Connection>,
    udp_index: FastMap<Key, usize>,
    udp: Vec<UdpState>,
}

/// What a shard found, for [`Splitter::finish`].
pub struct ShardResult {
    connections: Vec<Connection>,
    udp: Vec<UdpFlow>,
    warnings: Warnings,
}

impl ShardAnalyzer {
    pub fn new(opts: &Options) -> ShardAnalyzer {
        ShardAnalyzer {
            keep_series: opts.keep_series,
            filter: opts.filter.clone(),
            warnings: Warnings::new(opts.max_warnings),
            tcp: Vec::new(),
            tcp_index: FastMap::default(),
            recent: Recent::default(),
            tcp_done: Vec::new(),
            udp_index: FastMap::default(),
            udp: Vec::new(),
        }
    }

    /// Feeds one item of a part of a capture read by itself, whose records were numbered
    /// from 1 after record `base`.
    #[inline]
    fn handle_numbered_from(&mut self, item: Item<'_>, base: u64) {
        match item.0 {
            ItemKind::Packet {
                vantage,
                number,
                time,
                ip,
            } => self.packet(vantage, base + number, time, ip),
            ItemKind::Sweep(now) => self.sweep(now),
        }
    }

    /// Feeds one item from the front.
    #[inline]
    pub fn handle(&mut self, item: Item<'_>) {
        match item.0 {
            ItemKind::Packet {
                vantage,
                number,
                time,
                ip,
            } => self.packet(vantage, number, time, ip),
            ItemKind::Sweep(now) => self.sweep(now),
        }
    }

    /// One IP datagram: parsed, filtered, and fed to its connection or flow.
    fn packet(&mut self, vantage: Vantage, number: u64, time: Instant, ip: &[u8]) {
        // Most packets: TCP read at fixed offsets, without building addresses.
        if let Some(f) = headers::tcp_fast(ip) {
            if let Some(t) = f.tcp {
                let family = if f.v6 { 1 << 16 } else { 0 };
                self.tcp_packet(&TcpItem {
                    vantage,
                    number,
                    time,
                    src: End {
                        ip: f.src,
                        port_family: u32::from(t.src_port) | family,
                    },
                    dst: End {
                        ip: f.dst,
                        port_family: u32::from(t.dst_port) | family,
                    },
                    h: t,
                    ecn: f.ecn,
                    ttl: f.ttl,
                    ip_header_len: f.header_len,
                    ip,
                });
            } else {
                // Most often a snap length too short for the TCP options (`tcpdump -s 60`
                // keeps 6 of the 12 option bytes Linux sends with every segment): said once
                // per packet, so that a capture of nothing but such packets does not look
                // like a capture without TCP.
                let msg = format!(
                    "packet {number}: the capture kept only part of its TCP header (a snap \
                     length too short?); skipped (tcpdump -s 96 keeps the headers)"
                );
                self.warnings.warn(vantage.capture, number, msg);
            }
            return;
        }
        let h = match headers::parse(ip) {
            Ok(h) => h,
            Err(e) => {
                let msg = format!("packet {number}: {e}");
                self.warnings.warn(vantage.capture, number, msg);
                return;
            }
        };
        match h.transport {
            Transport::Tcp(t) => self.tcp_packet(&TcpItem {
                vantage,
                number,
                time,
                src: End::new(h.ip.src, t.src_port),
                dst: End::new(h.ip.dst, t.dst_port),
                h: t,
                ecn: h.ip.ecn,
                ttl: h.ip.ttl,
                ip_header_len: h.ip.header_len,
                ip,
            }),
            Transport::Udp {
                src_port,
                dst_port,
                payload_len,
            } => {
                let src = SocketAddr::new(h.ip.src, src_port);
                let dst = SocketAddr::new(h.ip.dst, dst_port);
                if let Some(f) = &self.filter {
                    if !f.matches(false, src, dst) {
                        return;
                    }
                }
                let key = Key::new(vantage, End::of(src), End::of(dst));
                let idx = *self.udp_index.entry(key).or_insert_with(|| {
                    self.udp.push(UdpState::new(vantage, src, dst, time));
                    self.udp.len() - 1
                });
                // The payload as far as the capture kept it (a snap length may cut it).
                let start = (h.ip.header_len + 8).min(ip.len());
                let bytes = &ip[start..(start + payload_len).min(ip.len())];
                self.udp[idx].handle(src, time, payload_len, bytes, h.ip.ecn);
            }
            _ => {}
        }
    }

    #[inline(always)]
    fn tcp_packet(&mut self, p: &TcpItem<'_>) {
        if let Some(f) = &self.filter {
            if !f.matches(true, p.src.socket(), p.dst.socket()) {
                return;
            }
        }
        let (t, ip, time) = (&p.h, p.ip, p.time);
        let o0 = p.ip_header_len + 20;
        let o1 = (p.ip_header_len + t.header_len).min(ip.len());
        let opts = tcpopt::parse(ip.get(o0..o1).unwrap_or(&[]));
        let way = Way {
            vantage: vantage_word(p.vantage),
            src: p.src,
            dst: p.dst,
        };
        // 0: sent by `a`; 1: by `b`.
        let (idx, mut side) = match self.recent.get(&way) {
            Some(hit) => hit,
            None => self.find_connection(p, way),
        };
        let (_, a, conn) = &mut self.tcp[idx];
        if conn.is_reuse_by(side, t) {
            let (src, dst) = (p.src.socket(), p.dst.socket());
            let fresh = TcpConn::new(p.vantage, src, dst, t, time, self.keep_series);
            *a = End::of(fresh.a);
            side = usize::from(p.src != *a);
            let old = std::mem::replace(conn, fresh);
            self.tcp_done.push(old.finish());
            // The new connection's `a` may be the other end: forget the sides remembered.
            self.recent = Recent::default();
        }
        conn.handle(
            side,
            &TcpPacket {
                time,
                h: t,
                opts: &opts,
                ecn: p.ecn,
                payload: ip
                    .get(o1..)
                    .map_or(&[][..], |b| &b[..b.len().min(t.payload_len)]),
                ttl: p.ttl,
                frame: p.number,
            },
        );
    }

    /// The index of the connection of `p`, which goes `way` (a new connection if there is
    /// none), and the side that sent it; remembered in `recent`.
    #[inline(never)]
    fn find_connection(&mut self, p: &TcpItem<'_>, way: Way) -> (usize, usize) {
        let key = Key::new(p.vantage, p.src, p.dst);
        let i = match self.tcp_index.get(&key) {
            Some(&i) => i,
            None => {
                let (src, dst) = (p.src.socket(), p.dst.socket());
                let conn = TcpConn::new(p.vantage, src, dst, &p.h, p.time, self.keep_series);
                self.tcp.push((key, End::of(conn.a), conn));
                self.tcp_index.insert(key, self.tcp.len() - 1);
                self.tcp.len() - 1
            }
        };
        let side = usize::from(p.src != self.tcp[i].1);
        self.recent.put(way, i, side);
        (i, side)
    }

    /// Finishes connections that closed (FIN both ways, or RST) long enough ago that no
    /// straggler will come, so that live state tracks open connections, not all of them.
    fn sweep(&mut self, now: Instant) {
        let cutoff = now - SWEEP_AFTER_CLOSE;
        if !self.tcp.iter().any(|(_, _, c)| c.closed_before(cutoff)) {
            return;
        }
        self.recent = Recent::default();
        self.tcp_index.clear();
        for (k, a, c) in std::mem::take(&mut self.tcp) {
            if c.closed_before(cutoff) {
                self.tcp_done.push(c.finish());
            } else {
                self.tcp_index.insert(k, self.tcp.len());
                self.tcp.push((k, a, c));
            }
        }
    }

    /// Finishes every connection and flow and runs the diagnoses.
    pub fn finish(self) -> ShardResult {
        let mut connections = self.tcp_done;
        connections.extend(self.tcp.into_iter().map(|(_, _, c)| c.finish()));
        connections.sort_by_key(|c| (c.first_time, c.vantage, c.a, c.b));
        // ecn_bleached: the same connection at two vantage points.
        let mut by_pair: FastMap<(End, End), Vec<usize>> = FastMap::default();
        for (i, c) in connections.iter().enumerate() {
            let k = Key::new(c.vantage, End::of(c.a), End::of(c.b));
            by_pair.entry((k.lo, k.hi)).or_default().push(i);
        }
        let mut extra: Vec<(usize, Diagnosis)> = Vec::new();
        for group in by_pair.values().filter(|g| g.len() > 1) {
            for &i in group {
                for &j in group {
                    if i != j && connections[i].vantage != connections[j].vantage {
                        for d in diagnose::bleaching(&connections[i], &connections[j]) {
                            extra.push((j, d));
                        }
                    }
                }
            }
        }
        for (j, d) in extra {
            connections[j].diagnoses.push(d);
            connections[j].diagnoses.sort_by_key(|d| d.start);
        }
        let mut udp: Vec<UdpFlow> = self.udp.into_iter().map(UdpState::finish).collect();
        udp.sort_by_key(|u| (u.first_time, u.vantage, u.a, u.b));
        ShardResult {
            connections,
            udp,
            warnings: self.warnings,
        }
    }
}

/// The front alone: reads captures held in memory once and splits their packets into
/// `count` shards by address pair, for [`ShardAnalyzer`]s on other threads.
pub struct Splitter {
    front: Front,
    count: u32,
}

impl Splitter {
    pub fn new(opts: &Options, count: u32) -> Splitter {
        Splitter {
            front: Front::new(opts),
            count: count.max(1),
        }
    }

    /// Reads a whole uncompressed capture from `bytes` (a mapped file), handing each packet to
    /// `sink` with the index of its shard; items borrow `bytes`. `progress` hears how far the
    /// reading got, every [`PROGRESS_STEP_BYTES`]. Errors only when the file header cannot be
    /// read (or the capture is gzip-compressed: read those with an [`Analyzer`]); trouble
    /// later in the file becomes a warning naming the packet.
    pub fn add_capture<'a>(
        &mut self,
        name: &str,
        bytes: &'a [u8],
        sink: &mut impl FnMut(u32, Item<'a>),
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), CaptureError> {
        let rd = CaptureReader::from_bytes(bytes)?;
        if rd.is_gzip() {
            return Err(CaptureError::Malformed {
                packet: 0,
                why: "a gzip-compressed capture cannot be split in place".into(),
            });
        }
        let count = self.count;
        self.front
            .read_capture(name, rd, progress, |f, v, n, t, (rec, at), ip| {
                let at = usize::try_from(at).unwrap_or(usize::MAX);
                // In place, the datagram is these bytes of the input.
                if let Some(ip) = bytes.get(at..at.saturating_add(ip.len())) {
                    f.packet(v, n, t, Some(rec), ip, count, &mut *sink);
                }
            });
        Ok(())
    }

    /// The analysis: the shards' connections and flows (in any order of shards) with the
    /// capture summaries, warnings and epoch read here.
    pub fn finish(self, parts: Vec<ShardResult>) -> Analysis {
        self.front.into_analysis(parts)
    }
}

/// A pcap held in memory (a mapped file), read in parts on several threads: each part is
/// [`Options::part_bytes`] of the file (the records whose captured bytes start in it), found and
/// walked by itself ([`ChunkedCapture::read_chunk`]: records, link layer, address pair), and
/// its packets handed to the shards that keep their connections ([`ChunkConsumer`]), which
/// take the parts in file order. Where a part's first record starts is a guess
/// ([`CaptureReader::pcap_resync`]) that each consumer checks against where the part before
/// it really ended; a wrong guess makes [`ChunkConsumer::failed`] true and the caller reads
/// the file in one piece instead. The analysis is then the one [`Analyzer`] gives: records
/// numbered from each part's start are renumbered as the parts before it add up, and closed
/// connections are swept at the same places in the file.
///
/// It does not start threads: the caller runs `read_chunk` and the consumers where it likes.
pub struct ChunkedCapture<'a> {
    name: String,
    /// Index of this capture among the analysis' captures.
    capture: usize,
    bytes: &'a [u8],
    format: String,
    interfaces: Vec<InterfaceInfo>,
    /// The first record's time, seconds: later records are expected within a day of it.
    near_secs: u32,
    part_bytes: u64,
}

/// What reading one part of a [`ChunkedCapture`] found besides its packets.
#[derive(Clone, Debug)]
pub struct ChunkMeta {
    /// The capture and the part's index in it.
    pub capture: usize,
    pub index: usize,
    /// Where the part's first record starts (`u64::MAX`: no start was found) and where the
    /// record after its last one starts (or the error ended it).
    start: u64,
    end: u64,
    /// Records read, numbered from 1 in the part.
    records: u64,
    summary: CaptureSummary,
    /// The time of its first IP packet: closed connections are swept before it.
    sweep: Option<Instant>,
    epoch: Option<Instant>,
    warnings: Warnings,
    /// The record it could not read (numbered in the part); the rest of the file is ignored.
    error: Option<CaptureError>,
}

/// One part of a [`ChunkedCapture`]: its facts, and its IP datagrams per shard.
pub struct Chunk<'a> {
    pub meta: ChunkMeta,
    pub items: Vec<Vec<Item<'a>>>,
}

impl<'a> ChunkedCapture<'a> {
    /// `bytes` as capture number `capture` of the analysis, or None when they cannot be read
    /// in parts (not an uncompressed pcap, or a link type the analyzer does not read): read
    /// those with a [`Splitter`] or an [`Analyzer`]. Errors when the file header is unreadable.
    pub fn new(
        name: &str,
        capture: usize,
        bytes: &'a [u8],
        opts: &Options,
    ) -> Result<Option<ChunkedCapture<'a>>, CaptureError> {
        let mut rd = CaptureReader::from_bytes(bytes)?;
        if rd.pcap_at(24).is_none() {
            return Ok(None);
        }
        let interfaces = rd.interfaces();
        let linktype = interfaces.first().map_or(0, |i| i.linktype);
        if matches!(
            link::ip_payload(linktype, &[]),
            Err(link::LinkError::Unsupported(_))
        ) {
            return Ok(None);
        }
        let near_secs = match rd.next_packet() {
            Ok(Some(p)) => (p.time.as_nanos() / 1_000_000_000) as u32,
            _ => 0,
        };
        Ok(Some(ChunkedCapture {
            name: name.to_string(),
            capture,
            bytes,
            format: rd.format_name(),
            interfaces,
            near_secs,
            part_bytes: opts.part_bytes.max(4096),
        }))
    }

    /// How many parts.
    pub fn chunks(&self) -> usize {
        (self.bytes.len() as u64).div_ceil(self.part_bytes).max(1) as usize
    }

    /// The bytes of the file that part `k` covers (its last record may run past them).
    pub fn span(&self, k: usize) -> std::ops::Range<usize> {
        let at = |k: usize| {
            usize::try_from(k as u64 * self.part_bytes)
                .unwrap_or(usize::MAX)
                .min(self.bytes.len())
        };
        at(k)..at(k + 1)
    }

    /// Reads part `k`: finds its first record, walks its records, strips their link layer
    /// and hands each IP datagram to the shard (of `shards`) that keeps its address pair.
    pub fn read_chunk(&self, k: usize, shards: u32) -> Chunk<'a> {
        // Part k holds the records whose captured bytes start in [k, k + 1) × the part size:
        // the same boundaries as the sweeps of `Front::packet`.
        let header = |k: usize| (k as u64 * self.part_bytes).saturating_sub(16).max(24);
        let (lo, hi) = (header(k), header(k + 1));
        let mut front = Front {
            epoch: None,
            captures: vec![CaptureSummary::default(); self.capture + 1],
            warnings: Warnings::new(usize::MAX),
            since_sweep: 0,
            next_sweep: 0,
            part_bytes: self.part_bytes,
        };
        let mut items: Vec<Vec<Item<'a>>> = (0..shards.max(1)).map(|_| Vec::new()).collect();
        let mut meta = ChunkMeta {
            capture: self.capture,
            index: k,
            start: u64::MAX,
            end: u64::MAX,
            records: 0,
            summary: CaptureSummary::default(),
            sweep: None,
            epoch: None,
            warnings: Warnings::default(),
            error: None,
        };
        let rd = CaptureReader::from_bytes(self.bytes).ok();
        let start = match (&rd, k) {
            (Some(_), 0) => Some(24),
            // No record starts in the part: empty, if the one before runs to the end.
            (Some(r), _) if lo < self.bytes.len() as u64 => Some(
                r.pcap_resync(lo as usize, self.near_secs)
                    .unwrap_or(self.bytes.len()),
            ),
            // Past the end: an empty part, where the part before ends.
            (Some(_), _) => Some(self.bytes.len()),
            (None, _) => None,
        };
        let Some(mut part) = start.and_then(|at| rd.as_ref().and_then(|r| r.pcap_at(at))) else {
            return Chunk { meta, items };
        };
        meta.start = part.position();
        let bytes = self.bytes;
        let mut sweep = None;
        let count = shards.max(1);
        meta.error = front.walk_any(
            self.capture,
            &mut part,
            hi,
            &mut |_| {},
            &mut |f: &mut Front, v, n, t, (_, at): (u64, u64), ip: &[u8]| {
                f.epoch = Some(f.epoch.map_or(t, |e: Instant| e.min(t)));
                sweep.get_or_insert(t);
                let at = usize::try_from(at).unwrap_or(usize::MAX);
                if let Some(ip) = bytes.get(at..at.saturating_add(ip.len())) {
                    let shard = if count <= 1 { 0 } else { shard_of(ip, count) };
                    items[shard as usize].push(Item(ItemKind::Packet {
                        vantage: v,
                        number: n,
                        time: t,
                        ip,
                    }));
                }
            },
        );
        meta.end = match &meta.error {
            Some(_) => u64::MAX,
            None => part.position(),
        };
        meta.records = part.packets_read();
        meta.summary = std::mem::take(&mut front.captures[self.capture]);
        meta.sweep = sweep;
        meta.epoch = front.epoch;
        meta.warnings = front.warnings;
        Chunk { meta, items }
    }
}

/// The shards' side of a [`ChunkedCapture`]: takes every part, in file order, with the
/// packets of its shard.
pub struct ChunkConsumer {
    shard: ShardAnalyzer,
    /// (capture, part) expected next, where it must start, and the number of the record
    /// before it.
    next: (usize, usize),
    expect_start: u64,
    base: u64,
    /// The capture whose rest is ignored after an unreadable record.
    stopped: Option<usize>,
    failed: bool,
}

impl ChunkConsumer {
    pub fn new(opts: &Options) -> ChunkConsumer {
        ChunkConsumer {
            shard: ShardAnalyzer::new(opts),
            next: (usize::MAX, 0),
            expect_start: 0,
            base: 0,
            stopped: None,
            failed: false,
        }
    }

    /// Feeds the next part: its facts and this shard's packets of it. Parts must come in
    /// order, captures one after another.
    pub fn chunk(&mut self, meta: &ChunkMeta, items: Vec<Item<'_>>) {
        if self.failed {
            return;
        }
        if meta.index == 0 {
            self.next = (meta.capture, 0);
            self.expect_start = 24;
            self.base = 0;
        }
        if self.next != (meta.capture, meta.index) {
            self.failed = true;
            return;
        }
        self.next.1 += 1;
        if self.stopped == Some(meta.capture) {
            return;
        }
        if meta.start != self.expect_start {
            self.failed = true;
            return;
        }
        if meta.index > 0 {
            if let Some(t) = meta.sweep {
                self.shard.sweep(t);
            }
        }
        for item in items {
            self.shard.handle_numbered_from(item, self.base);
        }
        self.base += meta.records;
        self.expect_start = meta.end;
        if meta.error.is_some() {
            self.stopped = Some(meta.capture);
        }
    }

    /// A part did not start where the one before it ended (or came out of order): this
    /// consumer's result is void; read the captures another way.
    pub fn failed(&self) -> bool {
        self.failed
    }

    pub fn finish(self) -> ShardResult {
        self.shard.finish()
    }
}

/// The analysis of [`ChunkedCapture`]s read in parts: their summaries and warnings from the
/// parts' facts (`metas`, every part of every capture in order, as the consumers took them),
/// the connections from the consumers' results. Only when no consumer [`failed`].
///
/// [`failed`]: ChunkConsumer::failed
pub fn finish_chunked(
    opts: &Options,
    captures: &[ChunkedCapture<'_>],
    metas: &[&ChunkMeta],
    parts: Vec<ShardResult>,
) -> Analysis {
    let mut front = Front::new(opts);
    for c in captures {
        front.captures.push(CaptureSummary {
            name: c.name.clone(),
            format: c.format.clone(),
            interfaces: c.interfaces.clone(),
            ..CaptureSummary::default()
        });
    }
    let mut base = 0;
    let mut stopped = None;
    let mut chunk_warnings = Vec::new();
    for m in metas {
        if m.index == 0 {
            base = 0;
        }
        if stopped == Some(m.capture) {
            continue;
        }
        if let Some(s) = front.captures.get_mut(m.capture) {
            s.packets += m.summary.packets;
            s.ip_packets += m.summary.ip_packets;
            s.non_ip_packets += m.summary.non_ip_packets;
            s.captured_bytes += m.summary.captured_bytes;
        }
        if let Some(t) = m.epoch {
            front.epoch = Some(front.epoch.map_or(t, |e| e.min(t)));
        }
        let mut w = m.warnings.clone();
        w.max = opts.max_warnings;
        for x in &mut w.kept {
            x.packet += base;
        }
        chunk_warnings.push(w);
        if let Some(e) = &m.error {
            let e = e.clone().renumbered(base);
            let mut w = Warnings::new(opts.max_warnings);
            w.warn(
                m.capture,
                e.packet(),
                format!("{e}; the rest of the file is ignored"),
            );
            chunk_warnings.push(w);
            stopped = Some(m.capture);
        }
        base += m.records;
    }
    front.warnings.merge(chunk_warnings);
    front.into_analysis(parts)
}

/// Builds an [`Analysis`] from captures fed one after another, on one thread.
pub struct Analyzer {
    front: Front,
    shard: ShardAnalyzer,
}

impl Analyzer {
    pub fn new(opts: Options) -> Analyzer {
        Analyzer {
            front: Front::new(&opts),
            shard: ShardAnalyzer::new(&opts),
        }
    }

    /// Reads a whole capture as a stream. Errors only when the file header cannot be read;
    /// trouble later in the file becomes a warning naming the packet, and what came before it
    /// counts.
    pub fn add_capture<R: Read>(&mut self, name: &str, input: R) -> Result<(), CaptureError> {
        let rd = CaptureReader::new(input)?;
        let shard = &mut self.shard;
        self.front
            .read_capture(name, rd, &mut |_| {}, |f, v, n, t, (rec, _), ip| {
                f.packet(v, n, t, Some(rec), ip, 1, &mut |_, item| shard.handle(item));
            });
        Ok(())
    }

    /// Reads a whole capture held in memory (a mapped file), parsing its records in place.
    /// Errors as [`Analyzer::add_capture`].
    pub fn add_capture_bytes(&mut self, name: &str, bytes: &[u8]) -> Result<(), CaptureError> {
        self.add_capture_bytes_with(name, bytes, &mut |_| {})
    }

    /// [`Analyzer::add_capture_bytes`], telling `progress` how far the reading got every
    /// [`PROGRESS_STEP_BYTES`].
    pub fn add_capture_bytes_with(
        &mut self,
        name: &str,
        bytes: &[u8],
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), CaptureError> {
        let rd = CaptureReader::from_bytes(bytes)?;
        let shard = &mut self.shard;
        self.front
            .read_capture(name, rd, progress, |f, v, n, t, (rec, _), ip| {
                f.packet(v, n, t, Some(rec), ip, 1, &mut |_, item| shard.handle(item));
            });
        Ok(())
    }

    /// Feeds one IP datagram seen at `vantage` (for callers that have packets rather than a
    /// file, such as a live lab). `number` is only used in warnings.
    pub fn add_packet(&mut self, vantage: Vantage, number: u64, time: Instant, ip: &[u8]) {
        let shard = &mut self.shard;
        self.front
            .packet(vantage, number, time, None, ip, 1, &mut |_, item| {
                shard.handle(item)
            });
    }

    /// Finishes every connection and flow, runs the diagnoses, and returns the analysis.
    pub fn finish(self) -> Analysis {
        self.front.into_analysis(vec![self.shard.finish()])
    }
}

/// Analyzes one in-memory capture.
pub fn analyze_bytes(name: &str, bytes: &[u8], opts: Options) -> Result<Analysis, CaptureError> {
    let mut a = Analyzer::new(opts);
    a.add_capture_bytes(name, bytes)?;
    Ok(a.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{self, Bulk};

    fn capture() -> Vec<u8> {
        let b = Bulk::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
        );
        synth::pcap(b.run())
    }

    #[test]
    fn a_truncated_capture_warns_with_the_packet_number_and_keeps_the_rest() {
        let full = capture();
        let cut = &full[..full.len() - 7];
        let a = analyze_bytes("cut.pcap", cut, Options::default()).unwrap();
        let n = a.captures[0].packets;
        assert_eq!(a.warnings.len(), 1);
        assert_eq!(a.warnings[0].packet, n + 1);
        assert!(
            a.warnings[0]
                .message
                .contains(&format!("inside packet {}", n + 1)),
            "{}",
            a.warnings[0].message
        );
        assert_eq!(a.connections.len(), 1);
    }

    #[test]
    fn a_tcp_header_cut_by_the_snap_length_is_a_warning_naming_its_packet() {
        let syn = synth::Tcp::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
            1,
            0,
            synth::SYN,
        )
        .build();
        let mut w = wire::pcap::PcapWriter::new(Vec::new()).unwrap();
        w.write(1, &syn).unwrap();
        // The IP header and 19 bytes of TCP header: one short of the fixed part.
        w.write(2, &syn[..39]).unwrap();
        let a = analyze_bytes("cut", &w.into_inner(), Options::default()).unwrap();
        assert_eq!(a.connections.len(), 1);
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        assert_eq!(a.warnings[0].packet, 2);
        assert!(
            a.warnings[0].message.contains("part of its TCP header"),
            "{}",
            a.warnings[0].message
        );
    }

    #[test]
    fn a_corrupt_ip_header_is_a_warning_naming_its_packet() {
        let mut w = wire::pcap::PcapWriter::new(Vec::new()).unwrap();
        w.write(1, &[0x45, 0, 0, 40, 0, 0]).unwrap();
        w.write(2, &[0x99; 30]).unwrap();
        let a = analyze_bytes("bad", &w.into_inner(), Options::default()).unwrap();
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        assert_eq!(a.warnings[0].packet, 1);
        assert!(a.warnings[0].message.starts_with("packet 1:"));
        assert_eq!(a.captures[0].non_ip_packets, 1);
    }

    #[test]
    fn the_filter_keeps_only_matching_connections() {
        let mut b = Bulk::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
        );
        b.bytes = 20_000;
        let mut pk = b.run();
        b.client = "10.0.0.3:40001".parse().unwrap();
        b.server = "10.0.0.2:80".parse().unwrap();
        pk.extend(b.run());
        let bytes = synth::pcap(pk);
        let all = analyze_bytes("t", &bytes, Options::default()).unwrap();
        assert_eq!(all.connections.len(), 2);
        let opts = Options {
            filter: Some(Filter::parse("port 80").unwrap()),
            ..Options::default()
        };
        let one = analyze_bytes("t", &bytes, opts).unwrap();
        assert_eq!(one.connections.len(), 1);
        assert_eq!(one.connections[0].b.port(), 80);
    }

    /// Runs the front over `bytes` into `count` shards, one after another, and joins them.
    fn split(bytes: &[u8], count: u32, opts: &Options) -> (Analysis, Vec<usize>) {
        let mut front = Splitter::new(opts, count);
        let mut queues: Vec<Vec<Item<'_>>> = (0..count).map(|_| Vec::new()).collect();
        front
            .add_capture(
                "t",
                bytes,
                &mut |s, item| queues[s as usize].push(item),
                &mut |_| {},
            )
            .unwrap();
        let mut sizes = Vec::new();
        let parts = queues
            .into_iter()
            .map(|q| {
                let mut shard = ShardAnalyzer::new(opts);
                let mut tcp = 0;
                for item in q {
                    tcp += usize::from(matches!(item.0, ItemKind::Packet { .. }));
                    shard.handle(item);
                }
                sizes.push(tcp);
                shard.finish()
            })
            .collect();
        (front.finish(parts), sizes)
    }

    #[test]
    fn shards_split_the_connections_and_merge_back_into_the_whole_analysis() {
        let mut pk = Vec::new();
        for i in 0..12u16 {
            let mut b = Bulk::new(
                format!("10.0.0.{}:{}", 1 + i % 3, 40000 + i)
                    .parse()
                    .unwrap(),
                "10.0.0.9:5201".parse().unwrap(),
            );
            b.bytes = 30_000;
            pk.extend(b.run());
        }
        pk.sort_by_key(|p| p.0);
        let mut bytes = synth::pcap(pk);
        // A damaged packet at the end: its warning must appear once after the merge.
        bytes.extend_from_slice(&[0; 16]);
        let n = bytes.len();
        bytes[n - 8] = 4;
        bytes[n - 4] = 4;
        bytes.extend_from_slice(&[0x60, 0, 0, 0]);
        let opts = Options::default();
        let whole = analyze_bytes("t", &bytes, opts.clone()).unwrap();
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        assert_eq!(whole.connections.len(), 12);
        assert_eq!(whole.warnings.len(), 1);
        for count in [1, 2, 3] {
            let (merged, sizes) = split(&bytes, count, &opts);
            assert!(
                sizes.iter().filter(|&&n| n > 0).count() >= count.min(2) as usize,
                "the hash spreads connections over the shards: {sizes:?}"
            );
            assert!(
                json(&merged) == json(&whole),
                "{count} merged shards differ from the whole"
            );
        }
        // The stream reader and the in-place one agree.
        let mut a = Analyzer::new(opts);
        a.add_capture("t", &bytes[..]).unwrap();
        assert!(json(&a.finish()) == json(&whole));
    }

    /// Reads `bytes` in parts, last part first (as threads may), and feeds them in order to
    /// `shards` consumers; the analysis and whether a part did not line up.
    fn in_parts(bytes: &[u8], shards: u32, opts: &Options) -> (Analysis, bool, usize) {
        let c = ChunkedCapture::new("t", 0, bytes, opts).unwrap().unwrap();
        let mut chunks: Vec<Chunk<'_>> = (0..c.chunks())
            .rev()
            .map(|k| c.read_chunk(k, shards))
            .collect();
        chunks.reverse();
        let mut consumers: Vec<ChunkConsumer> =
            (0..shards).map(|_| ChunkConsumer::new(opts)).collect();
        let mut metas = Vec::new();
        for ch in chunks {
            for (con, items) in consumers.iter_mut().zip(ch.items) {
                con.chunk(&ch.meta, items);
            }
            metas.push(ch.meta);
        }
        let failed = consumers.iter().any(ChunkConsumer::failed);
        let parts = consumers.into_iter().map(ChunkConsumer::finish).collect();
        let refs: Vec<&ChunkMeta> = metas.iter().collect();
        let n = metas.len();
        (finish_chunked(opts, &[c], &refs, parts), failed, n)
    }

    fn bulk_mix(conns: u16, bytes_each: u64, spacing_ns: u64) -> Vec<u8> {
        let mut pk = Vec::new();
        for i in 0..conns {
            let mut b = Bulk::new(
                format!("10.0.3.{}:{}", 1 + i % 7, 43000 + i)
                    .parse()
                    .unwrap(),
                "10.0.0.9:5201".parse().unwrap(),
            );
            b.bytes = bytes_each;
            b.start_ns = u64::from(i) * spacing_ns;
            pk.extend(b.run());
        }
        pk.sort_by_key(|p| p.0);
        synth::pcap(pk)
    }

    #[test]
    fn a_pcap_read_in_parts_gives_the_analysis_of_one_reader() {
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        // Many connections, some closed long before others open (sweeps at part starts), a
        // damaged datagram at the end, and the same file cut inside its last record.
        let mut bytes = bulk_mix(30, 40_000, 20_000_000_000);
        let good = bytes.clone();
        bytes.extend_from_slice(&[0; 16]);
        let n = bytes.len();
        bytes[n - 8] = 4;
        bytes[n - 4] = 4;
        bytes.extend_from_slice(&[0x60, 0, 0, 0]);
        let cut = &good[..good.len() - 300];
        for part_bytes in [4096, 50_000, 1 << 30] {
            let opts = Options {
                part_bytes,
                ..Options::default()
            };
            for file in [&bytes[..], cut, &good[..]] {
                let whole = analyze_bytes("t", file, opts.clone()).unwrap();
                assert_eq!(whole.connections.len(), 30);
                for shards in [1, 2, 3] {
                    let (a, failed, parts) = in_parts(file, shards, &opts);
                    assert!(!failed, "{part_bytes}: a part did not line up");
                    if part_bytes == 4096 {
                        assert!(parts > 100, "{parts}");
                    }
                    assert!(
                        json(&a) == json(&whole),
                        "{part_bytes} bytes a part, {shards} shards: not the whole's analysis"
                    );
                }
            }
        }
    }

    /// The datagrams of a few bulk connections (time ns, IP datagram), in time order.
    fn datagrams() -> Vec<(u64, Vec<u8>)> {
        let mut pk = Vec::new();
        for i in 0..6u16 {
            let server = if i % 2 == 0 {
                "10.0.0.9:5201"
            } else {
                "[2001:db8::9]:5201"
            };
            let client = if i % 2 == 0 {
                format!("10.0.4.{}:{}", 1 + i, 44000 + i)
            } else {
                format!("[2001:db8::{}]:{}", 1 + i, 44000 + i)
            };
            let mut b = Bulk::new(client.parse().unwrap(), server.parse().unwrap());
            b.bytes = 60_000;
            b.start_ns = u64::from(i) * 3_000_000;
            pk.extend(b.run());
        }
        pk.sort_by_key(|p| p.0);
        pk
    }

    /// `ip` behind the link-layer header of `linktype`.
    fn framed(linktype: u32, ip: &[u8]) -> Vec<u8> {
        let et: [u8; 2] = if ip[0] >> 4 == 6 {
            [0x86, 0xdd]
        } else {
            [0x08, 0x00]
        };
        let mut f = Vec::new();
        match linktype {
            // Ethernet with an 802.1Q tag.
            link::LINKTYPE_ETHERNET => {
                f.extend_from_slice(&[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x81, 0x00, 0, 7]);
                f.extend_from_slice(&et);
            }
            link::LINKTYPE_LINUX_SLL => {
                f.extend_from_slice(&[0, 0, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
                f.extend_from_slice(&et);
            }
            link::LINKTYPE_LINUX_SLL2 => {
                f.extend_from_slice(&et);
                f.extend_from_slice(&[0, 0, 0, 0, 0, 3, 0, 1, 0, 6, 2, 0, 0, 0, 0, 1, 0, 0]);
            }
            _ => {}
        }
        f.extend_from_slice(ip);
        f
    }

    /// Captures as other tools write them: big-endian microsecond pcap of tagged Ethernet cut
    /// by a snap length, Linux cooked (SLL, SLL2) in nanoseconds, timestamps out of order
    /// (one a day back), and a pcapng of two interfaces with their own link types and
    /// resolutions. Read in parts (pcap) and split over shards (all), each gives the analysis
    /// of one reader, or, for a part that does not line up, says so (the caller then reads
    /// the file another way).
    #[test]
    fn captures_of_other_tools_read_in_parts_or_in_shards_give_the_analysis_of_one_reader() {
        use crate::capture::testwrite;
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        let pk = datagrams();
        let pcap_of = |big_endian: bool, nanos: bool, linktype: u32, snap: usize| {
            let mut b = testwrite::pcap_header(big_endian, nanos, linktype);
            for (t, ip) in &pk {
                let f = framed(linktype, ip);
                let (secs, ns) = (
                    (t / 1_000_000_000) as u32 + 1_700_000_000,
                    t % 1_000_000_000,
                );
                let frac = if nanos { ns } else { ns / 1000 } as u32;
                let mut r = testwrite::pcap_record(big_endian, secs, frac, &f[..f.len().min(snap)]);
                // The length on the wire, beyond the snap length.
                let orig = (f.len() as u32).to_be_bytes();
                let orig = if big_endian {
                    orig
                } else {
                    (f.len() as u32).to_le_bytes()
                };
                r[12..16].copy_from_slice(&orig);
                b.extend_from_slice(&r);
            }
            b
        };
        let mut files = vec![
            (
                "tagged ethernet, cut",
                pcap_of(true, false, link::LINKTYPE_ETHERNET, 96),
            ),
            ("sll", pcap_of(false, true, link::LINKTYPE_LINUX_SLL, 65535)),
            (
                "sll2",
                pcap_of(false, true, link::LINKTYPE_LINUX_SLL2, 65535),
            ),
        ];
        // Out of order: every tenth record swapped with the next, and one a day back.
        let mut shuffled = pk.clone();
        for i in (0..shuffled.len() - 1).step_by(10) {
            shuffled.swap(i, i + 1);
        }
        let mut w = testwrite::pcap_header(false, true, link::LINKTYPE_RAW);
        for (n, (t, ip)) in shuffled.iter().enumerate() {
            let secs = (t / 1_000_000_000) as u32 + 1_700_000_000 - u32::from(n == 500) * 86_401;
            w.extend_from_slice(&testwrite::pcap_record(
                false,
                secs,
                (t % 1_000_000_000) as u32,
                ip,
            ));
        }
        files.push(("out of order", w));
        let mut ng = testwrite::shb(false);
        ng.extend_from_slice(&testwrite::idb(
            false,
            link::LINKTYPE_ETHERNET as u16,
            6,
            Some("eth0"),
        ));
        ng.extend_from_slice(&testwrite::idb(
            false,
            link::LINKTYPE_RAW as u16,
            9,
            Some("tun0"),
        ));
        for (n, (t, ip)) in pk.iter().enumerate() {
            let (iface, ticks, data) = if n % 3 == 0 {
                (1, *t, ip.clone())
            } else {
                (0, t / 1000, framed(link::LINKTYPE_ETHERNET, ip))
            };
            ng.extend_from_slice(&testwrite::epb(
                false,
                iface,
                ticks,
                &data,
                data.len() as u32,
            ));
        }
        files.push(("pcapng of two interfaces", ng));
        for (what, file) in &files {
            let opts = Options {
                part_bytes: 4096,
                ..Options::default()
            };
            let whole = analyze_bytes("t", file, opts.clone()).unwrap();
            // Two interfaces are two vantage points: each sees every connection.
            let vantages = if what.starts_with("pcapng") { 2 } else { 1 };
            let found = whole.connections.len();
            assert_eq!(found, 6 * vantages, "{what}: {:?}", whole.warnings);
            for shards in [2, 3] {
                assert!(
                    json(&split(file, shards, &opts).0) == json(&whole),
                    "{what}: {shards} shards are not the whole's analysis"
                );
                if what.starts_with("pcapng") {
                    assert!(ChunkedCapture::new("t", 0, file, &opts).unwrap().is_none());
                    continue;
                }
                let (a, failed, _) = in_parts(file, shards, &opts);
                assert!(
                    failed || json(&a) == json(&whole),
                    "{what}: read in parts on {shards} shards, not the whole's analysis"
                );
                if !what.starts_with("out of order") {
                    assert!(!failed, "{what}: a part did not line up");
                }
            }
        }
    }

    #[test]
    fn a_part_that_starts_elsewhere_than_where_the_one_before_ended_is_refused() {
        // A record whose payload holds copies of pcap record headers, each followed by a
        // chain of more, right after a part boundary: the guess lands inside the record.
        let opts = Options {
            part_bytes: 4096,
            ..Options::default()
        };
        let mut w = wire::pcap::PcapWriter::new(Vec::new()).unwrap();
        let t0 = 1_700_000_000_000_000_000u64;
        let tcp = synth::Tcp::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
            1,
            2,
            synth::ACK,
        )
        .build();
        // Fake records of 40 bytes each: a header (16) and 24 bytes, chained.
        let mut fake = Vec::new();
        for i in 0..200u32 {
            fake.extend_from_slice(&1_700_000_000u32.to_le_bytes());
            fake.extend_from_slice(&i.to_le_bytes());
            fake.extend_from_slice(&24u32.to_le_bytes());
            fake.extend_from_slice(&24u32.to_le_bytes());
            fake.extend_from_slice(&[0u8; 24]);
        }
        let mut big = tcp.clone();
        big.extend_from_slice(&fake);
        w.write(t0, &tcp).unwrap();
        w.write(t0 + 1, &big).unwrap();
        for i in 0..50 {
            w.write(t0 + 2 + i, &tcp).unwrap();
        }
        let bytes = w.into_inner();
        assert!(bytes.len() > 8192);
        let (_, failed, _) = in_parts(&bytes, 2, &opts);
        assert!(failed, "the second part starts inside the big record");
    }

    #[test]
    fn both_directions_share_a_shard_and_many_clients_of_one_server_spread_evenly() {
        let server = End::of("10.78.0.1:5201".parse().unwrap());
        let v6 = End::of("[2001:db8::1]:443".parse().unwrap());
        for count in [2, 3, 4] {
            let mut per_shard = vec![0u32; count as usize];
            for port in 40_000..41_200u16 {
                let client = End::of(SocketAddr::new("10.78.0.2".parse().unwrap(), port));
                let s = pair_shard(client, server, count);
                assert_eq!(s, pair_shard(server, client, count));
                per_shard[s as usize] += 1;
                let c6 = End::of(SocketAddr::new("2001:db8::2".parse().unwrap(), port));
                assert_eq!(pair_shard(c6, v6, count), pair_shard(v6, c6, count));
            }
            // 1200 connections: each shard within 10 % of its fair share.
            let fair = 1200 / count;
            assert!(
                per_shard.iter().all(|&n| n.abs_diff(fair) * 10 <= fair),
                "{count} shards: {per_shard:?}"
            );
        }
        assert_eq!(pair_shard(server, v6, 1), 0);
    }

    #[test]
    fn the_shard_read_from_raw_bytes_is_the_one_of_the_parsed_address_pair() {
        let tcp = synth::Tcp::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
            1,
            2,
            synth::ACK,
        )
        .build();
        let tcp6 = synth::Tcp::new(
            "[fd00::1]:443".parse().unwrap(),
            "[fd00::2]:50000".parse().unwrap(),
            1,
            2,
            synth::ACK,
        )
        .build();
        let udp = |v6: bool| {
            let mut p = if v6 {
                let mut p = vec![0x60, 0, 0, 0, 0, 8, 17, 64];
                p.extend((0..32u8).map(|i| i * 7));
                p
            } else {
                vec![
                    0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 3, 10, 0, 0, 4,
                ]
            };
            p.extend_from_slice(&[0x13, 0x88, 0, 53, 0, 8, 0, 0]);
            p
        };
        let mut frag = tcp.clone();
        frag[6] = 0x20;
        let mut options = vec![0x46];
        options.extend_from_slice(&tcp[1..20]);
        options.extend_from_slice(&[1, 1, 1, 0]);
        options.extend_from_slice(&tcp[20..]);
        let total = u16::from_be_bytes([tcp[2], tcp[3]]) + 4;
        options[2..4].copy_from_slice(&total.to_be_bytes());
        for ip in [
            tcp,
            tcp6,
            udp(false),
            udp(true),
            frag,
            options,
            vec![0x45; 12],
        ] {
            let parsed = match headers::parse(&ip).map(|h| h.transport) {
                Ok(Transport::Tcp(_) | Transport::Udp { .. }) => {
                    let h = headers::parse(&ip).unwrap();
                    let (sp, dp) = match h.transport {
                        Transport::Tcp(t) => (t.src_port, t.dst_port),
                        Transport::Udp {
                            src_port, dst_port, ..
                        } => (src_port, dst_port),
                        _ => unreachable!(),
                    };
                    Some(Key::new(
                        Vantage::default(),
                        End::new(h.ip.src, sp),
                        End::new(h.ip.dst, dp),
                    ))
                }
                _ => None,
            };
            for count in [2, 3, 7] {
                let want = parsed.map_or(0, |k| pair_shard(k.lo, k.hi, count));
                assert_eq!(shard_of(&ip, count), want, "{ip:02x?} in {count}");
            }
        }
    }

    #[test]
    fn warnings_from_several_shards_merge_into_the_first_ones_of_the_file() {
        // Connections spread over the shards, each followed by a damaged datagram, and the
        // cap lower than the number of warnings.
        let mut pk = Vec::new();
        for i in 0..8u16 {
            let mut b = Bulk::new(
                format!("10.0.2.{}:{}", 1 + i, 42000 + i).parse().unwrap(),
                "10.0.0.9:5201".parse().unwrap(),
            );
            b.bytes = 5_000;
            b.start_ns = u64::from(i) * 1_000_000_000;
            pk.extend(b.run());
            // TCP over IPv4 whose header claims 24 words: the parse fails in the shard.
            let mut bad = pk.last().unwrap().1.clone();
            bad[0] = 0x4f;
            bad.truncate(40);
            pk.push((b.start_ns + 900_000_000, bad));
        }
        pk.sort_by_key(|p| p.0);
        let bytes = synth::pcap(pk);
        let opts = Options {
            max_warnings: 3,
            ..Options::default()
        };
        let whole = analyze_bytes("t", &bytes, opts.clone()).unwrap();
        assert_eq!(whole.warnings.len(), 3);
        assert_eq!(whole.captures[0].warnings_dropped, 5);
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        for count in [2, 3] {
            assert!(json(&split(&bytes, count, &opts).0) == json(&whole));
        }
    }

    #[test]
    fn sweeps_reach_every_shard_so_a_split_analysis_finishes_connections_alike() {
        // Short connections, each closed long before the next: sweeps finish them as the
        // file goes on, in every shard at the same packet.
        let mut pk = Vec::new();
        for i in 0..40u16 {
            let mut b = Bulk::new(
                format!("10.0.1.{}:{}", 1 + i % 5, 41000 + i % 3)
                    .parse()
                    .unwrap(),
                "10.0.0.9:5201".parse().unwrap(),
            );
            b.bytes = 2_000_000;
            b.start_ns = u64::from(i) * 40_000_000_000;
            pk.extend(b.run());
        }
        pk.sort_by_key(|p| p.0);
        let bytes = synth::pcap(pk);
        assert!(bytes.len() as u64 > 2 * PART_BYTES, "{}", bytes.len());
        let opts = Options::default();
        let whole = analyze_bytes("t", &bytes, opts.clone()).unwrap();
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        let (merged, _) = split(&bytes, 2, &opts);
        assert!(json(&merged) == json(&whole));
    }

    #[test]
    fn udp_flows_count_packets_bytes_and_ecn_per_direction() {
        let mut w = wire::pcap::PcapWriter::new(Vec::new()).unwrap();
        let udp = |src: [u8; 4], dst: [u8; 4], ports: [u8; 4], ecn: u8, len: usize| {
            let total = 28 + len;
            let mut p = vec![0x45, ecn, 0, total as u8, 0, 0, 0, 0, 64, 17, 0, 0];
            p.extend_from_slice(&src);
            p.extend_from_slice(&dst);
            p.extend_from_slice(&ports);
            p.extend_from_slice(&[0, (8 + len) as u8, 0, 0]);
            p.extend(std::iter::repeat_n(0u8, len));
            p
        };
        for i in 0..10u64 {
            let ecn = if i < 3 { 3 } else { 1 };
            w.write(
                i * 50_000_000,
                &udp([10, 0, 0, 1], [10, 0, 0, 2], [0x13, 0x88, 0, 53], ecn, 100),
            )
            .unwrap();
        }
        w.write(
            1,
            &udp([10, 0, 0, 2], [10, 0, 0, 1], [0, 53, 0x13, 0x88], 0, 20),
        )
        .unwrap();
        let a = analyze_bytes("u", &w.into_inner(), Options::default()).unwrap();
        assert_eq!(a.udp.len(), 1);
        let u = &a.udp[0];
        assert_eq!(
            (u.a2b.packets, u.a2b.bytes, u.a2b.ce, u.a2b.ect1),
            (10, 1000, 3, 7)
        );
        assert_eq!((u.b2a.packets, u.b2a.bytes, u.b2a.not_ect), (1, 20, 1));
        // 1000 bytes over 0.45 s; two 100-byte packets per 100 ms bin.
        assert!((u.a2b.rate_bps - 8000.0 / 0.45).abs() < 1.0);
        assert_eq!(u.a2b.rate_series_bps[0], 2.0 * 100.0 * 8.0 * 10.0);
    }

    #[test]
    fn json_has_the_documented_fields() {
        let a = analyze_bytes("t", &capture(), Options::default()).unwrap();
        let v = serde_json::to_value(a.json_report()).unwrap();
        let c = &v["connections"][0];
        for k in [
            "a",
            "b",
            "handshake_ms",
            "duration_s",
            "a2b",
            "b2a",
            "diagnoses",
        ] {
            assert!(!c[k].is_null(), "missing {k}");
        }
        for k in [
            "packets",
            "data_packets",
            "data_bytes",
            "unique_bytes",
            "retransmitted_packets",
            "retransmitted_bytes",
            "rtt_samples",
            "rtt_min_ms",
            "rtt_avg_ms",
            "rtt_max_ms",
            "zero_window",
            "ce",
            "ece",
            "cwr",
            "throughput_bps",
            "vantage",
            "not_judged",
        ] {
            assert!(c["a2b"].get(k).is_some(), "missing a2b.{k}");
        }
        assert_eq!(c["a"], "10.0.0.1:40000");
        assert_eq!(v["schema_version"], 1);
        assert!(v["udp"].is_array());
    }

    proptest::proptest! {
        #[test]
        fn no_capture_bytes_make_the_analyzer_panic(
            cut in 0usize..4000,
            flips in proptest::collection::vec((0usize..4000, proptest::num::u8::ANY), 0..20),
        ) {
            // Mutations of a real capture reach deep into the TCP logic.
            let mut b = capture();
            b.truncate(cut.max(24) + 4000);
            for (i, v) in flips {
                if let Some(x) = b.get_mut(24 + i) {
                    *x = v;
                }
            }
            let opts = Options { keep_series: true, ..Options::default() };
            if let Ok(a) = analyze_bytes("t", &b, opts.clone()) {
                let _ = crate::text::summary(&a);
                let _ = crate::text::warnings(&a);
                // Split over two shards, the same analysis.
                let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
                proptest::prop_assert!(json(&split(&b, 2, &opts).0) == json(&a));
                // Read in small parts: the same analysis, unless a part was refused.
                let small = Options { part_bytes: 4096, ..opts.clone() };
                let whole = analyze_bytes("t", &b, small.clone()).unwrap();
                if let Ok(Some(_)) = ChunkedCapture::new("t", 0, &b, &small) {
                    let (parts, failed, _) = in_parts(&b, 2, &small);
                    proptest::prop_assert!(failed || json(&parts) == json(&whole));
                }
            }
        }
    }

    #[test]
    fn a_4_tuple_reused_by_the_other_end_gives_the_new_connection_its_own_sides() {
        use crate::synth::{Tcp, ACK, FIN, SYN};
        let x: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let y: SocketAddr = "10.0.0.2:6000".parse().unwrap();
        let ms = |t: u64| 1_700_000_000_000_000_000 + t * 1_000_000;
        let seg = |t: u64, src, dst, seq, ack, flags, len| {
            let mut p = Tcp::new(src, dst, seq, ack, flags);
            p.payload_len = len;
            (ms(t), p.build())
        };
        let pkts = vec![
            // x opens, sends 100 bytes, both close.
            seg(0, x, y, 100, 0, SYN, 0),
            seg(1, y, x, 900, 101, SYN | ACK, 0),
            seg(2, x, y, 101, 901, ACK, 0),
            seg(3, x, y, 101, 901, ACK, 100),
            seg(4, y, x, 901, 201, ACK, 0),
            seg(5, x, y, 201, 901, FIN | ACK, 0),
            seg(6, y, x, 901, 202, FIN | ACK, 0),
            seg(7, x, y, 202, 902, ACK, 0),
            // y opens on the same 4-tuple and sends 300 bytes.
            seg(10, y, x, 5000, 0, SYN, 0),
            seg(11, x, y, 7000, 5001, SYN | ACK, 0),
            seg(12, y, x, 5001, 7001, ACK, 0),
            seg(13, y, x, 5001, 7001, ACK, 200),
            seg(14, y, x, 5201, 7001, ACK, 100),
            seg(15, x, y, 7001, 5301, ACK, 0),
        ];
        let a = analyze_bytes("reuse", &synth::pcap(pkts), Options::default()).unwrap();
        assert_eq!(a.connections.len(), 2, "{:#?}", a.connections);
        let (first, second) = (&a.connections[0], &a.connections[1]);
        assert_eq!((first.a, first.a2b.stats.data_bytes), (x, 100));
        assert_eq!(first.b2a.stats.data_bytes, 0);
        assert_eq!((second.a, second.a2b.stats.data_bytes), (y, 300));
        assert_eq!(second.b2a.stats.data_bytes, 0);
        assert_eq!((second.a2b.stats.packets, second.b2a.stats.packets), (4, 2));
    }

    #[test]
    fn the_recent_connections_cache_never_answers_with_another_connections_index() {
        // Both directions of each connection, the second one's side 1.
        let way = |port: u16, back: bool| {
            let (x, y) = (
                End::new("10.0.0.1".parse().unwrap(), port),
                End::new("10.0.0.2".parse().unwrap(), 5201),
            );
            let (src, dst) = if back { (y, x) } else { (x, y) };
            Way {
                vantage: 0,
                src,
                dst,
            }
        };
        let mut r = Recent::default();
        let mut slots = std::collections::HashSet::new();
        for port in 1000..1200u16 {
            for back in [false, true] {
                r.put(way(port, back), usize::from(port), usize::from(back));
                slots.insert(Recent::slot(&way(port, back)));
                // The last one put is always found; earlier ones only if no later one took
                // their slot, and never as another's or with the other direction's side.
                let want = Some((usize::from(port), usize::from(back)));
                assert_eq!(r.get(&way(port, back)), want);
            }
            for earlier in 1000..port {
                for back in [false, true] {
                    let got = r.get(&way(earlier, back));
                    let want = Some((usize::from(earlier), usize::from(back)));
                    assert!(got.is_none() || got == want, "{earlier}: {got:?}");
                }
            }
        }
        assert_eq!(slots.len(), RECENT_SLOTS, "some slots are never used");
    }
}

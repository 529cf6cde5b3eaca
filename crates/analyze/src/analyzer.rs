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
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep_series: false,
            filter: None,
            max_warnings: 100,
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

/// How often (in IP packets over all shards) closed connections are finished and their state
/// dropped.
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
    /// of them. [`Key::shard`] keeps its own hash: the split must not depend on this one.
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
    fn hash_pair<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.lo.ip as u64);
        h.write_u64((self.lo.ip >> 64) as u64);
        h.write_u64(self.hi.ip as u64);
        h.write_u64((self.hi.ip >> 64) as u64);
        h.write_u64(u64::from(self.lo.port_family) << 32 | u64::from(self.hi.port_family));
    }
    /// Which of `count` shards keeps the flow: by its address pair alone, so that both
    /// directions and every vantage point of a connection fall in the same one (and
    /// `ecn_bleached` still sees both views).
    fn shard(&self, count: u32) -> u32 {
        if count <= 1 {
            return 0;
        }
        let mut h = FxHasher::default();
        self.hash_pair(&mut h);
        // The multiply leaves the low bits poorly mixed; the high ones pick the shard.
        ((h.finish() >> 32) % u64::from(count)) as u32
    }
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

/// Which of `count` shards keeps the flow of IP datagram `ip`: [`Key::shard`] of its address
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
    Key::new(Vantage::default(), x, y).shard(count)
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
#[derive(Default)]
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
    /// IP packets since the last sweep of closed connections.
    since_sweep: u32,
}

impl Front {
    fn new(opts: &Options) -> Front {
        Front {
            epoch: None,
            captures: Vec::new(),
            warnings: Warnings::new(opts.max_warnings),
            since_sweep: 0,
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
        mut each: impl FnMut(&mut Front, Vantage, u64, Instant, u64, &[u8]),
    ) {
        let cap = self.captures.len();
        self.captures.push(CaptureSummary {
            name: name.to_string(),
            format: rd.format_name(),
            ..CaptureSummary::default()
        });
        // One loop per record layout, chosen once for the file: 4 to 7 are a pcap in memory
        // in either byte order and timestamp unit (`RECORDS_PCAP_IN_MEMORY` and its bits).
        match rd.records() {
            4 => self.walk::<4>(cap, &mut rd, progress, &mut each),
            5 => self.walk::<5>(cap, &mut rd, progress, &mut each),
            6 => self.walk::<6>(cap, &mut rd, progress, &mut each),
            7 => self.walk::<7>(cap, &mut rd, progress, &mut each),
            _ => self.walk::<RECORDS_ANY>(cap, &mut rd, progress, &mut each),
        }
        self.captures[cap].interfaces = rd.interfaces();
    }

    /// [`Front::read_capture`]'s loop over the records of capture `cap`, which lie as
    /// `RECORDS` says ([`CaptureReader::records`]).
    fn walk<const RECORDS: u8>(
        &mut self,
        cap: usize,
        rd: &mut CaptureReader<'_>,
        progress: &mut dyn FnMut(u64),
        each: &mut impl FnMut(&mut Front, Vantage, u64, Instant, u64, &[u8]),
    ) {
        let mut next_progress = PROGRESS_STEP_BYTES;
        let mut unsupported: Vec<u32> = Vec::new();
        loop {
            let p: RawPacket<'_> = match rd.next_fixed::<RECORDS>() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    let n = e.packet();
                    self.warn(cap, n, format!("{e}; the rest of the file is ignored"));
                    break;
                }
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
                    each(self, vantage, number, time, offset, ip);
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
    fn packet<'a>(
        &mut self,
        vantage: Vantage,
        number: u64,
        time: Instant,
        ip: &'a [u8],
        count: u32,
        sink: &mut impl FnMut(u32, Item<'a>),
    ) {
        self.epoch = Some(self.epoch.map_or(time, |e| e.min(time)));
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY_PACKETS {
            self.since_sweep = 0;
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
                self.udp[idx].handle(src, time, payload_len, h.ip.ecn);
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
            .read_capture(name, rd, progress, |f, v, n, t, at, ip| {
                let at = usize::try_from(at).unwrap_or(usize::MAX);
                // In place, the datagram is these bytes of the input.
                if let Some(ip) = bytes.get(at..at.saturating_add(ip.len())) {
                    f.packet(v, n, t, ip, count, &mut *sink);
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
            .read_capture(name, rd, &mut |_| {}, |f, v, n, t, _, ip| {
                f.packet(v, n, t, ip, 1, &mut |_, item| shard.handle(item));
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
            .read_capture(name, rd, progress, |f, v, n, t, _, ip| {
                f.packet(v, n, t, ip, 1, &mut |_, item| shard.handle(item));
            });
        Ok(())
    }

    /// Feeds one IP datagram seen at `vantage` (for callers that have packets rather than a
    /// file, such as a live lab). `number` is only used in warnings.
    pub fn add_packet(&mut self, vantage: Vantage, number: u64, time: Instant, ip: &[u8]) {
        let shard = &mut self.shard;
        self.front
            .packet(vantage, number, time, ip, 1, &mut |_, item| {
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
                let want = parsed.map_or(0, |k| k.shard(count));
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
        assert!(pk.len() > SWEEP_EVERY_PACKETS as usize, "{}", pk.len());
        let bytes = synth::pcap(pk);
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

//! The analyzer: captures in, [`Analysis`] out.
//!
//! [`Analyzer`] reads each capture as a stream ([`crate::capture`]), strips the link layer
//! ([`crate::link`]), parses IP and transport headers (`wire::packet::parse`, TCP options with
//! [`crate::tcpopt`]), and hands each packet to the TCP connection or UDP flow it belongs to,
//! keyed by vantage point and address pair. A SYN on a 4-tuple whose connection was closed or
//! reset starts a new connection. Problems in the middle of a file become warnings naming the
//! packet number; the analysis keeps what it read. It does not open files or print.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::Read;
use std::net::SocketAddr;

use wire::packet::Transport;
use wire::Instant;

use crate::capture::{CaptureError, CaptureReader};
use crate::diagnose;
use crate::filter::Filter;
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
    /// Which part of the connections this analyzer keeps, for running several over the same
    /// captures on several cores ([`Shard`]; [`Analysis::merge`] joins their results).
    pub shard: Shard,
}

/// One of `count` disjoint parts of the connections and flows, chosen by a hash of their
/// address pair (both directions and every vantage point of a connection fall in the same
/// part, so `ecn_bleached` still sees both views). Every shard reads every packet, keeps the
/// capture summaries and the epoch; only shard 0 keeps warnings, so that merged shards report
/// each once.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Shard {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// Whether the connection or flow between `x` and `y` belongs to this shard.
    fn owns(self, x: SocketAddr, y: SocketAddr) -> bool {
        if self.count <= 1 {
            return true;
        }
        let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
        let mut h = FxHasher::default();
        lo.hash(&mut h);
        hi.hash(&mut h);
        // The multiply leaves the low bits poorly mixed; the high ones pick the shard.
        ((h.finish() >> 32) % u64::from(self.count)) as u32 == self.index
    }
}

impl Default for Options {
    fn default() -> Options {
        Options {
            keep_series: false,
            filter: None,
            max_warnings: 100,
            shard: Shard::default(),
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

/// How often (in packets) closed connections are finished and their state dropped.
const SWEEP_EVERY_PACKETS: u32 = 65_536;
/// How long after its last packet a closed connection is finished: a reused 4-tuple within
/// this time still starts a new connection (see `TcpConn::is_reuse_by`).
const SWEEP_AFTER_CLOSE: wire::Duration = wire::Duration::from_secs(30);

/// (vantage, lower endpoint, higher endpoint): both directions map to one key.
type Key = (Vantage, SocketAddr, SocketAddr);

fn key(v: Vantage, x: SocketAddr, y: SocketAddr) -> Key {
    if x <= y {
        (v, x, y)
    } else {
        (v, y, x)
    }
}

/// Builds an [`Analysis`] from captures fed one after another.
pub struct Analyzer {
    opts: Options,
    epoch: Option<Instant>,
    captures: Vec<CaptureSummary>,
    warnings: Vec<Warning>,
    /// Live connections.
    tcp: FastMap<Key, TcpConn>,
    /// Packets since the last sweep of closed connections.
    since_sweep: u32,
    tcp_done: Vec<Connection>,
    udp_index: FastMap<Key, usize>,
    udp: Vec<UdpState>,
}

impl Analyzer {
    pub fn new(opts: Options) -> Analyzer {
        Analyzer {
            opts,
            epoch: None,
            captures: Vec::new(),
            warnings: Vec::new(),
            tcp: FastMap::default(),
            since_sweep: 0,
            tcp_done: Vec::new(),
            udp_index: FastMap::default(),
            udp: Vec::new(),
        }
    }

    /// Reads a whole capture. Errors only when the file header cannot be read; trouble later
    /// in the file becomes a warning naming the packet, and what came before it counts.
    pub fn add_capture<R: Read>(&mut self, name: &str, input: R) -> Result<(), CaptureError> {
        let mut rd = CaptureReader::new(input)?;
        let cap = self.captures.len();
        self.captures.push(CaptureSummary {
            name: name.to_string(),
            format: rd.format_name(),
            ..CaptureSummary::default()
        });
        let mut unsupported: Vec<u32> = Vec::new();
        loop {
            let p = match rd.next_packet() {
                Ok(Some(p)) => p,
                Ok(None) => break,
                Err(e) => {
                    let n = e.packet();
                    self.warn(cap, n, format!("{e}; the rest of the file is ignored"));
                    break;
                }
            };
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
                    self.add_packet(vantage, number, time, ip);
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
        self.captures[cap].interfaces = rd.interfaces();
        Ok(())
    }

    fn warn(&mut self, capture: usize, packet: u64, message: String) {
        if self.opts.shard.index != 0 {
            return;
        }
        if self.warnings.len() < self.opts.max_warnings {
            self.warnings.push(Warning {
                capture,
                packet,
                message,
            });
        } else if let Some(c) = self.captures.get_mut(capture) {
            c.warnings_dropped += 1;
        }
    }

    /// Feeds one IP datagram seen at `vantage` (for callers that have packets rather than a
    /// file, such as a live lab). `number` is only used in warnings.
    pub fn add_packet(&mut self, vantage: Vantage, number: u64, time: Instant, ip: &[u8]) {
        self.epoch = Some(self.epoch.map_or(time, |e| e.min(time)));
        self.since_sweep += 1;
        if self.since_sweep >= SWEEP_EVERY_PACKETS {
            self.since_sweep = 0;
            self.sweep(time);
        }
        let h = match wire::packet::parse(ip) {
            Ok(h) => h,
            Err(e) => {
                self.warn(vantage.capture, number, format!("packet {number}: {e}"));
                return;
            }
        };
        match &h.transport {
            Transport::Tcp(t) => {
                let src = SocketAddr::new(h.ip.src, t.src_port);
                let dst = SocketAddr::new(h.ip.dst, t.dst_port);
                if !self.opts.shard.owns(src, dst) {
                    return;
                }
                if let Some(f) = &self.opts.filter {
                    if !f.matches(true, src, dst) {
                        return;
                    }
                }
                let o0 = h.ip.header_len + 20;
                let o1 = (h.ip.header_len + t.header_len).min(ip.len());
                let opts = tcpopt::parse(ip.get(o0..o1).unwrap_or(&[]));
                let k = key(vantage, src, dst);
                let keep = self.opts.keep_series;
                let conn = self
                    .tcp
                    .entry(k)
                    .or_insert_with(|| TcpConn::new(vantage, src, dst, t, time, keep));
                if conn.is_reuse_by(src, t) {
                    let fresh = TcpConn::new(vantage, src, dst, t, time, keep);
                    let old = std::mem::replace(conn, fresh);
                    self.tcp_done.push(old.finish());
                }
                conn.handle(
                    src,
                    &TcpPacket {
                        time,
                        h: t,
                        opts: &opts,
                        ecn: h.ip.ecn,
                        payload: ip
                            .get(o1..)
                            .map_or(&[][..], |b| &b[..b.len().min(t.payload_len)]),
                        ttl: h.ip.ttl,
                    },
                );
            }
            Transport::Udp {
                src_port,
                dst_port,
                payload_len,
            } => {
                let src = SocketAddr::new(h.ip.src, *src_port);
                let dst = SocketAddr::new(h.ip.dst, *dst_port);
                if !self.opts.shard.owns(src, dst) {
                    return;
                }
                if let Some(f) = &self.opts.filter {
                    if !f.matches(false, src, dst) {
                        return;
                    }
                }
                let k = key(vantage, src, dst);
                let idx = *self.udp_index.entry(k).or_insert_with(|| {
                    self.udp.push(UdpState::new(vantage, src, dst, time));
                    self.udp.len() - 1
                });
                self.udp[idx].handle(src, time, *payload_len, h.ip.ecn);
            }
            _ => {}
        }
    }

    /// Finishes connections that closed (FIN both ways, or RST) long enough ago that no
    /// straggler will come, so that live state tracks open connections, not all of them.
    fn sweep(&mut self, now: Instant) {
        let done: Vec<Key> = self
            .tcp
            .iter()
            .filter(|(_, c)| c.closed_before(now - SWEEP_AFTER_CLOSE))
            .map(|(k, _)| *k)
            .collect();
        for k in done {
            if let Some(c) = self.tcp.remove(&k) {
                self.tcp_done.push(c.finish());
            }
        }
    }

    /// Finishes every connection and flow, runs the diagnoses, and returns the analysis.
    pub fn finish(self) -> Analysis {
        let mut connections = self.tcp_done;
        connections.extend(self.tcp.into_values().map(TcpConn::finish));
        connections.sort_by_key(|c| (c.first_time, c.vantage, c.a, c.b));
        // ecn_bleached: the same connection at two vantage points.
        let mut by_pair: FastMap<(SocketAddr, SocketAddr), Vec<usize>> = FastMap::default();
        for (i, c) in connections.iter().enumerate() {
            let (_, x, y) = key(c.vantage, c.a, c.b);
            by_pair.entry((x, y)).or_default().push(i);
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
        Analysis {
            epoch: self.epoch.unwrap_or_default(),
            captures: self.captures,
            connections,
            udp,
            warnings: self.warnings,
        }
    }
}

impl Analysis {
    /// Joins the analyses of the shards of the same captures ([`Shard`]): the capture
    /// summaries and warnings of the first, the connections and flows of all, in order of
    /// their first packet.
    pub fn merge(parts: Vec<Analysis>) -> Analysis {
        let mut it = parts.into_iter();
        let Some(mut all) = it.next() else {
            return Analysis {
                epoch: Instant::default(),
                captures: Vec::new(),
                connections: Vec::new(),
                udp: Vec::new(),
                warnings: Vec::new(),
            };
        };
        for p in it {
            all.epoch = all.epoch.min(p.epoch);
            all.connections.extend(p.connections);
            all.udp.extend(p.udp);
        }
        all.connections
            .sort_by_key(|c| (c.first_time, c.vantage, c.a, c.b));
        all.udp.sort_by_key(|u| (u.first_time, u.vantage, u.a, u.b));
        all
    }
}

/// Analyzes one in-memory capture.
pub fn analyze_bytes(name: &str, bytes: &[u8], opts: Options) -> Result<Analysis, CaptureError> {
    let mut a = Analyzer::new(opts);
    a.add_capture(name, bytes)?;
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
        let whole = analyze_bytes("t", &bytes, Options::default()).unwrap();
        let parts: Vec<Analysis> = (0..3)
            .map(|index| {
                let shard = Shard { index, count: 3 };
                let a = analyze_bytes(
                    "t",
                    &bytes,
                    Options {
                        shard,
                        ..Options::default()
                    },
                );
                a.unwrap()
            })
            .collect();
        assert!(
            parts.iter().filter(|p| !p.connections.is_empty()).count() >= 2,
            "the hash spreads connections over the shards"
        );
        let merged = Analysis::merge(parts);
        let json = |a: &Analysis| serde_json::to_string(&a.json_report()).unwrap();
        assert_eq!(whole.connections.len(), 12);
        assert_eq!(whole.warnings.len(), 1);
        assert!(
            json(&merged) == json(&whole),
            "merged shards differ from the whole"
        );
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
            if let Ok(a) = analyze_bytes("f", &b, Options { keep_series: true, ..Options::default() }) {
                let _ = crate::text::summary(&a);
                let _ = crate::text::warnings(&a);
            }
        }
    }
}

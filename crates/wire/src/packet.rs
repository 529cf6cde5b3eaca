//! A packet in flight through the lab, and checked views over its headers.
//!
//! Two levels, as in smoltcp: fast accessors on [`Packet`] for what every hop needs (length,
//! ECN, flow key), reading fixed offsets after checking the length; and [`parse`], a full
//! checked parse into plain [`Headers`] built on etherparse, for logs, translators and tests.
//! On top of that parse, [`udp_datagram`] gives a whole UDP datagram's ports and payload, for
//! those who read an application's messages out of a capture.
//! A packet is always one IP datagram (IPv4 or IPv6, no link-layer header), as a TUN device in
//! IFF_NO_PI mode delivers it and as LINKTYPE_RAW captures store it.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ecn::Ecn;
use crate::flow::{FlowKey, IpProto};
use crate::time::Instant;

/// Why bytes are not a packet we can read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PacketError {
    /// Fewer bytes than the header needs.
    Truncated { needed: usize, got: usize },
    /// The version nibble is neither 4 nor 6.
    BadVersion(u8),
    /// A header field is inconsistent (the text says which).
    Malformed(String),
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::Truncated { needed, got } => {
                write!(f, "truncated packet: {got} bytes, header needs {needed}")
            }
            PacketError::BadVersion(v) => {
                write!(f, "not an IP packet (version nibble {v}, want 4 or 6)")
            }
            PacketError::Malformed(why) => write!(f, "malformed packet: {why}"),
        }
    }
}

impl std::error::Error for PacketError {}

/// One IP datagram moving through the lab, with the bookkeeping the hops need.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Packet {
    /// The IP datagram, starting at the IP header.
    pub data: Vec<u8>,
    /// Lab-wide sequence number, for logs.
    pub id: u64,
    /// When the packet entered the current queue; set by the link before enqueue, read by
    /// AQMs for sojourn time.
    pub enqueued_at: Instant,
    /// Which sub-queue a discipline put the packet in (DualPI2: 0 = classic, 1 = L4S); zero
    /// for single-queue disciplines.
    pub class: u8,
    /// A TCP super-packet carried whole, standing for its segments (`None`: one datagram).
    pub whole: Option<crate::gso::Whole>,
}

impl Packet {
    pub fn new(data: Vec<u8>) -> Packet {
        Packet {
            data,
            ..Packet::default()
        }
    }

    /// Length of the IP datagram in bytes.
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The datagrams this packet stands for: one, or a whole super-packet's segments.
    pub fn segments(&self) -> u64 {
        self.whole.map_or(1, |w| u64::from(w.segments))
    }

    /// The bytes of the datagrams it stands for: its length, or a super-packet's segments'.
    pub fn wire_bytes(&self) -> u64 {
        match &self.whole {
            None => self.data.len() as u64,
            Some(w) => w.wire_bytes(self.data.len()),
        }
    }

    /// The IP version nibble (4 or 6), if there is a first byte.
    pub fn ip_version(&self) -> Option<u8> {
        self.data.first().map(|b| b >> 4)
    }

    /// The ECN field; `NotEct` for bytes that are not a readable IP header.
    pub fn ecn(&self) -> Ecn {
        ecn_of(&self.data)
    }

    /// Sets the ECN field, fixing the IPv4 header checksum incrementally (RFC 1624). IPv6 has
    /// no header checksum, and transport checksums do not cover the ECN bits.
    pub fn set_ecn(&mut self, ecn: Ecn) -> Result<(), PacketError> {
        set_ecn(&mut self.data, ecn)
    }

    /// The 5-tuple, or `None` for bytes that are not a readable IP packet.
    pub fn flow_key(&self) -> Option<FlowKey> {
        flow_key(&self.data)
    }
}

/// The ECN field of an IP datagram; `NotEct` when the bytes are not a readable IP header.
pub fn ecn_of(data: &[u8]) -> Ecn {
    match (data.first().map(|b| b >> 4), data.len()) {
        (Some(4), n) if n >= 20 => Ecn::from_bits(data[1]),
        // IPv6: traffic class is bits 4..12; ECN is its low two bits, bits 10-11 (RFC 8200 §7).
        (Some(6), n) if n >= 40 => Ecn::from_bits(data[1] >> 4),
        _ => Ecn::NotEct,
    }
}

/// Sets the ECN field of an IP datagram in place; see [`Packet::set_ecn`].
pub fn set_ecn(data: &mut [u8], ecn: Ecn) -> Result<(), PacketError> {
    match data.first().map(|b| b >> 4) {
        Some(4) => {
            need(data, 20)?;
            let old_word = u16::from_be_bytes([data[0], data[1]]);
            data[1] = (data[1] & !0b11) | ecn.bits();
            let new_word = u16::from_be_bytes([data[0], data[1]]);
            let old_sum = u16::from_be_bytes([data[10], data[11]]);
            let new_sum = checksum::update(old_sum, old_word, new_word);
            data[10..12].copy_from_slice(&new_sum.to_be_bytes());
            Ok(())
        }
        Some(6) => {
            need(data, 40)?;
            data[1] = (data[1] & !0b0011_0000) | (ecn.bits() << 4);
            Ok(())
        }
        Some(v) => Err(PacketError::BadVersion(v)),
        None => Err(PacketError::Truncated { needed: 1, got: 0 }),
    }
}

fn need(data: &[u8], n: usize) -> Result<(), PacketError> {
    if data.len() < n {
        Err(PacketError::Truncated {
            needed: n,
            got: data.len(),
        })
    } else {
        Ok(())
    }
}

fn ports_at(data: &[u8], off: usize, proto: u8) -> (u16, u16) {
    let rd = |o: usize| {
        data.get(o..o + 2)
            .map_or(0, |b| u16::from_be_bytes([b[0], b[1]]))
    };
    match proto {
        6 | 17 | 132 | 136 => (rd(off), rd(off + 2)),
        // ICMP echo / echo reply (types 8/0, ICMPv6 128/129): the identifier names the flow.
        1 | 58 => {
            let t = data.get(off).copied().unwrap_or(255);
            if matches!(t, 0 | 8 | 128 | 129) {
                let id = rd(off + 4);
                (id, id)
            } else {
                (0, 0)
            }
        }
        _ => (0, 0),
    }
}

/// The 5-tuple of an IP datagram. Fast path for IPv4 and for IPv6 without extension headers;
/// other IPv6 packets go through the full parse. Non-first IPv4 fragments get ports 0.
pub fn flow_key(data: &[u8]) -> Option<FlowKey> {
    match data.first().map(|b| b >> 4) {
        Some(4) => {
            if data.len() < 20 {
                return None;
            }
            let ihl = usize::from(data[0] & 0x0f) * 4;
            let proto = data[9];
            let frag_offset = u16::from_be_bytes([data[6], data[7]]) & 0x1fff;
            let (sp, dp) = if frag_offset == 0 {
                ports_at(data, ihl, proto)
            } else {
                (0, 0)
            };
            Some(FlowKey {
                src: IpAddr::V4(Ipv4Addr::new(data[12], data[13], data[14], data[15])),
                dst: IpAddr::V4(Ipv4Addr::new(data[16], data[17], data[18], data[19])),
                proto: IpProto(proto),
                src_port: sp,
                dst_port: dp,
            })
        }
        Some(6) => {
            if data.len() < 40 {
                return None;
            }
            let nh = data[6];
            let (proto, off) = if matches!(nh, 6 | 17 | 58) {
                (nh, 40)
            } else {
                let h = parse(data).ok()?;
                (h.ip.proto.0, h.ip.header_len)
            };
            let (sp, dp) = ports_at(data, off, proto);
            let a = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&data[o..o + 16]);
                IpAddr::V6(Ipv6Addr::from(b))
            };
            Some(FlowKey {
                src: a(8),
                dst: a(24),
                proto: IpProto(proto),
                src_port: sp,
                dst_port: dp,
            })
        }
        _ => None,
    }
}

/// The IP header, whichever version, as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IpHeader {
    pub version: u8,
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The upper-layer protocol, after any IPv6 extension headers.
    pub proto: IpProto,
    pub ecn: Ecn,
    /// DSCP, the upper six bits of TOS / traffic class.
    pub dscp: u8,
    /// TTL or hop limit.
    pub ttl: u8,
    /// Bytes of IP header, including IPv4 options and IPv6 extension headers.
    pub header_len: usize,
    /// Total datagram length the header claims.
    pub total_len: usize,
    /// A fragment (IPv4 MF or offset set, or an IPv6 fragment header).
    pub fragment: bool,
}

/// TCP header fields (RFC 9293 §3.1).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    /// FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40, CWR 0x80.
    pub flags: u8,
    /// The AE (formerly NS) bit, used by AccECN (RFC 9768).
    pub ae: bool,
    /// The raw, unscaled window field.
    pub window: u16,
    pub header_len: usize,
    pub payload_len: usize,
}

impl TcpHeader {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;
    pub const ECE: u8 = 0x40;
    pub const CWR: u8 = 0x80;

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// The transport header, as far as it was captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp(TcpHeader),
    Udp {
        src_port: u16,
        dst_port: u16,
        payload_len: usize,
    },
    Icmpv4 {
        icmp_type: u8,
        code: u8,
    },
    Icmpv6 {
        icmp_type: u8,
        code: u8,
    },
    /// Another protocol, a non-first fragment, or a transport header cut short.
    Other,
}

/// A fully parsed packet: IP header and transport header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Headers {
    pub ip: IpHeader,
    pub transport: Transport,
}

/// Checked parse of an IP datagram. A transport header that is cut short (a small snaplen)
/// gives `Transport::Other` rather than an error; a bad IP header is an error.
pub fn parse(data: &[u8]) -> Result<Headers, PacketError> {
    let version = data
        .first()
        .map(|b| b >> 4)
        .ok_or(PacketError::Truncated { needed: 1, got: 0 })?;
    if version != 4 && version != 6 {
        return Err(PacketError::BadVersion(version));
    }
    // Lax: accept a datagram whose payload was cut by the capture's snaplen.
    let sliced = etherparse::LaxIpSlice::from_slice(data)
        .map_err(|e| PacketError::Malformed(e.to_string()))?;
    let (ip_slice, _stop) = sliced;
    let ip = match &ip_slice {
        etherparse::LaxIpSlice::Ipv4(v4) => {
            let h = v4.header();
            IpHeader {
                version: 4,
                src: IpAddr::V4(h.source_addr()),
                dst: IpAddr::V4(h.destination_addr()),
                proto: IpProto(h.protocol().0),
                ecn: Ecn::from_bits(h.ecn().value()),
                dscp: h.dcp().value(),
                ttl: h.ttl(),
                header_len: h.ihl() as usize * 4,
                total_len: usize::from(h.total_len()),
                fragment: h.more_fragments() || h.fragments_offset().value() != 0,
            }
        }
        etherparse::LaxIpSlice::Ipv6(v6) => {
            let h = v6.header();
            let exts = v6.extensions();
            IpHeader {
                version: 6,
                src: IpAddr::V6(h.source_addr()),
                dst: IpAddr::V6(h.destination_addr()),
                proto: IpProto(v6.payload().ip_number.0),
                ecn: Ecn::from_bits(h.traffic_class() & 0b11),
                dscp: h.traffic_class() >> 2,
                ttl: h.hop_limit(),
                header_len: 40 + exts.slice().len(),
                total_len: 40 + usize::from(h.payload_length()),
                fragment: v6.is_payload_fragmented(),
            }
        }
    };
    let payload = match &ip_slice {
        etherparse::LaxIpSlice::Ipv4(v4) => v4.payload().payload,
        etherparse::LaxIpSlice::Ipv6(v6) => v6.payload().payload,
    };
    let transport = if ip.fragment && !first_fragment(data) {
        Transport::Other
    } else {
        match ip.proto.0 {
            6 => match etherparse::TcpSlice::from_slice(payload) {
                Ok(t) => Transport::Tcp(TcpHeader {
                    src_port: t.source_port(),
                    dst_port: t.destination_port(),
                    seq: t.sequence_number(),
                    ack: t.acknowledgment_number(),
                    flags: payload[13],
                    ae: payload[12] & 0x01 != 0,
                    window: t.window_size(),
                    header_len: t.header_len(),
                    payload_len: ip
                        .total_len
                        .saturating_sub(ip.header_len)
                        .saturating_sub(t.header_len()),
                }),
                Err(_) => Transport::Other,
            },
            17 => match etherparse::UdpSlice::from_slice_lax(payload) {
                Ok(u) => Transport::Udp {
                    src_port: u.source_port(),
                    dst_port: u.destination_port(),
                    payload_len: usize::from(u.length()).saturating_sub(8),
                },
                Err(_) => Transport::Other,
            },
            1 if payload.len() >= 2 => Transport::Icmpv4 {
                icmp_type: payload[0],
                code: payload[1],
            },
            58 if payload.len() >= 2 => Transport::Icmpv6 {
                icmp_type: payload[0],
                code: payload[1],
            },
            _ => Transport::Other,
        }
    };
    Ok(Headers { ip, transport })
}

fn first_fragment(data: &[u8]) -> bool {
    match data.first().map(|b| b >> 4) {
        Some(4) if data.len() >= 8 => u16::from_be_bytes([data[6], data[7]]) & 0x1fff == 0,
        _ => true,
    }
}

/// A whole UDP datagram found in an IP packet: its ports and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpDatagram<'a> {
    pub src_port: u16,
    pub dst_port: u16,
    /// The data after the 8-byte UDP header, as long as the UDP length field says.
    pub payload: &'a [u8],
}

/// The UDP datagram (RFC 768) that an IP packet carries, whole; `None` for anything else.
///
/// The IP header is read by [`parse`], so there is one walk of it: an IPv4 header's length
/// is its IHL, options included (RFC 791 §3.1); IPv6 extension headers are walked to the
/// upper layer (RFC 8200 §4), so UDP behind Hop-by-Hop, Routing, Destination Options or AH
/// is found. `None` when:
/// - the bytes are not an IP packet, or its upper layer is not UDP (protocol 17);
/// - the packet is a fragment: IPv4 with MF or an offset (RFC 791 §3.1), IPv6 with a
///   Fragment header that fragments (RFC 8200 §4.5), since the payload is not all here. An
///   atomic fragment (offset 0, no M flag) is a whole datagram and is read;
/// - the packet is cut short: fewer bytes than the IPv4 total length (RFC 791 §3.1) or than
///   40 plus the IPv6 payload length (RFC 8200 §3) claim, as a capture's snaplen cuts them.
///   An IPv6 jumbogram (payload length 0, RFC 2675) counts as cut;
/// - the UDP length (RFC 768: header and data, in bytes) is less than the 8-byte header or
///   more than the IP payload holds.
///
/// Bytes after the datagram, within the IP payload or after it (link-layer padding), are
/// not payload. No checksum is checked: a capture taken at the sender holds datagrams whose
/// checksum the device fills in later (checksum offload).
pub fn udp_datagram(data: &[u8]) -> Option<UdpDatagram<'_>> {
    let h = parse(data).ok()?;
    if h.ip.proto != IpProto::UDP || h.ip.fragment {
        return None;
    }
    // The IP payload: `total_len` counts the IP header, options and extension headers too.
    let udp = data.get(h.ip.header_len..h.ip.total_len)?;
    // RFC 768: source port at 0, destination port at 2, length at 4, checksum at 6.
    let be16 = |at: usize| {
        udp.get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
    };
    let (src_port, dst_port, udp_len) = (be16(0)?, be16(2)?, be16(4)?);
    Some(UdpDatagram {
        src_port,
        dst_port,
        payload: udp.get(8..usize::from(udp_len))?,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::build::{Ip, Tcp};
    use crate::testing::{A4, A6, B4, B6};

    /// An IPv4 TCP SYN, 10.0.0.1:40000 > 10.0.0.2:80, ECT(0), with valid checksums.
    pub fn tcp_syn_v4() -> Vec<u8> {
        Ip::v4([10, 0, 0, 1].into(), [10, 0, 0, 2].into())
            .ecn(Ecn::Ect0)
            .identification(0x1234)
            .tcp(&Tcp::new(40000, 80, 1).flags(TcpHeader::SYN), &[])
    }

    /// IPv6 UDP fd00::1:5000 > fd00::2:53, traffic class 0x01 (ECT(1)), 4 payload bytes.
    pub fn udp_v6() -> Vec<u8> {
        let fd = |last: u16| std::net::Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, last);
        Ip::v6(fd(1), fd(2))
            .ecn(Ecn::Ect1)
            .udp(5000, 53, &[1, 2, 3, 4])
    }

    #[test]
    fn ecn_reads_both_versions() {
        assert_eq!(ecn_of(&tcp_syn_v4()), Ecn::Ect0);
        assert_eq!(ecn_of(&udp_v6()), Ecn::Ect1);
        assert_eq!(ecn_of(&[0x45]), Ecn::NotEct);
    }

    #[test]
    fn setting_ce_on_ipv4_keeps_the_header_checksum_valid() {
        let mut p = Packet::new(tcp_syn_v4());
        p.set_ecn(Ecn::Ce).unwrap();
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(checksum::checksum(&p.data[..20], 0), 0);
        assert_eq!(p.data[1] >> 2, 0, "DSCP untouched");
    }

    #[test]
    fn setting_ecn_on_ipv6_leaves_the_rest_of_the_traffic_class() {
        let mut d = udp_v6();
        d[0] = 0x6b; // traffic class high nibble 0xb
        set_ecn(&mut d, Ecn::Ce).unwrap();
        assert_eq!(ecn_of(&d), Ecn::Ce);
        assert_eq!(d[0], 0x6b);
        assert_eq!(parse(&d).unwrap().ip.dscp, 0xb0 >> 2);
    }

    #[test]
    fn set_ecn_refuses_what_is_not_ip() {
        assert_eq!(
            set_ecn(&mut [], Ecn::Ce),
            Err(PacketError::Truncated { needed: 1, got: 0 })
        );
        assert_eq!(
            set_ecn(&mut [0x20; 40], Ecn::Ce),
            Err(PacketError::BadVersion(2))
        );
        assert!(set_ecn(&mut [0x45; 10], Ecn::Ce).is_err());
    }

    #[test]
    fn flow_keys_of_tcp_and_udp() {
        let k = flow_key(&tcp_syn_v4()).unwrap();
        assert_eq!(k.to_string(), "tcp 10.0.0.1:40000 > 10.0.0.2:80");
        let k6 = flow_key(&udp_v6()).unwrap();
        assert_eq!(k6.to_string(), "udp [fd00::1]:5000 > [fd00::2]:53");
        assert_eq!(flow_key(&[0x45, 0, 0]), None);
    }

    #[test]
    fn parse_gives_tcp_fields() {
        let h = parse(&tcp_syn_v4()).unwrap();
        assert_eq!(h.ip.version, 4);
        assert_eq!(h.ip.ttl, 64);
        match h.transport {
            Transport::Tcp(t) => {
                assert!(t.has(TcpHeader::SYN));
                assert!(!t.has(TcpHeader::ACK));
                assert_eq!(t.seq, 1);
                assert_eq!(t.window, 0xffff);
                assert_eq!(t.payload_len, 0);
            }
            other => panic!("not tcp: {other:?}"),
        }
    }

    #[test]
    fn parse_tolerates_a_short_snaplen_but_not_garbage() {
        let p = tcp_syn_v4();
        let h = parse(&p[..24]).unwrap();
        assert_eq!(h.transport, Transport::Other);
        assert!(parse(&[0x45, 0, 0, 40]).is_err());
        assert_eq!(parse(&[0x12; 40]), Err(PacketError::BadVersion(1)));
    }

    /// `p` with its UDP length field (RFC 768, bytes 4..6 of the UDP header) set to `len`.
    fn with_udp_len(mut p: Vec<u8>, udp_at: usize, len: u16) -> Vec<u8> {
        p[udp_at + 4..udp_at + 6].copy_from_slice(&len.to_be_bytes());
        p
    }

    fn ports_and_payload(p: &[u8]) -> Option<(u16, u16, &[u8])> {
        udp_datagram(p).map(|u| (u.src_port, u.dst_port, u.payload))
    }

    #[test]
    fn udp_datagram_gives_the_ports_and_payload_of_either_version() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            let p = ip.udp(5000, 53, b"query");
            assert_eq!(ports_and_payload(&p), Some((5000, 53, &b"query"[..])));
            let empty = ip.udp(1, 2, &[]);
            assert_eq!(udp_datagram(&empty).unwrap().payload, &[] as &[u8]);
        }
    }

    #[test]
    fn udp_datagram_finds_udp_after_ipv4_options() {
        // Router Alert (RFC 2113 §2.1): four bytes, IHL 6.
        let p = Ip::v4(A4, B4)
            .ipv4_options(&[148, 4, 0, 0])
            .udp(5000, 53, b"query");
        assert_eq!(p[0] & 0x0f, 6);
        assert_eq!(ports_and_payload(&p), Some((5000, 53, &b"query"[..])));
    }

    #[test]
    fn udp_datagram_refuses_every_cut_of_a_packet() {
        for ip in [Ip::v4(A4, B4).ipv4_options(&[1; 8]), Ip::v6(A6, B6)] {
            let p = ip.udp(5000, 53, b"query");
            for n in 0..p.len() {
                assert_eq!(udp_datagram(&p[..n]), None, "{n} of {} bytes", p.len());
            }
        }
    }

    #[test]
    fn udp_datagram_leaves_out_bytes_after_the_datagram() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            // Link-layer padding after the IP datagram.
            let mut padded = ip.udp(5000, 53, b"query");
            padded.extend_from_slice(&[0; 6]);
            assert_eq!(udp_datagram(&padded).unwrap().payload, b"query");
            // A UDP length shorter than the IP payload: the rest is not the datagram's.
            let short = with_udp_len(ip.udp(5000, 53, b"query"), ip.header_bytes(), 8 + 2);
            assert_eq!(udp_datagram(&short).unwrap().payload, b"qu");
        }
    }

    #[test]
    fn udp_datagram_refuses_a_udp_length_outside_the_ip_payload() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            let at = ip.header_bytes();
            let p = ip.udp(5000, 53, b"query");
            assert_eq!(udp_datagram(&with_udp_len(p.clone(), at, 7)), None);
            let beyond = (p.len() - at + 1) as u16;
            assert_eq!(udp_datagram(&with_udp_len(p, at, beyond)), None);
        }
    }

    #[test]
    fn udp_datagram_is_none_for_other_protocols() {
        assert_eq!(udp_datagram(&tcp_syn_v4()), None);
        assert_eq!(
            udp_datagram(&Ip::v6(A6, B6).echo_request(7, 1, b"ping")),
            None
        );
        assert_eq!(udp_datagram(&[0x12; 40]), None);
        assert_eq!(udp_datagram(&[]), None);
    }

    #[test]
    fn udp_datagram_refuses_fragments_but_reads_an_atomic_one() {
        for ip in [Ip::v4(A4, B4).dont_fragment(false), Ip::v6(A6, B6)] {
            let whole = ip.udp(5000, 53, &[7; 24]);
            let udp = &whole[ip.header_bytes()..];
            // The first fragment holds the UDP header but not all of the payload, even when
            // its UDP length claims no more than the fragment holds.
            let first = ip.fragment(17, 9, 0, true, &udp[..16]);
            assert_eq!(udp_datagram(&first), None);
            let at = first.len() - 16;
            assert_eq!(udp_datagram(&with_udp_len(first, at, 16)), None);
            let last = ip.fragment(17, 9, 2, false, &udp[16..]);
            assert_eq!(udp_datagram(&last), None);
        }
        // IPv6's atomic fragment (RFC 8200 §4.5): a Fragment header before a whole datagram.
        let ip = Ip::v6(A6, B6);
        let whole = ip.udp(5000, 53, b"query");
        let atomic = ip.fragment(17, 9, 0, false, &whole[40..]);
        assert_eq!(atomic[6], 44, "a Fragment header follows the fixed header");
        assert_eq!(ports_and_payload(&atomic), Some((5000, 53, &b"query"[..])));
    }

    proptest::proptest! {
        #[test]
        fn a_built_udp_datagram_reads_back_and_no_cut_of_it_does(
            v6 in proptest::bool::ANY,
            src_port in proptest::num::u16::ANY,
            dst_port in proptest::num::u16::ANY,
            options in proptest::collection::vec(proptest::num::u8::ANY, 0..41),
            payload in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
            cut in proptest::num::usize::ANY,
        ) {
            let ip = if v6 { Ip::v6(A6, B6) } else { Ip::v4(A4, B4).ipv4_options(&options) };
            let p = ip.udp(src_port, dst_port, &payload);
            let u = udp_datagram(&p).unwrap();
            proptest::prop_assert_eq!((u.src_port, u.dst_port), (src_port, dst_port));
            proptest::prop_assert_eq!(u.payload, &payload[..]);
            let k = flow_key(&p).unwrap();
            proptest::prop_assert_eq!((k.src_port, k.dst_port), (src_port, dst_port));
            proptest::prop_assert_eq!(udp_datagram(&p[..cut % p.len()]), None);
        }

        #[test]
        fn no_bytes_make_the_readers_panic(data in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = parse(&data);
            let _ = flow_key(&data);
            let _ = udp_datagram(&data);
            let _ = ecn_of(&data);
            let mut d = data.clone();
            let _ = set_ecn(&mut d, Ecn::Ce);
        }
    }
}

//! Building packets: the emit side of [`packet`](crate::packet). Whole IPv4/IPv6 datagrams
//! carrying UDP, TCP, ICMP echo or an ICMP "too big" error, with their lengths and checksums
//! right, as a host's stack or a router would send them. The lab uses it for the ICMP errors
//! of a narrow link; tests and benches use it wherever they need a real packet.
//!
//! The headers are written by etherparse's `PacketBuilder`, so there is one definition of each
//! header's layout for reading ([`packet::parse`](crate::packet::parse)) and for writing.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{
    icmpv4::DestUnreachableHeader, Icmpv4Type, Icmpv6Type, IpDscp, IpEcn, IpFragOffset, IpHeaders,
    IpNumber, Ipv4Header, Ipv4Options, Ipv6Header, PacketBuilder, PacketBuilderStep,
};

use crate::packet::TcpHeader;
use crate::Ecn;

/// The IP header of the packets to build: addresses of one family, hop limit, ECN field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip {
    src: IpAddr,
    dst: IpAddr,
    hop_limit: u8,
    ecn: Ecn,
    dont_fragment: bool,
    identification: u16,
    /// IPv4 option bytes, whole words: the first `v4_options_len` of `v4_options`.
    v4_options: [u8; IPV4_OPTIONS_MAX_BYTES],
    v4_options_len: u8,
}

/// A TCP segment's header fields (RFC 9293 §3.1); options go beside it, to
/// [`Ip::tcp_with_options`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tcp {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    /// The acknowledgment number; the ACK flag is set with it.
    pub ack: Option<u32>,
    /// The other flags, as [`TcpHeader`]'s constants (`TcpHeader::SYN | TcpHeader::PSH`).
    pub flags: u8,
    /// The AE flag (Accurate ECN, RFC 9768 §3.1; the former NS bit, bit 8 of the flags).
    pub ae: bool,
    pub window: u16,
}

impl Tcp {
    /// A segment from `src_port` to `dst_port` with sequence number `seq`, no flags, a 65535
    /// window.
    pub fn new(src_port: u16, dst_port: u16, seq: u32) -> Tcp {
        Tcp {
            src_port,
            dst_port,
            seq,
            ack: None,
            flags: 0,
            ae: false,
            window: u16::MAX,
        }
    }

    /// With the ACK flag and acknowledgment number `ack`.
    pub fn ack(mut self, ack: u32) -> Tcp {
        self.ack = Some(ack);
        self
    }

    /// With `flags` added; ACK among them without [`Tcp::ack`] acknowledges 0.
    pub fn flags(mut self, flags: u8) -> Tcp {
        if flags & TcpHeader::ACK != 0 && self.ack.is_none() {
            self.ack = Some(0);
        }
        self.flags |= flags & !TcpHeader::ACK;
        self
    }

    /// With the AE flag set.
    pub fn ae(mut self) -> Tcp {
        self.ae = true;
        self
    }

    /// With a receive window of `window`.
    pub fn window(mut self, window: u16) -> Tcp {
        self.window = window;
        self
    }
}

/// The most option bytes a TCP header holds: its data offset counts at most 15 words of 4.
pub const TCP_OPTIONS_MAX_BYTES: usize = 40;

/// TCP option bytes (RFC 9293 §3.2), each with the NOPs that align it as Linux sends them.
pub mod tcp_option {
    /// Maximum segment size (kind 2, RFC 9293 §3.7.1).
    pub fn mss(mss: u16) -> Vec<u8> {
        let b = mss.to_be_bytes();
        vec![2, 4, b[0], b[1]]
    }

    /// Window scale (kind 3, RFC 7323 §2.2), after one NOP.
    pub fn wscale(shift: u8) -> Vec<u8> {
        vec![1, 3, 3, shift]
    }

    /// SACK-permitted (kind 4, RFC 2018 §2), after two NOPs.
    pub fn sack_permitted() -> Vec<u8> {
        vec![1, 1, 4, 2]
    }

    /// Timestamps (kind 8, RFC 7323 §3.2), after two NOPs.
    pub fn timestamps(tsval: u32, tsecr: u32) -> Vec<u8> {
        let mut v = vec![1, 1, 8, 10];
        v.extend_from_slice(&tsval.to_be_bytes());
        v.extend_from_slice(&tsecr.to_be_bytes());
        v
    }

    /// SACK blocks (kind 5, RFC 2018 §3), after two NOPs; at most four blocks fit.
    pub fn sack(blocks: &[(u32, u32)]) -> Vec<u8> {
        let blocks = &blocks[..blocks.len().min(4)];
        let mut v = vec![1, 1, 5, (2 + 8 * blocks.len()) as u8];
        for (l, r) in blocks {
            v.extend_from_slice(&l.to_be_bytes());
            v.extend_from_slice(&r.to_be_bytes());
        }
        v
    }
}

/// The most option bytes an IPv4 header holds: its IHL counts at most 15 words of 4, five of
/// them the fixed header (RFC 791 §3.1).
pub const IPV4_OPTIONS_MAX_BYTES: usize = 40;

/// The IPv6 Fragment header's Next Header value (RFC 8200 §4.5).
const IPV6_FRAGMENT: u8 = 44;

/// IPv4's default TTL and IPv6's default hop limit on Linux (`ip_default_ttl`).
pub const DEFAULT_HOP_LIMIT: u8 = 64;

/// Writes a builder step's headers and the payload, cut to what the length fields hold.
/// Writing into a `Vec` fails only on a length too large, which the cut rules out.
macro_rules! emit {
    ($ip:expr, $step:expr, $l4_bytes:expr, $payload:expr) => {{
        let step = $step;
        let payload = $ip.payload_cap($l4_bytes, $payload);
        let mut out = Vec::with_capacity(step.size(payload.len()));
        step.write(&mut out, payload)
            .expect("a Vec takes any write within the length fields");
        out
    }};
}

impl Ip {
    /// IPv4 from `src` to `dst`: TTL 64, Not-ECT, DF set (as Linux sends TCP and UDP with path
    /// MTU discovery on), identification 0.
    pub fn v4(src: Ipv4Addr, dst: Ipv4Addr) -> Ip {
        Ip::new(IpAddr::V4(src), IpAddr::V4(dst))
    }

    /// IPv6 from `src` to `dst`: hop limit 64, Not-ECT.
    pub fn v6(src: Ipv6Addr, dst: Ipv6Addr) -> Ip {
        Ip::new(IpAddr::V6(src), IpAddr::V6(dst))
    }

    /// From `src` to `dst` if both are of one family.
    pub fn between(src: IpAddr, dst: IpAddr) -> Option<Ip> {
        (src.is_ipv4() == dst.is_ipv4()).then(|| Ip::new(src, dst))
    }

    fn new(src: IpAddr, dst: IpAddr) -> Ip {
        Ip {
            src,
            dst,
            hop_limit: DEFAULT_HOP_LIMIT,
            ecn: Ecn::NotEct,
            dont_fragment: true,
            identification: 0,
            v4_options: [0; IPV4_OPTIONS_MAX_BYTES],
            v4_options_len: 0,
        }
    }

    /// With TTL / hop limit `hops`.
    pub fn hop_limit(mut self, hops: u8) -> Ip {
        self.hop_limit = hops;
        self
    }

    /// With the ECN field `ecn` (RFC 3168 §5).
    pub fn ecn(mut self, ecn: Ecn) -> Ip {
        self.ecn = ecn;
        self
    }

    /// IPv4's Don't Fragment bit (IPv6 has none: ignored there).
    pub fn dont_fragment(mut self, df: bool) -> Ip {
        self.dont_fragment = df;
        self
    }

    /// IPv4's identification field (ignored for IPv6).
    pub fn identification(mut self, id: u16) -> Ip {
        self.identification = id;
        self
    }

    /// With the IPv4 option bytes `options` (RFC 791 §3.1), padded with End of Option List
    /// (zeros) to whole words and cut at [`IPV4_OPTIONS_MAX_BYTES`]; the IHL counts them.
    /// Ignored for IPv6, which carries options in extension headers.
    pub fn ipv4_options(mut self, options: &[u8]) -> Ip {
        let n = options.len().min(IPV4_OPTIONS_MAX_BYTES);
        self.v4_options = [0; IPV4_OPTIONS_MAX_BYTES];
        self.v4_options[..n].copy_from_slice(&options[..n]);
        self.v4_options_len = n.next_multiple_of(4) as u8;
        self
    }

    /// The source address.
    pub fn src(&self) -> IpAddr {
        self.src
    }

    /// The destination address.
    pub fn dst(&self) -> IpAddr {
        self.dst
    }

    /// A UDP datagram (RFC 768) carrying `payload`.
    pub fn udp(&self, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
        emit!(self, self.start().udp(src_port, dst_port), 8, payload)
    }

    /// A UDP datagram of `total_bytes` in all, IP header included, its payload zeros.
    /// Fewer bytes than the headers take give the headers alone.
    pub fn udp_of_len(&self, src_port: u16, dst_port: u16, total_bytes: usize) -> Vec<u8> {
        let payload = total_bytes.saturating_sub(self.header_bytes() + 8);
        self.udp(src_port, dst_port, &vec![0; payload])
    }

    /// A TCP segment (RFC 9293) carrying `payload`.
    pub fn tcp(&self, seg: &Tcp, payload: &[u8]) -> Vec<u8> {
        self.tcp_with_options(seg, &[], payload)
    }

    /// A TCP segment carrying the option bytes `options` (see [`tcp_option`]), padded with
    /// NOPs to whole words and cut at [`TCP_OPTIONS_MAX_BYTES`], then `payload`.
    pub fn tcp_with_options(&self, seg: &Tcp, options: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut opts = options[..options.len().min(TCP_OPTIONS_MAX_BYTES)].to_vec();
        opts.resize(opts.len().next_multiple_of(4), 1);
        let mut b = self
            .start()
            .tcp(seg.src_port, seg.dst_port, seg.seq, seg.window);
        if let Some(ack) = seg.ack {
            b = b.ack(ack);
        }
        let f = |flag: u8| seg.flags & flag != 0;
        if f(TcpHeader::FIN) {
            b = b.fin();
        }
        if f(TcpHeader::SYN) {
            b = b.syn();
        }
        if f(TcpHeader::RST) {
            b = b.rst();
        }
        if f(TcpHeader::PSH) {
            b = b.psh();
        }
        if f(TcpHeader::URG) {
            b = b.urg(0);
        }
        if f(TcpHeader::ECE) {
            b = b.ece();
        }
        if f(TcpHeader::CWR) {
            b = b.cwr();
        }
        if seg.ae {
            b = b.ns();
        }
        let b = b
            .options_raw(&opts)
            .expect("whole words within the 40 option bytes");
        emit!(self, b, 20 + opts.len(), payload)
    }

    /// A TCP segment of `total_bytes` in all, IP header included, its payload zeros.
    pub fn tcp_of_len(&self, seg: &Tcp, total_bytes: usize) -> Vec<u8> {
        let payload = total_bytes.saturating_sub(self.header_bytes() + 20);
        self.tcp(seg, &vec![0; payload])
    }

    /// An ICMP (RFC 792) or ICMPv6 (RFC 4443 §4.1) echo request.
    pub fn echo_request(&self, id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
        match self.src {
            IpAddr::V4(_) => emit!(self, self.start().icmpv4_echo_request(id, seq), 8, payload),
            IpAddr::V6(_) => emit!(self, self.start().icmpv6_echo_request(id, seq), 8, payload),
        }
    }

    /// An ICMP or ICMPv6 echo reply.
    pub fn echo_reply(&self, id: u16, seq: u16, payload: &[u8]) -> Vec<u8> {
        match self.src {
            IpAddr::V4(_) => emit!(self, self.start().icmpv4_echo_reply(id, seq), 8, payload),
            IpAddr::V6(_) => emit!(self, self.start().icmpv6_echo_reply(id, seq), 8, payload),
        }
    }

    /// The router's answer to a packet too big for the next hop's `mtu`, quoting the start of
    /// `original`: for IPv4 a Destination Unreachable, Fragmentation Needed with the next-hop
    /// MTU (RFC 792, RFC 1191 §4), quoting up to 576 bytes in all (RFC 1812 §4.3.2.3); for IPv6
    /// a Packet Too Big (RFC 4443 §3.2), quoting as much as fits in 1280 bytes. The caller
    /// decides whether an error may be sent at all (never about another ICMP error).
    pub fn too_big(&self, mtu: u32, original: &[u8]) -> Vec<u8> {
        match self.src {
            IpAddr::V4(_) => {
                let quote = original.len().min(576 - self.header_bytes() - 8);
                let next_hop_mtu = mtu.min(u32::from(u16::MAX)) as u16;
                let kind = Icmpv4Type::DestinationUnreachable(
                    DestUnreachableHeader::FragmentationNeeded { next_hop_mtu },
                );
                emit!(self, self.start().icmpv4(kind), 8, &original[..quote])
            }
            IpAddr::V6(_) => {
                let quote = original.len().min(1280 - 40 - 8);
                emit!(
                    self,
                    self.start().icmpv6(Icmpv6Type::PacketTooBig { mtu }),
                    8,
                    &original[..quote]
                )
            }
        }
    }

    /// An ICMP (RFC 792) or ICMPv6 (RFC 4443 §2.1) message of any type: `kind` and `code`,
    /// `rest` as the four bytes after the checksum, then `body` (for an error, the start of the
    /// packet it is about). The caller decides whether such a message may be sent.
    pub fn icmp(&self, kind: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
        match self.src {
            IpAddr::V4(_) => emit!(self, self.start().icmpv4_raw(kind, code, rest), 8, body),
            IpAddr::V6(_) => emit!(self, self.start().icmpv6_raw(kind, code, rest), 8, body),
        }
    }

    /// A fragment of a datagram whose upper layer is protocol `proto`: `part` of its payload,
    /// `offset_8` eight-byte units in, more to come when `more`. IPv4 carries the low 16 bits
    /// of `id` in its header (RFC 791 §3.1); IPv6 carries all 32 in a fragment header (RFC 8200
    /// §4.5). Offsets beyond 13 bits are cut to them.
    pub fn fragment(&self, proto: u8, id: u32, offset_8: u16, more: bool, part: &[u8]) -> Vec<u8> {
        let offset_8 = offset_8 & 0x1fff;
        let (header, next, extension) = match self.header() {
            IpHeaders::Ipv4(mut h, e) => {
                h.identification = id as u16;
                h.fragment_offset = IpFragOffset::try_new(offset_8).expect("13 bits");
                h.more_fragments = more;
                (IpHeaders::Ipv4(h, e), proto, Vec::new())
            }
            // The fragment header is written here: etherparse 0.18 writes its offset and M flag
            // elsewhere than RFC 8200 §4.5 puts them (offset in the top 13 bits, M the last).
            h @ IpHeaders::Ipv6(..) => {
                let mut ext = vec![proto, 0];
                ext.extend_from_slice(&(offset_8 << 3 | u16::from(more)).to_be_bytes());
                ext.extend_from_slice(&id.to_be_bytes());
                (h, IPV6_FRAGMENT, ext)
            }
        };
        let part = self.payload_cap(extension.len(), part);
        let mut out = Vec::with_capacity(self.header_bytes() + extension.len() + part.len());
        PacketBuilder::ip(header)
            .write(&mut out, IpNumber(next), &[&extension[..], part].concat())
            .expect("a Vec takes any write within the length fields");
        out
    }

    /// Bytes of the IP header this writes: IPv4's with its options, IPv6's fixed header (no
    /// extension headers).
    pub fn header_bytes(&self) -> usize {
        match self.src {
            IpAddr::V4(_) => 20 + usize::from(self.v4_options_len),
            IpAddr::V6(_) => 40,
        }
    }

    /// `payload` cut to what fits after the IP header and `after_ip_bytes` more header bytes:
    /// the IPv4 total length (RFC 791 §3.1) counts the IP header, the IPv6 payload length
    /// (RFC 8200 §3) does not, and both are 16 bits.
    fn payload_cap<'p>(&self, after_ip_bytes: usize, payload: &'p [u8]) -> &'p [u8] {
        let counted = match self.src {
            IpAddr::V4(_) => self.header_bytes() + after_ip_bytes,
            IpAddr::V6(_) => after_ip_bytes,
        };
        let room = usize::from(u16::MAX).saturating_sub(counted);
        &payload[..payload.len().min(room)]
    }

    fn start(&self) -> PacketBuilderStep<IpHeaders> {
        PacketBuilder::ip(self.header())
    }

    fn header(&self) -> IpHeaders {
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => IpHeaders::Ipv4(
                Ipv4Header {
                    dscp: IpDscp::ZERO,
                    ecn: ip_ecn(self.ecn),
                    identification: self.identification,
                    dont_fragment: self.dont_fragment,
                    time_to_live: self.hop_limit,
                    // Set by the builder from what follows.
                    protocol: IpNumber::UDP,
                    source: s.octets(),
                    destination: d.octets(),
                    options: Ipv4Options::try_from(
                        &self.v4_options[..usize::from(self.v4_options_len)],
                    )
                    .expect("whole words within the 40 option bytes"),
                    ..Default::default()
                },
                Default::default(),
            ),
            (IpAddr::V6(s), IpAddr::V6(d)) => IpHeaders::Ipv6(
                Ipv6Header {
                    traffic_class: self.ecn.bits(),
                    hop_limit: self.hop_limit,
                    next_header: IpNumber::UDP,
                    source: s.octets(),
                    destination: d.octets(),
                    ..Default::default()
                },
                Default::default(),
            ),
            // `Ip`'s constructors keep the two addresses of one family.
            _ => unreachable!("an Ip of mixed families"),
        }
    }
}

fn ip_ecn(ecn: Ecn) -> IpEcn {
    IpEcn::try_new(ecn.bits()).unwrap_or(IpEcn::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;
    use crate::packet::{parse, Transport};
    use crate::testing::{transport_sum_ok, A4, A6, B4, B6};

    #[test]
    fn udp_parses_back_with_its_ports_ecn_and_valid_checksums() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            let p = ip.ecn(Ecn::Ect1).udp(5000, 53, &[1, 2, 3, 4]);
            let h = parse(&p).unwrap();
            assert_eq!(h.ip.ecn, Ecn::Ect1);
            assert_eq!(h.ip.src, ip.src());
            assert_eq!(h.ip.total_len, p.len());
            assert!(matches!(
                h.transport,
                Transport::Udp {
                    src_port: 5000,
                    dst_port: 53,
                    payload_len: 4,
                    ..
                }
            ));
            assert!(transport_sum_ok(&p));
            if p[0] >> 4 == 4 {
                assert_eq!(checksum::checksum(&p[..20], 0), 0);
                assert_eq!(p[6] & 0x40, 0x40, "DF");
            }
        }
    }

    #[test]
    fn tcp_carries_its_flags_numbers_and_window() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            let seg = Tcp::new(40000, 80, 7)
                .ack(99)
                .flags(TcpHeader::SYN | TcpHeader::ECE | TcpHeader::CWR);
            let p = ip.tcp(&seg, b"hi");
            let h = parse(&p).unwrap();
            let Transport::Tcp(t) = h.transport else {
                panic!("not TCP: {h:?}")
            };
            assert_eq!((t.src_port, t.dst_port, t.seq, t.ack), (40000, 80, 7, 99));
            assert_eq!(
                t.flags,
                TcpHeader::SYN | TcpHeader::ACK | TcpHeader::ECE | TcpHeader::CWR
            );
            assert_eq!((t.window, t.payload_len), (u16::MAX, 2));
            assert!(transport_sum_ok(&p));
        }
    }

    #[test]
    fn tcp_options_are_padded_to_words_and_the_ae_bit_is_set() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            let mut opts = tcp_option::mss(1460);
            opts.extend(tcp_option::wscale(7));
            opts.extend([4, 2]); // SACK-permitted without its NOPs
            let seg = Tcp::new(1, 2, 3).flags(TcpHeader::SYN).ae().window(1000);
            let p = ip.tcp_with_options(&seg, &opts, b"x");
            let at = ip.header_bytes();
            assert_eq!(p[at + 12] >> 4, 8, "20 + 12 bytes of options: 8 words");
            assert_eq!(p[at + 12] & 1, 1, "AE");
            assert_eq!(
                &p[at + 20..at + 32],
                &[2, 4, 5, 180, 1, 3, 3, 7, 4, 2, 1, 1]
            );
            assert_eq!(p.len(), at + 32 + 1);
            let Transport::Tcp(t) = parse(&p).unwrap().transport else {
                panic!("not TCP")
            };
            assert_eq!((t.window, t.payload_len), (1000, 1));
            assert!(transport_sum_ok(&p));
        }
    }

    #[test]
    fn tcp_options_beyond_forty_bytes_are_cut() {
        let opts = tcp_option::sack(&[(1, 2), (3, 4), (5, 6), (7, 8), (9, 10)]);
        assert_eq!(opts.len(), 4 + 32, "four blocks at most");
        let p = Ip::v4(A4, B4).tcp_with_options(
            &Tcp::new(1, 2, 3),
            &[opts.clone(), opts].concat(),
            &[],
        );
        assert_eq!(p[32] >> 4, 15);
        assert_eq!(p.len(), 20 + 60);
        assert!(transport_sum_ok(&p));
    }

    #[test]
    fn of_len_builders_give_exactly_the_length_asked() {
        for ip in [Ip::v4(A4, B4), Ip::v6(A6, B6)] {
            assert_eq!(ip.udp_of_len(1, 2, 1500).len(), 1500);
            assert_eq!(ip.tcp_of_len(&Tcp::new(1, 2, 0), 1500).len(), 1500);
            // Too short for the headers: the headers alone.
            assert_eq!(ip.udp_of_len(1, 2, 3).len(), ip.header_bytes() + 8);
        }
    }

    #[test]
    fn echo_request_and_reply_have_their_types_and_valid_checksums() {
        let p = Ip::v4(A4, B4).echo_request(7, 1, b"ping");
        assert_eq!((p[9], p[20], p[21]), (1, 8, 0));
        assert_eq!(checksum::checksum(&p[20..], 0), 0);
        let p = Ip::v6(A6, B6).echo_reply(7, 1, b"pong");
        assert_eq!((p[6], p[40]), (58, 129));
        assert!(transport_sum_ok(&p));
    }

    #[test]
    fn too_big_quotes_the_original_within_the_rfc_limits() {
        let big4 = Ip::v4(A4, B4).udp_of_len(1, 2, 1500);
        let e = Ip::v4(Ipv4Addr::new(10, 0, 0, 254), A4).too_big(1400, &big4);
        assert_eq!(e.len(), 576);
        assert_eq!((e[20], e[21]), (3, 4));
        assert_eq!(u16::from_be_bytes([e[26], e[27]]), 1400);
        assert_eq!(&e[28..], &big4[..548]);
        assert_eq!(checksum::checksum(&e[20..], 0), 0);

        let big6 = Ip::v6(A6, B6).udp_of_len(1, 2, 1500);
        let e = Ip::v6(B6, A6).too_big(1280, &big6);
        assert_eq!(e.len(), 1280);
        assert_eq!(e[40], 2);
        assert_eq!(u32::from_be_bytes([e[44], e[45], e[46], e[47]]), 1280);
        assert!(transport_sum_ok(&e));
    }

    #[test]
    fn icmp_of_any_type_carries_its_rest_and_body_with_a_valid_checksum() {
        let quoted = Ip::v4(B4, A4).udp(53, 5000, b"late");
        let e = Ip::v4(A4, B4).icmp(3, 3, [0, 0, 5, 220], &quoted);
        assert_eq!((e[9], e[20], e[21]), (1, 3, 3));
        assert_eq!(&e[24..28], &[0, 0, 5, 220]);
        assert_eq!(&e[28..], &quoted[..]);
        assert_eq!(checksum::checksum(&e[20..], 0), 0);
        let e = Ip::v6(A6, B6).icmp(1, 4, [0; 4], b"quote");
        assert_eq!((e[6], e[40], e[41]), (58, 1, 4));
        assert!(transport_sum_ok(&e));
    }

    #[test]
    fn fragments_carry_their_offset_more_flag_and_identification() {
        let f = Ip::v4(A4, B4)
            .dont_fragment(false)
            .fragment(17, 0xabcd_0042, 3, true, &[7; 16]);
        assert_eq!(f.len(), 20 + 16);
        assert_eq!(u16::from_be_bytes([f[4], f[5]]), 0x0042);
        assert_eq!(u16::from_be_bytes([f[6], f[7]]), 0x2000 | 3, "MF, offset");
        assert_eq!((f[9], checksum::checksum(&f[..20], 0)), (17, 0));
        let f = Ip::v6(A6, B6).fragment(17, 0xabcd_0042, 4, false, &[7; 16]);
        assert_eq!(f.len(), 40 + 8 + 16);
        assert_eq!((u16::from_be_bytes([f[4], f[5]]), f[6]), (24, 44));
        assert_eq!(f[40], 17, "the fragment header's next header");
        assert_eq!(
            u16::from_be_bytes([f[42], f[43]]),
            4 << 3,
            "offset, no M flag"
        );
        assert_eq!(&f[44..48], &0xabcd_0042u32.to_be_bytes());
    }

    #[test]
    fn ipv4_options_are_padded_to_words_and_counted_by_the_ihl() {
        // Router Alert (RFC 2113 §2.1) and one NOP: five bytes, padded to eight.
        let ip = Ip::v4(A4, B4).ipv4_options(&[148, 4, 0, 0, 1]);
        assert_eq!(ip.header_bytes(), 28);
        let p = ip.udp(5000, 53, b"opt");
        assert_eq!(p[0] & 0x0f, 7, "IHL: 28 bytes, 7 words");
        assert_eq!(&p[20..28], &[148, 4, 0, 0, 1, 0, 0, 0]);
        assert_eq!(u16::from_be_bytes([p[2], p[3]]), 28 + 8 + 3);
        assert_eq!(checksum::checksum(&p[..28], 0), 0);
        assert!(transport_sum_ok(&p));
        let h = parse(&p).unwrap();
        assert_eq!(h.ip.header_len, 28);
        assert!(matches!(
            h.transport,
            Transport::Udp {
                src_port: 5000,
                payload_len: 3,
                ..
            }
        ));
        assert_eq!(ip.udp_of_len(1, 2, 100).len(), 100);
        let long = Ip::v4(A4, B4).ipv4_options(&[1; 50]);
        assert_eq!(long.header_bytes(), 20 + IPV4_OPTIONS_MAX_BYTES);
        assert_eq!(long.udp(1, 2, &[]).len(), 60 + 8);
        let v6 = Ip::v6(A6, B6).ipv4_options(&[148, 4, 0, 0]);
        assert_eq!(
            v6.udp(1, 2, &[]).len(),
            40 + 8,
            "no options in IPv6's fixed header"
        );
    }

    #[test]
    fn mixed_families_are_refused() {
        assert!(Ip::between(IpAddr::V4(A4), IpAddr::V6(B6)).is_none());
        assert!(Ip::between(IpAddr::V6(A6), IpAddr::V6(B6)).is_some());
    }
}

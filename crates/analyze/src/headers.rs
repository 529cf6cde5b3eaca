//! The IP and TCP headers of a captured datagram, read the way `wire::packet::parse` reads
//! them, with a fast path for the packets that make up almost every capture.
//!
//! [`parse`] gives exactly what `wire::packet::parse` gives (same [`Headers`], same errors);
//! it reads an unfragmented IPv4 TCP datagram (no AH) or an IPv6 TCP datagram without
//! extension headers at fixed offsets, and hands everything else to `wire::packet::parse`.
//! The lax length rules are etherparse's `LaxIpSlice`: a datagram cut by the snaplen keeps
//! the length its header claims, and a claim shorter than the header falls back to the
//! captured bytes. RFC 791 §3.1 (IPv4 header), RFC 8200 §3 (IPv6 header), RFC 9293 §3.1
//! (TCP header).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::flow::IpProto;
use wire::packet::{Headers, IpHeader, PacketError, TcpHeader, Transport};
use wire::Ecn;

/// The headers of an IP datagram; see the module documentation.
pub fn parse(ip: &[u8]) -> Result<Headers, PacketError> {
    match fast(ip) {
        Some(h) => Ok(h),
        None => wire::packet::parse(ip),
    }
}

/// The fast path: `None` for anything it does not read (then the full parse decides).
fn fast(d: &[u8]) -> Option<Headers> {
    let f = tcp_fast(d)?;
    let (version, src, dst) = if f.v6 {
        (
            6,
            IpAddr::V6(Ipv6Addr::from(f.src)),
            IpAddr::V6(Ipv6Addr::from(f.dst)),
        )
    } else {
        let v4 = |a: u128| IpAddr::V4(Ipv4Addr::from(a as u32));
        (4, v4(f.src), v4(f.dst))
    };
    let ip = IpHeader {
        version,
        src,
        dst,
        proto: IpProto(6),
        ecn: f.ecn,
        dscp: f.dscp,
        ttl: f.ttl,
        header_len: f.header_len,
        total_len: f.total_len,
        fragment: false,
    };
    let transport = f.tcp.map_or(Transport::Other, Transport::Tcp);
    Some(Headers { ip, transport })
}

/// What [`parse`] reads from a datagram its fast path takes, without building addresses:
/// the analyzer's per-packet path needs no more.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpFast {
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Source and destination address as integers (an IPv4 address in the low 32 bits).
    pub src: u128,
    pub dst: u128,
    pub ecn: Ecn,
    pub dscp: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    pub header_len: usize,
    pub total_len: usize,
    /// The TCP header; `None` when it is cut short (the full parse's `Transport::Other`).
    pub tcp: Option<TcpHeader>,
}

/// The fast path of [`parse`] as [`TcpFast`]: `Some` exactly when [`parse`] reads the
/// datagram at fixed offsets, with the same values.
#[inline(always)]
pub fn tcp_fast(d: &[u8]) -> Option<TcpFast> {
    let first = *d.first()?;
    let (mut f, payload) = match first >> 4 {
        4 => {
            let hlen = usize::from(first & 0x0f) * 4;
            // The fixed header as an array: the reads below need no bounds checks.
            let ip = d.first_chunk::<20>()?;
            // Options are fine; AH (51), fragments and other protocols take the full parse.
            if hlen < 20 || d.len() < hlen || ip[9] != 6 || ip[6] & 0x3f != 0 || ip[7] != 0 {
                return None;
            }
            let total_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let end = if total_len < hlen || total_len > d.len() {
                d.len()
            } else {
                total_len
            };
            let be32 = |o: usize| u32::from_be_bytes([ip[o], ip[o + 1], ip[o + 2], ip[o + 3]]);
            let f = TcpFast {
                v6: false,
                src: u128::from(be32(12)),
                dst: u128::from(be32(16)),
                ecn: Ecn::from_bits(ip[1] & 0b11),
                dscp: ip[1] >> 2,
                ttl: ip[8],
                header_len: hlen,
                total_len,
                tcp: None,
            };
            (f, &d[hlen..end])
        }
        6 => {
            let ip = d.first_chunk::<40>()?;
            if ip[6] != 6 {
                return None;
            }
            let plen = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            let end = if (plen == 0 && d.len() > 40) || d.len() < 40 + plen {
                d.len()
            } else {
                40 + plen
            };
            let tc = (ip[0] << 4) | (ip[1] >> 4);
            let addr = |o: usize| {
                let mut b = [0u8; 16];
                b.copy_from_slice(&ip[o..o + 16]);
                u128::from_be_bytes(b)
            };
            let f = TcpFast {
                v6: true,
                src: addr(8),
                dst: addr(24),
                ecn: Ecn::from_bits(tc & 0b11),
                dscp: tc >> 2,
                ttl: ip[7],
                header_len: 40,
                total_len: 40 + plen,
                tcp: None,
            };
            (f, &d[40..end])
        }
        _ => return None,
    };
    // A TCP header cut short is `Transport::Other`, as in the full parse.
    if let Some(t) = payload.first_chunk::<20>() {
        let thlen = usize::from(t[12] >> 4) * 4;
        if thlen >= 20 && payload.len() >= thlen {
            let be16 = |o: usize| u16::from_be_bytes([t[o], t[o + 1]]);
            let be32 = |o: usize| u32::from_be_bytes([t[o], t[o + 1], t[o + 2], t[o + 3]]);
            f.tcp = Some(TcpHeader {
                src_port: be16(0),
                dst_port: be16(2),
                seq: be32(4),
                ack: be32(8),
                flags: t[13],
                ae: t[12] & 0x01 != 0,
                window: be16(14),
                header_len: thlen,
                payload_len: f
                    .total_len
                    .saturating_sub(f.header_len)
                    .saturating_sub(thlen),
            });
        }
    }
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// IPv4 TCP, 10.0.0.1:40000 > 10.0.0.2:80, ECT(0), TTL 64, NOP NOP TS options, 10 bytes
    /// of payload.
    fn v4_tcp() -> Vec<u8> {
        let mut p = vec![
            0x45, 0x02, 0x00, 62, 0x12, 0x34, 0x40, 0x00, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p.extend_from_slice(&[0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 9, 0x80, 0x18]);
        p.extend_from_slice(&[0x01, 0xf5, 0, 0, 0, 0, 1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 3]);
        p.extend_from_slice(&[b'x'; 10]);
        p
    }

    /// IPv6 TCP fd00::1:443 > fd00::2:50000, traffic class 0x03 (CE), hop limit 63.
    fn v6_tcp() -> Vec<u8> {
        let mut p = vec![0x60, 0x30, 0, 0, 0, 24, 6, 63];
        let mut a = [0u8; 16];
        a[0] = 0xfd;
        a[15] = 1;
        p.extend_from_slice(&a);
        a[15] = 2;
        p.extend_from_slice(&a);
        p.extend_from_slice(&[
            1, 0xbb, 0xc3, 0x50, 0, 0, 0, 5, 0, 0, 0, 6, 0x50, 0x10, 0, 9,
        ]);
        p.extend_from_slice(&[0, 0, 0, 0, 1, 2, 3, 4]);
        p
    }

    fn same_as_full_parse(d: &[u8]) {
        let full = wire::packet::parse(d);
        if let Some(h) = fast(d) {
            assert_eq!(Ok(h), full, "bytes {d:02x?}");
        }
        assert_eq!(parse(d), full);
    }

    #[test]
    fn the_fast_path_reads_common_tcp_packets_as_the_full_parse_does() {
        for p in [v4_tcp(), v6_tcp()] {
            assert!(fast(&p).is_some());
            same_as_full_parse(&p);
            // Cut by a snaplen anywhere, or padded after the datagram.
            for cut in 0..p.len() {
                same_as_full_parse(&p[..cut]);
            }
            let mut padded = p.clone();
            padded.extend_from_slice(&[0; 6]);
            same_as_full_parse(&padded);
        }
        let h = parse(&v4_tcp()).unwrap();
        let Transport::Tcp(t) = h.transport else {
            panic!("tcp")
        };
        assert_eq!((t.header_len, t.payload_len, t.window), (32, 10, 501));
        assert_eq!((h.ip.ttl, h.ip.ecn), (64, Ecn::Ect0));
    }

    #[test]
    fn odd_lengths_fragments_and_other_protocols_agree_with_the_full_parse() {
        let mut v4 = v4_tcp();
        for total in [0u16, 19, 20, 39, 40, 52, 61, 200] {
            v4[2..4].copy_from_slice(&total.to_be_bytes());
            same_as_full_parse(&v4);
        }
        let mut frag = v4_tcp();
        frag[6] = 0x20; // more fragments
        assert!(fast(&frag).is_none());
        same_as_full_parse(&frag);
        let mut v6 = v6_tcp();
        for plen in [0u16, 10, 20, 24, 30] {
            v6[4..6].copy_from_slice(&plen.to_be_bytes());
            same_as_full_parse(&v6);
        }
        v6[6] = 17;
        assert!(fast(&v6).is_none());
        let mut doff = v4_tcp();
        doff[32] = 0x40; // data offset 4 words: not a TCP header
        same_as_full_parse(&doff);
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_give_the_full_parse_result(
            v6 in proptest::bool::ANY,
            flips in proptest::collection::vec((0usize..64, proptest::num::u8::ANY), 0..6),
            cut in 0usize..80,
        ) {
            let mut p = if v6 { v6_tcp() } else { v4_tcp() };
            for (i, v) in flips {
                if let Some(x) = p.get_mut(i) {
                    *x = v;
                }
            }
            p.truncate(cut);
            same_as_full_parse(&p);
        }
    }
}

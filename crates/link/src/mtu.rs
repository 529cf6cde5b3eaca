//! What the router in front of a narrow link does with a packet too large for it: IPv4
//! fragmentation when DF is clear (RFC 791 §3.2, "Fragmentation"), otherwise an ICMP error back
//! to the sender: "fragmentation needed and DF set" with the next-hop MTU (RFC 792, RFC 1191 §4)
//! or ICMPv6 "Packet Too Big" (RFC 4443 §3.2, RFC 8201 §4).
//!
//! RFCs to read before editing: RFC 791, RFC 792, RFC 1191, RFC 1812 §4.3.2.3 (how much of the
//! original an ICMPv4 error quotes: up to 576 bytes in all), RFC 4443 §2.4 (never an error about
//! an error; quote as much as fits in 1280 bytes), RFC 8200 §5 (IPv6's 1280-byte minimum).
//!
//! Not here: deciding whether a packet is too big (the link does), routing the error (the
//! network does), filtering it (the reverse link's drop filters do: that is the PMTU black hole).

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::build::Ip;
use wire::checksum;

/// The outcome for a packet larger than the link's MTU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TooBig {
    /// IPv4 without DF: these fragments go on instead.
    Fragments(Vec<Vec<u8>>),
    /// An ICMP error for the sender; the packet is dropped.
    Icmp(Vec<u8>),
    /// Dropped without a word: an ICMP error about an ICMP error, or bytes that are not a
    /// readable IP packet.
    Silent,
}

/// IPv6's minimum link MTU (RFC 8200 §5): a Packet Too Big never advertises less.
pub const IPV6_MIN_MTU: u32 = 1280;

/// Handles a packet of more than `mtu` bytes at the router in front of the narrow link.
pub fn too_big(data: &[u8], mtu: u32, router_v4: Ipv4Addr, router_v6: Ipv6Addr) -> TooBig {
    match data.first().map(|b| b >> 4) {
        Some(4) if data.len() >= 20 => {
            let ihl = usize::from(data[0] & 0x0f) * 4;
            if ihl < 20 || data.len() < ihl {
                return TooBig::Silent;
            }
            let df = data[6] & 0x40 != 0;
            if !df {
                return fragment_v4(data, ihl, mtu);
            }
            if is_icmp_error(data[9], data.get(ihl).copied()) {
                return TooBig::Silent;
            }
            TooBig::Icmp(frag_needed_v4(data, mtu, router_v4))
        }
        Some(6) if data.len() >= 40 => {
            if data[6] == 58 && data.get(40).is_some_and(|t| *t < 128) {
                return TooBig::Silent;
            }
            TooBig::Icmp(packet_too_big_v6(data, mtu.max(IPV6_MIN_MTU), router_v6))
        }
        _ => TooBig::Silent,
    }
}

/// ICMPv4 error types (RFC 792): destination unreachable, source quench, redirect, time
/// exceeded, parameter problem.
fn is_icmp_error(proto: u8, icmp_type: Option<u8>) -> bool {
    proto == 1 && matches!(icmp_type, Some(3 | 4 | 5 | 11 | 12))
}

/// Type 3 code 4 with the next-hop MTU (RFC 1191 §4), from the router to the original's
/// source; DF clear, as Linux sends its ICMP errors.
fn frag_needed_v4(orig: &[u8], mtu: u32, from: Ipv4Addr) -> Vec<u8> {
    let to = Ipv4Addr::new(orig[12], orig[13], orig[14], orig[15]);
    Ip::v4(from, to).dont_fragment(false).too_big(mtu, orig)
}

/// Type 2 code 0 with the MTU (RFC 4443 §3.2), from the router to the original's source.
fn packet_too_big_v6(orig: &[u8], mtu: u32, from: Ipv6Addr) -> Vec<u8> {
    let mut to = [0u8; 16];
    to.copy_from_slice(&orig[8..24]);
    Ip::v6(from, Ipv6Addr::from(to)).too_big(mtu, orig)
}

/// Splits an IPv4 datagram into fragments of at most `mtu` bytes: each carries the header
/// (options included; RFC 791 would copy only the copy-flagged ones) and a multiple of 8 bytes
/// of payload, offsets continuing the original's, MF set on all but the original's last.
fn fragment_v4(data: &[u8], ihl: usize, mtu: u32) -> TooBig {
    let total = usize::from(u16::from_be_bytes([data[2], data[3]])).min(data.len());
    let per = (mtu as usize).saturating_sub(ihl) / 8 * 8;
    if per == 0 || total <= ihl {
        return TooBig::Silent;
    }
    let flags = u16::from_be_bytes([data[6], data[7]]);
    let (orig_mf, orig_off) = (flags & 0x2000 != 0, flags & 0x1fff);
    let payload = &data[ihl..total];
    let mut out = Vec::new();
    for (k, chunk) in payload.chunks(per).enumerate() {
        let mut f = Vec::with_capacity(ihl + chunk.len());
        f.extend_from_slice(&data[..ihl]);
        f.extend_from_slice(chunk);
        let len = f.len() as u16;
        f[2..4].copy_from_slice(&len.to_be_bytes());
        let last = (k + 1) * per >= payload.len();
        let off = orig_off + (k * per / 8) as u16;
        let mf = if last { orig_mf } else { true };
        let word = (u16::from(mf) << 13) | (off & 0x1fff);
        f[6..8].copy_from_slice(&word.to_be_bytes());
        f[10..12].copy_from_slice(&[0, 0]);
        let c = checksum::checksum(&f[..ihl], 0);
        f[10..12].copy_from_slice(&c.to_be_bytes());
        out.push(f);
    }
    TooBig::Fragments(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::packet::{parse, Transport};

    const R4: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 1);
    const R6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 9, 0, 0, 0, 1);

    /// A TCP segment of `len` bytes in all, 10.0.0.1 > 10.0.1.1, identification 0x1234.
    fn v4(len: usize, df: bool) -> Vec<u8> {
        Ip::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 1, 1))
            .dont_fragment(df)
            .identification(0x1234)
            .tcp_of_len(&wire::build::Tcp::new(40000, 80, 1), len)
    }

    #[test]
    fn df_set_gets_fragmentation_needed_with_the_mtu_from_the_router() {
        let TooBig::Icmp(icmp) = too_big(&v4(1500, true), 1400, R4, R6) else {
            panic!("want an ICMP error");
        };
        let h = parse(&icmp).unwrap();
        assert_eq!(h.ip.src, std::net::IpAddr::V4(R4));
        assert_eq!(h.ip.dst, "10.0.0.1".parse::<std::net::IpAddr>().unwrap());
        assert_eq!(
            h.transport,
            Transport::Icmpv4 {
                icmp_type: 3,
                code: 4
            }
        );
        assert_eq!(u16::from_be_bytes([icmp[26], icmp[27]]), 1400);
        assert_eq!(icmp.len(), 576, "quotes up to 576 bytes in all");
        assert_eq!(&icmp[28..48], &v4(1500, true)[..20], "quotes the header");
        assert_eq!(checksum::checksum(&icmp[..20], 0), 0);
        assert_eq!(checksum::checksum(&icmp[20..], 0), 0);
    }

    #[test]
    fn df_clear_is_fragmented_on_8_byte_boundaries() {
        let orig = v4(1500, false);
        let TooBig::Fragments(frags) = too_big(&orig, 1000, R4, R6) else {
            panic!("want fragments");
        };
        // 1480 payload bytes, 976 per fragment (a multiple of 8 within 1000 − 20).
        assert_eq!(
            frags.iter().map(|f| f.len()).collect::<Vec<_>>(),
            [996, 524]
        );
        assert_eq!(u16::from_be_bytes([frags[0][6], frags[0][7]]), 0x2000);
        assert_eq!(u16::from_be_bytes([frags[1][6], frags[1][7]]), 976 / 8);
        for f in &frags {
            assert_eq!(checksum::checksum(&f[..20], 0), 0);
            assert_eq!(&f[4..6], &[0x12, 0x34], "the identification is kept");
        }
        let mut joined = frags[0][20..].to_vec();
        joined.extend_from_slice(&frags[1][20..]);
        assert_eq!(joined, orig[20..]);
    }

    #[test]
    fn ipv6_gets_packet_too_big_never_below_1280() {
        let p = Ip::v6(
            Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            Ipv6Addr::new(0xfd00, 0, 0, 1, 0, 0, 0, 1),
        )
        .udp_of_len(5000, 5001, 1500);
        let TooBig::Icmp(icmp) = too_big(&p, 1000, R4, R6) else {
            panic!("want Packet Too Big");
        };
        let h = parse(&icmp).unwrap();
        assert_eq!(
            h.transport,
            Transport::Icmpv6 {
                icmp_type: 2,
                code: 0
            }
        );
        assert_eq!(h.ip.src, std::net::IpAddr::V6(R6));
        assert_eq!(&icmp[24..40], &p[8..24]);
        assert_eq!(
            u32::from_be_bytes([icmp[44], icmp[45], icmp[46], icmp[47]]),
            1280
        );
        assert_eq!(icmp.len(), 1280);
        let mut acc = checksum::sum(&icmp[8..40], 0);
        acc = checksum::sum(&((icmp.len() - 40) as u32).to_be_bytes(), acc);
        acc = checksum::sum(&[0, 0, 0, 58], acc);
        assert_eq!(checksum::checksum(&icmp[40..], acc), 0);
    }

    #[test]
    fn no_error_about_an_error_and_no_error_about_garbage() {
        let mut e = v4(1500, true);
        e[9] = 1;
        e[20] = 3;
        assert_eq!(too_big(&e, 1400, R4, R6), TooBig::Silent);
        e[20] = 8; // an echo request does get one
        assert!(matches!(too_big(&e, 1400, R4, R6), TooBig::Icmp(_)));
        assert_eq!(too_big(&[0x45; 10], 1400, R4, R6), TooBig::Silent);
    }
}

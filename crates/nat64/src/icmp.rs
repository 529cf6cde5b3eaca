//! ICMPv4 ↔ ICMPv6 type, code, pointer and MTU mapping (RFC 7915 §4.2 and §5.2).
//!
//! Pure tables: given the first 8 bytes' meaning (type, code and the 4 bytes after the
//! checksum) they say what the translated header is, or that the message is not translated
//! (RFC 7915 says "silently drop" for those). Building the messages, translating the inner
//! packet of an error and checksums are the translator's job.

/// ICMPv4 types (RFC 792).
pub(crate) mod v4 {
    pub const ECHO_REPLY: u8 = 0;
    pub const DEST_UNREACH: u8 = 3;
    pub const ECHO_REQUEST: u8 = 8;
    pub const TIME_EXCEEDED: u8 = 11;
    pub const PARAM_PROBLEM: u8 = 12;
    /// Destination Unreachable codes used when this translator answers itself.
    pub const CODE_FRAG_NEEDED: u8 = 4;
    pub const CODE_SOURCE_ROUTE_FAILED: u8 = 5;
}

/// ICMPv6 types (RFC 4443).
pub(crate) mod v6 {
    pub const DEST_UNREACH: u8 = 1;
    pub const PACKET_TOO_BIG: u8 = 2;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const PARAM_PROBLEM: u8 = 4;
    pub const ECHO_REQUEST: u8 = 128;
    pub const ECHO_REPLY: u8 = 129;
}

/// Whether an ICMPv4 type is an error message (RFC 1122 §3.2.2: never answer one with an
/// error).
pub(crate) fn is_error4(ty: u8) -> bool {
    matches!(ty, 3 | 4 | 5 | 11 | 12)
}

/// ICMPv6 error messages are types 0..=127 (RFC 4443 §2.1).
pub(crate) fn is_error6(ty: u8) -> bool {
    ty < 128
}

/// The translated ICMP header: type, code and the 4 bytes after the checksum.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapped {
    pub ty: u8,
    pub code: u8,
    pub rest: [u8; 4],
}

/// MTUs of the translator's own next hops, for the Packet Too Big arithmetic.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Mtus {
    pub v4_bytes: u16,
    pub v6_bytes: u16,
}

/// RFC 1191 §7 table 7-1: the plateaus a host tries when a Fragmentation Needed message
/// carries no MTU (an RFC 792 router).
/// IPv6's minimum link MTU (RFC 8200 §5).
const IPV6_MIN_MTU: u32 = 1280;

const PLATEAUS: [u16; 11] = [
    65535, 32000, 17914, 8166, 4352, 2002, 1492, 1006, 508, 296, 68,
];

/// The largest plateau below `total_len` (the packet in error's Total Length); RFC 7915 §4.2
/// points to RFC 1191 for this case.
pub(crate) fn plateau_below(total_len: u16) -> u16 {
    PLATEAUS
        .iter()
        .copied()
        .find(|&p| p < total_len)
        .unwrap_or(68)
}

/// RFC 7915 §4.2: an ICMPv4 header to its ICMPv6 equivalent, `None` when it is dropped.
/// `inner_total_len` is the Total Length field of the IPv4 packet inside an error.
pub(crate) fn map_4to6(
    ty: u8,
    code: u8,
    rest: [u8; 4],
    inner_total_len: u16,
    mtu: Mtus,
) -> Option<Mapped> {
    let plain = |ty: u8, code: u8| {
        Some(Mapped {
            ty,
            code,
            rest: [0; 4],
        })
    };
    match ty {
        // Echo: identifier and sequence number unchanged.
        v4::ECHO_REQUEST => Some(Mapped {
            ty: v6::ECHO_REQUEST,
            code: 0,
            rest,
        }),
        v4::ECHO_REPLY => Some(Mapped {
            ty: v6::ECHO_REPLY,
            code: 0,
            rest,
        }),
        v4::DEST_UNREACH => match code {
            // Net, host, source route failed, unknown net/host, isolated, TOS: no route.
            0 | 1 | 5 | 6 | 7 | 8 | 11 | 12 => plain(v6::DEST_UNREACH, 0),
            // Protocol unreachable: Parameter Problem "unrecognised next header", pointing at
            // the Next Header field (octet 6).
            2 => Some(Mapped {
                ty: v6::PARAM_PROBLEM,
                code: 1,
                rest: 6u32.to_be_bytes(),
            }),
            3 => plain(v6::DEST_UNREACH, 4),
            // Fragmentation Needed → Packet Too Big:
            //   MTU6 = max(1280, min(advertised + 20, MTU of the IPv6 next hop,
            //                        MTU of the IPv4 next hop + 20))
            // and, when the advertised MTU is zero (RFC 792 routers), the RFC 1191 plateau below
            // the packet's Total Length stands in for it. IPv6's minimum link MTU is 1280
            // (RFC 8200 §5): a smaller figure is never advertised; the IPv4 side fragments what
            // it must (the translator sends IPv4 packets of up to 1260 bytes without DF, RFC 7915 §5.1).
            4 => {
                let adv = u16::from_be_bytes([rest[2], rest[3]]);
                let adv = if adv == 0 {
                    plateau_below(inner_total_len)
                } else {
                    adv
                };
                let m = (u32::from(adv) + 20)
                    .min(u32::from(mtu.v6_bytes))
                    .min(u32::from(mtu.v4_bytes) + 20)
                    .max(IPV6_MIN_MTU);
                Some(Mapped {
                    ty: v6::PACKET_TOO_BIG,
                    code: 0,
                    rest: m.to_be_bytes(),
                })
            }
            // Administratively prohibited (net, host, filter, precedence cut-off).
            9 | 10 | 13 | 15 => plain(v6::DEST_UNREACH, 1),
            // 14 (host precedence violation) and unknown codes: dropped.
            _ => None,
        },
        v4::TIME_EXCEEDED => plain(v6::TIME_EXCEEDED, code),
        v4::PARAM_PROBLEM => match code {
            0 | 2 => {
                let p = pointer_4to6(rest[0])?;
                Some(Mapped {
                    ty: v6::PARAM_PROBLEM,
                    code: 0,
                    rest: u32::from(p).to_be_bytes(),
                })
            }
            _ => None,
        },
        // Source quench, redirect, router advertisement/solicitation, timestamp, information
        // and address mask messages, and anything unknown: silently dropped.
        _ => None,
    }
}

/// RFC 7915 §4.2 Figure 3: an IPv4 header octet offset to the IPv6 one; `None` where the
/// IPv4 field has no IPv6 counterpart (the message is dropped).
pub(crate) fn pointer_4to6(p: u8) -> Option<u8> {
    match p {
        0 => Some(0),        // version/IHL → version/traffic class
        1 => Some(1),        // TOS → traffic class
        2 | 3 => Some(4),    // total length → payload length
        8 => Some(7),        // TTL → hop limit
        9 => Some(6),        // protocol → next header
        12..=15 => Some(8),  // source address
        16..=19 => Some(24), // destination address
        _ => None,
    }
}

/// RFC 7915 §5.2: an ICMPv6 header to its ICMPv4 equivalent, `None` when it is dropped.
pub(crate) fn map_6to4(ty: u8, code: u8, rest: [u8; 4], mtu: Mtus) -> Option<Mapped> {
    let plain = |ty: u8, code: u8| {
        Some(Mapped {
            ty,
            code,
            rest: [0; 4],
        })
    };
    match ty {
        v6::ECHO_REQUEST => Some(Mapped {
            ty: v4::ECHO_REQUEST,
            code: 0,
            rest,
        }),
        v6::ECHO_REPLY => Some(Mapped {
            ty: v4::ECHO_REPLY,
            code: 0,
            rest,
        }),
        v6::DEST_UNREACH => match code {
            // No route, beyond scope of source address, address unreachable → host unreachable.
            0 | 2 | 3 => plain(v4::DEST_UNREACH, 1),
            // Administratively prohibited → communication with host administratively prohibited.
            1 => plain(v4::DEST_UNREACH, 10),
            4 => plain(v4::DEST_UNREACH, 3),
            _ => None,
        },
        // Packet Too Big → Fragmentation Needed:
        //   MTU4 = min(advertised - 20, MTU of the IPv4 next hop, MTU of the IPv6 next hop - 20)
        v6::PACKET_TOO_BIG => {
            let adv = u32::from_be_bytes(rest);
            let m = adv
                .saturating_sub(20)
                .min(u32::from(mtu.v4_bytes))
                .min(u32::from(mtu.v6_bytes).saturating_sub(20));
            let m = m as u16; // ≤ v4_bytes, so it fits
            let b = m.to_be_bytes();
            Some(Mapped {
                ty: v4::DEST_UNREACH,
                code: v4::CODE_FRAG_NEEDED,
                rest: [0, 0, b[0], b[1]],
            })
        }
        v6::TIME_EXCEEDED => plain(v4::TIME_EXCEEDED, code),
        v6::PARAM_PROBLEM => match code {
            0 => {
                let p = pointer_6to4(u32::from_be_bytes(rest))?;
                Some(Mapped {
                    ty: v4::PARAM_PROBLEM,
                    code: 0,
                    rest: [p, 0, 0, 0],
                })
            }
            // Unrecognised next header → protocol unreachable.
            1 => plain(v4::DEST_UNREACH, 2),
            _ => None,
        },
        // MLD, neighbour discovery, redirects and unknown types: silently dropped.
        _ => None,
    }
}

/// RFC 7915 §5.2 Figure 6: an IPv6 header octet offset to the IPv4 one.
pub(crate) fn pointer_6to4(p: u32) -> Option<u8> {
    match p {
        0 => Some(0),        // version/traffic class → version/IHL
        1 => Some(1),        // traffic class/flow label → TOS
        4 | 5 => Some(2),    // payload length → total length
        6 => Some(9),        // next header → protocol
        7 => Some(8),        // hop limit → TTL
        8..=23 => Some(12),  // source address
        24..=39 => Some(16), // destination address
        _ => None,           // flow label (2, 3) and beyond the header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MTU: Mtus = Mtus {
        v4_bytes: 1500,
        v6_bytes: 1500,
    };

    #[test]
    fn fragmentation_needed_becomes_packet_too_big_with_mtu_plus_20_capped_by_next_hops() {
        // Advertised 1400 → 1420 (below both next hops).
        let m = map_4to6(3, 4, [0, 0, 0x05, 0x78], 1500, MTU).unwrap();
        assert_eq!((m.ty, m.code), (2, 0));
        assert_eq!(u32::from_be_bytes(m.rest), 1420);
        // Advertised 1500 → min(1520, 1500, 1520) = 1500.
        let m = map_4to6(3, 4, [0, 0, 0x05, 0xdc], 1500, MTU).unwrap();
        assert_eq!(u32::from_be_bytes(m.rest), 1500);
    }

    #[test]
    fn a_small_next_hop_mtu_never_becomes_a_packet_too_big_below_1280() {
        for adv in [68u16, 576, 1000, 1259] {
            let b = adv.to_be_bytes();
            let m = map_4to6(3, 4, [0, 0, b[0], b[1]], 1500, MTU).unwrap();
            assert_eq!(u32::from_be_bytes(m.rest), 1280, "advertised {adv}");
        }
        // 1260 + 20 is exactly the minimum; 1261 + 20 goes through.
        let m = map_4to6(3, 4, [0, 0, 0x04, 0xed], 1500, MTU).unwrap();
        assert_eq!(u32::from_be_bytes(m.rest), 1281);
    }

    #[test]
    fn fragmentation_needed_with_zero_mtu_uses_the_plateau_below_the_packet() {
        // A 1500-byte packet in error: plateau 1492, +20 = 1512, capped at the IPv6 hop 1500.
        let m = map_4to6(3, 4, [0; 4], 1500, MTU).unwrap();
        assert_eq!(u32::from_be_bytes(m.rest), 1500);
        // A 1200-byte packet: plateau 1006 → 1026, raised to IPv6's minimum.
        let m = map_4to6(3, 4, [0; 4], 1200, MTU).unwrap();
        assert_eq!(u32::from_be_bytes(m.rest), 1280);
        assert_eq!(plateau_below(68), 68);
        assert_eq!(plateau_below(2002), 1492);
    }

    #[test]
    fn packet_too_big_becomes_fragmentation_needed_with_mtu_minus_20() {
        let m = map_6to4(2, 0, 1400u32.to_be_bytes(), MTU).unwrap();
        assert_eq!((m.ty, m.code), (3, 4));
        assert_eq!(u16::from_be_bytes([m.rest[2], m.rest[3]]), 1380);
        // A huge advertised MTU is capped by the IPv4 next hop and the IPv6 one minus 20.
        let m = map_6to4(2, 0, 9000u32.to_be_bytes(), MTU).unwrap();
        assert_eq!(u16::from_be_bytes([m.rest[2], m.rest[3]]), 1480);
    }

    #[test]
    fn echo_and_error_types_map_both_ways_and_informational_ones_are_dropped() {
        assert_eq!(
            map_6to4(128, 0, [1, 2, 3, 4], MTU).map(|m| (m.ty, m.rest)),
            Some((8, [1, 2, 3, 4]))
        );
        assert_eq!(map_6to4(129, 0, [0; 4], MTU).map(|m| m.ty), Some(0));
        assert_eq!(map_4to6(8, 0, [0; 4], 0, MTU).map(|m| m.ty), Some(128));
        assert_eq!(map_4to6(0, 0, [0; 4], 0, MTU).map(|m| m.ty), Some(129));
        assert_eq!(
            map_6to4(1, 4, [0; 4], MTU).map(|m| (m.ty, m.code)),
            Some((3, 3))
        );
        assert_eq!(
            map_4to6(3, 3, [0; 4], 0, MTU).map(|m| (m.ty, m.code)),
            Some((1, 4))
        );
        assert_eq!(
            map_4to6(3, 13, [0; 4], 0, MTU).map(|m| (m.ty, m.code)),
            Some((1, 1))
        );
        assert_eq!(
            map_4to6(11, 1, [0; 4], 0, MTU).map(|m| (m.ty, m.code)),
            Some((3, 1))
        );
        assert_eq!(
            map_6to4(3, 0, [0; 4], MTU).map(|m| (m.ty, m.code)),
            Some((11, 0))
        );
        let proto = map_4to6(3, 2, [0; 4], 0, MTU).unwrap();
        assert_eq!(
            (proto.ty, proto.code, u32::from_be_bytes(proto.rest)),
            (4, 1, 6)
        );
        assert_eq!(
            map_6to4(4, 1, [0; 4], MTU).map(|m| (m.ty, m.code)),
            Some((3, 2))
        );
        // Neighbour solicitation, MLD query, timestamp, redirect, source quench.
        assert_eq!(map_6to4(135, 0, [0; 4], MTU), None);
        assert_eq!(map_6to4(130, 0, [0; 4], MTU), None);
        assert_eq!(map_4to6(13, 0, [0; 4], 0, MTU), None);
        assert_eq!(map_4to6(5, 0, [0; 4], 0, MTU), None);
        assert_eq!(map_4to6(4, 0, [0; 4], 0, MTU), None);
    }

    #[test]
    fn parameter_problem_pointers_follow_the_rfc_7915_figures() {
        let p = |ptr: u32| map_6to4(4, 0, ptr.to_be_bytes(), MTU).map(|m| m.rest[0]);
        assert_eq!(p(6), Some(9));
        assert_eq!(p(7), Some(8));
        assert_eq!(p(4), Some(2));
        assert_eq!(p(30), Some(16));
        assert_eq!(p(2), None); // flow label has no IPv4 field
        let q =
            |ptr: u8| map_4to6(12, 0, [ptr, 0, 0, 0], 0, MTU).map(|m| u32::from_be_bytes(m.rest));
        assert_eq!(q(9), Some(6));
        assert_eq!(q(8), Some(7));
        assert_eq!(q(13), Some(8));
        assert_eq!(q(18), Some(24));
        assert_eq!(q(10), None); // header checksum has no IPv6 field
        assert_eq!(map_4to6(12, 1, [0; 4], 0, MTU), None);
    }
}

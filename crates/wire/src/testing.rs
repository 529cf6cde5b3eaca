//! Addresses and an independent checksum check shared by the packet builders' and the
//! segmenter's tests.

use crate::checksum;
use std::net::{Ipv4Addr, Ipv6Addr};

pub(crate) const A4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub(crate) const B4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
pub(crate) const A6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
pub(crate) const B6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);

/// The transport checksum over the pseudo-header verifies (RFC 768, RFC 9293 §3.1,
/// RFC 8200 §8.1).
pub(crate) fn transport_sum_ok(p: &[u8]) -> bool {
    let (ihl, proto, src, dst, plen) = if p[0] >> 4 == 4 {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        (ihl, p[9], &p[12..16], &p[16..20], p.len() - ihl)
    } else {
        (40, p[6], &p[8..24], &p[24..40], p.len() - 40)
    };
    let mut acc = checksum::sum(src, 0);
    acc = checksum::sum(dst, acc);
    acc = checksum::sum(&(plen as u32).to_be_bytes(), acc);
    if proto != 1 {
        acc = checksum::sum(&[0, 0, 0, proto], acc);
    } else {
        acc = 0; // ICMPv4 has no pseudo-header.
    }
    checksum::checksum(&p[ihl..], acc) == 0
}

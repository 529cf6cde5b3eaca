//! Checksum arithmetic the translator needs on top of `wire::checksum`: pseudo-header sums for
//! IPv4 and IPv6 and the RFC 1624 update for a change of several words at once.
//!
//! Translation changes addresses, ports and (for ICMP) the type and the presence of a
//! pseudo-header, but never the payload, so transport checksums are adjusted, not recomputed
//! (RFC 7915 §4.5 and §5.5 allow either). An adjusted checksum that was wrong stays wrong by
//! the same amount, so the receiver still rejects it.

use std::net::{Ipv4Addr, Ipv6Addr};

use wire::checksum;

/// The one's-complement sum of `data` as 16-bit big-endian words, plus `initial`, folded to 32
/// bits: the same value's class as `wire::checksum::sum`, eight bytes at a time.
///
/// Why it is right: one's-complement addition is addition modulo 2^16 - 1, and 2^64 - 1 is a
/// multiple of it, so summing big-endian 64-bit words with end-around carry and folding gives
/// the same residue as summing 16-bit words (RFC 1071 §2 (B), "parallel summation").
pub(crate) fn sum(data: &[u8], initial: u32) -> u32 {
    let mut acc = u64::from(initial);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(w);
        acc = s + u64::from(carry);
    }
    let tail = u64::from(checksum::sum(chunks.remainder(), 0));
    let (s, carry) = acc.overflowing_add(tail);
    acc = s + u64::from(carry);
    // Fold 64 → 32 bits with end-around carry.
    let folded = (acc >> 32) + (acc & 0xffff_ffff);
    let folded = (folded >> 32) + (folded & 0xffff_ffff);
    folded as u32
}

/// The checksum of `data` with pseudo-header sum `initial`, fast path of
/// `wire::checksum::checksum`.
pub(crate) fn checksum(data: &[u8], initial: u32) -> u16 {
    checksum::finish(sum(data, initial))
}

/// Folds a one's-complement sum to 16 bits without complementing it.
pub(crate) fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// RFC 1624 eqn. 3 for many words: `HC' = ~(~HC + ~m + m')`, where `m` and `m'` are the
/// one's-complement sums of the old and new words.
pub(crate) fn adjust(old_checksum: u16, old_sum: u32, new_sum: u32) -> u16 {
    checksum::finish(
        u32::from(!old_checksum) + u32::from(!fold(old_sum)) + u32::from(fold(new_sum)),
    )
}

pub(crate) fn addr4_sum(a: Ipv4Addr) -> u32 {
    let o = a.octets();
    u32::from(u16::from_be_bytes([o[0], o[1]])) + u32::from(u16::from_be_bytes([o[2], o[3]]))
}

pub(crate) fn addr6_sum(a: Ipv6Addr) -> u32 {
    a.segments().iter().map(|&w| u32::from(w)).sum()
}

/// The IPv4 pseudo-header sum (RFC 768 / RFC 9293 §3.1): source, destination, protocol,
/// transport length.
pub(crate) fn pseudo4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: usize) -> u32 {
    addr4_sum(src) + addr4_sum(dst) + u32::from(proto) + (len as u32 & 0xffff)
}

/// The IPv6 pseudo-header sum (RFC 8200 §8.1): source, destination, 32-bit upper-layer
/// length, next header.
pub(crate) fn pseudo6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, len: usize) -> u32 {
    let len = len as u32;
    addr6_sum(src) + addr6_sum(dst) + (len >> 16) + (len & 0xffff) + u32::from(next)
}

/// A 16-bit big-endian word at `off`.
pub(crate) fn word(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn wide_sum_gives_the_same_checksum_as_the_rfc_1071_loop(data in proptest::collection::vec(any::<u8>(), 0..300), init in any::<u32>()) {
            let init = init >> 2; // a pseudo-header sum is far below u32::MAX
            prop_assert_eq!(checksum(&data, init), wire::checksum::checksum(&data, init));
        }
    }

    #[test]
    fn adjusting_for_changed_words_matches_recomputing() {
        // A UDP-like segment: checksum at 6, covered with a pseudo-header sum.
        let mut seg = [
            0x12u8, 0x34, 0x00, 0x35, 0x00, 0x0c, 0, 0, 0xde, 0xad, 0xbe, 0xef,
        ];
        let s4 = Ipv4Addr::new(192, 0, 2, 1);
        let d4 = Ipv4Addr::new(198, 51, 100, 9);
        let p = pseudo4(s4, d4, 17, seg.len());
        let c = checksum::checksum(&seg, p);
        seg[6..8].copy_from_slice(&c.to_be_bytes());

        let s6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d6: Ipv6Addr = "64:ff9b::c633:6409".parse().unwrap();
        let old = addr4_sum(s4) + addr4_sum(d4) + u32::from(word(&seg, 0));
        seg[0..2].copy_from_slice(&0x9999u16.to_be_bytes());
        let new = addr6_sum(s6) + addr6_sum(d6) + 0x9999;
        let adj = adjust(c, old, new);
        seg[6..8].copy_from_slice(&adj.to_be_bytes());
        assert_eq!(checksum::checksum(&seg, pseudo6(s6, d6, 17, seg.len())), 0);
        assert_ne!(adj, c);
    }
}

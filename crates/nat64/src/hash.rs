//! A fast keyed hasher for the session and binding tables.
//!
//! The tables are looked up two or three times per packet, and std's SipHash costs about as
//! much as the rest of the translation for a 24-byte key. This is a multiply-rotate hash
//! (folded 128-bit multiply, as in wyhash/foldhash) keyed from the translator's seeded RNG, so
//! runs repeat from their seed and a host that does not know the seed cannot aim collisions at
//! one bucket. It is not a cryptographic PRF: fine for a lab's own traffic, not a claim of DoS
//! resistance on the open Internet.

use std::hash::{BuildHasher, Hasher};

const K: u64 = 0x9e37_79b9_7f4a_7c15;

#[inline]
fn mix(a: u64, b: u64) -> u64 {
    let m = u128::from(a) * u128::from(b);
    (m as u64) ^ ((m >> 64) as u64)
}

/// Builds [`KeyedHasher`]s that share one key.
#[derive(Copy, Clone, Debug)]
pub(crate) struct KeyedState {
    key: u64,
}

impl KeyedState {
    pub fn new(key: u64) -> KeyedState {
        KeyedState { key }
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher { acc: self.key }
    }
}

pub(crate) struct KeyedHasher {
    acc: u64,
}

impl KeyedHasher {
    #[inline]
    fn eat(&mut self, w: u64) {
        self.acc = mix(self.acc ^ w, K);
    }
}

impl Hasher for KeyedHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.eat(u64::from_le_bytes([
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
            ]));
        }
        let mut last = [0u8; 8];
        let r = chunks.remainder();
        if !r.is_empty() {
            last[..r.len()].copy_from_slice(r);
            self.eat(u64::from_le_bytes(last) ^ ((r.len() as u64) << 56));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.eat(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.eat(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.eat(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.eat(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.eat(i as u64);
    }
    fn finish(&self) -> u64 {
        // A final mix so that the low bits hashbrown uses depend on every input bit.
        mix(self.acc, K ^ 0x2d35_8dcc_aa6c_78a5)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::BuildHasher;

    #[test]
    fn nearby_keys_spread_over_the_low_bits_and_the_key_changes_the_hash() {
        let s = KeyedState::new(1);
        let low: HashSet<u64> = (0u16..1024)
            .map(|p| s.hash_one((6u8, [10u8, 0, 0, 1], p)) & 0x3ff)
            .collect();
        // 1024 consecutive ports in 1024 buckets: a good hash leaves about 63 % used.
        assert!(low.len() > 550, "{} buckets used", low.len());
        assert_ne!(
            KeyedState::new(1).hash_one(42u16),
            KeyedState::new(2).hash_one(42u16)
        );
    }
}

//! The packets on the wire that do not keep their place in line (sent ahead by `reorder`, late
//! duplicates, packets under reordering jitter, the slow path), ordered by arrival time.
//!
//! A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster algorithms for the shortest path
//! problem", J. ACM 37(2), 1990): a priority queue for keys that never go below the last one
//! taken, which arrival times on a link do not (a packet is put on the wire at or after the
//! moment the link was last polled, and arrives no earlier than that). It works on grains of
//! 2^10 ns (about a microsecond): bucket `b` holds the packets whose grain first differs from
//! the grain last taken at bit `b − 1`; when `ready` (the packets of the grain last taken, in
//! order of arrival) runs out, the lowest non-empty bucket is split into lower ones, so each
//! packet moves at most 54 times, in practice a handful, and every move is a sequential copy.
//! A binary heap over 10 000 packets in flight instead sifts through 13 levels of scattered
//! memory for each packet.
//!
//! Among equal arrival times the packet put in first comes out first: equal keys always share
//! a bucket, buckets keep their order when they are appended to and split, and `ready` is kept
//! sorted by a stable sort and by inserting after equal keys.
//!
//! What this module is not: the decision of which packets go out of line (see `Link::launch`).

use std::collections::VecDeque;

use wire::{Instant, Packet};

/// Nanoseconds per grain, as a shift: 2^10 ns.
const GRAIN_BITS: u32 = 10;
/// Buckets 1..=54 by the highest bit in which a grain differs from the last; 0 is `ready`.
const BUCKETS: usize = (u64::BITS - GRAIN_BITS) as usize + 1;

pub(crate) struct OutOfLine {
    /// The arrival last taken: an arrival put in before it is due with it.
    floor: u64,
    /// The grain last split on or taken from: no packet waiting is in an earlier grain.
    grain: u64,
    /// The packets of `grain`, sorted by arrival, then by the order they were put in.
    ready: VecDeque<(u64, Packet)>,
    /// Bucket `b` (1..): packets whose grain's highest bit differing from `grain` is `b − 1`,
    /// in the order they were put in.
    buckets: Vec<Vec<(u64, Packet)>>,
    /// The earliest arrival in each bucket (meaningless for an empty one).
    mins: [u64; BUCKETS],
    /// Bit `b` set when bucket `b` (1..) is not empty.
    nonempty: u64,
}

impl Default for OutOfLine {
    fn default() -> OutOfLine {
        OutOfLine {
            floor: 0,
            grain: 0,
            ready: VecDeque::new(),
            buckets: Vec::new(),
            mins: [0; BUCKETS],
            nonempty: 0,
        }
    }
}

impl OutOfLine {
    fn bucket_of(&self, key: u64) -> usize {
        (u64::BITS - ((key >> GRAIN_BITS) ^ self.grain).leading_zeros()) as usize
    }

    /// Puts `packet` on the wire to arrive at `at`. An arrival earlier than one already taken
    /// (a caller whose clock went back) is due at once: it arrives with the last one taken.
    pub(crate) fn push(&mut self, at: Instant, packet: Packet) {
        let key = at.as_nanos().max(self.floor);
        match self.bucket_of(key) {
            0 => {
                // Usually at the back: arrivals within a grain mostly come in order.
                let i = self.ready.partition_point(|(k, _)| *k <= key);
                self.ready.insert(i, (key, packet));
            }
            b => self.put(b, key, packet),
        }
    }

    fn put(&mut self, b: usize, key: u64, packet: Packet) {
        if self.buckets.is_empty() {
            self.buckets.resize_with(BUCKETS, Vec::new);
        }
        if self.nonempty & (1 << b) == 0 {
            self.nonempty |= 1 << b;
            self.mins[b] = key;
        } else if key < self.mins[b] {
            self.mins[b] = key;
        }
        self.buckets[b].push((key, packet));
    }

    /// The earliest arrival, if any.
    pub(crate) fn peek(&self) -> Option<Instant> {
        if let Some((key, _)) = self.ready.front() {
            return Some(Instant::from_nanos(*key));
        }
        match self.nonempty.trailing_zeros() as usize {
            b if b < BUCKETS => Some(Instant::from_nanos(self.mins[b])),
            _ => None,
        }
    }

    /// Takes the earliest arrival (the first put in among equals) if it is due by `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Packet)> {
        if self.ready.is_empty() {
            let b = self.nonempty.trailing_zeros() as usize;
            if b >= BUCKETS || self.mins[b] > now.as_nanos() {
                return None;
            }
            // The earliest grain becomes the current one, and every packet of the bucket moves
            // down: those of that grain into `ready`, the rest below `b` (they share the grain's
            // bits from `b` up).
            self.grain = self.mins[b] >> GRAIN_BITS;
            self.nonempty &= !(1 << b);
            let mut items = std::mem::take(&mut self.buckets[b]);
            for (key, packet) in items.drain(..) {
                match self.bucket_of(key) {
                    0 => self.ready.push_back((key, packet)),
                    lower => self.put(lower, key, packet),
                }
            }
            // Keep the bucket's allocation for its next fill.
            self.buckets[b] = items;
            // Stable: among equal arrivals, the order put in.
            self.ready.make_contiguous().sort_by_key(|(key, _)| *key);
        }
        match self.ready.front() {
            Some((key, _)) if *key <= now.as_nanos() => {
                let (key, packet) = self.ready.pop_front().expect("a front");
                self.floor = key;
                Some((Instant::from_nanos(key), packet))
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn packet(id: u64) -> Packet {
        Packet {
            id,
            ..Packet::default()
        }
    }

    #[test]
    fn packets_come_out_by_arrival_then_by_order_put_in() {
        let mut q = OutOfLine::default();
        for (id, at) in [(0, 50), (1, 20), (2, 50), (3, 20), (4, 7), (5, 1 << 40)] {
            q.push(Instant::from_nanos(at), packet(id));
        }
        assert_eq!(q.peek(), Some(Instant::from_nanos(7)));
        assert_eq!(q.pop_due(Instant::from_nanos(6)).map(|(_, p)| p.id), None);
        let mut got = Vec::new();
        while let Some((at, p)) = q.pop_due(Instant::from_nanos(100)) {
            got.push((at.as_nanos(), p.id));
        }
        assert_eq!(got, vec![(7, 4), (20, 1), (20, 3), (50, 0), (50, 2)]);
        assert_eq!(q.peek(), Some(Instant::from_nanos(1 << 40)));
        let last = q.pop_due(Instant::from_nanos(u64::MAX)).map(|(_, p)| p.id);
        assert_eq!((last, q.peek()), (Some(5), None));
    }

    #[test]
    fn an_arrival_before_the_last_taken_is_due_at_once() {
        let mut q = OutOfLine::default();
        q.push(Instant::from_nanos(100), packet(0));
        assert!(q.pop_due(Instant::from_nanos(100)).is_some());
        q.push(Instant::from_nanos(40), packet(1));
        assert_eq!(
            q.pop_due(Instant::from_nanos(100))
                .map(|(t, p)| (t.as_nanos(), p.id)),
            Some((100, 1))
        );
    }

    /// Against a sorted reference, with pushes interleaved with pops as a link makes them:
    /// each push at or after the time last polled, some far ahead, many equal.
    #[test]
    fn it_agrees_with_a_sort_by_arrival_and_order_put_in() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut q = OutOfLine::default();
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut got, mut want) = (0u64, Vec::new(), Vec::new());
        for id in 0..30_000u64 {
            let ahead = match rng.gen_range(0..10) {
                0 => 0,
                1 => rng.gen_range(0..4) * 1000,
                2 => rng.gen_range(0..1 << 40),
                _ => rng.gen_range(0..20_000_000),
            };
            q.push(Instant::from_nanos(now + ahead), packet(id));
            reference.push((now + ahead, id));
            if rng.gen_range(0..3) == 0 {
                now += rng.gen_range(0..200_000);
                while let Some((at, p)) = q.pop_due(Instant::from_nanos(now)) {
                    got.push((at.as_nanos(), p.id));
                }
                // The reference: everything due, by arrival, then by id (the order put in).
                reference.sort();
                let due = reference.partition_point(|(at, _)| *at <= now);
                want.extend(reference.drain(..due));
                assert_eq!(
                    q.peek().map(Instant::as_nanos),
                    reference.first().map(|r| r.0)
                );
            }
        }
        assert_eq!(got, want);
        while let Some((at, p)) = q.pop_due(Instant::from_nanos(u64::MAX)) {
            got.push((at.as_nanos(), p.id));
        }
        reference.sort();
        want.extend(reference);
        assert_eq!(got, want);
    }
}

//! The packets on the wire that do not keep their place in line (sent ahead by `reorder`, late
//! duplicates, packets under reordering jitter, the slow path), ordered by arrival time.
//!
//! A timing wheel (Varghese and Lauck, "Hashed and hierarchical timing wheels", SOSP 1987): a
//! ring of [`SLOTS`] slots, each a span of 2^`slot_bits` ns of arrival times, sized by
//! [`OutOfLine::fit`] so that the ring reaches the link's delay and jitter (131 µs a slot for
//! 10 ms ± 8 ms). A packet is appended to its slot's list; when the wheel reaches a slot, its
//! packets are sorted by a counting sort on 256 sub-slots and an insertion sort within each,
//! and taken in order. The slots are few and wide on purpose: the packets in flight are appended
//! to a hundred-odd lists, whose ends stay in cache, and every later pass over them is
//! sequential. A ring of thousands of microsecond slots, measured, cost more than the radix heap
//! it replaces: each append was a cache miss in a different slot. Arrivals beyond the ring's
//! reach (a late duplicate or a slow path longer than the delay, a caller's clock far ahead)
//! wait in a radix heap ([`RadixHeap`]) and enter the ring when it comes within reach of them.
//!
//! Among equal arrival times the packet put in first comes out first: a slot's list is in the
//! order put in and is sorted stably; packets from the radix heap enter a slot before any packet
//! can be put into it directly (a packet goes to the heap only while its slot is out of reach,
//! and the ring's reach only grows); `ready` takes a late packet after the equal ones it holds.
//!
//! What this module is not: the decision of which packets go out of line (see `Link::launch`).

use std::collections::VecDeque;

use wire::{Instant, Packet};

/// Nanoseconds per grain, as a shift: 2^10 ns.
const GRAIN_BITS: u32 = 10;
/// Buckets 1..=54 by the highest bit in which a grain differs from the last; 0 is `ready`.
const BUCKETS: usize = (u64::BITS - GRAIN_BITS) as usize + 1;

/// A radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster algorithms for the shortest path
/// problem", J. ACM 37(2), 1990), for the arrivals beyond the wheel's reach: a priority queue
/// for keys that never go below the last one taken. It works on grains of 2^10 ns: bucket `b`
/// holds the packets whose grain first differs from the grain last taken at bit `b − 1`; when
/// `ready` runs out, the lowest non-empty bucket is split into lower ones. Among equal keys the
/// packet put in first comes out first (buckets keep their order, `ready` is sorted stably).
pub(crate) struct RadixHeap {
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

impl Default for RadixHeap {
    fn default() -> RadixHeap {
        RadixHeap {
            floor: 0,
            grain: 0,
            ready: VecDeque::new(),
            buckets: Vec::new(),
            mins: [0; BUCKETS],
            nonempty: 0,
        }
    }
}

impl RadixHeap {
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

/// Slots in the wheel's ring: a power of two.
pub(crate) const SLOTS: usize = 256;
/// The finest slot, as a shift: 2^16 ns, about 65 µs.
const MIN_SLOT_BITS: u32 = 16;
/// A slot's packets are sorted by the next 8 bits of their arrival below the slot's own.
const SUB_BITS: u32 = 8;

/// One slot of the wheel: its packets in the order put in, and the earliest arrival among them
/// (meaningless while the slot is empty).
#[derive(Default)]
struct WheelSlot {
    min: u64,
    packets: Vec<(u64, Packet)>,
}

pub(crate) struct OutOfLine {
    /// The arrival last taken: an arrival put in before it is due with it.
    floor: u64,
    /// Each slot spans 2^`slot_bits` ns of arrival times.
    slot_bits: u32,
    /// What [`OutOfLine::fit`] asked for, taken up when the queue is next empty.
    wanted_bits: u32,
    /// The slot last reached: `ready` holds every packet of it and of the slots before.
    current: u64,
    /// The packets of `current` and before, by arrival, then by the order put in.
    ready: VecDeque<(u64, Packet)>,
    /// Slot `s`, for `current` < s < `current` + [`SLOTS`], at `s % SLOTS`; allocated on first use.
    wheel: Vec<WheelSlot>,
    /// Bit `i` of word `i / 64` set when `wheel[i]` holds packets.
    occupied: Vec<u64>,
    /// Slots in the wheel that hold packets.
    occupied_slots: usize,
    /// Arrivals at slot `current` + [`SLOTS`] or later.
    far: RadixHeap,
    /// Where a slot's packets are placed by their sub-slot while it is sorted.
    scratch: Vec<Option<(u64, Packet)>>,
}

/// Sorts a slot's packets by arrival, stably (among equal arrivals, the order put in), with
/// sequential passes rather than a comparison sort's scattered moves: a counting sort by the
/// 2^[`SUB_BITS`] sub-slots of the slot (2^(`slot_bits` − 8) ns each), which leaves each packet
/// in its sub-slot, then an insertion sort, which has only the few packets that share a
/// sub-slot to put in order.
fn sort_slot(
    packets: &mut Vec<(u64, Packet)>,
    slot_bits: u32,
    scratch: &mut Vec<Option<(u64, Packet)>>,
) {
    if packets.len() > 16 {
        let shift = slot_bits.saturating_sub(SUB_BITS);
        let sub = |key: u64| ((key >> shift) as usize) & ((1 << SUB_BITS) - 1);
        // starts[s + 1] counts sub-slot s, then starts[s] is where it begins.
        let mut starts = [0usize; (1 << SUB_BITS) + 1];
        for (key, _) in packets.iter() {
            starts[sub(*key) + 1] += 1;
        }
        for s in 1..starts.len() {
            starts[s] += starts[s - 1];
        }
        scratch.clear();
        scratch.resize_with(packets.len(), || None);
        for item in packets.drain(..) {
            let s = sub(item.0);
            scratch[starts[s]] = Some(item);
            starts[s] += 1;
        }
        packets.extend(
            scratch
                .drain(..)
                .map(|item| item.expect("every place filled")),
        );
    }
    for i in 1..packets.len() {
        let key = packets[i].0;
        let mut j = i;
        while j > 0 && packets[j - 1].0 > key {
            j -= 1;
        }
        if j < i {
            packets[j..=i].rotate_right(1);
        }
    }
}

impl Default for OutOfLine {
    fn default() -> OutOfLine {
        OutOfLine {
            floor: 0,
            slot_bits: MIN_SLOT_BITS + 1,
            wanted_bits: MIN_SLOT_BITS + 1,
            current: 0,
            ready: VecDeque::new(),
            wheel: Vec::new(),
            occupied: Vec::new(),
            occupied_slots: 0,
            far: RadixHeap::default(),
            scratch: Vec::new(),
        }
    }
}

impl OutOfLine {
    /// Sizes the slots so that the ring reaches `span` ahead (the link's delay and the most its
    /// impairments add): beyond it, packets take the slower radix heap. Taken up the next time
    /// the queue is empty; until then the wheel keeps its slots, which changes only its speed.
    pub(crate) fn fit(&mut self, span: wire::Duration) {
        let per_slot = wire::time::duration_nanos(span) / SLOTS as u64 + 1;
        self.wanted_bits = (u64::BITS - per_slot.leading_zeros()).max(MIN_SLOT_BITS);
    }

    fn is_empty(&self) -> bool {
        self.ready.is_empty() && self.occupied_slots == 0 && self.far.peek().is_none()
    }

    /// Puts `packet` on the wire to arrive at `at`. An arrival earlier than one already taken
    /// (a caller whose clock went back) is due at once: it arrives with the last one taken.
    pub(crate) fn push(&mut self, at: Instant, packet: Packet) {
        if self.slot_bits != self.wanted_bits && self.is_empty() {
            self.slot_bits = self.wanted_bits;
            self.current = self.floor >> self.slot_bits;
        }
        let key = at.as_nanos().max(self.floor);
        let slot = key >> self.slot_bits;
        if slot <= self.current {
            // After the equal arrivals already there.
            let i = self.ready.partition_point(|(k, _)| *k <= key);
            self.ready.insert(i, (key, packet));
        } else if slot - self.current < SLOTS as u64 {
            self.put(slot, key, packet);
        } else {
            self.far.push(Instant::from_nanos(key), packet);
        }
    }

    fn put(&mut self, slot: u64, key: u64, packet: Packet) {
        if self.wheel.is_empty() {
            self.wheel.resize_with(SLOTS, WheelSlot::default);
            self.occupied = vec![0; SLOTS / 64];
        }
        let i = slot as usize % SLOTS;
        let s = &mut self.wheel[i];
        if s.packets.is_empty() {
            s.min = key;
            self.occupied[i / 64] |= 1 << (i % 64);
            self.occupied_slots += 1;
        } else if key < s.min {
            s.min = key;
        }
        s.packets.push((key, packet));
    }

    /// The first slot after `current` that holds packets, if the wheel has any.
    fn next_occupied(&self) -> Option<u64> {
        if self.occupied_slots == 0 {
            return None;
        }
        let start = (self.current as usize + 1) % SLOTS;
        let words = SLOTS / 64;
        // The word of `start` from its bit on, the other words in ring order, then the word of
        // `start` below its bit.
        for n in 0..=words {
            let w = (start / 64 + n) % words;
            let mut bits = self.occupied[w];
            if n == 0 {
                bits &= !0u64 << (start % 64);
            } else if n == words {
                bits &= !(!0u64 << (start % 64));
            }
            if bits != 0 {
                let i = w * 64 + bits.trailing_zeros() as usize;
                let ahead = (i + SLOTS - self.current as usize % SLOTS) % SLOTS;
                return Some(self.current + ahead as u64);
            }
        }
        unreachable!("occupied_slots counts a slot whose bit is set")
    }

    /// The earliest arrival, if any.
    pub(crate) fn peek(&self) -> Option<Instant> {
        if let Some((key, _)) = self.ready.front() {
            return Some(Instant::from_nanos(*key));
        }
        match self.next_occupied() {
            Some(s) => Some(Instant::from_nanos(self.wheel[s as usize % SLOTS].min)),
            None => self.far.peek(),
        }
    }

    /// Makes `slot` (with nothing waiting before it) the current one: the heap's arrivals that
    /// come within reach enter their slots, and the slot's packets become `ready`.
    fn reach(&mut self, slot: u64) {
        self.current = slot;
        let reach = (slot + SLOTS as u64) << self.slot_bits;
        while let Some(at) = self.far.peek() {
            if at.as_nanos() >= reach {
                break;
            }
            let (at, p) = self.far.pop_due(at).expect("peeked");
            self.put(at.as_nanos() >> self.slot_bits, at.as_nanos(), p);
        }
        let i = slot as usize % SLOTS;
        if self.occupied[i / 64] & (1 << (i % 64)) == 0 {
            return;
        }
        self.occupied[i / 64] &= !(1 << (i % 64));
        self.occupied_slots -= 1;
        // `ready` is empty: its allocation goes to the slot for its next fill.
        let spent = Vec::from(std::mem::take(&mut self.ready));
        let mut packets = std::mem::replace(&mut self.wheel[i].packets, spent);
        // Late duplicates and slow packets, delayed alike, are put in in order already; the
        // check stops at the first pair out of order, which in a jittered slot is at once.
        if !packets.is_sorted_by_key(|(key, _)| *key) {
            sort_slot(&mut packets, self.slot_bits, &mut self.scratch);
        }
        self.ready = VecDeque::from(packets);
    }

    /// Takes the earliest arrival (the first put in among equals) if it is due by `now`.
    ///
    /// Inlined into the link's poll: most calls take a packet from `ready` or find it not yet
    /// due, and the slot's sort (with its 2 KB of counts on the stack) stays out of line, so
    /// that these calls set up no large frame.
    #[inline]
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, Packet)> {
        if self.ready.is_empty() && !self.reach_due(now) {
            return None;
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

    /// With `ready` empty: reaches the next slot that holds packets (or the heap's earliest
    /// arrival) if its earliest arrival is due by `now`; whether it did.
    #[inline(never)]
    fn reach_due(&mut self, now: Instant) -> bool {
        let next = match self.next_occupied() {
            Some(s) => (s, self.wheel[s as usize % SLOTS].min),
            None => match self.far.peek() {
                Some(at) => (at.as_nanos() >> self.slot_bits, at.as_nanos()),
                None => return false,
            },
        };
        if next.1 > now.as_nanos() {
            return false;
        }
        if self.wheel.is_empty() {
            self.wheel.resize_with(SLOTS, WheelSlot::default);
            self.occupied = vec![0; SLOTS / 64];
        }
        self.reach(next.0);
        true
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

    /// What the tests ask of both queues.
    trait Queue {
        fn push(&mut self, at: Instant, p: Packet);
        fn peek(&self) -> Option<Instant>;
        fn pop_due(&mut self, now: Instant) -> Option<(Instant, Packet)>;
    }

    macro_rules! queue {
        ($t:ty) => {
            impl Queue for $t {
                fn push(&mut self, at: Instant, p: Packet) {
                    <$t>::push(self, at, p)
                }
                fn peek(&self) -> Option<Instant> {
                    <$t>::peek(self)
                }
                fn pop_due(&mut self, now: Instant) -> Option<(Instant, Packet)> {
                    <$t>::pop_due(self, now)
                }
            }
        };
    }
    queue!(OutOfLine);
    queue!(RadixHeap);

    /// Against a sorted reference, with pushes interleaved with pops as a link makes them:
    /// each push at or after the time last polled, some far ahead, many equal. `refit` is
    /// called now and then with a random span, and the queue is emptied now and then.
    fn agrees_with_a_sort<Q: Queue>(
        q: &mut Q,
        seed: u64,
        mut refit: impl FnMut(&mut Q, &mut ChaCha8Rng),
    ) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let (mut now, mut got, mut want) = (0u64, Vec::new(), Vec::new());
        for id in 0..30_000u64 {
            let ahead = match rng.gen_range(0..10) {
                0 => 0,
                1 => rng.gen_range(0..4) * 1000,
                2 => rng.gen_range(0..1 << 40),
                3 => rng.gen_range(0..200_000_000),
                _ => rng.gen_range(0..20_000_000),
            };
            q.push(Instant::from_nanos(now + ahead), packet(id));
            reference.push((now + ahead, id));
            if rng.gen_range(0..3) == 0 {
                now += rng.gen_range(0..200_000);
                if rng.gen_range(0..500) == 0 {
                    refit(q, &mut rng);
                    now = reference.iter().map(|r| r.0).max().unwrap_or(now);
                }
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

    #[test]
    fn it_agrees_with_a_sort_by_arrival_and_order_put_in() {
        agrees_with_a_sort(&mut OutOfLine::default(), 3, |_, _| {});
        agrees_with_a_sort(&mut RadixHeap::default(), 3, |_, _| {});
    }

    #[test]
    fn it_agrees_with_a_sort_whatever_the_slots_and_when_they_change() {
        for span_ms in [0, 1, 30, 1000] {
            let mut q = OutOfLine::default();
            q.fit(wire::Duration::from_millis(span_ms));
            agrees_with_a_sort(&mut q, 4 + span_ms, |_, _| {});
        }
        let mut q = OutOfLine::default();
        let mut bits = Vec::new();
        agrees_with_a_sort(&mut q, 5, |q, rng| {
            q.fit(wire::Duration::from_micros(rng.gen_range(0..2_000_000)));
            bits.push(q.slot_bits);
        });
        // The slots changed size along the way (each refit takes effect once the queue is
        // empty, at the next push).
        bits.push(q.slot_bits);
        bits.dedup();
        assert!(bits.len() > 2, "{bits:?}");
    }

    #[test]
    fn an_arrival_from_beyond_the_ring_comes_before_an_equal_one_put_in_later() {
        let mut q = OutOfLine::default();
        q.fit(wire::Duration::from_millis(1));
        let slot_ns = 1u64 << q.wanted_bits;
        let far = slot_ns * SLOTS as u64 * 3 + 5;
        q.push(Instant::from_nanos(far), packet(0));
        q.push(Instant::from_nanos(far - slot_ns * 2), packet(1));
        assert!(q.pop_due(Instant::from_nanos(far - slot_ns * 2)).is_some());
        // Now `far` is within reach: an equal arrival put in now goes after packet 0.
        q.push(Instant::from_nanos(far), packet(2));
        q.push(Instant::from_nanos(far - 1), packet(3));
        let ids: Vec<u64> = std::iter::from_fn(|| q.pop_due(Instant::from_nanos(far)))
            .map(|(_, p)| p.id)
            .collect();
        assert_eq!(ids, [3, 0, 2]);
    }

    #[test]
    fn a_crowded_slot_comes_out_sorted_with_equal_arrivals_in_the_order_put_in() {
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        let mut q = OutOfLine::default();
        // Thousands of packets a slot, half of them on a few shared arrival times.
        let mut reference: Vec<(u64, u64)> = (0..20_000u64)
            .map(|id| {
                let at = if id % 2 == 0 {
                    rng.gen_range(0..4_000_000)
                } else {
                    rng.gen_range(0..40) * 100_000
                };
                (at, id)
            })
            .collect();
        for &(at, id) in &reference {
            q.push(Instant::from_nanos(at), packet(id));
        }
        reference.sort();
        let got: Vec<(u64, u64)> = std::iter::from_fn(|| q.pop_due(Instant::from_nanos(u64::MAX)))
            .map(|(at, p)| (at.as_nanos(), p.id))
            .collect();
        assert_eq!(got, reference);
    }
}

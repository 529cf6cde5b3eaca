//! Which frames of its capture a connection's packets were, so that a diagnosis named when
//! the connection is finished can point at the packets that show it ([`Frames`]).
//!
//! One entry per packet, in capture order: the change of time (zigzag, since captures are not
//! always in time order) and of frame number since the connection's previous packet, each a
//! LEB128 varint. Packets of a connection are close in time and in the file, so an entry takes
//! 3 to 5 bytes: the index grows with the packets of the connections still open, and goes
//! with them. Not responsible for naming diagnoses, nor for numbering frames (the capture
//! reader does, as Wireshark does).

use wire::Instant;

use crate::model::Frames;

#[derive(Clone, Debug, Default)]
pub(crate) struct FrameIndex {
    bytes: Vec<u8>,
    last_time_ns: u64,
    last_frame: u64,
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at `*at`, moving `at` past it; None at the end or on a cut one.
fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

impl FrameIndex {
    /// Adds the connection's next packet: frame `frame` (1-based) at `time`.
    #[inline]
    pub(crate) fn push(&mut self, time: Instant, frame: u64) {
        let t = time.as_nanos();
        let dt = t.wrapping_sub(self.last_time_ns) as i64;
        // Zigzag: small negative steps stay small.
        put_varint(&mut self.bytes, ((dt << 1) ^ (dt >> 63)) as u64);
        put_varint(&mut self.bytes, frame.wrapping_sub(self.last_frame));
        self.last_time_ns = t;
        self.last_frame = frame;
    }

    /// The packets whose time lies in `from..=to`: the first and the last in capture order,
    /// and how many.
    pub(crate) fn span(&self, from: Instant, to: Instant) -> Frames {
        let mut out = Frames::default();
        let (mut t, mut f, mut at) = (0u64, 0u64, 0usize);
        while at < self.bytes.len() {
            let (Some(z), Some(df)) = (
                get_varint(&self.bytes, &mut at),
                get_varint(&self.bytes, &mut at),
            ) else {
                break;
            };
            let dt = ((z >> 1) as i64) ^ -((z & 1) as i64);
            t = t.wrapping_add(dt as u64);
            f = f.wrapping_add(df);
            let time = Instant::from_nanos(t);
            if time < from || time > to {
                continue;
            }
            if out.packets == 0 {
                out.first = f;
                out.first_time = time;
            }
            out.last = f;
            out.last_time = time;
            out.packets += 1;
        }
        out
    }

    /// Bytes held.
    #[cfg(test)]
    pub(crate) fn len_bytes(&self) -> usize {
        self.bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ns: u64) -> Instant {
        Instant::from_nanos(ns)
    }

    #[test]
    fn the_span_gives_the_first_and_last_frame_in_time_and_their_count() {
        let mut ix = FrameIndex::default();
        let t0 = 1_700_000_000_000_000_000u64;
        // Frames 3, 4, 9, 10, 200 000; the fourth stamped before the third (out of order).
        let pk = [
            (t0, 3),
            (t0 + 1_000, 4),
            (t0 + 5_000_000, 9),
            (t0 + 4_000_000, 10),
            (t0 + 9_000_000_000, 200_000),
        ];
        for (t, f) in pk {
            ix.push(at(t), f);
        }
        let s = ix.span(at(t0 + 1_000), at(t0 + 5_000_000));
        assert_eq!((s.first, s.last, s.packets), (4, 10, 3));
        assert_eq!(
            (s.first_time, s.last_time),
            (at(t0 + 1_000), at(t0 + 4_000_000))
        );
        let all = ix.span(at(0), at(u64::MAX));
        assert_eq!((all.first, all.last, all.packets), (3, 200_000, 5));
        assert_eq!(
            ix.span(at(t0 + 6_000_000), at(t0 + 7_000_000)),
            Frames::default()
        );
        // Close packets cost a few bytes each.
        assert!(ix.len_bytes() <= 5 * 12 + 3, "{}", ix.len_bytes());
    }

    #[test]
    fn extreme_steps_round_trip() {
        let mut ix = FrameIndex::default();
        for (t, f) in [(u64::MAX, u64::MAX), (0, 1), (u64::MAX / 2, 2)] {
            ix.push(at(t), f);
        }
        let s = ix.span(at(0), at(0));
        assert_eq!((s.first, s.packets), (1, 1));
        let s = ix.span(at(u64::MAX), at(u64::MAX));
        assert_eq!((s.first, s.packets), (u64::MAX, 1));
    }
}

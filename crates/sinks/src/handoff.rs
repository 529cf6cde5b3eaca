//! How the records of every capture and link log travel from the engine to the writer thread:
//! framed one after another in a buffer, a chunk, each as its file's number, its length and
//! its bytes, so that the engine appends to one buffer whichever file a record is for and hands
//! over whole chunks; and how many chunks there may be. Pure: no files, no threads, no clock.

use std::time::Duration;

use wire::Instant;

/// A frame's header: the file's number and the record's length, little-endian `u32`s.
pub const FRAME_HEADER_BYTES: usize = 8;

/// Appends a record for file `file`, the concatenation of `parts`.
pub fn push(chunk: &mut Vec<u8>, file: u32, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    chunk.extend_from_slice(&file.to_le_bytes());
    chunk.extend_from_slice(&(len as u32).to_le_bytes());
    for p in parts {
        chunk.extend_from_slice(p);
    }
}

/// Appends a record for file `file` that `write` appends to `chunk` (a line formatted in
/// place, whose length is known only once written).
pub fn push_with(chunk: &mut Vec<u8>, file: u32, write: impl FnOnce(&mut Vec<u8>)) {
    let start = chunk.len();
    chunk.extend_from_slice(&file.to_le_bytes());
    chunk.extend_from_slice(&[0; 4]);
    write(chunk);
    let len = (chunk.len() - start - FRAME_HEADER_BYTES) as u32;
    chunk[start + 4..start + FRAME_HEADER_BYTES].copy_from_slice(&len.to_le_bytes());
}

/// Whether a record of at most `record_bytes` goes into `chunk` without taking it past
/// `capacity_bytes`, so without a new allocation. An empty chunk takes any record (and grows
/// for one larger than itself).
pub fn fits(chunk: &[u8], record_bytes: usize, capacity_bytes: usize) -> bool {
    chunk.is_empty() || chunk.len() + FRAME_HEADER_BYTES + record_bytes <= capacity_bytes
}

/// The records of a chunk as (file, bytes), in the order they were pushed. A chunk ends at its
/// last whole frame.
pub fn records(chunk: &[u8]) -> Records<'_> {
    Records { rest: chunk }
}

pub struct Records<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Records<'a> {
    type Item = (u32, &'a [u8]);

    fn next(&mut self) -> Option<(u32, &'a [u8])> {
        let (head, rest) = self.rest.split_first_chunk::<FRAME_HEADER_BYTES>()?;
        let [f0, f1, f2, f3, l0, l1, l2, l3] = *head;
        let len = u32::from_le_bytes([l0, l1, l2, l3]) as usize;
        let (record, rest) = rest.split_at_checked(len)?;
        self.rest = rest;
        Some((u32::from_le_bytes([f0, f1, f2, f3]), record))
    }
}

/// The chunks between the engine and the writer, made as they are needed up to a bound: the
/// steady state reuses the chunks the writer gives back, and the bound is how far the writer
/// may fall behind before the engine waits for it.
#[derive(Clone, Copy, Debug)]
pub struct Pool {
    made: usize,
    max: usize,
}

/// Where the engine's next chunk comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Take {
    /// One the writer has given back.
    Returned,
    /// A new one: fewer than the bound exist.
    Make,
    /// Wait until the writer gives one back: every chunk is full and waiting for the disk.
    Wait,
}

impl Pool {
    /// A pool of at most `max` chunks (at least one) of which the engine holds the first.
    pub fn new(max: usize) -> Pool {
        Pool {
            made: 1,
            max: max.max(1),
        }
    }

    /// The engine has handed over its chunk and needs the next; `returned` says whether the
    /// writer has given one back already.
    pub fn take(&mut self, returned: bool) -> Take {
        if returned {
            Take::Returned
        } else if self.made < self.max {
            self.made += 1;
            Take::Make
        } else {
            Take::Wait
        }
    }
}

/// The engine's waits for the writer (the disk slower than the captures and link logs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DiskWait {
    pub count: u64,
    pub total: Duration,
    pub longest: Duration,
    /// When the longest began, in lab time.
    pub longest_at: Instant,
}

impl DiskWait {
    /// The engine waited `waited` from `at`.
    pub fn record(&mut self, at: Instant, waited: Duration) {
        self.count += 1;
        self.total += waited;
        if waited > self.longest {
            self.longest = waited;
            self.longest_at = at;
        }
    }

    /// What the user is told, when the engine waited at all.
    pub fn warning(&self) -> Option<String> {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        (self.count > 0).then(|| {
            format!(
                "captures: the engine waited {:.1} ms for the disk ({} times, the longest \
                 {:.1} ms at {:.3} s): the captures and link logs are whole, and packets due \
                 meanwhile were late by as much (--snaplen 128 writes a tenth as much)",
                ms(self.total),
                self.count,
                ms(self.longest),
                self.longest_at.as_secs_f64()
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_out_of_a_chunk_as_they_went_in_whatever_their_file() {
        let mut chunk = Vec::new();
        push(&mut chunk, 3, &[b"head", b"er+data"]);
        push_with(&mut chunk, 0, |c| c.extend_from_slice(b"a line\n"));
        push(&mut chunk, 7, &[]);
        push(&mut chunk, 3, &[b"x"]);
        assert_eq!(chunk.len(), 4 * FRAME_HEADER_BYTES + 11 + 7 + 1);
        let got: Vec<(u32, &[u8])> = records(&chunk).collect();
        assert_eq!(
            got,
            vec![
                (3, &b"header+data"[..]),
                (0, &b"a line\n"[..]),
                (7, &b""[..]),
                (3, &b"x"[..]),
            ]
        );
    }

    #[test]
    fn a_chunk_cut_inside_a_frame_ends_at_its_last_whole_record() {
        let mut chunk = Vec::new();
        push(&mut chunk, 1, &[b"whole"]);
        push(&mut chunk, 2, &[b"cut short"]);
        for cut in [chunk.len() - 1, FRAME_HEADER_BYTES + 5 + 3] {
            let got: Vec<_> = records(&chunk[..cut]).collect();
            assert_eq!(got, vec![(1, &b"whole"[..])]);
        }
    }

    #[test]
    fn a_record_fits_while_the_chunk_stays_within_its_capacity_and_an_empty_chunk_takes_any() {
        let mut chunk = Vec::with_capacity(32);
        assert!(
            fits(&chunk, 100, 32),
            "an empty chunk takes a record larger than itself"
        );
        push(&mut chunk, 0, &[&[0; 8]]);
        assert!(fits(&chunk, 8, 32), "16 + 8 + 8 = 32");
        assert!(!fits(&chunk, 9, 32));
        push(&mut chunk, 0, &[&[0; 8]]);
        assert_eq!(chunk.len(), 32);
        assert_eq!(chunk.capacity(), 32, "no new allocation");
        assert!(!fits(&chunk, 0, 32));
    }

    #[test]
    fn the_pool_reuses_returned_chunks_makes_new_ones_up_to_its_bound_then_waits() {
        let mut p = Pool::new(3);
        assert_eq!(p.take(true), Take::Returned);
        assert_eq!(p.take(false), Take::Make);
        assert_eq!(p.take(true), Take::Returned);
        assert_eq!(p.take(false), Take::Make);
        assert_eq!(p.take(false), Take::Wait, "three made");
        assert_eq!(p.take(false), Take::Wait);
        assert_eq!(p.take(true), Take::Returned);
        assert_eq!(p.take(false), Take::Wait, "still three");
        assert_eq!(
            Pool::new(0).take(false),
            Take::Wait,
            "the engine's own chunk"
        );
    }

    #[test]
    fn disk_waits_add_up_keep_the_longest_and_are_said_only_when_there_were_any() {
        let mut w = DiskWait::default();
        assert_eq!(w.warning(), None);
        w.record(Instant::from_millis(1500), Duration::from_micros(300));
        w.record(Instant::from_millis(2250), Duration::from_micros(4200));
        w.record(Instant::from_millis(3000), Duration::from_micros(1000));
        assert_eq!(w.count, 3);
        assert_eq!(w.total, Duration::from_micros(5500));
        assert_eq!(
            (w.longest, w.longest_at),
            (Duration::from_micros(4200), Instant::from_millis(2250))
        );
        let line = w.warning().unwrap();
        assert!(
            line.starts_with("captures: the engine waited 5.5 ms for the disk (3 times, the longest 4.2 ms at 2.250 s)"),
            "{line}"
        );
    }
}

//! A lab's captures and link logs, written by a thread of their own, so that a `write(2)` that
//! takes milliseconds (dirty pages throttled, a slow disk, a filling tmpfs) holds up no packet.
//! The engine frames each record into a chunk ([`crate::handoff`]: a copy, no system call) and
//! hands each full chunk to the writer over a bounded channel; the writer gives it back empty,
//! so the steady state allocates nothing. The writer does every write, the rotation into the
//! next file, the stop of every file when one fails (a full disk) with the reserve given back,
//! and the flush and close at the end.
//!
//! When the disk is slower than the traffic for long enough that every chunk waits for it, the
//! engine waits for one: a capture missing packets without a word would be worse than late
//! packets. The waits are counted ([`DiskWait`]) and said at the end of the run.
//!
//! Not responsible for what the files are called or what a record holds (`labnet::run_dir`,
//! [`RotatingFile`], `wire::pcap`).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use labnet::run_dir::{self, CaptureLimits};
use link::Event;
use wire::{pcap, Instant};

use crate::handoff::{self, DiskWait, Pool, Take};
use crate::{Reserve, RotatingFile};

/// Bytes of records per chunk.
const CHUNK_BYTES: usize = 512 << 10;
/// Chunks at most between the engine and the writer (16 MiB): how far the disk may fall behind
/// before the engine waits, about 0.3 s of a 1 Gbit/s lab's captures cut at 128 bytes and its
/// link logs, 50 ms of whole packets.
const MAX_CHUNKS: usize = 32;
/// Room for a link-log line: the longest (between two IPv6 addresses, every number at its
/// widest) is about 210 bytes; a longer one would only make its chunk grow.
const LOG_LINE_BYTES: usize = 256;
/// A pcap record's header.
const PCAP_RECORD_HEADER_BYTES: usize = 16;
/// Why the engine stops taking records when the writer thread has gone (it panicked).
const WRITER_GONE: &str = "the thread writing them ended";

/// One capture or link log of a lab.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId(u32);

/// The captures and link logs being opened, before the lab starts: each is created (for the
/// user) with its header here, on the caller's thread, so that a file that cannot be created
/// is an error of the lab's start.
pub struct Opening {
    files: Vec<RotatingFile>,
    limits: CaptureLimits,
}

impl Opening {
    pub fn new(limits: CaptureLimits) -> Opening {
        Opening {
            files: Vec::new(),
            limits,
        }
    }

    /// An interface's capture: each packet cut at the snapshot length, with its original length.
    pub fn pcap(&mut self, path: &Path) -> Result<FileId> {
        let header = pcap::file_header(pcap::LINKTYPE_RAW, snaplen(self.limits));
        self.add(RotatingFile::create(path, &header, self.limits)?)
    }

    /// A link direction's event log.
    pub fn log(&mut self, path: &Path) -> Result<FileId> {
        let header = run_dir::LOG_HEADER.as_bytes();
        self.add(RotatingFile::create(path, header, self.limits)?)
    }

    fn add(&mut self, f: RotatingFile) -> Result<FileId> {
        let id = u32::try_from(self.files.len()).context("more than 2^32 capture files")?;
        self.files.push(f);
        Ok(FileId(id))
    }

    /// Starts the writer with the files and `reserve` (given back when a write fails). Packets
    /// are stamped `real_start_ns` (the lab's start, in nanoseconds since the Unix epoch) plus
    /// their lab time. The thread inherits the caller's signal mask.
    pub fn start(self, reserve: Reserve, real_start_ns: u64) -> Result<Captures> {
        self.start_with(reserve, real_start_ns, CHUNK_BYTES, MAX_CHUNKS)
    }

    fn start_with(
        self,
        reserve: Reserve,
        real_start_ns: u64,
        chunk_bytes: usize,
        max_chunks: usize,
    ) -> Result<Captures> {
        // Every chunk fits in the channel: handing one over never blocks, taking one back may.
        let (to_writer, from_engine) = mpsc::sync_channel(max_chunks);
        let (back, empties) = mpsc::channel();
        let stopped = Arc::new(AtomicBool::new(false));
        let writer = Writer {
            files: self.files,
            reserve,
            stopped: stopped.clone(),
            warnings: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name("captures".into())
            .spawn(move || writer.run(from_engine, back))
            .context("starting the thread that writes the captures")?;
        Ok(Captures {
            chunk: Vec::with_capacity(chunk_bytes),
            chunk_bytes,
            pool: Pool::new(max_chunks),
            snaplen: snaplen(self.limits) as usize,
            real_start_ns,
            to_writer,
            empties,
            writer_stopped: stopped,
            halted: false,
            latest: Instant::ZERO,
            wait: DiskWait::default(),
            warnings: Vec::new(),
            writer: Some(thread),
            #[cfg(test)]
            on_wait: None,
        })
    }
}

fn snaplen(limits: CaptureLimits) -> u32 {
    limits.snaplen_bytes.unwrap_or(pcap::SNAPLEN)
}

/// What goes from the engine to the writer.
enum ToWriter {
    /// Records to write, the latest of them taken at the given lab time.
    Chunk(Vec<u8>, Instant),
    /// Flush and close every file, and end.
    Finish,
}

/// How the writer ended, for the summary.
#[derive(Debug, Default)]
pub struct CapturesEnd {
    /// What stopped the files or kept the engine waiting, in words (each said on stderr too).
    pub warnings: Vec<String>,
    pub wait: DiskWait,
    /// The writer thread's CPU time, user and system, in seconds.
    pub writer_cpu_s: f64,
}

/// The engine's side: records go in here, on the engine's thread, without a system call
/// unless the engine must wait for the disk.
pub struct Captures {
    /// The records since the last hand-over, framed.
    chunk: Vec<u8>,
    chunk_bytes: usize,
    pool: Pool,
    snaplen: usize,
    real_start_ns: u64,
    to_writer: SyncSender<ToWriter>,
    /// Chunks written and given back.
    empties: Receiver<Vec<u8>>,
    /// Set by the writer once a write failed and every file stopped.
    writer_stopped: Arc<AtomicBool>,
    /// No more records are taken: the files have stopped, or the writer is gone.
    halted: bool,
    /// The lab time of the latest record.
    latest: Instant,
    wait: DiskWait,
    /// Said on this side (the writer gone).
    warnings: Vec<String>,
    writer: Option<JoinHandle<WriterEnd>>,
    /// Told each time the engine is about to wait for a chunk.
    #[cfg(test)]
    on_wait: Option<Sender<()>>,
}

impl Captures {
    /// Records a packet of a capture, taken at lab time `now`.
    pub fn pcap(&mut self, file: FileId, now: Instant, data: &[u8]) {
        let incl = data.len().min(self.snaplen);
        if !self.room(now, PCAP_RECORD_HEADER_BYTES + incl) {
            return;
        }
        let header = pcap::record_header(self.real_start_ns + now.as_nanos(), incl, data.len());
        handoff::push(&mut self.chunk, file.0, &[&header, &data[..incl]]);
        self.latest = now;
    }

    /// Records a link event, logged at lab time `now`.
    pub fn log(&mut self, file: FileId, now: Instant, e: &Event) {
        if !self.room(now, LOG_LINE_BYTES) {
            return;
        }
        handoff::push_with(&mut self.chunk, file.0, |line| {
            run_dir::write_event(line, e).expect("writing into a Vec cannot fail")
        });
        self.latest = now;
    }

    /// Makes room in the chunk for a record of at most `bytes`, handing the chunk over if it
    /// has none; false once records are no longer taken.
    fn room(&mut self, now: Instant, bytes: usize) -> bool {
        if !self.halted && !handoff::fits(&self.chunk, bytes, self.chunk_bytes) {
            self.hand_over(now);
        }
        !self.halted
    }

    /// Hands the chunk to the writer and takes an empty one, waiting for the writer when every
    /// chunk is full.
    fn hand_over(&mut self, now: Instant) {
        if self.writer_stopped.load(Ordering::Relaxed) {
            self.halt(None);
            return;
        }
        let full = std::mem::take(&mut self.chunk);
        if self.to_writer.send(ToWriter::Chunk(full, now)).is_err() {
            self.halt(Some(WRITER_GONE));
            return;
        }
        let returned = match self.empties.try_recv() {
            Ok(c) => Some(c),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => {
                self.halt(Some(WRITER_GONE));
                return;
            }
        };
        let take = self.pool.take(returned.is_some());
        self.chunk = match (returned, take) {
            (Some(c), _) => c,
            (None, Take::Make) => Vec::with_capacity(self.chunk_bytes),
            (None, _) => {
                #[cfg(test)]
                if let Some(w) = &self.on_wait {
                    let _ = w.send(());
                }
                let began = std::time::Instant::now();
                let got = self.empties.recv();
                self.wait.record(now, began.elapsed());
                match got {
                    Ok(c) => c,
                    Err(_) => {
                        self.halt(Some(WRITER_GONE));
                        return;
                    }
                }
            }
        };
    }

    /// Takes no more records; `why`, when the writer did not say it.
    fn halt(&mut self, why: Option<&str>) {
        self.halted = true;
        self.chunk = Vec::new();
        if let Some(why) = why {
            let w = format!(
                "captures and link logs stopped at {:.3} s: {why}; the lab and its programs \
                 went on",
                self.latest.as_secs_f64()
            );
            eprintln!("latencylab: warning: {w}");
            self.warnings.push(w);
        }
    }

    /// Hands over what is left, waits for the writer to flush and close every file, and says
    /// how the captures went. Called again (or on drop), it does nothing.
    pub fn finish(&mut self) -> CapturesEnd {
        let Some(thread) = self.writer.take() else {
            return CapturesEnd::default();
        };
        if !self.halted && !self.chunk.is_empty() {
            let last = std::mem::take(&mut self.chunk);
            let _ = self.to_writer.send(ToWriter::Chunk(last, self.latest));
        }
        let _ = self.to_writer.send(ToWriter::Finish);
        let mut end = CapturesEnd {
            warnings: std::mem::take(&mut self.warnings),
            wait: self.wait,
            writer_cpu_s: 0.0,
        };
        match thread.join() {
            Ok(w) => {
                end.warnings.extend(w.warnings);
                end.writer_cpu_s = w.cpu_s;
            }
            Err(_) => {
                let w = "captures and link logs: the thread writing them failed; they may be \
                         incomplete"
                    .to_string();
                eprintln!("latencylab: warning: {w}");
                end.warnings.push(w);
            }
        }
        if let Some(w) = self.wait.warning() {
            eprintln!("latencylab: warning: {w}");
            end.warnings.push(w);
        }
        end
    }
}

/// Whatever way the lab ends (an error half-way included), what was recorded reaches the files.
impl Drop for Captures {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The writer's side: owns the files and the reserve.
struct Writer {
    files: Vec<RotatingFile>,
    reserve: Reserve,
    stopped: Arc<AtomicBool>,
    warnings: Vec<String>,
}

struct WriterEnd {
    warnings: Vec<String>,
    cpu_s: f64,
}

impl Writer {
    fn run(mut self, from_engine: Receiver<ToWriter>, back: Sender<Vec<u8>>) -> WriterEnd {
        let mut latest = Instant::ZERO;
        // The engine gone without a word (it panicked) ends the thread as `Finish` does.
        while let Ok(ToWriter::Chunk(mut chunk, at)) = from_engine.recv() {
            latest = at;
            self.write(&chunk, at);
            chunk.clear();
            // The engine may be gone, with no use for it.
            let _ = back.send(chunk);
        }
        self.close(latest);
        WriterEnd {
            warnings: self.warnings,
            cpu_s: thread_cpu_seconds(),
        }
    }

    fn write(&mut self, chunk: &[u8], at: Instant) {
        if self.stopped.load(Ordering::Relaxed) {
            return;
        }
        for (file, record) in handoff::records(chunk) {
            let f = &mut self.files[file as usize];
            if let Err(e) = f.record(&[record]) {
                let path = f.path().to_path_buf();
                self.stop(&path, &e, at);
                return;
            }
        }
    }

    /// Flushes every file; they close as the thread ends.
    fn close(&mut self, at: Instant) {
        let failed = self.files.iter_mut().find_map(|f| match f.flush() {
            Ok(()) => None,
            Err(e) => Some((f.path().to_path_buf(), e)),
        });
        if let Some((path, e)) = failed {
            self.stop(&path, &e, at);
        }
    }

    /// Writing `path` failed with `e` (a chunk handed over at `at`): the disk is full or
    /// broken, so every capture and log stops (what they had buffered is dropped), the reserve
    /// is given back (room for summary.json), and the warning goes to stderr at once.
    fn stop(&mut self, path: &Path, e: &std::io::Error, at: Instant) {
        for f in &mut self.files {
            f.stop();
        }
        self.reserve.release();
        self.stopped.store(true, Ordering::Relaxed);
        let w = format!(
            "captures and link logs stopped at {:.3} s: writing {}: {e}; the lab and its \
             programs went on",
            at.as_secs_f64(),
            path.display()
        );
        eprintln!("latencylab: warning: {w}");
        self.warnings.push(w);
    }
}

/// The calling thread's CPU time, user and system, in seconds (0 if it cannot be read).
fn thread_cpu_seconds() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    match getrusage(UsageWho::RUSAGE_THREAD) {
        Ok(u) => {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
            t(u.user_time()) + t(u.system_time())
        }
        Err(_) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::io::{BufWriter, Read};
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::PathBuf;
    use std::time::Duration;

    use link::{DropCause, EventKind};
    use wire::Ecn;

    use crate::scratch;

    fn event(i: u64) -> Event {
        Event {
            time: Instant::from_micros(i * 37),
            kind: [EventKind::Enqueue, EventKind::Dequeue, EventKind::Drop][i as usize % 3],
            id: i,
            bytes: 40 + (i as usize * 97) % 1460,
            flow: None,
            ecn: Ecn::Ect0,
            sojourn: (!i.is_multiple_of(3)).then(|| Duration::from_nanos(i * 1013)),
            cause: (i % 3 == 2).then_some(DropCause::Loss),
            class: 0,
        }
    }

    fn packet(i: u64) -> Vec<u8> {
        (0..(20 + (i as usize * 131) % 1480))
            .map(|b| (b as u64 * 7 + i) as u8)
            .collect()
    }

    /// Every file in `dir`, by name, with its bytes.
    fn contents(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut v: Vec<_> = fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn files_written_by_the_writer_thread_are_byte_for_byte_those_written_in_place() {
        let limits = CaptureLimits {
            snaplen_bytes: Some(96),
            file_size_bytes: Some(20_000),
            file_count: Some(3),
        };
        let (threaded, in_place) = (scratch("threaded"), scratch("in-place"));
        // Chunks far smaller than a packet, and only two: most records are handed over alone,
        // and the engine often waits for the writer.
        let mut o = Opening::new(limits);
        let files = [
            o.pcap(&threaded.join("a.pcap")).unwrap(),
            o.pcap(&threaded.join("b.pcap")).unwrap(),
            o.log(&threaded.join("l.log")).unwrap(),
        ];
        let start_ns = 1_700_000_000_123_456_789;
        let mut c = o.start_with(Reserve(None), start_ns, 64, 2).unwrap();
        // The same records the way the engine wrote them before it had a writer thread.
        let snaplen = 96;
        let pcap_header = pcap::file_header(pcap::LINKTYPE_RAW, snaplen);
        let header = |name: &str| match name {
            "l.log" => run_dir::LOG_HEADER.as_bytes().to_vec(),
            _ => pcap_header.to_vec(),
        };
        let mut direct: Vec<RotatingFile> = ["a.pcap", "b.pcap", "l.log"]
            .iter()
            .map(|n| RotatingFile::create(&in_place.join(n), &header(n), limits).unwrap())
            .collect();
        for i in 0..3000u64 {
            let now = Instant::from_micros(i * 41);
            let data = packet(i);
            let f = (i % 2) as usize;
            c.pcap(files[f], now, &data);
            let incl = data.len().min(snaplen as usize);
            let h = pcap::record_header(start_ns + now.as_nanos(), incl, data.len());
            direct[f].record(&[&h, &data[..incl]]).unwrap();
            let e = event(i);
            c.log(files[2], now, &e);
            let mut line = Vec::new();
            run_dir::write_event(&mut line, &e).unwrap();
            direct[2].record(&[&line]).unwrap();
        }
        let end = c.finish();
        for f in &mut direct {
            f.flush().unwrap();
        }
        assert!(
            end.warnings.iter().all(|w| w.contains("waited")),
            "{:?}",
            end.warnings
        );
        let (got, want) = (contents(&threaded), contents(&in_place));
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want));
        assert_eq!(got.len(), 9, "the newest three of each: {:?}", names(&got));
        assert!(
            !threaded.join("a.pcap").exists(),
            "rotated: {:?}",
            names(&got)
        );
        assert!(got == want, "the files differ");
        fs::remove_dir_all(&threaded).unwrap();
        fs::remove_dir_all(&in_place).unwrap();
    }

    #[test]
    fn a_failed_write_stops_every_file_gives_back_the_reserve_and_the_engine_takes_no_more() {
        let d = scratch("full");
        let reserve_path = d.join(".reserve");
        fs::write(&reserve_path, [0; 100]).unwrap();
        let mut o = Opening::new(CaptureLimits::default());
        // /dev/full fails every write with ENOSPC, as a full disk does, once the writer's
        // buffer for it is full.
        let full = o
            .add(RotatingFile {
                first: PathBuf::from("/dev/full"),
                header: Vec::new(),
                rotation: labnet::run_dir::Rotation::new(CaptureLimits::default(), 0),
                out: Some(BufWriter::with_capacity(
                    4096,
                    fs::OpenOptions::new()
                        .write(true)
                        .open("/dev/full")
                        .unwrap(),
                )),
            })
            .unwrap();
        let ok = o.log(&d.join("ok.log")).unwrap();
        let mut c = o
            .start_with(Reserve(Some(reserve_path.clone())), 0, 4096, 2)
            .unwrap();
        let mut i = 0;
        // The pool of two chunks keeps the engine within two chunks of the writer, so it
        // learns of the stop a few chunks after the write that failed.
        while !c.halted {
            assert!(i < 100_000, "the engine went on taking records");
            c.log(full, Instant::from_micros(i), &event(i));
            c.log(ok, Instant::from_micros(i), &event(i));
            i += 1;
        }
        let end = c.finish();
        // Besides, maybe, the engine's waits for the writer (a pool of two chunks).
        let stops: Vec<_> = (end.warnings.iter())
            .filter(|w| !w.starts_with("captures: the engine waited"))
            .collect();
        assert_eq!(stops.len(), 1, "one warning: {:?}", end.warnings);
        let w = stops[0];
        assert!(
            w.contains("writing /dev/full") && w.contains("No space left on device"),
            "{w}"
        );
        assert!(!reserve_path.exists(), "the reserve was given back");
        // What the other file had buffered (its header and every record: less than its own
        // buffer) was dropped with it.
        assert_eq!(fs::read(d.join("ok.log")).unwrap(), b"");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_engine_waits_for_a_stuck_disk_counts_the_wait_and_loses_no_record() {
        let d = scratch("stuck");
        let fifo = d.join("stuck.log");
        let c_path = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0);
        // A reader that reads nothing yet: opening the file to write does not block, and the
        // writer's writes block once the pipe and its own buffer are full, as on a stuck disk.
        let mut reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let mut o = Opening::new(CaptureLimits::default());
        let log = o.log(&fifo).unwrap();
        let mut c = o.start_with(Reserve(None), 0, 4096, 2).unwrap();
        let (tx, waiting) = mpsc::channel();
        c.on_wait = Some(tx);
        // Once the engine waits, read everything, blocking.
        let drain = std::thread::spawn(move || {
            waiting.recv().unwrap();
            let fd = std::os::fd::AsRawFd::as_raw_fd(&reader);
            // SAFETY: fcntl on a descriptor this thread owns.
            assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFL, 0) }, 0);
            let mut all = Vec::new();
            reader.read_to_end(&mut all).unwrap();
            all
        });
        let mut want = run_dir::LOG_HEADER.as_bytes().to_vec();
        // 4 MB: more than the writer's buffer, the pipe and the two chunks together.
        let mut i = 0;
        while want.len() < 4_000_000 {
            let e = event(i);
            c.log(log, e.time, &e);
            run_dir::write_event(&mut want, &e).unwrap();
            i += 1;
        }
        let end = c.finish();
        let got = drain.join().unwrap();
        assert!(
            end.wait.count >= 1 && end.wait.total > Duration::ZERO,
            "{:?}",
            end.wait
        );
        assert!(
            end.warnings
                .iter()
                .any(|w| w.starts_with("captures: the engine waited")),
            "{:?}",
            end.warnings
        );
        assert_eq!(got.len(), want.len());
        assert!(got == want, "every record, in order");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_dropped_captures_flushes_what_it_was_given() {
        let d = scratch("dropped");
        let path = d.join("c.pcap");
        let mut o = Opening::new(CaptureLimits {
            snaplen_bytes: Some(40),
            ..CaptureLimits::default()
        });
        let f = o.pcap(&path).unwrap();
        let mut c = o.start(Reserve(None), 1_000_000_000).unwrap();
        c.pcap(f, Instant::from_nanos(7), &[0x45; 100]);
        c.pcap(f, Instant::from_secs(1), &[0x60; 30]);
        drop(c);
        let b = fs::read(&path).unwrap();
        let u = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(u(16), 40, "snaplen");
        assert_eq!((u(24), u(24 + 4)), (1, 7), "seconds and nanoseconds");
        assert_eq!((u(24 + 8), u(24 + 12)), (40, 100));
        let second = 24 + 16 + 40;
        assert_eq!((u(second), u(second + 8), u(second + 12)), (2, 30, 30));
        assert_eq!(b.len(), second + 16 + 30);
        fs::remove_dir_all(&d).unwrap();
    }
}

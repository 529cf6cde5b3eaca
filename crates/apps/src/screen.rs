//! `screen-server` / `screen-viewer`: screen sharing over TCP, to see the delay a sender adds
//! by queueing more than the network needs in its own socket buffer.
//!
//! The server sends screen frames as long as the viewer is connected: each frame is drawn when
//! it is generated and shows the latest click the server has heard of. In `--mode unbounded`
//! it writes frames while the socket takes them (the classic loop: a full send buffer of
//! frames that age while they wait); in `--mode lowat` it sets TCP_NOTSENT_LOWAT, waits until
//! the socket is writable (the unsent bytes fell below the mark) and only then generates and
//! writes one frame, so that each frame is as fresh as the network allows. Both modes cap the
//! frame rate at `--fps`. A second thread samples the socket's queued and unsent bytes
//! (SIOCOUTQ, SIOCOUTQNSD) every `--sample`.
//!
//! The viewer clicks at seeded random moments (uniform between half and one and a half
//! `--click-every` apart) and measures, per click, the time until the first complete frame
//! that draws it.
//!
//! Wire format, all big-endian. A click (viewer to server): `"LLC1"` and the click number
//! (u32, from 1). A frame (server to viewer): `"LLF1"`, the frame number (u32), the latest click
//! drawn (u32, 0 for none), the payload length (u32), then the payload.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rand::{Rng, SeedableRng};

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, positive_time_arg, resolve, size_arg, start_record, time_arg,
    with_default_port, Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::Percentiles;

const DEFAULT_PORT: u16 = 5204;
const CLICK_MAGIC: &[u8; 4] = b"LLC1";
const FRAME_MAGIC: &[u8; 4] = b"LLF1";
const HEADER_BYTES: usize = 16;
/// Largest frame a viewer accepts, so that a bad header cannot allocate gigabytes.
const MAX_FRAME_BYTES: u32 = 16 << 20;
const POLL: Duration = Duration::from_millis(50);

/// How the server feeds its socket.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Write frames while the socket takes them.
    Unbounded,
    /// TCP_NOTSENT_LOWAT, and one frame generated per writable event.
    Lowat,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Unbounded => "unbounded",
            Mode::Lowat => "lowat",
        }
    }
}

/// Options of `screen-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct ScreenServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// How frames are written: unbounded (until the socket refuses) or lowat.
    #[arg(long, value_enum, default_value = "unbounded")]
    pub mode: Mode,
    /// Bytes per frame, header included.
    #[arg(long, default_value = "4kb", value_parser = size_arg, value_name = "SIZE")]
    pub frame: u64,
    /// Most frames generated per second.
    #[arg(long, default_value_t = 30.0, value_name = "N")]
    pub fps: f64,
    /// The socket's send buffer (SO_SNDBUF; Linux doubles it for its bookkeeping).
    #[arg(long, default_value = "120kb", value_parser = size_arg, value_name = "SIZE")]
    pub sndbuf: u64,
    /// TCP_NOTSENT_LOWAT in lowat mode.
    #[arg(long, default_value = "16kb", value_parser = size_arg, value_name = "SIZE")]
    pub lowat: u64,
    /// How often the send buffer is sampled.
    #[arg(long, default_value = "100ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub sample: Duration,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `screen-viewer`.
#[derive(clap::Args, Clone, Debug)]
pub struct ScreenViewerArgs {
    /// The server, as HOST or HOST:PORT (port 5204 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Mean time between clicks.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub click_every: Duration,
    /// No clicks before this long after connecting (the send buffer fills meanwhile).
    #[arg(long, default_value = "2s", value_parser = time_arg, value_name = "TIME")]
    pub warmup: Duration,
    /// Seed of the click moments.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How long to watch.
    #[arg(long, default_value = "30s", value_parser = time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FrameHeader {
    frame: u32,
    click: u32,
    payload_bytes: u32,
}

impl FrameHeader {
    fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut b = [0u8; HEADER_BYTES];
        b[..4].copy_from_slice(FRAME_MAGIC);
        b[4..8].copy_from_slice(&self.frame.to_be_bytes());
        b[8..12].copy_from_slice(&self.click.to_be_bytes());
        b[12..16].copy_from_slice(&self.payload_bytes.to_be_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<FrameHeader> {
        if b.len() < HEADER_BYTES || &b[..4] != FRAME_MAGIC {
            return None;
        }
        let word = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let payload_bytes = word(12);
        (payload_bytes <= MAX_FRAME_BYTES).then_some(FrameHeader {
            frame: word(4),
            click: word(8),
            payload_bytes,
        })
    }
}

/// `screen-server`: shares a "screen" with each viewer until `--duration` or a signal.
pub fn run_server(args: &ScreenServerArgs) -> anyhow::Result<()> {
    if !(args.fps > 0.0 && args.fps <= 1000.0) {
        return Err(crate::common::UsageError(format!(
            "--fps: cannot use '{}' (from above 0 to 1000, try 30)",
            args.fps
        ))
        .into());
    }
    crate::common::run_tcp_server_program(
        args.out.as_ref(),
        args.bind.as_deref(),
        args.port,
        |l, out, stop| {
            let a = args.clone();
            announce_and_serve(
                "screen-server",
                l,
                out,
                stop,
                args.duration,
                move |stream, conn, clock, out, stop| {
                    server_connection(stream, conn, &a, clock, out, stop)
                },
            )
        },
    )
}

fn server_connection(
    stream: TcpStream,
    conn: u64,
    args: &ScreenServerArgs,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let fd = stream.as_fd();
    let sndbuf = libc::c_int::try_from(args.sndbuf).unwrap_or(libc::c_int::MAX);
    crate::sys::set_int_option(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, sndbuf)
        .context("setting SO_SNDBUF")?;
    if args.mode == Mode::Lowat {
        let lowat = libc::c_int::try_from(args.lowat).unwrap_or(libc::c_int::MAX);
        crate::sys::set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, lowat)
            .context("setting TCP_NOTSENT_LOWAT")?;
    }
    stream.set_nodelay(true)?;

    let latest_click = Arc::new(AtomicU32::new(0));
    let done = Stop::new();
    let reader = {
        let s = stream.try_clone()?;
        let (latest, done, stop) = (latest_click.clone(), done.clone(), stop.clone());
        std::thread::spawn(move || read_clicks(s, &latest, &done, &stop))
    };
    let sampler = {
        let s = stream.try_clone()?;
        let (o, done, stop, clock, every) =
            (out.clone(), done.clone(), stop.clone(), *clock, args.sample);
        std::thread::spawn(move || sample_send_queue(&s, conn, every, &clock, &o, &done, &stop))
    };

    let r = write_frames(&stream, args, clock, &latest_click, &done, stop);
    done.request();
    let _ = reader.join();
    let unsent = sampler.join().unwrap_or_default();
    let (frames, bytes) = *r.as_ref().unwrap_or(&(0, 0));
    let pct = Percentiles::of(&unsent);
    out.emit(&Record::ScreenServerSummary {
        t_s: clock.t_s(),
        conn,
        mode: args.mode.name().into(),
        frames,
        bytes,
        unsent_bytes_p50: pct.map(|p| p.p50),
        unsent_bytes_max: pct.map(|p| p.max),
    });
    r.map(|_| ())
}

/// The frame loop; returns frames and bytes written. Ends when the viewer leaves.
fn write_frames(
    stream: &TcpStream,
    args: &ScreenServerArgs,
    clock: &Clock,
    latest_click: &AtomicU32,
    done: &Stop,
    stop: &Stop,
) -> anyhow::Result<(u64, u64)> {
    stream.set_nonblocking(true)?;
    let frame_gap = Duration::from_secs_f64(1.0 / args.fps);
    let frame_bytes = usize::try_from(args.frame)
        .unwrap_or(usize::MAX)
        .clamp(HEADER_BYTES, MAX_FRAME_BYTES as usize);
    let mut payload = vec![0u8; frame_bytes];
    let mut next_frame = clock.elapsed();
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut w = stream;
    while !stop.requested() && !done.requested() {
        // Wait for room first, then draw: in lowat mode "room" means the unsent bytes fell
        // below TCP_NOTSENT_LOWAT, so the frame is generated just in time; without the option
        // it means the buffer has space, which keeps it full of frames drawn earlier.
        if !crate::sys::wait_writable(stream.as_fd(), POLL)? {
            continue;
        }
        let now = clock.elapsed();
        if now < next_frame {
            std::thread::sleep(next_frame - now);
        }
        next_frame = next_frame.max(now) + frame_gap;
        frames += 1;
        let header = FrameHeader {
            frame: u32::try_from(frames).unwrap_or(u32::MAX),
            click: latest_click.load(Ordering::Relaxed),
            payload_bytes: (frame_bytes - HEADER_BYTES) as u32,
        };
        payload[..HEADER_BYTES].copy_from_slice(&header.encode());
        let mut off = 0;
        while off < payload.len() {
            match w.write(&payload[off..]) {
                Ok(0) => return Ok((frames, bytes)),
                Ok(n) => {
                    off += n;
                    bytes += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if stop.requested() || done.requested() {
                        return Ok((frames, bytes));
                    }
                    crate::sys::wait_writable(stream.as_fd(), POLL)?;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_disconnect(&e) => return Ok((frames, bytes)),
                Err(e) => return Err(e).context("writing a frame"),
            }
        }
    }
    Ok((frames, bytes))
}

/// Reads clicks until the viewer leaves; keeps the latest click number.
fn read_clicks(mut s: TcpStream, latest: &AtomicU32, done: &Stop, stop: &Stop) {
    let _ = s.set_read_timeout(Some(POLL));
    let mut buf = Vec::new();
    let mut chunk = [0u8; 256];
    while !stop.requested() && !done.requested() {
        match s.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
        let whole = buf.len() / 8 * 8;
        for c in buf[..whole].chunks_exact(8) {
            if &c[..4] == CLICK_MAGIC {
                let n = u32::from_be_bytes([c[4], c[5], c[6], c[7]]);
                latest.fetch_max(n, Ordering::Relaxed);
            }
        }
        buf.drain(..whole);
    }
    // The viewer left (or the program stops): the frame loop ends too.
    done.request();
}

/// Samples the send queue every `every`; returns the unsent bytes of every sample.
fn sample_send_queue(
    s: &TcpStream,
    conn: u64,
    every: Duration,
    clock: &Clock,
    out: &JsonLines,
    done: &Stop,
    stop: &Stop,
) -> Vec<f64> {
    let mut unsent = Vec::new();
    let mut next = clock.elapsed();
    while !stop.requested() && !done.requested() {
        let Ok(q) = crate::sys::send_queue(s.as_fd()) else {
            break;
        };
        out.emit(&Record::SendQueue {
            t_s: clock.t_s(),
            conn,
            queued_bytes: q.queued_bytes,
            unsent_bytes: q.unsent_bytes,
        });
        unsent.push(q.unsent_bytes as f64);
        next += every;
        let now = clock.elapsed();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    unsent
}

/// Clicks waiting for the frame that draws them.
#[derive(Debug, Default)]
struct Clicks {
    /// (click number, when it was sent, s on the viewer's clock), in order.
    pending: Vec<(u32, f64)>,
    delays_ms: Vec<f64>,
    clicks: u64,
}

impl Clicks {
    fn clicked(&mut self, n: u32, t_s: f64) {
        self.pending.push((n, t_s));
        self.clicks += 1;
    }

    /// A complete frame drawing clicks up to `drawn` arrived at `t_s`: the records of the
    /// clicks it answers.
    fn frame(&mut self, drawn: u32, t_s: f64) -> Vec<Record> {
        let answered = self.pending.partition_point(|(n, _)| *n <= drawn);
        self.pending
            .drain(..answered)
            .map(|(n, at)| {
                let ms = (t_s - at) * 1e3;
                self.delays_ms.push(ms);
                Record::Click {
                    t_s: at,
                    click: u64::from(n),
                    click_to_frame_ms: Some(ms),
                }
            })
            .collect()
    }
}

/// `screen-viewer`.
pub fn run_viewer(args: &ScreenViewerArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = viewer(args, &out, &Stop::new());
    out.flush();
    r
}

/// Watches the screen of `args.server`, clicking, until `--duration`, the end of the
/// connection or `stop`.
pub fn viewer(args: &ScreenViewerArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("screen-viewer", &clock));
    let target = with_default_port(&args.server, DEFAULT_PORT);
    let addr = resolve(&target)?;
    let mut stream = crate::common::connect_client(&target, &addr)?;
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(10)))?;
    let mut clicker = stream.try_clone()?;

    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let mean_s = args.click_every.as_secs_f64();
    let mut next_click_s = args.warmup.as_secs_f64() + rng.gen_range(0.5..1.5) * mean_s;
    let mut clicks = Clicks::default();
    let (mut frames, mut bytes) = (0u64, 0u64);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let end_s = args.duration.as_secs_f64();
    let mut result = Ok(());
    while !stop.requested() && clock.t_s() < end_s {
        let now_s = clock.t_s();
        if now_s >= next_click_s {
            let n = u32::try_from(clicks.clicks + 1).unwrap_or(u32::MAX);
            let mut m = [0u8; 8];
            m[..4].copy_from_slice(CLICK_MAGIC);
            m[4..].copy_from_slice(&n.to_be_bytes());
            if let Err(e) = clicker.write_all(&m) {
                result = Err(e).context("sending a click");
                break;
            }
            clicks.clicked(n, now_s);
            next_click_s = now_s + rng.gen_range(0.5..1.5) * mean_s;
        }
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => {
                bytes += n as u64;
                buf.extend_from_slice(&chunk[..n]);
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => {
                result = Err(e).context("reading frames");
                break;
            }
        }
        let t = clock.t_s();
        let mut off = 0;
        while buf.len() - off >= HEADER_BYTES {
            let Some(h) = FrameHeader::decode(&buf[off..]) else {
                result = Err(anyhow::anyhow!("not a screen-server frame at byte {bytes}"));
                break;
            };
            let len = HEADER_BYTES + h.payload_bytes as usize;
            if buf.len() - off < len {
                break;
            }
            off += len;
            frames += 1;
            for r in clicks.frame(h.click, t) {
                out.emit(&r);
            }
        }
        buf.drain(..off);
        if result.is_err() {
            break;
        }
    }
    for (n, at) in &clicks.pending {
        out.emit(&Record::Click {
            t_s: *at,
            click: u64::from(*n),
            click_to_frame_ms: None,
        });
    }
    let p = Percentiles::of(&clicks.delays_ms);
    out.emit(&Record::ScreenSummary {
        t_s: clock.t_s(),
        frames,
        bytes,
        clicks: clicks.clicks,
        answered: clicks.delays_ms.len() as u64,
        click_to_frame_ms_p50: p.map(|p| p.p50),
        click_to_frame_ms_p95: p.map(|p| p.p95),
        click_to_frame_ms_max: p.map(|p| p.max),
    });
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_header_round_trips_and_a_bad_one_is_refused() {
        let h = FrameHeader {
            frame: 7,
            click: 3,
            payload_bytes: 4080,
        };
        assert_eq!(FrameHeader::decode(&h.encode()), Some(h));
        let mut b = h.encode();
        b[0] = b'X';
        assert_eq!(FrameHeader::decode(&b), None);
        let huge = FrameHeader {
            payload_bytes: MAX_FRAME_BYTES + 1,
            ..h
        };
        assert_eq!(FrameHeader::decode(&huge.encode()), None);
        assert_eq!(FrameHeader::decode(&b[..10]), None);
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic_the_frame_parser_and_what_it_reads_re_encodes(
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)
        ) {
            if let Some(h) = FrameHeader::decode(&b) {
                proptest::prop_assert_eq!(&h.encode()[..], &b[..HEADER_BYTES]);
                proptest::prop_assert!(h.payload_bytes <= MAX_FRAME_BYTES);
            }
        }
    }

    #[test]
    fn a_frame_answers_every_click_it_draws_and_only_those() {
        let mut c = Clicks::default();
        c.clicked(1, 1.0);
        c.clicked(2, 1.5);
        c.clicked(3, 2.0);
        assert!(c.frame(0, 1.2).is_empty());
        let r = c.frame(2, 3.0);
        assert_eq!(r.len(), 2);
        assert!(
            matches!(r[0], Record::Click { click: 1, click_to_frame_ms: Some(ms), .. } if (ms - 2000.0).abs() < 1e-6)
        );
        assert!(
            matches!(r[1], Record::Click { click: 2, click_to_frame_ms: Some(ms), .. } if (ms - 1500.0).abs() < 1e-6)
        );
        assert_eq!(c.pending, vec![(3, 2.0)]);
        assert!(c.frame(2, 3.1).is_empty());
    }

    fn loopback_run(mode: Mode) -> (Vec<Record>, Vec<Record>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server_out = JsonLines::memory();
        let stop = Stop::new();
        let args = ScreenServerArgs {
            port,
            bind: None,
            mode,
            frame: 4000,
            fps: 50.0,
            sndbuf: 120_000,
            lowat: 16_000,
            sample: Duration::from_millis(50),
            duration: None,
            out: None,
        };
        let server = {
            let (o, s) = (server_out.clone(), stop.clone());
            std::thread::spawn(move || {
                let a = args.clone();
                announce_and_serve(
                    "screen-server",
                    listener,
                    &o,
                    &s,
                    None,
                    move |stream, conn, clock, out, stop| {
                        server_connection(stream, conn, &a, clock, out, stop)
                    },
                )
            })
        };
        let viewer_out = JsonLines::memory();
        let vargs = ScreenViewerArgs {
            server: format!("127.0.0.1:{port}"),
            click_every: Duration::from_millis(100),
            warmup: Duration::from_millis(100),
            seed: 3,
            duration: Duration::from_millis(900),
            out: None,
        };
        viewer(&vargs, &viewer_out, &Stop::new()).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        stop.request();
        server.join().unwrap().unwrap();
        (
            crate::parse_records(&viewer_out.contents()).unwrap(),
            crate::parse_records(&server_out.contents()).unwrap(),
        )
    }

    #[test]
    fn on_loopback_every_click_is_drawn_and_the_server_samples_its_queue() {
        for mode in [Mode::Unbounded, Mode::Lowat] {
            let (viewer, server) = loopback_run(mode);
            let Some(Record::ScreenSummary {
                frames,
                clicks,
                answered,
                ..
            }) = viewer.last().cloned()
            else {
                panic!("no summary: {viewer:?}");
            };
            assert!(frames > 10, "{mode:?}: {frames} frames");
            assert!(clicks >= 3, "{mode:?}: {clicks} clicks");
            assert!(answered + 1 >= clicks, "{mode:?}: {answered} of {clicks}");
            assert!(server.iter().any(|r| matches!(r, Record::SendQueue { .. })));
            assert!(server.iter().any(
                |r| matches!(r, Record::ScreenServerSummary { mode: m, frames, .. } if m == mode.name() && *frames > 10)
            ));
        }
    }
}

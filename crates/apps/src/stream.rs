//! `stream-server` / `stream-client`: a "streaming video" transfer over TCP. The server writes
//! chunks of `bitrate × chunk` bytes on a media schedule; the client models a playback buffer
//! ([`crate::playback`]) and records the gaps between reads that returned data, goodput per
//! second, and stalls.
//!
//! The client asks for everything in a 32-byte request: `"LLS1"`, four zero bytes, the bitrate
//! in bit/s (u64), the chunk length in µs (u32), how far ahead of the media clock the server
//! may run in ms (u32), and the media length in ms (u64), all big-endian. Chunk `k` becomes due
//! at `k × chunk − ahead` after the request. The server writes each chunk when it is due; when
//! the socket could not take the previous chunks in time it writes the next one at once, as
//! fast as the socket takes it, until it is back on schedule (it never runs further ahead than
//! `ahead`). So `--ahead 0s` is a live stream at the bitrate, and a large `--ahead` is a video
//! server filling the client's buffer as fast as the network allows. The server closes its side
//! after the last chunk.
//!
//! The client stops after `--duration` (the watching time, also the media length asked for), at
//! end of file, or on a signal.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use wire::{Instant, Rate};

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, ms, positive_time_arg, rate_arg, resolve, secs, start_record, time_arg,
    with_default_port, Clock, JsonLines, Stop, UsageError,
};
use crate::playback::{Gaps, Playback, PlaybackEvent, PlaybackParams, Stall};
use crate::records::Record;
use crate::stats::{mbps, IntervalMeter, Percentiles};

const MAGIC: &[u8; 4] = b"LLS1";
const DEFAULT_PORT: u16 = 5203;
const POLL: Duration = Duration::from_millis(50);
/// Largest chunk a server agrees to write, so that a bad request cannot allocate gigabytes.
const MAX_CHUNK_BYTES: u64 = 64 << 20;

/// Options of `stream-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct StreamServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Reporting interval of the sender's `interval` lines.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `stream-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct StreamClientArgs {
    /// The server, as HOST or HOST:PORT (port 5203 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Media bitrate (tc units).
    #[arg(long, default_value = "8mbit", value_parser = rate_arg, value_name = "RATE")]
    pub bitrate: Rate,
    /// Media time per chunk the server writes.
    #[arg(long, default_value = "250ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub chunk: Duration,
    /// How far ahead of the media clock the server may send (0s: live).
    #[arg(long, default_value = "0s", value_parser = time_arg, value_name = "TIME")]
    pub ahead: Duration,
    /// Watching time, and the length of media asked for.
    #[arg(long, default_value = "30s", value_parser = time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Media buffered before playback starts.
    #[arg(long, default_value = "2s", value_parser = time_arg, value_name = "TIME")]
    pub startup: Duration,
    /// Media buffered before playback resumes after a stall [default: --startup].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub rebuffer: Option<Duration>,
    /// Write a `gap` line for every gap between reads longer than this.
    #[arg(long, default_value = "100ms", value_parser = time_arg, value_name = "TIME")]
    pub gap_threshold: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The request a client sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Request {
    bitrate_bps: u64,
    chunk: Duration,
    ahead: Duration,
    media: Duration,
}

impl Request {
    fn encode(&self) -> [u8; 32] {
        let mut b = [0u8; 32];
        b[..4].copy_from_slice(MAGIC);
        b[8..16].copy_from_slice(&self.bitrate_bps.to_be_bytes());
        let chunk_us = u32::try_from(self.chunk.as_micros()).unwrap_or(u32::MAX);
        b[16..20].copy_from_slice(&chunk_us.to_be_bytes());
        let ahead_ms = u32::try_from(self.ahead.as_millis()).unwrap_or(u32::MAX);
        b[20..24].copy_from_slice(&ahead_ms.to_be_bytes());
        let media_ms = u64::try_from(self.media.as_millis()).unwrap_or(u64::MAX);
        b[24..32].copy_from_slice(&media_ms.to_be_bytes());
        b
    }

    fn decode(b: &[u8; 32]) -> Option<Request> {
        if &b[..4] != MAGIC {
            return None;
        }
        let bitrate_bps = u64::from_be_bytes(b[8..16].try_into().ok()?);
        let chunk_us = u32::from_be_bytes(b[16..20].try_into().ok()?);
        let ahead_ms = u32::from_be_bytes(b[20..24].try_into().ok()?);
        let media_ms = u64::from_be_bytes(b[24..32].try_into().ok()?);
        if bitrate_bps == 0 || chunk_us == 0 {
            return None;
        }
        Some(Request {
            bitrate_bps,
            chunk: Duration::from_micros(u64::from(chunk_us)),
            ahead: Duration::from_millis(u64::from(ahead_ms)),
            media: Duration::from_millis(media_ms.min(24 * 3600 * 1000)),
        })
    }

    /// Bytes per chunk: bitrate × chunk / 8, at least one.
    fn chunk_bytes(&self) -> u64 {
        let bits = u128::from(self.bitrate_bps) * self.chunk.as_nanos() / 1_000_000_000;
        u64::try_from(bits / 8)
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_CHUNK_BYTES)
    }

    /// Number of chunks: media / chunk, rounded up.
    fn chunks(&self) -> u64 {
        let n = self.media.as_nanos().div_ceil(self.chunk.as_nanos());
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    /// When chunk `k` may be written, relative to the start of the stream.
    fn due(&self, k: u64) -> Duration {
        let t = self
            .chunk
            .saturating_mul(u32::try_from(k).unwrap_or(u32::MAX));
        t.saturating_sub(self.ahead)
    }
}

/// `stream-server`: streams to each client as asked, until `--duration` or a signal.
pub fn run_server(args: &StreamServerArgs) -> anyhow::Result<()> {
    crate::common::run_tcp_server_program(
        args.out.as_ref(),
        args.bind.as_deref(),
        args.port,
        |l, out, stop| serve(l, args, out, stop),
    )
}

/// Serves streams on `listener` until `stop` or `args.duration`.
pub fn serve(
    listener: TcpListener,
    args: &StreamServerArgs,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let interval = args.interval;
    announce_and_serve(
        "stream-server",
        listener,
        out,
        stop,
        args.duration,
        move |stream, conn, clock, out, stop| {
            server_connection(stream, conn, interval, clock, out, stop)
        },
    )
}

fn server_connection(
    mut stream: TcpStream,
    conn: u64,
    interval: Duration,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut b = [0u8; 32];
    stream.read_exact(&mut b).context("no request")?;
    let req = Request::decode(&b).context("not a stream-client request")?;
    stream.set_write_timeout(Some(POLL))?;
    let start = clock.now();
    let mut meter = IntervalMeter::new(start, interval);
    let chunk = vec![0u8; req.chunk_bytes() as usize];
    let report = |done: Vec<crate::stats::IntervalBytes>| {
        for iv in done {
            out.emit(&Record::Interval {
                t_s: secs(iv.end),
                conn,
                role: "sender".into(),
                interval_s: interval.as_secs_f64(),
                bytes: iv.bytes,
                goodput_mbps: mbps(iv.bytes, interval),
            });
        }
    };
    'chunks: for k in 0..req.chunks() {
        let due = start + req.due(k);
        // Wait for the chunk's time, waking often enough to honour stop and report intervals.
        loop {
            if stop.requested() {
                break 'chunks;
            }
            let now = clock.now();
            report(meter.poll(now));
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(POLL));
        }
        let mut written = 0;
        while written < chunk.len() {
            if stop.requested() {
                break 'chunks;
            }
            let n = match stream.write(&chunk[written..]) {
                Ok(n) => n,
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) if is_disconnect(&e) => break 'chunks,
                Err(e) => return Err(e).context("write failed"),
            };
            written += n;
            report(meter.add(clock.now(), n as u64));
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
    let dur = clock.now() - start;
    out.emit(&Record::Total {
        t_s: clock.t_s(),
        conn,
        role: "sender".into(),
        duration_s: dur.as_secs_f64(),
        bytes: meter.total(),
        goodput_mbps: mbps(meter.total(), dur),
        peer_bytes: None,
    });
    // Wait for the client to close, so that the last bytes are not reset away.
    stream.set_read_timeout(Some(POLL))?;
    let mut sink = [0u8; 1024];
    let until = clock.now() + Duration::from_secs(5);
    while clock.now() < until && !stop.requested() {
        match stream.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// `stream-client`: watches one stream.
pub fn run_client(args: &StreamClientArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = client(args, &out, &Stop::new());
    out.flush();
    r
}

/// Watches one stream from `args.server` and writes its records.
pub fn client(args: &StreamClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let req = Request {
        bitrate_bps: args.bitrate.bits_per_sec,
        chunk: args.chunk,
        ahead: args.ahead,
        media: args.duration,
    };
    if args.chunk > Duration::from_secs(4_000) || req.chunk_bytes() >= MAX_CHUNK_BYTES {
        return Err(UsageError(format!(
            "--chunk '{}' at --bitrate '{}' makes chunks larger than 64 MB (try --chunk 250ms)",
            wire::units::format_duration(args.chunk),
            args.bitrate
        ))
        .into());
    }
    let clock = Clock::start();
    out.emit(&start_record("stream-client", &clock));
    let target = with_default_port(&args.server, DEFAULT_PORT);
    let addr = resolve(&target)?;
    let mut stream = crate::common::connect_client(&target, &addr)?;
    out.emit(&Record::Connected {
        t_s: clock.t_s(),
        conn: 1,
        peer: addr.to_string(),
    });
    stream
        .write_all(&req.encode())
        .context("cannot send the request")?;
    let requested_at = clock.now();
    let end = requested_at + args.duration;
    let params = PlaybackParams {
        bitrate: args.bitrate,
        startup: args.startup,
        rebuffer: args.rebuffer.unwrap_or(args.startup),
    };
    let mut watch = Watch {
        playback: Playback::new(params, requested_at),
        gaps: Gaps::new(),
        meter: IntervalMeter::new(requested_at, Duration::from_secs(1)),
        gap_threshold: args.gap_threshold,
        out,
    };
    stream.set_read_timeout(Some(POLL))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut last_data = requested_at;
    loop {
        let now = clock.now();
        if now >= end || stop.requested() {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => {
                let now = clock.now();
                let ev = watch.playback.on_end_of_stream(now);
                watch.events(ev);
                break;
            }
            Ok(n) => {
                let now = clock.now();
                last_data = now;
                watch.on_read(now, n as u64);
            }
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                let now = clock.now();
                watch.tick(now);
            }
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("read failed"),
        }
    }
    let now = clock.now().min(end);
    watch.tick(now);
    let ev = watch.playback.finish(now);
    watch.events(ev);
    let stalls = watch.playback.stalls();
    let gaps = Percentiles::of(watch.gaps.samples_ms());
    let longest = watch.gaps.longest();
    let received = watch.meter.total();
    let dur = last_data - requested_at;
    out.emit(&Record::StreamSummary {
        t_s: clock.t_s(),
        bytes: received,
        duration_s: dur.as_secs_f64(),
        goodput_mbps: mbps(received, dur),
        media_received_s: watch.playback.media_received().as_secs_f64(),
        longest_gap_ms: longest.map(|(g, _)| ms(g)),
        longest_gap_at_s: longest.map(|(_, t)| secs(t)),
        gap_p50_ms: gaps.map(|p| p.p50),
        gap_p99_ms: gaps.map(|p| p.p99),
        startup_delay_s: watch.playback.startup_delay().map(|d| d.as_secs_f64()),
        stalls: stalls.len() as u64,
        // fold from +0.0: an empty f64 sum is -0.0, which reads oddly in JSON.
        stall_total_s: stalls
            .iter()
            .fold(0.0, |acc, s| acc + s.duration.as_secs_f64()),
    });
    Ok(())
}

/// The client's models and where their records go.
struct Watch<'a> {
    playback: Playback,
    gaps: Gaps,
    meter: IntervalMeter,
    gap_threshold: Duration,
    out: &'a JsonLines,
}

impl Watch<'_> {
    fn on_read(&mut self, now: Instant, bytes: u64) {
        let done = self.meter.add(now, bytes);
        self.seconds(done);
        if let Some(gap) = self.gaps.on_read(now) {
            if gap > self.gap_threshold {
                self.out.emit(&Record::Gap {
                    t_s: secs(now),
                    gap_ms: ms(gap),
                });
            }
        }
        let ev = self.playback.on_data(now, bytes);
        self.events(ev);
    }

    fn tick(&mut self, now: Instant) {
        let done = self.meter.poll(now);
        self.seconds(done);
        let ev = self.playback.advance(now);
        self.events(ev);
    }

    fn seconds(&mut self, done: Vec<crate::stats::IntervalBytes>) {
        for iv in done {
            let max_gap = self.gaps.take_interval_max();
            self.out.emit(&Record::StreamSecond {
                t_s: secs(iv.end),
                bytes: iv.bytes,
                goodput_mbps: mbps(iv.bytes, self.meter.interval()),
                max_gap_ms: max_gap.map(ms),
                buffer_s: self.playback.buffered(iv.end).as_secs_f64(),
                playing: self.playback.playing(iv.end),
            });
        }
    }

    fn events(&mut self, events: Vec<PlaybackEvent>) {
        for e in events {
            match e {
                PlaybackEvent::Started { at, startup_delay } => {
                    self.out.emit(&Record::PlaybackStart {
                        t_s: secs(at),
                        startup_delay_s: startup_delay.as_secs_f64(),
                    })
                }
                PlaybackEvent::StallEnded(Stall {
                    start,
                    duration,
                    ongoing,
                }) => self.out.emit(&Record::Stall {
                    t_s: secs(start),
                    duration_s: duration.as_secs_f64(),
                    ongoing,
                }),
                PlaybackEvent::StallStarted { .. } => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::parse_records;

    #[test]
    fn requests_round_trip_and_size_chunks_from_the_bitrate() {
        let r = Request {
            bitrate_bps: 8_000_000,
            chunk: Duration::from_millis(250),
            ahead: Duration::from_secs(1),
            media: Duration::from_millis(10_100),
        };
        assert_eq!(Request::decode(&r.encode()), Some(r));
        assert_eq!(r.chunk_bytes(), 250_000);
        assert_eq!(r.chunks(), 41);
        assert_eq!(r.due(0), Duration::ZERO);
        assert_eq!(r.due(4), Duration::ZERO);
        assert_eq!(r.due(6), Duration::from_millis(500));
        let mut bad = r.encode();
        bad[0] = b'x';
        assert_eq!(Request::decode(&bad), None);
    }

    fn client_args(port: u16) -> StreamClientArgs {
        StreamClientArgs {
            server: format!("127.0.0.1:{port}"),
            bitrate: Rate::from_mbit(4),
            chunk: Duration::from_millis(100),
            ahead: Duration::from_millis(200),
            duration: Duration::from_millis(1500),
            startup: Duration::from_millis(300),
            rebuffer: None,
            gap_threshold: Duration::from_millis(50),
            out: None,
        }
    }

    #[test]
    fn loopback_stream_plays_and_reports_seconds_gaps_and_a_summary() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Stop::new();
        let (so, ss) = (JsonLines::memory(), stop.clone());
        let server_out = so.clone();
        let sargs = StreamServerArgs {
            port: 0,
            bind: None,
            duration: None,
            interval: Duration::from_millis(500),
            out: None,
        };
        let server = std::thread::spawn(move || serve(listener, &sargs, &so, &ss).unwrap());
        let out = JsonLines::memory();
        client(&client_args(port), &out, &Stop::new()).unwrap();
        stop.request();
        server.join().unwrap();
        let recs = parse_records(&out.contents()).unwrap();
        let summary = recs
            .iter()
            .find_map(|r| match r {
                Record::StreamSummary {
                    bytes,
                    longest_gap_ms,
                    startup_delay_s,
                    media_received_s,
                    ..
                } => Some((*bytes, *longest_gap_ms, *startup_delay_s, *media_received_s)),
                _ => None,
            })
            .expect("a summary");
        let (bytes, longest_gap, startup, media) = summary;
        assert!(bytes > 0);
        // 4 Mbit/s of 100 ms chunks: at most 15 chunks of 50 kB were asked for.
        assert!(bytes <= 15 * 50_000);
        assert!((0.0..=1.5).contains(&media));
        assert!(longest_gap.is_some_and(|g| g > 0.0 && g < 1000.0));
        assert!(
            startup.is_some_and(|s| s < 1.2),
            "playback never started: {recs:?}"
        );
        assert!(recs
            .iter()
            .any(|r| matches!(r, Record::StreamSecond { .. })));
        assert!(recs
            .iter()
            .any(|r| matches!(r, Record::PlaybackStart { .. })));
        let server_recs = parse_records(&server_out.contents()).unwrap();
        assert!(server_recs.iter().any(
            |r| matches!(r, Record::Total { role, bytes: b, .. } if role == "sender" && *b >= bytes)
        ));
    }

    #[test]
    fn a_chunk_too_large_is_a_usage_error_quoting_the_values() {
        let mut a = client_args(1);
        a.bitrate = Rate::from_mbit(10_000);
        a.chunk = Duration::from_secs(1);
        let err = client(&a, &JsonLines::memory(), &Stop::new()).unwrap_err();
        let u = err.downcast_ref::<UsageError>().expect("a usage error");
        assert!(u.0.contains("'1s'") && u.0.contains("'10gbit'"), "{u}");
    }
}

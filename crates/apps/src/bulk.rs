//! `bulk-server` / `bulk-client`: one bulk TCP transfer per connection, in either direction,
//! for a fixed time, with bytes and goodput per interval and in total.
//!
//! The client opens the connection and sends a 16-byte request: `"LLB1"`, the direction
//! (0 = download: the server sends; 1 = upload: the client sends), three zero bytes, and the
//! duration in milliseconds (u64, big-endian). The sender writes for that long and then shuts
//! its side down; the receiver reads to end of file. After an upload the server answers with
//! the byte count it read (u64, big-endian), so the client's `total` line carries both ends'
//! counts. The sender's counts are bytes accepted by the socket, the receiver's are bytes read
//! by the application: only the receiver's are goodput.
//!
//! Three options reach into TCP, for the delayed-ACK experiment: the sender's write size
//! (`--write-size`, each `write()` call hands the socket that many bytes), the server's
//! receive buffer (`--rcvbuf`, `SO_RCVBUF` on the listening socket, so that the window scale
//! and the first window offered already follow it) and `--quickack` (the receiver sets
//! `TCP_QUICKACK` after every read, so that its TCP acknowledges at once instead of deferring
//! the ACK). Everything else (congestion control, the other buffers) stays the host's.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::common::{
    announce_and_serve, positive_time_arg, secs, start_record, time_arg, Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::{mbps, IntervalMeter};

const MAGIC: &[u8; 4] = b"LLB1";
const DEFAULT_PORT: u16 = 5201;
/// Socket timeouts: how often blocked loops look at the stop flag and the interval clock.
const POLL: Duration = Duration::from_millis(100);
/// How long a receiver waits past the agreed duration for the sender's end of file.
const GRACE: Duration = Duration::from_secs(5);
/// Longest transfer a server agrees to, so that a stray request cannot hold it for ever.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Bytes handed to the socket per `write()` unless `--write-size` says otherwise.
pub const DEFAULT_WRITE_SIZE: u32 = 128 * 1024;
/// Largest `--write-size` and `--rcvbuf` accepted, bytes.
const MAX_SIZE: i64 = 64 << 20;

/// Options of `bulk-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct BulkServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Reporting interval of the per-connection `interval` lines.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Bytes per write() when this side sends (downloads), e.g. `--write-size 1000`.
    #[arg(long, default_value_t = DEFAULT_WRITE_SIZE, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(1..=MAX_SIZE))]
    pub write_size: u32,
    /// SO_RCVBUF of the listening socket, inherited by every connection, e.g.
    /// `--rcvbuf 8192` (Linux doubles it for its bookkeeping) [default: the host's
    /// autotuned buffer].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u32).range(1..=MAX_SIZE))]
    pub rcvbuf: Option<u32>,
    /// When this side receives (uploads), set TCP_QUICKACK after every read: acknowledge at
    /// once rather than defer the ACK.
    #[arg(long)]
    pub quickack: bool,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Which way the bytes flow, seen from the client.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// The server sends, the client receives.
    Download,
    /// The client sends, the server receives.
    Upload,
}

/// Options of `bulk-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct BulkClientArgs {
    /// The server, as HOST or HOST:PORT (port 5201 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Which way the bytes flow.
    #[arg(long, value_enum, default_value_t = Direction::Download)]
    pub direction: Direction,
    /// How long to transfer.
    #[arg(long, default_value = "10s", value_parser = time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Reporting interval of the `interval` lines.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Bytes per write() when this side sends (uploads), e.g. `--write-size 1000`.
    #[arg(long, default_value_t = DEFAULT_WRITE_SIZE, value_name = "BYTES",
          value_parser = clap::value_parser!(u32).range(1..=MAX_SIZE))]
    pub write_size: u32,
    /// When this side receives (downloads), set TCP_QUICKACK after every read: acknowledge
    /// at once rather than defer the ACK.
    #[arg(long)]
    pub quickack: bool,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// `bulk-server`: binds, then serves until `--duration` or a signal.
pub fn run_server(args: &BulkServerArgs) -> anyhow::Result<()> {
    crate::common::run_tcp_server_program(
        args.out.as_ref(),
        args.bind.as_deref(),
        args.port,
        |l, out, stop| serve(l, args, out, stop),
    )
}

/// Serves bulk transfers on `listener` until `stop` or `args.duration`.
pub fn serve(
    listener: TcpListener,
    args: &BulkServerArgs,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    if let Some(bytes) = args.rcvbuf {
        crate::sys::set_int_option(
            listener.as_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            bytes as libc::c_int,
        )
        .with_context(|| format!("--rcvbuf {bytes}: cannot set SO_RCVBUF"))?;
    }
    let tuning = Tuning {
        write_size: args.write_size,
        quickack: args.quickack,
    };
    let interval = args.interval;
    announce_and_serve(
        "bulk-server",
        listener,
        out,
        stop,
        args.duration,
        move |stream, conn, clock, out, stop| {
            server_connection(stream, conn, interval, tuning, clock, out, stop)
        },
    )
}

fn server_connection(
    mut stream: TcpStream,
    conn: u64,
    interval: Duration,
    tuning: Tuning,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut req = [0u8; 16];
    stream.read_exact(&mut req).context("no request")?;
    if &req[..4] != MAGIC {
        anyhow::bail!("not a bulk-client request");
    }
    let duration =
        Duration::from_millis(u64::from_be_bytes(req[8..16].try_into()?)).min(MAX_DURATION);
    let ctx = Ctx {
        conn,
        interval,
        tuning,
        clock,
        out,
        stop,
    };
    match req[4] {
        0 => {
            send_for(&mut stream, duration, &ctx)?;
            // Let the client read to the end before the socket closes.
            let _ = drain(&mut stream, stop);
        }
        1 => {
            let bytes = receive_to_eof(&mut stream, duration + GRACE, &ctx, None)?;
            stream.set_write_timeout(Some(Duration::from_secs(5)))?;
            stream.write_all(&bytes.to_be_bytes())?;
            let _ = stream.shutdown(Shutdown::Write);
        }
        d => anyhow::bail!("unknown direction {d}"),
    }
    Ok(())
}

/// `bulk-client`: one transfer, then a `total` line.
pub fn run_client(args: &BulkClientArgs) -> anyhow::Result<()> {
    crate::common::run_client_program(args.out.as_ref(), |out, stop| client(args, out, stop))
}

/// One bulk transfer against `args.server`.
pub fn client(args: &BulkClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("bulk-client", &clock));
    let mut stream = crate::common::connect_tcp(&args.server, DEFAULT_PORT, &clock, out)?;
    let mut req = [0u8; 16];
    req[..4].copy_from_slice(MAGIC);
    req[4] = match args.direction {
        Direction::Download => 0,
        Direction::Upload => 1,
    };
    let duration_ms = u64::try_from(args.duration.as_millis()).unwrap_or(u64::MAX);
    req[8..].copy_from_slice(&duration_ms.to_be_bytes());
    stream.write_all(&req).context("cannot send the request")?;
    let ctx = Ctx {
        conn: 1,
        interval: args.interval,
        tuning: Tuning {
            write_size: args.write_size,
            quickack: args.quickack,
        },
        clock: &clock,
        out,
        stop,
    };
    match args.direction {
        Direction::Download => {
            receive_to_eof(&mut stream, args.duration + GRACE, &ctx, None)?;
        }
        Direction::Upload => {
            let start = clock.now();
            let sent = send_for_quiet(&mut stream, args.duration, &ctx)?;
            stream.set_read_timeout(Some(GRACE))?;
            let mut count = [0u8; 8];
            let peer_bytes = stream
                .read_exact(&mut count)
                .ok()
                .map(|_| u64::from_be_bytes(count));
            let dur = clock.now() - start;
            // The receiver's count includes what was still in the send buffer and the queue
            // when the sender stopped writing, and it arrives only once all of it is read: so
            // it is divided by the time until it arrived, not by the writing time, which would
            // give more than the path's capacity.
            let dur = match peer_bytes {
                Some(_) => dur,
                None => args.duration.min(dur),
            };
            out.emit(&Record::Total {
                t_s: clock.t_s(),
                conn: 1,
                role: "sender".into(),
                duration_s: dur.as_secs_f64(),
                bytes: sent,
                goodput_mbps: mbps(peer_bytes.unwrap_or(sent), dur),
                peer_bytes,
            });
        }
    }
    Ok(())
}

/// How one side drives its socket.
#[derive(Clone, Copy, Debug)]
struct Tuning {
    /// Bytes per `write()` when sending.
    write_size: u32,
    /// `TCP_QUICKACK` after every read when receiving.
    quickack: bool,
}

/// What a transfer loop needs to report.
struct Ctx<'a> {
    conn: u64,
    interval: Duration,
    tuning: Tuning,
    clock: &'a Clock,
    out: &'a JsonLines,
    stop: &'a Stop,
}

impl Ctx<'_> {
    fn report(&self, role: &str, done: Vec<crate::stats::IntervalBytes>) {
        for iv in done {
            self.out.emit(&Record::Interval {
                t_s: secs(iv.end),
                conn: self.conn,
                role: role.into(),
                interval_s: self.interval.as_secs_f64(),
                bytes: iv.bytes,
                goodput_mbps: mbps(iv.bytes, self.interval),
            });
        }
    }
}

/// Sends for `duration`, then writes the sender's `total` line.
fn send_for(stream: &mut TcpStream, duration: Duration, ctx: &Ctx<'_>) -> anyhow::Result<u64> {
    let start = ctx.clock.now();
    let sent = send_for_quiet(stream, duration, ctx)?;
    let dur = (ctx.clock.now() - start).min(duration);
    ctx.out.emit(&Record::Total {
        t_s: ctx.clock.t_s(),
        conn: ctx.conn,
        role: "sender".into(),
        duration_s: dur.as_secs_f64(),
        bytes: sent,
        goodput_mbps: mbps(sent, dur),
        peer_bytes: None,
    });
    Ok(sent)
}

/// Writes zeros for `duration` (or until stop), reporting intervals, then shuts down the
/// sending side. Returns the bytes the socket accepted.
fn send_for_quiet(
    stream: &mut TcpStream,
    duration: Duration,
    ctx: &Ctx<'_>,
) -> anyhow::Result<u64> {
    stream.set_write_timeout(Some(POLL))?;
    let start = ctx.clock.now();
    let end = start + duration;
    let mut meter = IntervalMeter::new(start, ctx.interval);
    let buf = vec![0u8; ctx.tuning.write_size as usize];
    loop {
        let now = ctx.clock.now();
        if now >= end || ctx.stop.requested() {
            break;
        }
        let n = match stream.write(&buf) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) => 0,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            // The receiver went away: the transfer is over, its numbers still count.
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("write failed"),
        };
        let done = meter.add(ctx.clock.now(), n as u64);
        ctx.report("sender", done);
    }
    let done = meter.poll(ctx.clock.now().min(end));
    ctx.report("sender", done);
    let _ = stream.shutdown(Shutdown::Write);
    Ok(meter.total())
}

/// Reads until end of file, `limit` after the start, or stop; reports intervals and a
/// receiver `total`. Returns the bytes read.
fn receive_to_eof(
    stream: &mut TcpStream,
    limit: Duration,
    ctx: &Ctx<'_>,
    peer_bytes: Option<u64>,
) -> anyhow::Result<u64> {
    stream.set_read_timeout(Some(POLL))?;
    let start = ctx.clock.now();
    let end = start + limit;
    let mut meter = IntervalMeter::new(start, ctx.interval);
    let mut buf = vec![0u8; 128 * 1024];
    let mut last_data = start;
    loop {
        let now = ctx.clock.now();
        if now >= end || ctx.stop.requested() {
            break;
        }
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("read failed"),
        };
        if n > 0 && ctx.tuning.quickack {
            // Linux clears quick-ACK mode again by itself (it is not a permanent setting,
            // tcp(7)), so it is set anew after every read.
            crate::sys::set_int_option(stream.as_fd(), libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)
                .context("cannot set TCP_QUICKACK")?;
        }
        let now = ctx.clock.now();
        if n > 0 {
            last_data = now;
        }
        let done = meter.add(now, n as u64);
        ctx.report("receiver", done);
    }
    // The partial last interval is not reported as an interval (it would read as a drop in
    // goodput); it is in the total.
    let dur = last_data - start;
    ctx.out.emit(&Record::Total {
        t_s: ctx.clock.t_s(),
        conn: ctx.conn,
        role: "receiver".into(),
        duration_s: dur.as_secs_f64(),
        bytes: meter.total(),
        goodput_mbps: mbps(meter.total(), dur),
        peer_bytes,
    });
    Ok(meter.total())
}

/// Reads and discards until end of file, [`GRACE`] or stop.
fn drain(stream: &mut TcpStream, stop: &Stop) -> io::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    let start = std::time::Instant::now();
    let mut buf = [0u8; 4096];
    while start.elapsed() < GRACE && !stop.requested() {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

pub(crate) fn is_disconnect(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionAborted
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::parse_records;

    fn server_args() -> BulkServerArgs {
        BulkServerArgs {
            port: 0,
            bind: None,
            duration: Some(Duration::from_secs(10)),
            interval: Duration::from_millis(200),
            write_size: DEFAULT_WRITE_SIZE,
            rcvbuf: None,
            quickack: false,
            out: None,
        }
    }

    fn run_pair(direction: Direction) -> (Vec<Record>, Vec<Record>) {
        run_tuned(direction, server_args(), DEFAULT_WRITE_SIZE)
    }

    fn run_tuned(
        direction: Direction,
        sargs: BulkServerArgs,
        client_write_size: u32,
    ) -> (Vec<Record>, Vec<Record>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server_out = JsonLines::memory();
        let stop = Stop::new();
        let (so, ss) = (server_out.clone(), stop.clone());
        let server = std::thread::spawn(move || serve(listener, &sargs, &so, &ss).unwrap());
        let client_out = JsonLines::memory();
        let args = BulkClientArgs {
            server: format!("127.0.0.1:{port}"),
            direction,
            duration: Duration::from_millis(700),
            interval: Duration::from_millis(200),
            write_size: client_write_size,
            quickack: false,
            out: None,
        };
        client(&args, &client_out, &Stop::new()).unwrap();
        stop.request();
        server.join().unwrap();
        (
            parse_records(&client_out.contents()).unwrap(),
            parse_records(&server_out.contents()).unwrap(),
        )
    }

    fn total(recs: &[Record], want_role: &str) -> (u64, Option<u64>, f64) {
        recs.iter()
            .find_map(|r| match r {
                Record::Total {
                    role,
                    bytes,
                    peer_bytes,
                    goodput_mbps,
                    ..
                } if role == want_role => Some((*bytes, *peer_bytes, *goodput_mbps)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {want_role} total in {recs:?}"))
    }

    #[test]
    fn download_moves_bytes_and_both_ends_report_the_same_count() {
        let (client, server) = run_pair(Direction::Download);
        let (received, _, goodput) = total(&client, "receiver");
        let (sent, _, _) = total(&server, "sender");
        assert!(received > 0);
        assert!(goodput > 0.0);
        // Everything the server's socket accepted reaches the client before end of file.
        assert_eq!(received, sent);
        let intervals = client
            .iter()
            .filter(|r| matches!(r, Record::Interval { role, .. } if role == "receiver"))
            .count();
        assert!(intervals >= 2, "expected interval lines, got {client:?}");
        assert!(matches!(client[0], Record::Start { .. }));
    }

    #[test]
    fn upload_reports_the_servers_count_back_to_the_client() {
        let (client, server) = run_pair(Direction::Upload);
        let (sent, peer, _) = total(&client, "sender");
        let (received, _, _) = total(&server, "receiver");
        assert!(sent > 0);
        assert_eq!(peer, Some(received));
        assert_eq!(sent, received);
    }

    #[test]
    fn an_upload_in_small_writes_into_a_small_quickack_receiver_loses_nothing() {
        let sargs = BulkServerArgs {
            rcvbuf: Some(8192),
            quickack: true,
            ..server_args()
        };
        let (client, server) = run_tuned(Direction::Upload, sargs, 1000);
        let (sent, peer, _) = total(&client, "sender");
        let (received, _, _) = total(&server, "receiver");
        assert!(sent > 0);
        assert_eq!(sent % 1000, 0, "whole 1000-byte writes: {sent}");
        assert_eq!(peer, Some(received));
        assert_eq!(sent, received);
    }

    #[test]
    fn write_size_and_rcvbuf_refuse_zero_and_name_the_option() {
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            server: BulkServerArgs,
        }
        use clap::Parser;
        let ok = Cli::try_parse_from([
            "x",
            "--write-size",
            "1000",
            "--rcvbuf",
            "8192",
            "--quickack",
        ])
        .unwrap();
        assert_eq!(ok.server.write_size, 1000);
        assert_eq!(ok.server.rcvbuf, Some(8192));
        assert!(ok.server.quickack);
        for opt in ["--write-size", "--rcvbuf"] {
            let e = Cli::try_parse_from(["x", opt, "0"])
                .unwrap_err()
                .to_string();
            assert!(e.contains(opt) && e.contains("'0'"), "{e}");
        }
    }

    #[test]
    fn a_refused_connection_is_an_error_naming_the_target() {
        // Bind then drop to get a port with (almost certainly) no listener.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let args = BulkClientArgs {
            server: format!("127.0.0.1:{port}"),
            direction: Direction::Download,
            duration: Duration::from_millis(100),
            interval: Duration::from_millis(100),
            write_size: DEFAULT_WRITE_SIZE,
            quickack: false,
            out: None,
        };
        let err = client(&args, &JsonLines::memory(), &Stop::new()).unwrap_err();
        assert!(format!("{err:#}").contains(&format!("'127.0.0.1:{port}'")));
    }
}

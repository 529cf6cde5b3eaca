//! `chunk-server` / `chunk-client`: a bulk upload written in chunks of a chosen size into a
//! receive window of a chosen size, to watch how the receiver's acknowledgements pace the
//! sender. The client writes `--chunk` bytes per `write()` (1000 by default: not a multiple of
//! any MSS) as fast as the socket takes them, with TCP_NODELAY on request, for `--duration`,
//! then closes. The server reads to end of file with `--rcvbuf` as its SO_RCVBUF (set on the
//! listening socket, so that the window scale of the handshake matches it) and, with
//! `--quickack`, sets TCP_QUICKACK after every read (Linux's switch to acknowledge at once
//! instead of deferring, tcp(7)).
//!
//! Both report like `bulk-*`: `interval` and `total` lines, `role` `sender` (bytes the socket
//! accepted) or `receiver` (bytes read: the goodput). Nothing here judges the pacing: the
//! captures and `latencylab analyze` do.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, connect_tcp, listen_tcp, positive_time_arg, run_client_program, secs,
    size_arg, start_record, time_arg, Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::{mbps, IntervalMeter};

const DEFAULT_PORT: u16 = 5207;
/// How often blocked loops look at the stop flag and the interval clock.
const POLL: Duration = Duration::from_millis(100);
/// Largest chunk a client writes per call.
const MAX_CHUNK: u64 = 1 << 20;

/// Options of `chunk-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct ChunkServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// SO_RCVBUF of every connection, in bytes (Linux doubles it for its bookkeeping and
    /// advertises part of it) [default: the host's autotuning].
    #[arg(long, value_parser = size_arg, value_name = "BYTES")]
    pub rcvbuf: Option<u64>,
    /// Set TCP_QUICKACK after every read: acknowledge at once instead of deferring.
    #[arg(long)]
    pub quickack: bool,
    /// Reporting interval of the `interval` lines.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `chunk-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct ChunkClientArgs {
    /// The server, as HOST or HOST:PORT (port 5207 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Bytes per write() call.
    #[arg(long, default_value = "1000", value_parser = chunk_arg, value_name = "BYTES")]
    pub chunk: u64,
    /// Set TCP_NODELAY: every write may leave as its own segment.
    #[arg(long)]
    pub nodelay: bool,
    /// How long to send.
    #[arg(long, default_value = "10s", value_parser = positive_time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Reporting interval of the `interval` lines.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// clap value parser for `--chunk`: 1 byte to 1 MiB.
fn chunk_arg(s: &str) -> Result<u64, String> {
    let n = size_arg(s)?;
    if n == 0 || n > MAX_CHUNK {
        return Err(format!("'{s}' must be from 1 byte to 1mb (try 1000)"));
    }
    Ok(n)
}

/// `chunk-server`: binds (with `--rcvbuf` on the listener), then receives until
/// `--duration` or a signal.
pub fn run_server(args: &ChunkServerArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    let listener = listen_tcp(args.bind.as_deref(), args.port)?;
    if let Some(b) = args.rcvbuf {
        set_rcvbuf(&listener, b)?;
    }
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = serve(listener, args, &out, &Stop::new());
    out.flush();
    r
}

/// SO_RCVBUF on a listener: accepted sockets inherit it, and the window scale offered in the
/// handshake is chosen from it.
pub fn set_rcvbuf(listener: &TcpListener, bytes: u64) -> anyhow::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    crate::sys::set_int_option(listener.as_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, v)
        .with_context(|| format!("cannot set SO_RCVBUF to {bytes}"))
}

/// Receives uploads on `listener` until `stop` or `args.duration`.
pub fn serve(
    listener: TcpListener,
    args: &ChunkServerArgs,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let (interval, quickack) = (args.interval, args.quickack);
    announce_and_serve(
        "chunk-server",
        listener,
        out,
        stop,
        args.duration,
        move |stream, conn, clock, out, stop| {
            receive(stream, conn, interval, quickack, clock, out, stop)
        },
    )
}

fn receive(
    mut stream: TcpStream,
    conn: u64,
    interval: Duration,
    quickack: bool,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(POLL))?;
    let start = clock.now();
    let mut meter = IntervalMeter::new(start, interval);
    let mut buf = vec![0u8; 64 * 1024];
    let mut last_data = start;
    while !stop.requested() {
        let n = match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("read failed"),
        };
        if n > 0 {
            // Linux leaves quick-ACK mode by itself; it has to be asked again after each read.
            if quickack {
                crate::sys::set_int_option(
                    stream.as_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_QUICKACK,
                    1,
                )
                .context("cannot set TCP_QUICKACK")?;
            }
            last_data = clock.now();
        }
        for iv in meter.add(clock.now(), n as u64) {
            out.emit(&interval_record(conn, "receiver", interval, iv));
        }
    }
    let dur = last_data - start;
    out.emit(&Record::Total {
        t_s: clock.t_s(),
        conn,
        role: "receiver".into(),
        duration_s: dur.as_secs_f64(),
        bytes: meter.total(),
        goodput_mbps: mbps(meter.total(), dur),
        peer_bytes: None,
    });
    Ok(())
}

fn interval_record(
    conn: u64,
    role: &str,
    interval: Duration,
    iv: crate::stats::IntervalBytes,
) -> Record {
    Record::Interval {
        t_s: secs(iv.end),
        conn,
        role: role.into(),
        interval_s: interval.as_secs_f64(),
        bytes: iv.bytes,
        goodput_mbps: mbps(iv.bytes, interval),
    }
}

/// `chunk-client`: one upload, then a sender `total` line.
pub fn run_client(args: &ChunkClientArgs) -> anyhow::Result<()> {
    run_client_program(args.out.as_ref(), |out, stop| client(args, out, stop))
}

/// Writes `args.chunk`-byte chunks to `args.server` for `args.duration`.
pub fn client(args: &ChunkClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("chunk-client", &clock));
    let mut stream = connect_tcp(&args.server, DEFAULT_PORT, &clock, out)?;
    stream.set_nodelay(args.nodelay)?;
    stream.set_write_timeout(Some(POLL))?;
    let chunk = vec![0u8; args.chunk as usize];
    let start = clock.now();
    let end = start + args.duration;
    let mut meter = IntervalMeter::new(start, args.interval);
    // Bytes of the current chunk already accepted: a chunk is one write() unless the socket
    // takes only part of it.
    let mut at = 0usize;
    while !stop.requested() && clock.now() < end {
        let n = match stream.write(&chunk[at..]) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("write failed"),
        };
        at = (at + n) % chunk.len();
        for iv in meter.add(clock.now(), n as u64) {
            out.emit(&interval_record(1, "sender", args.interval, iv));
        }
    }
    let _ = stream.shutdown(Shutdown::Write);
    let dur = (clock.now() - start).min(args.duration);
    out.emit(&Record::Total {
        t_s: clock.t_s(),
        conn: 1,
        role: "sender".into(),
        duration_s: dur.as_secs_f64(),
        bytes: meter.total(),
        goodput_mbps: mbps(meter.total(), dur),
        peer_bytes: None,
    });
    // Let the server read to the end before the socket closes under it.
    let mut sink = [0u8; 64];
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.read(&mut sink);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::parse_records;

    fn total(recs: &[Record], want: &str) -> u64 {
        recs.iter()
            .find_map(|r| match r {
                Record::Total { role, bytes, .. } if role == want => Some(*bytes),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no {want} total in {recs:?}"))
    }

    #[test]
    fn an_upload_in_odd_chunks_into_a_small_window_arrives_whole() {
        for quickack in [false, true] {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            set_rcvbuf(&listener, 4096).unwrap();
            let port = listener.local_addr().unwrap().port();
            let stop = Stop::new();
            let server_out = JsonLines::memory();
            let server_args = ChunkServerArgs {
                port: 0,
                bind: None,
                rcvbuf: Some(4096),
                quickack,
                interval: Duration::from_millis(100),
                duration: Some(Duration::from_secs(10)),
                out: None,
            };
            let (so, ss) = (server_out.clone(), stop.clone());
            let server =
                std::thread::spawn(move || serve(listener, &server_args, &so, &ss).unwrap());
            let client_out = JsonLines::memory();
            let args = ChunkClientArgs {
                server: format!("127.0.0.1:{port}"),
                chunk: 1000,
                nodelay: true,
                duration: Duration::from_millis(300),
                interval: Duration::from_millis(100),
                out: None,
            };
            client(&args, &client_out, &Stop::new()).unwrap();
            // The server's total comes when it reads end of file.
            for _ in 0..50 {
                if server_out.contents().contains("\"total\"") {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            stop.request();
            server.join().unwrap();
            let sent = total(&parse_records(&client_out.contents()).unwrap(), "sender");
            let received = total(&parse_records(&server_out.contents()).unwrap(), "receiver");
            assert!(sent > 0);
            assert_eq!(sent, received, "quickack {quickack}");
        }
    }

    #[test]
    fn a_chunk_of_zero_or_over_a_megabyte_is_refused_and_quoted() {
        assert!(chunk_arg("0").unwrap_err().contains("'0'"));
        assert!(chunk_arg("2mb").unwrap_err().contains("'2mb'"));
        assert_eq!(chunk_arg("1000").unwrap(), 1000);
    }
}

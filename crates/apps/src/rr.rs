//! `rr-server` / `rr-client`: request/response over one TCP connection, each 70-byte message
//! written the way a message-passing library of the 1990s wrote it: a 28-byte header and a
//! 42-byte body in two `write()` calls, in both directions. The server acts only on a whole
//! message (it echoes it back as the response); the client times each exchange from its first
//! write to the last byte of the response.
//!
//! Two options change how a message reaches the wire, at either end: `--nodelay` sets
//! TCP_NODELAY (Nagle's algorithm off, RFC 896; RFC 9293 §3.7.4), `--writev` writes the two
//! parts with one `writev()` call. Without either, the second part of every message waits in
//! the sender's kernel until the first part is acknowledged.
//!
//! Message format: `"LLR1"`, four zero bytes, the sequence number (u64, big-endian), zeros to
//! 70 bytes. The framing ([`Framer`]) is pure; the loops are I/O.

use std::io::{self, IoSlice, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, connect_tcp, ms, positive_time_arg, run_client_program, start_record,
    time_arg, Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::Percentiles;

const MAGIC: &[u8; 4] = b"LLR1";
/// One application message.
pub const MESSAGE_LEN: usize = 70;
/// The first `write()` of a message: its header.
pub const HEADER_LEN: usize = 28;
const DEFAULT_PORT: u16 = 5206;
/// How often blocked loops look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// How a message is handed to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteStyle {
    /// TCP_NODELAY on the socket.
    pub nodelay: bool,
    /// One `writev()` of both parts instead of two `write()` calls.
    pub writev: bool,
}

/// Options of `rr-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct RrServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Set TCP_NODELAY on every connection (turn Nagle's algorithm off).
    #[arg(long)]
    pub nodelay: bool,
    /// Write each response with one writev() instead of two write() calls.
    #[arg(long)]
    pub writev: bool,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `rr-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct RrClientArgs {
    /// The server, as HOST or HOST:PORT (port 5206 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Set TCP_NODELAY (turn Nagle's algorithm off).
    #[arg(long)]
    pub nodelay: bool,
    /// Write each request with one writev() instead of two write() calls.
    #[arg(long)]
    pub writev: bool,
    /// Think time between a response and the next request.
    #[arg(long, default_value = "200ms", value_parser = time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// How long to keep exchanging (the exchange under way is finished).
    #[arg(long, default_value = "10s", value_parser = positive_time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// The message with sequence number `seq`.
pub fn encode(seq: u64) -> [u8; MESSAGE_LEN] {
    let mut b = [0u8; MESSAGE_LEN];
    b[..4].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_be_bytes());
    b
}

/// The sequence number of a message; `None` for anything that is not one.
pub fn decode(b: &[u8]) -> Option<u64> {
    if b.len() != MESSAGE_LEN || &b[..4] != MAGIC {
        return None;
    }
    Some(u64::from_be_bytes(b[8..16].try_into().ok()?))
}

/// Cuts a byte stream into whole messages; pure.
#[derive(Clone, Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
}

impl Framer {
    /// Adds bytes as they were read.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }
    /// The next whole message, if one has arrived.
    pub fn next_message(&mut self) -> Option<[u8; MESSAGE_LEN]> {
        if self.buf.len() < MESSAGE_LEN {
            return None;
        }
        let mut m = [0u8; MESSAGE_LEN];
        m.copy_from_slice(&self.buf[..MESSAGE_LEN]);
        self.buf.drain(..MESSAGE_LEN);
        Some(m)
    }
    /// Bytes of a message not yet complete.
    pub fn partial(&self) -> usize {
        self.buf.len()
    }
}

/// Hands one message to the kernel: header and body in two `write()` calls, or both in one
/// `writev()`.
fn send_message(
    stream: &mut TcpStream,
    m: &[u8; MESSAGE_LEN],
    style: WriteStyle,
) -> io::Result<()> {
    let (head, body) = m.split_at(HEADER_LEN);
    if style.writev {
        let mut done = stream.write_vectored(&[IoSlice::new(head), IoSlice::new(body)])?;
        // A 70-byte writev into a socket with room is never short; finish it if it is.
        if done < MESSAGE_LEN {
            stream.write_all(&m[done..])?;
            done = MESSAGE_LEN;
        }
        debug_assert_eq!(done, MESSAGE_LEN);
    } else {
        stream.write_all(head)?;
        stream.write_all(body)?;
    }
    Ok(())
}

fn configure(stream: &TcpStream, style: WriteStyle) -> io::Result<()> {
    stream.set_nodelay(style.nodelay)?;
    stream.set_read_timeout(Some(POLL))
}

/// `rr-server`: binds, then serves until `--duration` or a signal.
pub fn run_server(args: &RrServerArgs) -> anyhow::Result<()> {
    crate::common::run_tcp_server_program(
        args.out.as_ref(),
        args.bind.as_deref(),
        args.port,
        |l, out, stop| serve(l, args, out, stop),
    )
}

/// Answers every whole message on `listener`'s connections until `stop` or `args.duration`.
pub fn serve(
    listener: TcpListener,
    args: &RrServerArgs,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let style = WriteStyle {
        nodelay: args.nodelay,
        writev: args.writev,
    };
    announce_and_serve(
        "rr-server",
        listener,
        out,
        stop,
        args.duration,
        move |stream, _conn, _clock, _out, stop| answer(stream, style, stop),
    )
}

fn answer(mut stream: TcpStream, style: WriteStyle, stop: &Stop) -> anyhow::Result<()> {
    configure(&stream, style)?;
    let mut framer = Framer::default();
    let mut buf = [0u8; 4096];
    while !stop.requested() {
        let n = match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_disconnect(&e) => return Ok(()),
            Err(e) => return Err(e).context("read failed"),
        };
        framer.push(&buf[..n]);
        // Only a whole message is acted on; half of one is just waited for.
        while let Some(m) = framer.next_message() {
            if decode(&m).is_none() {
                anyhow::bail!("not an rr-client message");
            }
            send_message(&mut stream, &m, style).context("write failed")?;
        }
    }
    Ok(())
}

/// `rr-client`: exchanges for `--duration`, then an `rr_summary` line.
pub fn run_client(args: &RrClientArgs) -> anyhow::Result<()> {
    run_client_program(args.out.as_ref(), |out, stop| client(args, out, stop))
}

/// Request/response exchanges against `args.server`, one `exchange` line each.
pub fn client(args: &RrClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("rr-client", &clock));
    let mut stream = connect_tcp(&args.server, DEFAULT_PORT, &clock, out)?;
    let style = WriteStyle {
        nodelay: args.nodelay,
        writev: args.writev,
    };
    configure(&stream, style)?;
    let end = clock.now() + args.duration;
    let mut samples = Vec::new();
    let mut framer = Framer::default();
    let mut buf = [0u8; 4096];
    let mut seq = 0u64;
    'exchanges: while !stop.requested() && clock.now() < end {
        let sent_at = clock.now();
        send_message(&mut stream, &encode(seq), style).context("cannot send a request")?;
        let reply = loop {
            if let Some(m) = framer.next_message() {
                break m;
            }
            match stream.read(&mut buf) {
                Ok(0) => anyhow::bail!("the server closed the connection"),
                Ok(n) => framer.push(&buf[..n]),
                Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {
                    if stop.requested() {
                        break 'exchanges;
                    }
                }
                Err(e) => return Err(e).context("read failed"),
            }
        };
        let took = clock.now() - sent_at;
        if decode(&reply) != Some(seq) {
            anyhow::bail!("response {:?} to request {seq}", decode(&reply));
        }
        samples.push(ms(took));
        out.emit(&Record::Exchange {
            t_s: clock.t_s(),
            seq,
            sent_s: sent_at.as_secs_f64(),
            exchange_ms: ms(took),
        });
        seq += 1;
        // Think time, cut short by a stop request.
        let resume = clock.now() + args.interval;
        while clock.now() < resume && !stop.requested() {
            std::thread::sleep((resume - clock.now()).min(POLL));
        }
    }
    let p = Percentiles::of(&samples);
    out.emit(&Record::RrSummary {
        t_s: clock.t_s(),
        nodelay: args.nodelay,
        writev: args.writev,
        exchanges: samples.len() as u64,
        exchange_p50_ms: p.map(|p| p.p50),
        exchange_p95_ms: p.map(|p| p.p95),
        exchange_max_ms: p.map(|p| p.max),
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::parse_records;

    #[test]
    fn the_framer_yields_only_whole_messages_however_the_bytes_arrive() {
        let mut f = Framer::default();
        let (a, b) = (encode(1), encode(2));
        f.push(&a[..HEADER_LEN]);
        assert_eq!(f.next_message(), None);
        assert_eq!(f.partial(), HEADER_LEN);
        f.push(&a[HEADER_LEN..]);
        f.push(&b[..3]);
        assert_eq!(f.next_message().map(|m| decode(&m)), Some(Some(1)));
        assert_eq!(f.next_message(), None);
        f.push(&b[3..]);
        assert_eq!(f.next_message().map(|m| decode(&m)), Some(Some(2)));
        assert_eq!(f.partial(), 0);
    }

    #[test]
    fn decode_refuses_what_is_not_a_message() {
        assert_eq!(decode(&encode(7)), Some(7));
        assert_eq!(decode(&[0u8; MESSAGE_LEN]), None);
        assert_eq!(decode(&encode(7)[..69]), None);
    }

    fn exchange_over_loopback(style: WriteStyle) -> Vec<Record> {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Stop::new();
        let server_args = RrServerArgs {
            port: 0,
            bind: None,
            nodelay: style.nodelay,
            writev: style.writev,
            duration: Some(Duration::from_secs(10)),
            out: None,
        };
        let s = stop.clone();
        let server = std::thread::spawn(move || {
            serve(listener, &server_args, &JsonLines::memory(), &s).unwrap()
        });
        let out = JsonLines::memory();
        let args = RrClientArgs {
            server: format!("127.0.0.1:{port}"),
            nodelay: style.nodelay,
            writev: style.writev,
            interval: Duration::from_millis(10),
            duration: Duration::from_millis(300),
            out: None,
        };
        client(&args, &out, &Stop::new()).unwrap();
        stop.request();
        server.join().unwrap();
        parse_records(&out.contents()).unwrap()
    }

    #[test]
    fn every_write_style_completes_exchanges_and_summarises_them() {
        for (nodelay, writev) in [(false, false), (true, false), (false, true)] {
            let recs = exchange_over_loopback(WriteStyle { nodelay, writev });
            let n = recs
                .iter()
                .filter(|r| matches!(r, Record::Exchange { .. }))
                .count() as u64;
            assert!(n >= 3, "{recs:?}");
            let Some(Record::RrSummary {
                exchanges,
                exchange_p50_ms,
                nodelay: nd,
                ..
            }) = recs.last()
            else {
                panic!("no summary last: {recs:?}");
            };
            assert_eq!(*exchanges, n);
            assert_eq!(*nd, nodelay);
            assert!(exchange_p50_ms.unwrap() > 0.0);
        }
    }
}

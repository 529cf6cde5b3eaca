//! `tfo-server` / `tfo-client`: short request/response connections, with or without TCP Fast
//! Open (RFC 7413), and a server that is not idempotent: it counts how many times it acted on
//! each request id, so that a request done twice shows.
//!
//! The client opens one connection per request, writes a 16-byte request (`"LLT1"`, four zero
//! bytes, the request id as u64, big-endian), reads the 16-byte answer (`"LLA1"`, how many times
//! the server has now acted on this id as u32, the id as u64) and closes first, so that the
//! TIME-WAIT state stays with the client and the server keeps no memory of the connection.
//! With `--fastopen` it sets TCP_FASTOPEN_CONNECT: the first connection asks for a cookie, the
//! next ones carry the request in their SYN. The server enables TCP_FASTOPEN on its listener
//! (unless `--no-fastopen`), acts on each request as soon as it has read it, answers, and waits
//! for the client's close. Both sides say per connection whether the SYN carried the data
//! (`TCP_INFO`'s TCPI_OPT_SYN_DATA).
//!
//! Linux also needs `net.ipv4.tcp_fastopen` to allow it: bit 1 for clients, bit 2 for servers
//! (the lab sets 3 in its hosts).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, ms, positive_time_arg, resolve, start_record, time_arg, with_default_port,
    Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::Percentiles;

const DEFAULT_PORT: u16 = 5205;
const REQUEST_MAGIC: &[u8; 4] = b"LLT1";
const ANSWER_MAGIC: &[u8; 4] = b"LLA1";
/// Length of the listener's queue of connections accepted from a SYN with data but not yet
/// handed to the program (the TCP_FASTOPEN option's value).
const FASTOPEN_QUEUE: libc::c_int = 64;

/// Options of `tfo-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct TfoServerArgs {
    /// TCP port to listen on.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Do not accept data in SYNs (no TCP_FASTOPEN on the listener).
    #[arg(long)]
    pub no_fastopen: bool,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `tfo-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct TfoClientArgs {
    /// The server, as HOST or HOST:PORT (port 5205 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Put each request in the SYN (TCP_FASTOPEN_CONNECT) once the server gave a cookie.
    #[arg(long)]
    pub fastopen: bool,
    /// Requests to make, one connection each.
    #[arg(long, default_value_t = 30)]
    pub count: u64,
    /// Time from the start of one request to the start of the next.
    #[arg(long, default_value = "300ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// The first request's id (the next ones count up from it).
    #[arg(long, default_value_t = 1)]
    pub first_id: u64,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn encode(magic: &[u8; 4], count: u32, id: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(magic);
    b[4..8].copy_from_slice(&count.to_be_bytes());
    b[8..].copy_from_slice(&id.to_be_bytes());
    b
}

/// (count, id) of a 16-byte message with `magic`.
fn decode(magic: &[u8; 4], b: &[u8; 16]) -> Option<(u32, u64)> {
    if &b[..4] != magic {
        return None;
    }
    let count = u32::from_be_bytes(b[4..8].try_into().ok()?);
    let id = u64::from_be_bytes(b[8..].try_into().ok()?);
    Some((count, id))
}

/// How many times the server acted on each request id.
#[derive(Debug, Default)]
struct Ledger {
    actions: HashMap<u64, u64>,
}

impl Ledger {
    /// Acts once more on `id`; the how-many-th time this is.
    fn act(&mut self, id: u64) -> u64 {
        let n = self.actions.entry(id).or_insert(0);
        *n += 1;
        *n
    }

    /// (distinct ids, actions, actions beyond the first per id).
    fn totals(&self) -> (u64, u64, u64) {
        let actions: u64 = self.actions.values().sum();
        let ids = self.actions.len() as u64;
        (ids, actions, actions - ids)
    }
}

/// `tfo-server`: answers requests until `--duration` or a signal, then writes its totals.
pub fn run_server(args: &TfoServerArgs) -> anyhow::Result<()> {
    crate::common::run_tcp_server_program(
        args.out.as_ref(),
        args.bind.as_deref(),
        args.port,
        |l, out, stop| {
            if !args.no_fastopen {
                crate::sys::set_int_option(
                    l.as_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_FASTOPEN,
                    FASTOPEN_QUEUE,
                )
                .context("setting TCP_FASTOPEN on the listener")?;
            }
            serve(l, args.duration, out, stop)
        },
    )
}

/// Serves requests on `listener` (TCP_FASTOPEN already set or not) until `stop` or
/// `deadline`; then writes the `action_summary`.
pub fn serve(
    listener: std::net::TcpListener,
    deadline: Option<Duration>,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let l = ledger.clone();
    let clock = Clock::start();
    let r = announce_and_serve(
        "tfo-server",
        listener,
        out,
        stop,
        deadline,
        move |stream, _conn, clock, out, _stop| serve_one(stream, &l, clock, out),
    );
    let (requests, actions, double_actions) =
        ledger.lock().unwrap_or_else(|e| e.into_inner()).totals();
    out.emit(&Record::ActionSummary {
        t_s: clock.t_s(),
        requests,
        actions,
        double_actions,
    });
    r
}

fn serve_one(
    mut stream: TcpStream,
    ledger: &Mutex<Ledger>,
    clock: &Clock,
    out: &JsonLines,
) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(3)))?;
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let mut b = [0u8; 16];
    stream.read_exact(&mut b).context("no request")?;
    let (_, id) = decode(REQUEST_MAGIC, &b).context("not a tfo-client request")?;
    let tfo = crate::sys::syn_data_acked(stream.as_fd()).unwrap_or(false);
    let count = ledger.lock().unwrap_or_else(|e| e.into_inner()).act(id);
    out.emit(&Record::Action {
        t_s: clock.t_s(),
        request: id,
        count,
        tfo,
        peer,
    });
    let answer = encode(ANSWER_MAGIC, u32::try_from(count).unwrap_or(u32::MAX), id);
    match stream.write_all(&answer) {
        Ok(()) => {}
        // A duplicate SYN's connection: the client has no such connection and resets it.
        Err(e) if is_disconnect(&e) => return Ok(()),
        Err(e) => return Err(e).context("answering"),
    }
    // The client closes first; wait for it so that TIME-WAIT stays on its side.
    let mut rest = [0u8; 64];
    loop {
        match stream.read(&mut rest) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) || is_disconnect(&e) => return Ok(()),
            Err(e) => return Err(e).context("waiting for the client's close"),
        }
    }
}

/// `tfo-client`.
pub fn run_client(args: &TfoClientArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = client(args, &out, &Stop::new());
    out.flush();
    r
}

/// One request on a connection of its own: the answer's count and whether the SYN carried
/// the request.
fn one_request(addr: &std::net::SocketAddr, fastopen: bool, id: u64) -> anyhow::Result<bool> {
    let mut s = crate::sys::connect_tcp(addr, fastopen).context("cannot connect")?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_nodelay(true)?;
    s.write_all(&encode(REQUEST_MAGIC, 0, id))
        .context("cannot send the request")?;
    let mut b = [0u8; 16];
    s.read_exact(&mut b).context("no answer")?;
    match decode(ANSWER_MAGIC, &b) {
        Some((_, got)) if got == id => {}
        _ => anyhow::bail!("not an answer to request {id}"),
    }
    Ok(crate::sys::syn_data_acked(s.as_fd()).unwrap_or(false))
}

/// Makes `args.count` requests to `args.server`, one connection each.
pub fn client(args: &TfoClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("tfo-client", &clock));
    let target = with_default_port(&args.server, DEFAULT_PORT);
    let addr = resolve(&target)?;
    let mut times_ms = Vec::new();
    let (mut failed, mut tfo_count) = (0u64, 0u64);
    let mut next = clock.elapsed();
    for i in 0..args.count {
        if stop.requested() {
            break;
        }
        let id = args.first_id.saturating_add(i);
        let t_s = clock.t_s();
        let t0 = clock.elapsed();
        match one_request(&addr, args.fastopen, id) {
            Ok(tfo) => {
                let request_ms = ms(clock.elapsed() - t0);
                times_ms.push(request_ms);
                tfo_count += u64::from(tfo);
                out.emit(&Record::Request {
                    t_s,
                    request: id,
                    request_ms,
                    tfo,
                });
            }
            Err(e) => {
                failed += 1;
                out.emit(&Record::RequestFailed {
                    t_s,
                    request: id,
                    error: format!("{e:#}"),
                });
            }
        }
        next += args.interval;
        let now = clock.elapsed();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    let p = Percentiles::of(&times_ms);
    out.emit(&Record::RequestSummary {
        t_s: clock.t_s(),
        requests: times_ms.len() as u64,
        failed,
        tfo: tfo_count,
        request_ms_p50: p.map(|p| p.p50),
        request_ms_p95: p.map(|p| p.p95),
    });
    if times_ms.is_empty() && failed > 0 {
        anyhow::bail!("no request to '{target}' succeeded");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_round_trip_and_a_wrong_magic_is_refused() {
        let b = encode(REQUEST_MAGIC, 0, 42);
        assert_eq!(decode(REQUEST_MAGIC, &b), Some((0, 42)));
        assert_eq!(decode(ANSWER_MAGIC, &b), None);
    }

    proptest::proptest! {
        #[test]
        fn what_the_message_parser_reads_re_encodes_to_the_same_bytes(
            b in proptest::array::uniform16(proptest::prelude::any::<u8>())
        ) {
            for magic in [REQUEST_MAGIC, ANSWER_MAGIC] {
                if let Some((count, id)) = decode(magic, &b) {
                    proptest::prop_assert_eq!(encode(magic, count, id), b);
                }
            }
        }
    }

    #[test]
    fn the_ledger_counts_actions_beyond_the_first_per_id_as_doubles() {
        let mut l = Ledger::default();
        assert_eq!(l.act(1), 1);
        assert_eq!(l.act(2), 1);
        assert_eq!(l.act(1), 2);
        assert_eq!(l.totals(), (2, 3, 1));
    }

    #[test]
    fn on_loopback_each_request_is_acted_on_once_and_fast_open_is_seen_once_allowed() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        // Whether this machine lets loopback connections use Fast Open (net.ipv4.tcp_fastopen
        // has both bits): then the requests after the cookie must ride in the SYN.
        let sysctl = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_fastopen")
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
            .unwrap_or(0);
        let server_tfo = crate::sys::set_int_option(
            listener.as_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_FASTOPEN,
            FASTOPEN_QUEUE,
        )
        .is_ok();
        let out = JsonLines::memory();
        let stop = Stop::new();
        let server = {
            let (o, s) = (out.clone(), stop.clone());
            std::thread::spawn(move || serve(listener, None, &o, &s))
        };
        let client_out = JsonLines::memory();
        let args = TfoClientArgs {
            server: format!("127.0.0.1:{port}"),
            fastopen: true,
            count: 4,
            interval: Duration::from_millis(20),
            first_id: 10,
            out: None,
        };
        client(&args, &client_out, &Stop::new()).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        stop.request();
        server.join().unwrap().unwrap();
        let c = crate::parse_records(&client_out.contents()).unwrap();
        let s = crate::parse_records(&out.contents()).unwrap();
        let Some(Record::RequestSummary {
            requests,
            failed,
            tfo,
            ..
        }) = c.last().cloned()
        else {
            panic!("{c:?}")
        };
        assert_eq!((requests, failed), (4, 0));
        if server_tfo && sysctl & 3 == 3 {
            // The first connection fetches the cookie; the others use it.
            assert_eq!(tfo, 3, "{c:?}");
        }
        assert!(s.contains(&Record::ActionSummary {
            t_s: match s.last() {
                Some(Record::ActionSummary { t_s, .. }) => *t_s,
                _ => panic!("{s:?}"),
            },
            requests: 4,
            actions: 4,
            double_actions: 0,
        }));
    }
}

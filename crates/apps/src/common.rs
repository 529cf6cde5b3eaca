//! What every program shares: the program clock (seconds since start, and the same instant as
//! a `wire::Instant` for the pure models), the stop condition (deadline, signal, or a test's
//! flag), the JSON-lines writer, option value parsers that quote the bad value, and binding a
//! listening socket on both address families.
//!
//! It does not define any record: those are in [`crate::records`].

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, TcpListener, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use wire::units::{parse_rate, parse_size, parse_time};
use wire::{Instant, Rate};

use crate::records::Record;

/// The program's clock: one monotonic origin taken at start.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    origin: std::time::Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            origin: std::time::Instant::now(),
        }
    }
    /// Now, in the lab's time type, counted from the program's start.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
    /// Seconds since start, as written in every record's `t_s`.
    pub fn t_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }
    pub fn elapsed(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// Seconds of a `wire::Instant` on the program clock.
pub fn secs(t: Instant) -> f64 {
    t.as_secs_f64()
}

/// Milliseconds of a duration, for `*_ms` fields.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// When a program must stop: SIGTERM/SIGINT, its own `--duration`, or (in tests and for
/// server threads) a shared flag.
#[derive(Clone, Debug, Default)]
pub struct Stop {
    flag: Arc<AtomicBool>,
}

impl Stop {
    pub fn new() -> Stop {
        Stop::default()
    }
    pub fn request(&self) {
        self.flag.store(true, Ordering::Relaxed);
    }
    pub fn requested(&self) -> bool {
        self.flag.load(Ordering::Relaxed) || crate::sys::signal_received()
    }
}

/// Where JSON lines go; cloned freely between threads, one line at a time under a lock so
/// that lines from different connections never interleave.
#[derive(Clone)]
pub struct JsonLines {
    sink: Arc<Mutex<Sink>>,
}

enum Sink {
    Writer(BufWriter<Box<dyn Write + Send>>),
    Memory(Vec<u8>),
}

impl JsonLines {
    /// `--out FILE`, or stdout when `None`.
    pub fn open(path: Option<&PathBuf>) -> anyhow::Result<JsonLines> {
        let w: Box<dyn Write + Send> = match path {
            Some(p) => Box::new(
                File::create(p).with_context(|| format!("cannot create '{}'", p.display()))?,
            ),
            None => Box::new(io::stdout()),
        };
        Ok(JsonLines {
            sink: Arc::new(Mutex::new(Sink::Writer(BufWriter::new(w)))),
        })
    }

    /// Collects lines in memory; for tests.
    pub fn memory() -> JsonLines {
        JsonLines {
            sink: Arc::new(Mutex::new(Sink::Memory(Vec::new()))),
        }
    }

    /// The lines written so far to a [`JsonLines::memory`] sink.
    pub fn contents(&self) -> String {
        match &*self.sink.lock().unwrap_or_else(|e| e.into_inner()) {
            Sink::Memory(v) => String::from_utf8_lossy(v).into_owned(),
            Sink::Writer(_) => String::new(),
        }
    }

    /// Writes one record as one line and flushes it, so that `| jq` and a killed program both
    /// see every line written so far.
    pub fn emit(&self, record: &Record) {
        let mut line = match serde_json::to_vec(record) {
            Ok(l) => l,
            Err(_) => return,
        };
        line.push(b'\n');
        let mut sink = self.sink.lock().unwrap_or_else(|e| e.into_inner());
        match &mut *sink {
            Sink::Writer(w) => {
                // A closed stdout (`| head`) must not kill a measurement thread.
                let _ = w.write_all(&line);
                let _ = w.flush();
            }
            Sink::Memory(v) => v.extend_from_slice(&line),
        }
    }

    pub fn flush(&self) {
        if let Sink::Writer(w) = &mut *self.sink.lock().unwrap_or_else(|e| e.into_inner()) {
            let _ = w.flush();
        }
    }
}

/// The `start` record every program writes first.
pub fn start_record(program: &str, clock: &Clock) -> Record {
    let unix_time_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    Record::Start {
        t_s: clock.t_s(),
        program: program.to_string(),
        unix_time_s,
        monotonic_s: crate::sys::monotonic_s() - clock.t_s(),
    }
}

/// A bad option value found after parsing (e.g. two options that contradict each other);
/// the CLI prints it and exits with status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// clap value parser for tc-style rates (`8mbit`).
pub fn rate_arg(s: &str) -> Result<Rate, String> {
    parse_rate(s).map_err(|e| e.to_string())
}

/// clap value parser for times with a unit (`10s`, `250ms`).
pub fn time_arg(s: &str) -> Result<Duration, String> {
    parse_time(s).map_err(|e| e.to_string())
}

/// clap value parser for positive times (`--interval`, `--chunk`): zero would spin.
pub fn positive_time_arg(s: &str) -> Result<Duration, String> {
    let d = time_arg(s)?;
    if d.is_zero() {
        return Err(format!("'{s}' must be longer than zero (try 100ms)"));
    }
    Ok(d)
}

/// clap value parser for sizes in bytes (`1200`, `64kb`).
pub fn size_arg(s: &str) -> Result<u64, String> {
    parse_size(s).map_err(|e| e.to_string())
}

/// Resolves `HOST:PORT` (names, IPv4, `[IPv6]`) to the first address.
pub fn resolve(target: &str) -> anyhow::Result<SocketAddr> {
    target
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve '{target}' (try server:5201 or [::1]:5201)"))?
        .next()
        .with_context(|| format!("'{target}' resolves to no address"))
}

/// Binds a TCP listener on `bind:port`; with no `bind`, on `[::]` (both families on Linux)
/// and on `0.0.0.0` when the host has no IPv6.
pub fn listen_tcp(bind: Option<&str>, port: u16) -> anyhow::Result<TcpListener> {
    match bind {
        Some(b) => {
            let addr = join_host_port(b, port);
            TcpListener::bind(&addr).with_context(|| format!("cannot listen on '{addr}'"))
        }
        None => TcpListener::bind(("::", port))
            .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
            .with_context(|| format!("cannot listen on port {port}")),
    }
}

/// As [`listen_tcp`] for UDP.
pub fn bind_udp(bind: Option<&str>, port: u16) -> anyhow::Result<UdpSocket> {
    match bind {
        Some(b) => {
            let addr = join_host_port(b, port);
            UdpSocket::bind(&addr).with_context(|| format!("cannot bind UDP '{addr}'"))
        }
        None => UdpSocket::bind(("::", port))
            .or_else(|_| UdpSocket::bind(("0.0.0.0", port)))
            .with_context(|| format!("cannot bind UDP port {port}")),
    }
}

/// `::1` + 5201 → `[::1]:5201`; `127.0.0.1` + 5201 → `127.0.0.1:5201`.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A UDP socket able to reach `peer`: bound to the unspecified address of the peer's family.
pub fn udp_for_peer(peer: &SocketAddr) -> anyhow::Result<UdpSocket> {
    let local = if peer.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    };
    UdpSocket::bind(local).with_context(|| format!("cannot open a UDP socket for {peer}"))
}

/// `HOST:PORT`, or `HOST` alone with `default_port` added (`server` → `server:5201`,
/// `::1` → `[::1]:5201`).
pub fn with_default_port(target: &str, default_port: u16) -> String {
    if target.parse::<SocketAddr>().is_ok() {
        return target.to_string();
    }
    if target.starts_with('[') {
        // `[::1]` without a port.
        if target.ends_with(']') {
            return format!("{target}:{default_port}");
        }
        return target.to_string();
    }
    match target.rsplit_once(':') {
        // One colon and digits after it: a name or IPv4 with a port.
        Some((host, port))
            if !host.contains(':')
                && !port.is_empty()
                && port.bytes().all(|b| b.is_ascii_digit()) =>
        {
            target.to_string()
        }
        _ => join_host_port(target, default_port),
    }
}

/// The outer shell of a TCP server program: opens its JSON-lines output, listens, installs the
/// stop signals, runs `serve` until it returns, and flushes the output.
pub fn run_tcp_server_program(
    out_path: Option<&PathBuf>,
    bind: Option<&str>,
    port: u16,
    serve: impl FnOnce(TcpListener, &JsonLines, &Stop) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let out = JsonLines::open(out_path)?;
    let listener = listen_tcp(bind, port)?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = serve(listener, &out, &Stop::new());
    out.flush();
    r
}

/// The outer shell of a client program: opens its JSON-lines output, installs the stop
/// signals, runs `client` until it returns, and flushes the output.
pub fn run_client_program(
    out_path: Option<&PathBuf>,
    client: impl FnOnce(&JsonLines, &Stop) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let out = JsonLines::open(out_path)?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = client(&out, &Stop::new());
    out.flush();
    r
}

/// How long a client keeps asking when its connection is refused: in a lab, programs start at
/// their own times, and a server started beside its client may not listen yet.
pub const REFUSED_RETRY: Duration = Duration::from_secs(3);
/// Between two attempts of a refused connection.
const REFUSED_GAP: Duration = Duration::from_millis(50);
/// How long one attempt may take (a path that drops the SYNs).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Connects to `addr` (`target` as the user wrote it, for the error), asking again every
/// 50 ms while the connection is refused, for up to [`REFUSED_RETRY`].
pub fn connect_client(target: &str, addr: &SocketAddr) -> anyhow::Result<std::net::TcpStream> {
    let start = std::time::Instant::now();
    loop {
        match std::net::TcpStream::connect_timeout(addr, CONNECT_TIMEOUT) {
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                if start.elapsed() >= REFUSED_RETRY {
                    return Err(e).with_context(|| {
                        format!(
                            "cannot connect to '{target}': refused for {} s (does a server listen on that port?)",
                            REFUSED_RETRY.as_secs()
                        )
                    });
                }
                std::thread::sleep(REFUSED_GAP);
            }
            r => return r.with_context(|| format!("cannot connect to '{target}'")),
        }
    }
}

/// Connects a client to `server` (`HOST` or `HOST:PORT`, `default_port` when none is given)
/// as [`connect_client`] does, and writes its `connected` line (connection 1).
pub fn connect_tcp(
    server: &str,
    default_port: u16,
    clock: &Clock,
    out: &JsonLines,
) -> anyhow::Result<std::net::TcpStream> {
    let target = with_default_port(server, default_port);
    let addr = resolve(&target)?;
    let stream = connect_client(&target, &addr)?;
    out.emit(&Record::Connected {
        t_s: clock.t_s(),
        conn: 1,
        peer: addr.to_string(),
    });
    Ok(stream)
}

/// Runs a TCP server program: announces it (its `start` and `listening` lines), then serves
/// each connection on its own thread with `connection(stream, conn, clock, out, stop)` until
/// `stop` or `deadline`. A connection that fails is reported on stderr, not fatal.
pub fn announce_and_serve<F>(
    program: &'static str,
    listener: TcpListener,
    out: &JsonLines,
    stop: &Stop,
    deadline: Option<Duration>,
    connection: F,
) -> anyhow::Result<()>
where
    F: Fn(std::net::TcpStream, u64, &Clock, &JsonLines, &Stop) -> anyhow::Result<()>
        + Send
        + Sync
        + 'static,
{
    let clock = Clock::start();
    out.emit(&start_record(program, &clock));
    out.emit(&Record::Listening {
        t_s: clock.t_s(),
        addr: listener.local_addr()?.to_string(),
        proto: "tcp".into(),
    });
    let (o, s) = (out.clone(), stop.clone());
    serve_tcp(
        listener,
        out,
        &clock,
        stop,
        deadline,
        move |stream, conn| {
            if let Err(e) = connection(stream, conn, &clock, &o, &s) {
                eprintln!("{program}: connection {conn}: {e:#}");
            }
        },
    )
}

/// Accepts TCP connections until `stop` or `deadline`, running `handle` on its own thread
/// for each, then waits for those threads (which watch the same `stop`) to end.
pub fn serve_tcp<F>(
    listener: TcpListener,
    out: &JsonLines,
    clock: &Clock,
    stop: &Stop,
    deadline: Option<Duration>,
    handle: F,
) -> anyhow::Result<()>
where
    F: Fn(std::net::TcpStream, u64) + Send + Sync + 'static,
{
    use std::os::fd::AsFd;
    let handle = Arc::new(handle);
    let mut workers: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut next_conn = 1u64;
    while !stop.requested() && deadline.is_none_or(|d| clock.elapsed() < d) {
        if !crate::sys::wait_readable(listener.as_fd(), Duration::from_millis(100))? {
            continue;
        }
        let (stream, peer) = match listener.accept() {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("accept failed"),
        };
        let conn = next_conn;
        next_conn += 1;
        out.emit(&Record::Connected {
            t_s: clock.t_s(),
            conn,
            peer: peer.to_string(),
        });
        let h = Arc::clone(&handle);
        workers.push(std::thread::spawn(move || h(stream, conn)));
        workers.retain(|w| !w.is_finished());
    }
    // Connection threads watch the program's stop flag; a server that ends by its own
    // deadline asks them to stop too.
    stop.request();
    for w in workers {
        let _ = w.join();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_port_is_added_only_when_missing() {
        assert_eq!(with_default_port("server", 5201), "server:5201");
        assert_eq!(with_default_port("server:80", 5201), "server:80");
        assert_eq!(with_default_port("10.0.0.1", 5201), "10.0.0.1:5201");
        assert_eq!(with_default_port("::1", 5201), "[::1]:5201");
        assert_eq!(with_default_port("[::1]", 5201), "[::1]:5201");
        assert_eq!(with_default_port("[::1]:80", 5201), "[::1]:80");
    }

    #[test]
    fn bad_option_values_are_quoted() {
        assert!(rate_arg("8mbits").unwrap_err().contains("'8mbits'"));
        assert!(time_arg("10").unwrap_err().contains("'10'"));
        assert!(positive_time_arg("0ms").unwrap_err().contains("'0ms'"));
        assert_eq!(time_arg("250ms").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn ipv6_hosts_are_bracketed() {
        assert_eq!(join_host_port("::1", 5), "[::1]:5");
        assert_eq!(join_host_port("[::1]", 5), "[::1]:5");
        assert_eq!(join_host_port("127.0.0.1", 5), "127.0.0.1:5");
    }

    #[test]
    fn memory_sink_keeps_one_record_per_line() {
        let out = JsonLines::memory();
        let clock = Clock::start();
        out.emit(&start_record("test", &clock));
        out.emit(&start_record("test", &clock));
        let text = out.contents();
        assert_eq!(text.lines().count(), 2);
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["type"], "start");
        }
    }

    /// A loopback port nothing listens on (bound, then let go).
    fn free_port() -> SocketAddr {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
    }

    #[test]
    fn a_client_waits_for_a_server_that_starts_listening_after_it() {
        let addr = free_port();
        let server = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            let l = TcpListener::bind(addr).unwrap();
            l.accept().map(|(_, peer)| peer)
        });
        let stream = connect_client("late", &addr).expect("connected once it listened");
        let peer = server.join().unwrap().unwrap();
        assert_eq!(stream.local_addr().unwrap(), peer);
    }

    #[test]
    fn a_client_refused_for_three_seconds_says_so() {
        let addr = free_port();
        let start = std::time::Instant::now();
        let e = connect_client("nobody:1", &addr).unwrap_err();
        assert!(start.elapsed() >= REFUSED_RETRY);
        let e = format!("{e:#}");
        assert!(
            e.contains("cannot connect to 'nobody:1': refused for 3 s"),
            "{e}"
        );
    }
}

//! `fallback-server` / `fallback-client`: a request every second from a client with two
//! interfaces (a preferred one, Wi-Fi, and a fallback, cellular), and what each way of
//! connecting does when the preferred one passes nothing.
//!
//! Modes of the client (`--mode`):
//! - `default`: a new connection per request over the default route, as most apps connect;
//!   a dead Wi-Fi costs it the kernel's SYN retransmissions (a second apart at first, then
//!   doubling) until one gets through or `--timeout` passes.
//! - `race`: a new connection per request, raced as RFC 8305 §5 specifies: an attempt over the
//!   preferred interface, a second over the fallback after the Connection Attempt Delay
//!   (`--attempt-delay`, 250 ms by RFC 8305 §8's recommendation), the first to connect wins
//!   and the other is closed. Once the fallback won, new requests go straight to it while a
//!   Better Route probe tries the preferred interface every `--probe-every`; the first probe
//!   that connects moves new requests back.
//! - `mptcp`: one MPTCP connection (RFC 8684) for all requests. The kernel's path manager
//!   opens a subflow per endpoint (`ip mptcp endpoint add ADDR dev IFACE subflow`, set up
//!   beforehand), moves data to the live subflow when one stops answering. The path manager
//!   never replaces the stale subflow, so, as a phone's MPTCP stack does, a Better Route probe
//!   (a plain TCP attempt over the preferred interface every `--probe-every`) runs while
//!   requests go over the fallback, and the first that connects has the path manager open a
//!   new subflow over the preferred interface (`ip mptcp endpoint`, see [`rejoin`]). Each
//!   request's interface is the subflow whose acknowledged bytes grew.
//!
//! Messages: the request is 16 bytes (`"LLF1"`, four zero bytes, the request id as u64,
//! big-endian); the answer the same with `"LLF2"`. The server answers every request on a
//! connection until the client closes it; it listens with MPTCP where the kernel allows it
//! (which also accepts plain TCP) and with plain TCP otherwise.
//!
//! The decisions (the race, the Better Route probe) are pure, in [`policy`]; this module
//! holds the sockets and threads.

pub mod policy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context};

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    announce_and_serve, positive_time_arg, resolve, start_record, time_arg, with_default_port,
    Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::Percentiles;
use policy::{Path, Plan, Policy, Race, Step};

const DEFAULT_PORT: u16 = 5208;
const REQUEST_MAGIC: &[u8; 4] = b"LLF1";
const ANSWER_MAGIC: &[u8; 4] = b"LLF2";
/// How often a waiting connection loop looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

/// How the client connects.
#[derive(clap::ValueEnum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A new connection per request over the default route.
    Default,
    /// A new connection per request, raced over both interfaces (RFC 8305), with a Better
    /// Route probe back to the preferred one.
    Race,
    /// One MPTCP connection with a subflow per interface.
    Mptcp,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Race => "race",
            Mode::Mptcp => "mptcp",
        }
    }
}

/// Options of `fallback-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct FallbackServerArgs {
    /// TCP port to listen on (IPv6 and IPv4).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Listen with plain TCP even where the kernel offers MPTCP.
    #[arg(long)]
    pub no_mptcp: bool,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Options of `fallback-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct FallbackClientArgs {
    /// The server, as HOST or HOST:PORT (port 5208 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// How to connect: default, race or mptcp.
    #[arg(long, value_enum, default_value = "race")]
    pub mode: Mode,
    /// The preferred interface (Wi-Fi).
    #[arg(long, default_value = "wlan0", value_name = "IFACE")]
    pub primary: String,
    /// The fallback interface (cellular).
    #[arg(long, default_value = "rmnet0", value_name = "IFACE")]
    pub secondary: String,
    /// Time from the start of one request to the start of the next.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// Start requests for this long, then wait for those in flight.
    #[arg(long, default_value = "20s", value_parser = positive_time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// A request that has no answer this long after its start has failed.
    #[arg(long, default_value = "10s", value_parser = positive_time_arg, value_name = "TIME")]
    pub timeout: Duration,
    /// `race`: the Connection Attempt Delay before the second attempt (RFC 8305 §5).
    #[arg(long, default_value = "250ms", value_parser = time_arg, value_name = "TIME")]
    pub attempt_delay: Duration,
    /// `race` and `mptcp`: time between Better Route probes while requests use the fallback;
    /// each probe waits this long for its connection.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub probe_every: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

fn encode(magic: &[u8; 4], id: u64) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..4].copy_from_slice(magic);
    b[8..].copy_from_slice(&id.to_be_bytes());
    b
}

/// The id of a 16-byte message with `magic`.
fn decode(magic: &[u8; 4], b: &[u8; 16]) -> Option<u64> {
    if &b[..4] != magic {
        return None;
    }
    Some(u64::from_be_bytes(b[8..].try_into().ok()?))
}

/// `fallback-server`.
pub fn run_server(args: &FallbackServerArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    let listener = if args.no_mptcp {
        None
    } else {
        crate::sys::listen_mptcp(args.port)
            .map_err(|e| eprintln!("fallback-server: no MPTCP listener ({e}); plain TCP"))
            .ok()
    };
    let listener = match listener {
        Some(l) => l,
        None => crate::common::listen_tcp(None, args.port)?,
    };
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = announce_and_serve(
        "fallback-server",
        listener,
        &out,
        &Stop::new(),
        args.duration,
        |stream, _conn, _clock, _out, stop| serve_one(stream, stop),
    );
    out.flush();
    r
}

/// Answers every request on one connection until the client closes it.
fn serve_one(mut stream: TcpStream, stop: &Stop) -> anyhow::Result<()> {
    stream.set_read_timeout(Some(STOP_POLL * 5))?;
    stream.set_nodelay(true)?;
    let mut b = [0u8; 16];
    let mut have = 0;
    while !stop.requested() {
        match stream.read(&mut b[have..]) {
            Ok(0) => return Ok(()),
            Ok(n) => have += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted || is_timeout(&e) => continue,
            Err(e) if is_disconnect(&e) => return Ok(()),
            Err(e) => return Err(e).context("reading a request"),
        }
        if have < b.len() {
            continue;
        }
        have = 0;
        let id = decode(REQUEST_MAGIC, &b).context("not a fallback-client request")?;
        match stream.write_all(&encode(ANSWER_MAGIC, id)) {
            Ok(()) => {}
            Err(e) if is_disconnect(&e) => return Ok(()),
            Err(e) => return Err(e).context("answering"),
        }
    }
    Ok(())
}

/// `fallback-client`.
pub fn run_client(args: &FallbackClientArgs) -> anyhow::Result<()> {
    crate::common::run_client_program(args.out.as_ref(), |out, stop| client(args, out, stop))
}

/// What the request threads share.
struct Shared {
    addr: SocketAddr,
    args: FallbackClientArgs,
    clock: Clock,
    out: JsonLines,
    stop: Stop,
    policy: Mutex<Policy>,
    /// (request_ms) of the answered requests, and the failed count.
    done: Mutex<(Vec<f64>, u64)>,
}

impl Shared {
    fn iface(&self, p: Path) -> &str {
        match p {
            Path::Primary => &self.args.primary,
            Path::Secondary => &self.args.secondary,
        }
    }

    fn answered(&self, id: u64, start_s: f64, iface: String, attempts: u32) {
        let request_ms = (self.clock.t_s() - start_s) * 1e3;
        self.done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .0
            .push(request_ms);
        self.out.emit(&Record::FallbackRequest {
            t_s: self.clock.t_s(),
            request: id,
            start_s,
            iface,
            attempts,
            request_ms,
        });
    }

    fn failed(&self, id: u64, start_s: f64, e: &anyhow::Error) {
        self.done.lock().unwrap_or_else(|e| e.into_inner()).1 += 1;
        self.out.emit(&Record::RequestFailed {
            t_s: start_s,
            request: id,
            error: format!("{e:#}"),
        });
    }
}

/// Makes a request every `--interval` for `--duration`, then waits for those in flight.
pub fn client(args: &FallbackClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("fallback-client", &clock));
    let target = with_default_port(&args.server, DEFAULT_PORT);
    let addr = resolve(&target)?;
    let shared = Arc::new(Shared {
        addr,
        args: args.clone(),
        clock,
        out: out.clone(),
        stop: stop.clone(),
        policy: Mutex::new(Policy::new(args.attempt_delay, args.probe_every)),
        done: Mutex::new((Vec::new(), 0)),
    });
    match args.mode {
        Mode::Default | Mode::Race => per_request_connections(&shared),
        Mode::Mptcp => one_mptcp_connection(&shared),
    }
    let (times, failed) = shared
        .done
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let p = Percentiles::of(&times);
    out.emit(&Record::FallbackSummary {
        t_s: clock.t_s(),
        mode: args.mode.name().into(),
        requests: times.len() as u64,
        failed,
        request_ms_p50: p.map(|p| p.p50),
        request_ms_max: p.map(|p| p.max),
    });
    if times.is_empty() && failed > 0 {
        bail!("no request to '{target}' succeeded");
    }
    Ok(())
}

/// Sleeps until `t` on the program clock or until `stop`; false when stopped.
fn sleep_until(clock: &Clock, t: Duration, stop: &Stop) -> bool {
    loop {
        if stop.requested() {
            return false;
        }
        let now = clock.elapsed();
        if now >= t {
            return true;
        }
        std::thread::sleep((t - now).min(STOP_POLL));
    }
}

/// `default` and `race`: each request on a connection of its own, on a thread of its own, so
/// that a slow one does not hold back the next; `race` also runs the Better Route probe.
fn per_request_connections(shared: &Arc<Shared>) {
    let args = &shared.args;
    let mut threads = Vec::new();
    let probing = Stop::new();
    if args.mode == Mode::Race {
        let s = shared.clone();
        let p = probing.clone();
        threads.push(std::thread::spawn(move || better_route_probe(&s, &p)));
    }
    let mut next = Duration::ZERO;
    let mut id = 0u64;
    while next < args.duration && sleep_until(&shared.clock, next, &shared.stop) {
        id += 1;
        let s = shared.clone();
        threads.push(std::thread::spawn(move || one_request(&s, id)));
        next += args.interval;
    }
    // The probe stops with the requests; each request ends by its own timeout.
    let n = threads.len();
    for (k, t) in threads.into_iter().enumerate().rev() {
        if k == 0 && n > 0 && args.mode == Mode::Race {
            probing.request();
        }
        let _ = t.join();
    }
}

fn one_request(s: &Shared, id: u64) {
    let start_s = s.clock.t_s();
    let deadline = s.clock.elapsed() + s.args.timeout;
    let r = (|| -> anyhow::Result<(String, u32)> {
        let (stream, iface, attempts) = match s.args.mode {
            Mode::Race => {
                let plan = s.policy.lock().unwrap_or_else(|e| e.into_inner()).plan();
                let r = race(s, plan, deadline);
                let winner = r.as_ref().ok().map(|w| w.1);
                s.policy
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .race_over(s.clock.now(), plan, winner);
                let (stream, p, attempts) = r?;
                (stream, s.iface(p).to_string(), attempts)
            }
            _ => {
                let fd = connect_before(s, &s.addr, None, deadline, false)?;
                let stream = TcpStream::from(fd);
                let iface = stream
                    .local_addr()
                    .ok()
                    .and_then(|a| iface_of(a.ip()))
                    .unwrap_or_default();
                (stream, iface, 1)
            }
        };
        exchange(s, stream, id, deadline)?;
        Ok((iface, attempts))
    })();
    match r {
        Ok((iface, attempts)) => s.answered(id, start_s, iface, attempts),
        Err(e) => s.failed(id, start_s, &e),
    }
}

/// Writes request `id` on `stream` and reads its answer before `deadline`, then closes.
fn exchange(s: &Shared, mut stream: TcpStream, id: u64, deadline: Duration) -> anyhow::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    stream
        .write_all(&encode(REQUEST_MAGIC, id))
        .context("cannot send the request")?;
    read_answer(s, &mut stream, id, deadline)
}

/// Reads answers on `stream` until the one to `id` (earlier ones, late, are skipped).
fn read_answer(
    s: &Shared,
    stream: &mut TcpStream,
    id: u64,
    deadline: Duration,
) -> anyhow::Result<()> {
    let mut b = [0u8; 16];
    let mut have = 0;
    loop {
        let now = s.clock.elapsed();
        if now >= deadline || s.stop.requested() {
            bail!("no answer within {:?}", s.args.timeout);
        }
        stream.set_read_timeout(Some(
            (deadline - now).clamp(Duration::from_millis(1), STOP_POLL),
        ))?;
        match stream.read(&mut b[have..]) {
            Ok(0) => bail!("the server closed the connection"),
            Ok(n) => have += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted || is_timeout(&e) => continue,
            Err(e) => return Err(e).context("reading the answer"),
        }
        if have == b.len() {
            have = 0;
            match decode(ANSWER_MAGIC, &b) {
                Some(got) if got == id => return Ok(()),
                Some(got) if got < id => continue,
                _ => bail!("not an answer to request {id}"),
            }
        }
    }
}

/// One connection attempt (over `dev`, or the default route; MPTCP or plain TCP) that must
/// connect before `deadline`.
fn connect_before(
    s: &Shared,
    addr: &SocketAddr,
    dev: Option<&str>,
    deadline: Duration,
    mptcp: bool,
) -> anyhow::Result<OwnedFd> {
    let started = s.clock.elapsed();
    let fd = crate::sys::start_connect(addr, dev, mptcp).context("cannot connect")?;
    loop {
        let now = s.clock.elapsed();
        if s.stop.requested() {
            bail!("stopped before a connection was made");
        }
        if now >= deadline {
            bail!(
                "no connection within {:?}",
                deadline.saturating_sub(started)
            );
        }
        let ready = crate::sys::wait_any_writable(&[fd.as_fd()], (deadline - now).min(STOP_POLL))?;
        if !ready.is_empty() {
            crate::sys::connect_outcome(fd.as_fd()).context("cannot connect")?;
            return Ok(fd);
        }
    }
}

/// Races the plan's attempts until one connects (the others are closed) or `deadline`.
fn race(s: &Shared, plan: Plan, deadline: Duration) -> anyhow::Result<(TcpStream, Path, u32)> {
    let mut race = Race::new(s.clock.now(), plan.first, plan.second, plan.delay);
    let mut live: Vec<(Path, OwnedFd)> = Vec::new();
    let mut errors = Vec::new();
    loop {
        let now = s.clock.now();
        let wait_until = match race.poll(now) {
            Step::Start(p) => {
                match crate::sys::start_connect(&s.addr, Some(s.iface(p)), false) {
                    Ok(fd) => live.push((p, fd)),
                    Err(e) => {
                        errors.push(format!("{}: {e}", s.iface(p)));
                        race.failed(p);
                    }
                }
                continue;
            }
            Step::Won(p) => {
                let attempts = race.attempts();
                let i = live
                    .iter()
                    .position(|l| l.0 == p)
                    .expect("the winner is live");
                // The other attempt, if any, is closed when `live` drops.
                let (_, fd) = live.swap_remove(i);
                return Ok((TcpStream::from(fd), p, attempts));
            }
            Step::Failed => bail!("every attempt failed: {}", errors.join("; ")),
            Step::WaitUntil(t) => Some(t),
            Step::Wait => None,
        };
        let now_d = s.clock.elapsed();
        if now_d >= deadline || s.stop.requested() {
            bail!("no connection within {:?}", s.args.timeout);
        }
        let mut wait = (deadline - now_d).min(STOP_POLL);
        if let Some(t) = wait_until {
            wait = wait.min(t.saturating_duration_since(now));
        }
        let fds: Vec<_> = live.iter().map(|l| l.1.as_fd()).collect();
        let ready = crate::sys::wait_any_writable(&fds, wait.max(Duration::from_millis(1)))?;
        // Highest index first, so that removing one does not move the others.
        for &i in ready.iter().rev() {
            let p = live[i].0;
            match crate::sys::connect_outcome(live[i].1.as_fd()) {
                Ok(()) => race.connected(p),
                Err(e) => {
                    errors.push(format!("{}: {e}", s.iface(p)));
                    race.failed(p);
                    live.remove(i);
                }
            }
        }
    }
}

/// `race`: while requests use the fallback, tries a connection over the preferred interface
/// every `--probe-every`; the first that connects moves new requests back.
fn better_route_probe(s: &Shared, done: &Stop) {
    while !done.requested() && !s.stop.requested() {
        let due = s
            .policy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .probe_due(s.clock.now());
        if !due {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        }
        let deadline = s.clock.elapsed() + s.args.probe_every;
        let ok = connect_before(s, &s.addr, Some(&s.args.primary), deadline, false).is_ok();
        s.policy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .probe_done(s.clock.now(), ok);
        if ok {
            s.out.emit(&Record::BetterRoute {
                t_s: s.clock.t_s(),
                iface: s.args.primary.clone(),
            });
        }
    }
}

/// What the `mptcp` mode's Better Route probe goes by.
#[derive(Debug, Default)]
struct MptcpPath {
    /// The last answered request was carried by the secondary.
    on_secondary: bool,
    /// The primary's subflow was made anew since requests moved to the secondary.
    rejoined: bool,
    /// The connection's local address (its first subflow's, over the primary).
    local: Option<IpAddr>,
    /// The endpoint [`rejoin`] adds exists (it is deleted by its id before the next rejoin).
    endpoint_added: bool,
    /// The last request's time over the secondary: one round trip on the live path.
    secondary_rtt: Duration,
}

/// The id of the path-manager endpoint [`rejoin`] adds for the primary's address.
const PRIMARY_ENDPOINT_ID: &str = "100";

/// `mptcp`: every request on one MPTCP connection, made again if it breaks. While requests go
/// over the secondary, a Better Route probe (a plain TCP connection attempt over the primary)
/// runs every `--probe-every`; when one connects, the primary's stale subflow is replaced by a
/// new one ([`rejoin`]), as a phone's MPTCP stack does when its Wi-Fi works again.
fn one_mptcp_connection(s: &Shared) {
    let path = Mutex::new(MptcpPath::default());
    let done = Stop::new();
    std::thread::scope(|scope| {
        scope.spawn(|| mptcp_better_route(s, &path, &done));
        mptcp_requests(s, &path);
        done.request();
    });
}

fn mptcp_requests(s: &Shared, path: &Mutex<MptcpPath>) {
    let mut conn: Option<TcpStream> = None;
    let mut next = Duration::ZERO;
    let mut id = 0u64;
    while next < s.args.duration && sleep_until(&s.clock, next, &s.stop) {
        id += 1;
        let start_s = s.clock.t_s();
        let deadline = s.clock.elapsed() + s.args.timeout;
        let r = (|| -> anyhow::Result<String> {
            if conn.is_none() {
                let fd = connect_before(s, &s.addr, None, deadline, true)?;
                let stream = TcpStream::from(fd);
                stream.set_nonblocking(false)?;
                stream.set_nodelay(true)?;
                conn = Some(stream);
            }
            let stream = conn.as_mut().expect("connected above");
            let before = crate::sys::mptcp_subflows(stream.as_fd()).unwrap_or_default();
            stream
                .write_all(&encode(REQUEST_MAGIC, id))
                .context("cannot send the request")?;
            read_answer(s, stream, id, deadline)?;
            let after = crate::sys::mptcp_subflows(stream.as_fd()).unwrap_or_default();
            Ok(carrier(&before, &after)
                .or_else(|| stream.local_addr().ok().map(|a| a.ip()))
                .and_then(iface_of)
                .unwrap_or_default())
        })();
        match r {
            Ok(iface) => {
                let mut p = path.lock().unwrap_or_else(|e| e.into_inner());
                if iface == s.args.secondary {
                    p.on_secondary = true;
                    p.secondary_rtt = s
                        .clock
                        .elapsed()
                        .saturating_sub(Duration::from_secs_f64(start_s));
                } else if iface == s.args.primary {
                    p.on_secondary = false;
                    p.rejoined = false;
                }
                p.local = conn
                    .as_ref()
                    .and_then(|c| c.local_addr().ok())
                    .map(|a| a.ip());
                drop(p);
                s.answered(id, start_s, iface, 1)
            }
            Err(e) => {
                if e.downcast_ref::<std::io::Error>().is_some() {
                    conn = None;
                }
                s.failed(id, start_s, &e);
            }
        }
        next = (next + s.args.interval).max(s.clock.elapsed());
    }
}

/// The `mptcp` mode's Better Route probe: while requests go over the secondary, a plain TCP
/// connection attempt over the primary every `--probe-every`; the first that connects writes a
/// `better_route` line and makes the primary's subflow anew.
fn mptcp_better_route(s: &Shared, path: &Mutex<MptcpPath>, done: &Stop) {
    let mut next = Duration::ZERO;
    while !done.requested() && !s.stop.requested() {
        let (local, endpoint_added, rtt) = {
            let p = path.lock().unwrap_or_else(|e| e.into_inner());
            let want = p.on_secondary && !p.rejoined;
            (p.local.filter(|_| want), p.endpoint_added, p.secondary_rtt)
        };
        let now = s.clock.elapsed();
        let Some(local) = local.filter(|_| now >= next) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        next = now + s.args.probe_every;
        if connect_before(s, &s.addr, Some(&s.args.primary), next, false).is_err() {
            continue;
        }
        s.out.emit(&Record::BetterRoute {
            t_s: s.clock.t_s(),
            iface: s.args.primary.clone(),
        });
        // The removal (RM_ADDR) travels over the secondary: two of its round trips give the
        // server time to act on it before the new subflow joins, which it would otherwise
        // close too (the new subflow from the first one's address has its id, 0).
        let settle = (2 * rtt).max(Duration::from_millis(50));
        let r = rejoin(local, &s.args.primary, endpoint_added, settle);
        let mut p = path.lock().unwrap_or_else(|e| e.into_inner());
        // Tried once per move to the secondary, whatever the outcome.
        p.rejoined = true;
        match r {
            Ok(()) => p.endpoint_added = true,
            Err(e) => eprintln!(
                "fallback-client: cannot make a new subflow over {}: {e:#}",
                s.args.primary
            ),
        }
    }
}

/// Has the kernel's in-kernel path manager open a new subflow from `local` (over `dev`) on
/// every MPTCP connection, as a phone's MPTCP stack does once its Wi-Fi works again (the path
/// manager by itself never replaces a subflow). The stale subflow from that address goes
/// first: the path manager opens no second subflow from an address in use. Deleting endpoint
/// id 0 with an address closes the connections' first subflows from it and tells the server
/// (RM_ADDR, RFC 8684 §3.4.2; ip-mptcp(8)); later, the endpoint added here is deleted by its
/// id. After `settle`, time for the server to act on the removal, the new endpoint is added
/// with the `subflow` flag, which makes the path manager open a subflow from it on the
/// connections that exist. Needs CAP_NET_ADMIN (root in the lab's host).
fn rejoin(local: IpAddr, dev: &str, endpoint_added: bool, settle: Duration) -> anyhow::Result<()> {
    let local = match local {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    let addr = local.to_string();
    let delete: &[&str] = if endpoint_added {
        &["mptcp", "endpoint", "delete", "id", PRIMARY_ENDPOINT_ID]
    } else {
        &["mptcp", "endpoint", "delete", "id", "0", &addr]
    };
    ip(delete)?;
    std::thread::sleep(settle);
    ip(&[
        "mptcp",
        "endpoint",
        "add",
        &addr,
        "dev",
        dev,
        "id",
        PRIMARY_ENDPOINT_ID,
        "subflow",
    ])
}

/// Runs `ip ARGS` (iproute2), its error quoted when it fails.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let o = std::process::Command::new("ip")
        .args(args)
        .output()
        .context("cannot run ip (iproute2)")?;
    if !o.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(())
}

/// The local address of the subflow whose acknowledged bytes grew most between two looks.
fn carrier(before: &[crate::sys::Subflow], after: &[crate::sys::Subflow]) -> Option<IpAddr> {
    after
        .iter()
        .map(|a| {
            let was = before
                .iter()
                .find(|b| b.local == a.local)
                .map_or(0, |b| b.bytes_acked);
            (a.bytes_acked.saturating_sub(was), a.local.ip())
        })
        .filter(|(grew, _)| *grew > 0)
        .max_by_key(|(grew, _)| *grew)
        .map(|(_, ip)| ip)
}

/// The name of the interface that has address `ip`.
fn iface_of(ip: IpAddr) -> Option<String> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
        let a = ifa.address?;
        let has = match ip {
            IpAddr::V4(v4) => a.as_sockaddr_in().is_some_and(|s| s.ip() == v4),
            IpAddr::V6(v6) => a.as_sockaddr_in6().is_some_and(|s| s.ip() == v6),
        };
        has.then_some(ifa.interface_name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys::Subflow;

    #[test]
    fn messages_round_trip_and_a_wrong_magic_is_refused() {
        let b = encode(REQUEST_MAGIC, 42);
        assert_eq!(decode(REQUEST_MAGIC, &b), Some(42));
        assert_eq!(decode(ANSWER_MAGIC, &b), None);
    }

    #[test]
    fn the_carrier_is_the_subflow_whose_acknowledged_bytes_grew_most() {
        let a: SocketAddr = "10.0.1.2:4000".parse().unwrap();
        let b: SocketAddr = "10.0.2.2:4001".parse().unwrap();
        let sf = |local, bytes_acked| Subflow { local, bytes_acked };
        let before = [sf(a, 160), sf(b, 0)];
        assert_eq!(carrier(&before, &[sf(a, 176), sf(b, 0)]), Some(a.ip()));
        assert_eq!(carrier(&before, &[sf(a, 160), sf(b, 16)]), Some(b.ip()));
        // A subflow that appeared during the request counts from zero.
        assert_eq!(
            carrier(&[sf(a, 160)], &[sf(a, 160), sf(b, 16)]),
            Some(b.ip())
        );
        assert_eq!(carrier(&before, &before), None);
    }

    #[test]
    fn the_loopback_address_belongs_to_lo() {
        assert_eq!(
            iface_of("127.0.0.1".parse().unwrap()).as_deref(),
            Some("lo")
        );
    }

    #[test]
    fn a_race_on_loopback_connects_and_the_server_answers_every_request() {
        let listener = crate::common::listen_tcp(Some("127.0.0.1"), 0).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Stop::new();
        let st = stop.clone();
        let server = std::thread::spawn(move || {
            announce_and_serve(
                "fallback-server",
                listener,
                &JsonLines::memory(),
                &st,
                None,
                |stream, _, _, _, stop| serve_one(stream, stop),
            )
        });
        for mode in [Mode::Race, Mode::Default] {
            let args = FallbackClientArgs {
                server: format!("127.0.0.1:{port}"),
                mode,
                primary: "lo".into(),
                secondary: "lo".into(),
                interval: Duration::from_millis(50),
                duration: Duration::from_millis(140),
                timeout: Duration::from_secs(5),
                attempt_delay: Duration::from_millis(250),
                probe_every: Duration::from_secs(1),
                out: None,
            };
            let out = JsonLines::memory();
            client(&args, &out, &Stop::new()).unwrap();
            let recs = crate::parse_records(&out.contents()).unwrap();
            let done: Vec<_> = recs
                .iter()
                .filter_map(|r| match r {
                    Record::FallbackRequest {
                        iface, attempts, ..
                    } => Some((iface.clone(), *attempts)),
                    _ => None,
                })
                .collect();
            assert_eq!(done, vec![("lo".to_string(), 1); 3], "{recs:?}");
        }
        stop.request();
        server.join().unwrap().unwrap();
    }
}

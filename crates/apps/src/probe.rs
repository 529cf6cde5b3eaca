//! `probe-server` / `probe-client`: latency probes. Over TCP, a 24-byte request on its own
//! connection (TCP_NODELAY both ends) every `--interval`, echoed by the server; over UDP, the
//! same 24 bytes as a datagram, ping-like, with loss declared after `--timeout`. Every answer
//! is one `rtt` line; every UDP probe without an answer is one `lost` line.
//!
//! Probe format (both protocols): `"LLP1"`, four zero bytes, the sequence number (u64) and the
//! client's send time in nanoseconds on its own clock (u64), big-endian. The server echoes the
//! bytes unchanged, so it keeps no state and needs no clock. The TCP probes show what a small
//! request sees behind the queue (TCP never loses them, only delays them); the UDP probes show
//! loss as well.
//!
//! The bookkeeping of outstanding UDP probes ([`Outstanding`]) is pure; the loops are I/O.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use wire::Instant;

use crate::bulk::{is_disconnect, is_timeout};
use crate::common::{
    bind_udp, listen_tcp, ms, positive_time_arg, resolve, secs, serve_tcp, start_record, time_arg,
    udp_for_peer, with_default_port, Clock, JsonLines, Stop,
};
use crate::records::Record;
use crate::stats::Percentiles;

const MAGIC: &[u8; 4] = b"LLP1";
const PROBE_LEN: usize = 24;
const DEFAULT_PORT: u16 = 5202;

/// Options of `probe-server`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProbeServerArgs {
    /// Port for both the TCP and the UDP probes.
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub port: u16,
    /// Address to listen on [default: all addresses, IPv6 and IPv4].
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Stop serving after this long [default: until SIGTERM or Ctrl-C].
    #[arg(long, value_parser = time_arg, value_name = "TIME")]
    pub duration: Option<Duration>,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Which probes to send.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeProto {
    Tcp,
    Udp,
    Both,
}

/// Options of `probe-client`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProbeClientArgs {
    /// The server, as HOST or HOST:PORT (port 5202 when omitted).
    #[arg(value_name = "SERVER")]
    pub server: String,
    /// Which probes to send.
    #[arg(long, value_enum, default_value_t = ProbeProto::Both)]
    pub proto: ProbeProto,
    /// Time between probes (each protocol).
    #[arg(long, default_value = "100ms", value_parser = positive_time_arg, value_name = "TIME")]
    pub interval: Duration,
    /// How long to probe.
    #[arg(long, default_value = "10s", value_parser = time_arg, value_name = "TIME")]
    pub duration: Duration,
    /// A UDP probe with no answer after this long is lost.
    #[arg(long, default_value = "1s", value_parser = positive_time_arg, value_name = "TIME")]
    pub timeout: Duration,
    /// Write the JSON lines to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Probes sent and not yet answered, with their send times; pure.
#[derive(Clone, Debug)]
pub struct Outstanding {
    timeout: Duration,
    sent: BTreeMap<u64, Instant>,
}

impl Outstanding {
    pub fn new(timeout: Duration) -> Outstanding {
        Outstanding {
            timeout,
            sent: BTreeMap::new(),
        }
    }
    pub fn sent(&mut self, seq: u64, now: Instant) {
        self.sent.insert(seq, now);
    }
    /// The round trip of `seq`, or `None` for a duplicate, a stranger, or an answer that came
    /// after the probe was declared lost (it stays lost: a 3 s "RTT" would hide the loss).
    pub fn answered(&mut self, seq: u64, now: Instant) -> Option<Duration> {
        self.sent.remove(&seq).map(|t| now - t)
    }
    /// Removes and returns (in sequence order) the probes older than the timeout at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<(u64, Instant)> {
        let lost: Vec<(u64, Instant)> = self
            .sent
            .iter()
            .filter(|(_, &t)| now - t >= self.timeout)
            .map(|(&s, &t)| (s, t))
            .collect();
        for (s, _) in &lost {
            self.sent.remove(s);
        }
        lost
    }
    pub fn len(&self) -> usize {
        self.sent.len()
    }
    pub fn is_empty(&self) -> bool {
        self.sent.is_empty()
    }
}

fn encode(seq: u64, now: Instant) -> [u8; PROBE_LEN] {
    let mut b = [0u8; PROBE_LEN];
    b[..4].copy_from_slice(MAGIC);
    b[8..16].copy_from_slice(&seq.to_be_bytes());
    b[16..24].copy_from_slice(&now.as_nanos().to_be_bytes());
    b
}

/// `(seq, send time)` of an echoed probe; `None` for anything else.
fn decode(b: &[u8]) -> Option<(u64, Instant)> {
    if b.len() != PROBE_LEN || &b[..4] != MAGIC {
        return None;
    }
    let seq = u64::from_be_bytes(b[8..16].try_into().ok()?);
    let t = u64::from_be_bytes(b[16..24].try_into().ok()?);
    Some((seq, Instant::from_nanos(t)))
}

/// `probe-server`: echoes TCP and UDP probes until `--duration` or a signal.
pub fn run_server(args: &ProbeServerArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    let listener = listen_tcp(args.bind.as_deref(), args.port)?;
    let udp = bind_udp(args.bind.as_deref(), listener.local_addr()?.port())?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = serve(listener, udp, args.duration, &out, &Stop::new());
    out.flush();
    r
}

/// Echoes probes on `listener` and `udp` until `stop` or `duration`.
pub fn serve(
    listener: TcpListener,
    udp: UdpSocket,
    duration: Option<Duration>,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("probe-server", &clock));
    for (addr, proto) in [(listener.local_addr()?, "tcp"), (udp.local_addr()?, "udp")] {
        out.emit(&Record::Listening {
            t_s: clock.t_s(),
            addr: addr.to_string(),
            proto: proto.into(),
        });
    }
    let udp_stop = stop.clone();
    let udp_thread = std::thread::spawn(move || udp_echo(&udp, &udp_stop, &clock, duration));
    let s = stop.clone();
    let r = serve_tcp(listener, out, &clock, stop, duration, move |stream, _| {
        let _ = tcp_echo(stream, &s);
    });
    stop.request();
    let u = udp_thread
        .join()
        .map_err(|_| anyhow::anyhow!("the UDP echo thread panicked"))?;
    r.and(u)
}

fn udp_echo(
    udp: &UdpSocket,
    stop: &Stop,
    clock: &Clock,
    duration: Option<Duration>,
) -> anyhow::Result<()> {
    udp.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 2048];
    while !stop.requested() && duration.is_none_or(|d| clock.elapsed() < d) {
        match udp.recv_from(&mut buf) {
            Ok((n, from)) if decode(&buf[..n]).is_some() => {
                // A full socket buffer on the way back is a lost answer, as on a real path.
                let _ = udp.send_to(&buf[..n], from);
            }
            Ok(_) => {}
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            // ICMP port unreachable from a client that left shows up here on Linux.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
            Err(e) => return Err(e).context("UDP receive failed"),
        }
    }
    Ok(())
}

fn tcp_echo(mut stream: TcpStream, stop: &Stop) -> io::Result<()> {
    stream.set_nodelay(true)?;
    stream.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut buf = [0u8; 4096];
    while !stop.requested() {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(()),
            // Echo whatever arrived: probes keep their framing on the way back.
            Ok(n) => stream.write_all(&buf[..n])?,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `probe-client`: probes for `--duration`, then one `probe_summary` line per protocol.
pub fn run_client(args: &ProbeClientArgs) -> anyhow::Result<()> {
    let out = JsonLines::open(args.out.as_ref())?;
    crate::sys::install_stop_signals().context("cannot install signal handlers")?;
    let r = client(args, &out, &Stop::new());
    out.flush();
    r
}

/// Runs the probes of `args` against `args.server`.
pub fn client(args: &ProbeClientArgs, out: &JsonLines, stop: &Stop) -> anyhow::Result<()> {
    let clock = Clock::start();
    out.emit(&start_record("probe-client", &clock));
    let target = with_default_port(&args.server, DEFAULT_PORT);
    let addr = resolve(&target)?;
    let mut threads = Vec::new();
    if matches!(args.proto, ProbeProto::Tcp | ProbeProto::Both) {
        let stream = crate::common::connect_client(&target, &addr)?;
        let (a, o, s) = (args.clone(), out.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            tcp_probes(stream, &a, &clock, &o, &s)
        }));
    }
    if matches!(args.proto, ProbeProto::Udp | ProbeProto::Both) {
        let udp = udp_for_peer(&addr)?;
        udp.connect(addr)
            .with_context(|| format!("cannot reach '{target}' over UDP"))?;
        let (a, o, s) = (args.clone(), out.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            udp_probes(udp, &a, &clock, &o, &s)
        }));
    }
    let mut result = Ok(());
    for t in threads {
        let r = t
            .join()
            .map_err(|_| anyhow::anyhow!("a probe thread panicked"))?;
        result = result.and(r);
    }
    result
}

/// Counts and samples of one protocol's probes.
#[derive(Default)]
struct Tally {
    sent: u64,
    rtts_ms: Vec<f64>,
    lost: u64,
}

impl Tally {
    fn summary(&self, proto: &str, clock: &Clock) -> Record {
        let p = Percentiles::of(&self.rtts_ms);
        Record::ProbeSummary {
            t_s: clock.t_s(),
            proto: proto.into(),
            sent: self.sent,
            received: self.rtts_ms.len() as u64,
            lost: self.lost,
            rtt_p50_ms: p.map(|p| p.p50),
            rtt_p95_ms: p.map(|p| p.p95),
            rtt_p99_ms: p.map(|p| p.p99),
            rtt_max_ms: p.map(|p| p.max),
        }
    }
}

/// When the next probe is due: one interval later, skipping probes the loop was too late for
/// rather than sending a burst.
fn next_due(due: Instant, now: Instant, interval: Duration) -> Instant {
    let mut next = due + interval;
    while next <= now {
        next += interval;
    }
    next
}

/// The read timeout until `due`, at least 1 ms (zero would mean "block for ever").
fn wait_until(due: Instant, now: Instant) -> Duration {
    (due - now).clamp(Duration::from_millis(1), Duration::from_millis(100))
}

fn tcp_probes(
    mut stream: TcpStream,
    args: &ProbeClientArgs,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let start = clock.now();
    let end = start + args.duration;
    let mut due = start;
    let mut tally = Tally::default();
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    // After the last probe, wait up to one timeout for the answers still in flight.
    while !stop.requested() {
        let now = clock.now();
        let sending = now < end;
        if !sending && (tally.rtts_ms.len() as u64 >= tally.sent || now >= end + args.timeout) {
            break;
        }
        if sending && now >= due {
            stream
                .write_all(&encode(tally.sent, now))
                .context("TCP probe write failed")?;
            tally.sent += 1;
            due = next_due(due, now, args.interval);
        }
        let wake = if sending { due } else { end + args.timeout };
        stream.set_read_timeout(Some(wait_until(wake, clock.now())))?;
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if is_disconnect(&e) => break,
            Err(e) => return Err(e).context("TCP probe read failed"),
        }
        let now = clock.now();
        while pending.len() >= PROBE_LEN {
            if let Some((seq, sent_at)) = decode(&pending[..PROBE_LEN]) {
                let rtt = now - sent_at;
                tally.rtts_ms.push(ms(rtt));
                out.emit(&Record::Rtt {
                    t_s: secs(now),
                    proto: "tcp".into(),
                    seq,
                    rtt_ms: ms(rtt),
                });
            }
            pending.drain(..PROBE_LEN);
        }
    }
    out.emit(&tally.summary("tcp", clock));
    Ok(())
}

fn udp_probes(
    udp: UdpSocket,
    args: &ProbeClientArgs,
    clock: &Clock,
    out: &JsonLines,
    stop: &Stop,
) -> anyhow::Result<()> {
    let start = clock.now();
    let end = start + args.duration;
    let mut due = start;
    let mut tally = Tally::default();
    let mut outstanding = Outstanding::new(args.timeout);
    let mut buf = [0u8; 2048];
    while !stop.requested() {
        let now = clock.now();
        let sending = now < end;
        for (seq, sent_at) in outstanding.expire(now) {
            tally.lost += 1;
            out.emit(&Record::Lost {
                t_s: secs(sent_at),
                proto: "udp".into(),
                seq,
            });
        }
        if !sending && outstanding.is_empty() {
            break;
        }
        if sending && now >= due {
            match udp.send(&encode(tally.sent, now)) {
                Ok(_) => {}
                // A refused probe (ICMP from the last one) still counts as sent and lost.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {}
                Err(e) => return Err(e).context("UDP probe send failed"),
            }
            outstanding.sent(tally.sent, now);
            tally.sent += 1;
            due = next_due(due, now, args.interval);
        }
        let wake = if sending {
            due
        } else {
            now + Duration::from_millis(100)
        };
        udp.set_read_timeout(Some(wait_until(wake, clock.now())))?;
        let n = match udp.recv(&mut buf) {
            Ok(n) => n,
            Err(e) if is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e).context("UDP probe receive failed"),
        };
        let now = clock.now();
        if let Some((seq, _)) = decode(&buf[..n]) {
            if let Some(rtt) = outstanding.answered(seq, now) {
                tally.rtts_ms.push(ms(rtt));
                out.emit(&Record::Rtt {
                    t_s: secs(now),
                    proto: "udp".into(),
                    seq,
                    rtt_ms: ms(rtt),
                });
            }
        }
    }
    out.emit(&tally.summary("udp", clock));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::parse_records;

    #[test]
    fn outstanding_probes_expire_after_the_timeout_and_late_answers_stay_lost() {
        let mut o = Outstanding::new(Duration::from_secs(1));
        o.sent(0, Instant::from_millis(0));
        o.sent(1, Instant::from_millis(100));
        o.sent(2, Instant::from_millis(200));
        assert_eq!(
            o.answered(1, Instant::from_millis(130)),
            Some(Duration::from_millis(30))
        );
        assert_eq!(o.answered(1, Instant::from_millis(131)), None);
        assert!(o.expire(Instant::from_millis(999)).is_empty());
        assert_eq!(
            o.expire(Instant::from_millis(1000)),
            vec![(0, Instant::from_millis(0))]
        );
        assert_eq!(o.answered(0, Instant::from_millis(1001)), None);
        assert_eq!(o.len(), 1);
    }

    #[test]
    fn probe_bytes_round_trip_and_strangers_are_refused() {
        let b = encode(42, Instant::from_nanos(123_456));
        assert_eq!(decode(&b), Some((42, Instant::from_nanos(123_456))));
        assert_eq!(decode(&b[..23]), None);
        let mut bad = b;
        bad[0] = b'X';
        assert_eq!(decode(&bad), None);
    }

    #[test]
    fn late_loops_skip_probes_instead_of_bursting() {
        let i = Duration::from_millis(100);
        assert_eq!(
            next_due(Instant::ZERO, Instant::from_millis(10), i),
            Instant::from_millis(100)
        );
        assert_eq!(
            next_due(Instant::ZERO, Instant::from_millis(350), i),
            Instant::from_millis(400)
        );
    }

    #[test]
    fn loopback_probes_report_rtts_for_both_protocols() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let udp = UdpSocket::bind(("127.0.0.1", port)).unwrap();
        let stop = Stop::new();
        let (so, ss) = (JsonLines::memory(), stop.clone());
        let server = std::thread::spawn(move || serve(listener, udp, None, &so, &ss).unwrap());
        let out = JsonLines::memory();
        let args = ProbeClientArgs {
            server: format!("127.0.0.1:{port}"),
            proto: ProbeProto::Both,
            interval: Duration::from_millis(50),
            duration: Duration::from_millis(600),
            timeout: Duration::from_millis(500),
            out: None,
        };
        client(&args, &out, &Stop::new()).unwrap();
        stop.request();
        server.join().unwrap();
        let recs = parse_records(&out.contents()).unwrap();
        for proto in ["tcp", "udp"] {
            let rtts: Vec<f64> = recs
                .iter()
                .filter_map(|r| match r {
                    Record::Rtt {
                        proto: p, rtt_ms, ..
                    } if p == proto => Some(*rtt_ms),
                    _ => None,
                })
                .collect();
            assert!(rtts.len() >= 3, "{proto}: too few samples in {recs:?}");
            assert!(rtts.iter().all(|&r| (0.0..1000.0).contains(&r)));
            let summary = recs.iter().find_map(|r| match r {
                Record::ProbeSummary {
                    proto: p,
                    sent,
                    received,
                    ..
                } if p == proto => Some((*sent, *received)),
                _ => None,
            });
            let (sent, received) = summary.expect("a summary per protocol");
            assert_eq!(received, rtts.len() as u64);
            assert!(sent >= received);
        }
    }

    #[test]
    fn udp_probes_to_a_silent_port_are_reported_lost() {
        // A bound socket that never answers.
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let out = JsonLines::memory();
        let args = ProbeClientArgs {
            server: format!("127.0.0.1:{port}"),
            proto: ProbeProto::Udp,
            interval: Duration::from_millis(50),
            duration: Duration::from_millis(200),
            timeout: Duration::from_millis(100),
            out: None,
        };
        client(&args, &out, &Stop::new()).unwrap();
        let recs = parse_records(&out.contents()).unwrap();
        let lost = recs
            .iter()
            .filter(|r| matches!(r, Record::Lost { .. }))
            .count();
        let (sent, summary_lost) = recs
            .iter()
            .find_map(|r| match r {
                Record::ProbeSummary { sent, lost, .. } => Some((*sent, *lost)),
                _ => None,
            })
            .unwrap();
        assert!(lost >= 1);
        assert_eq!(summary_lost, lost as u64);
        // Nothing ever answers, so every probe sent is lost.
        assert_eq!(sent, summary_lost);
        drop(silent);
    }
}

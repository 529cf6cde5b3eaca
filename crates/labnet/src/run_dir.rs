//! What a run leaves in its output directory, defined once: every path, the link-log line
//! (written and read here, nowhere else), and the schema of `summary.json`. Users script
//! against these (docs/run-dir.md); the demos, `ipv6-check`, the CLI and the tests read runs
//! through this module only.
//!
//! ```text
//! DIR/lab.json                   the lab, resolved (crate::spec)
//! DIR/summary.json               [`Summary`]
//! DIR/captures/HOST-IFACE.pcap   what tcpdump on that interface would see
//! DIR/links/LINK-SIDE.log        one [`LogLine`] per packet event of a link direction
//! DIR/captures/HOST-IFACE.pcap.N, DIR/links/LINK-SIDE.log.N
//!                                the N-th file after the first, with [`CaptureLimits`]
//! DIR/programs/NAME.out, .err    a program's standard output and error
//! ```
//!
//! Link log format (tab-separated, one line per packet event, a `#` header line first):
//! `time_ns  event  id  bytes  sojourn_ns  flow  ecn  cause`, where time is nanoseconds since the
//! lab started, event is enqueue/dequeue/drop/mark, sojourn is the time spent queued (dequeue,
//! and drops from the queue), flow is `proto src:port > dst:port`, ecn is
//! not-ect/ect0/ect1/ce, and cause names why a packet was dropped or marked; `-` where a field
//! does not apply. A line that does not read so is an error, never skipped.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use link::{Event, EventKind, LinkStats};
use serde::{Deserialize, Serialize};
use wire::Ecn;

use crate::spec::Side;

/// The paths of a run directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir {
    pub root: PathBuf,
}

impl RunDir {
    pub fn new(root: impl Into<PathBuf>) -> RunDir {
        RunDir { root: root.into() }
    }
    pub fn lab_json(&self) -> PathBuf {
        self.root.join("lab.json")
    }
    pub fn summary_json(&self) -> PathBuf {
        self.root.join("summary.json")
    }
    pub fn captures(&self) -> PathBuf {
        self.root.join("captures")
    }
    /// The capture of interface `iface` of `host`.
    pub fn capture(&self, host: &str, iface: &str) -> PathBuf {
        self.captures().join(format!("{host}-{iface}.pcap"))
    }
    pub fn links(&self) -> PathBuf {
        self.root.join("links")
    }
    /// The `n`-th file of a capture or link log after `first` (`n` ≥ 1), once the first
    /// reached [`CaptureLimits::file_size_bytes`]: `client-eth0.pcap.1`, `.2`, … Each is a
    /// whole file of its kind (a pcap header, a log header line), readable alone.
    pub fn rotated(first: &Path, n: u64) -> PathBuf {
        let mut name = first.as_os_str().to_owned();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }
    /// A file of spare room, given back when a capture fills the disk, so that summary.json
    /// can still be written.
    pub fn reserve(&self) -> PathBuf {
        self.root.join(".reserve")
    }
    /// The event log of one direction of a link.
    pub fn link_log(&self, link: &str, side: Side) -> PathBuf {
        self.links().join(format!("{link}-{}.log", side.name()))
    }
    pub fn programs(&self) -> PathBuf {
        self.root.join("programs")
    }
    /// A program's standard output.
    pub fn program_out(&self, program: &str) -> PathBuf {
        self.programs().join(format!("{program}.out"))
    }
    /// A program's standard error.
    pub fn program_err(&self, program: &str) -> PathBuf {
        self.programs().join(format!("{program}.err"))
    }
}

impl AsRef<Path> for RunDir {
    fn as_ref(&self) -> &Path {
        &self.root
    }
}

/// The first line of every link log.
pub const LOG_HEADER: &str = "# time_ns\tevent\tid\tbytes\tsojourn_ns\tflow\tecn\tcause\n";

/// Writes one event as a link-log line.
pub fn write_event(out: &mut impl Write, e: &Event) -> io::Result<()> {
    write!(
        out,
        "{}\t{}\t{}\t{}\t",
        e.time.as_nanos(),
        e.kind.name(),
        e.id,
        e.bytes
    )?;
    match e.sojourn {
        Some(s) => write!(out, "{}\t", s.as_nanos())?,
        None => out.write_all(b"-\t")?,
    }
    match e.flow {
        Some(f) => write!(out, "{f}\t")?,
        None => out.write_all(b"-\t")?,
    }
    writeln!(
        out,
        "{}\t{}",
        e.ecn.name(),
        e.cause.map_or("-", |c| c.name())
    )
}

/// How much of the traffic the captures and link logs keep (tcpdump's `-s`, `-C` and `-W`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureLimits {
    /// Bytes kept of each packet, from its IP header (the pcap header's snaplen); `None`
    /// keeps whole packets.
    pub snaplen_bytes: Option<u32>,
    /// A file that would grow past this many bytes is closed and the next one
    /// ([`RunDir::rotated`]) begins; `None`: one file, however large.
    pub file_size_bytes: Option<u64>,
    /// With `file_size_bytes`: at most this many files of each capture or log, the oldest
    /// removed as a new one begins; `None`: no limit.
    pub file_count: Option<u64>,
}

/// Which file of a rotated capture or link log ([`RunDir::rotated`]) each record goes to,
/// within [`CaptureLimits`]: the bookkeeping only; the shell opens, writes and removes.
/// No record straddles two files; one larger than the size limit goes whole into a file of
/// its own.
#[derive(Clone, Debug)]
pub struct Rotation {
    limits: CaptureLimits,
    /// The header every file begins with.
    header_bytes: u64,
    /// Bytes in the current file, its header included.
    file_bytes: u64,
    /// The current file's number, 0 for the first.
    index: u64,
}

/// A new file to begin before a record: its number, and the oldest file to remove, if the
/// count limit says so.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextFile {
    pub open: u64,
    pub remove: Option<u64>,
}

impl Rotation {
    /// The first file has just been opened with its header.
    pub fn new(limits: CaptureLimits, header_bytes: u64) -> Rotation {
        Rotation {
            limits,
            header_bytes,
            file_bytes: header_bytes,
            index: 0,
        }
    }

    /// Counts a record of `len_bytes`; `Some` when a new file must begin before it.
    pub fn record(&mut self, len_bytes: u64) -> Option<NextFile> {
        let has_records = self.file_bytes > self.header_bytes;
        let full = self
            .limits
            .file_size_bytes
            .is_some_and(|max| has_records && self.file_bytes + len_bytes > max);
        let next = full.then(|| {
            self.index += 1;
            self.file_bytes = self.header_bytes;
            NextFile {
                open: self.index,
                remove: self
                    .limits
                    .file_count
                    .filter(|&n| self.index >= n)
                    .map(|n| self.index - n),
            }
        });
        self.file_bytes += len_bytes;
        next
    }
}

/// One line of a link log, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogLine {
    pub time_ns: u64,
    pub event: EventKind,
    pub id: u64,
    pub bytes: u64,
    pub sojourn_ns: Option<u64>,
    /// `proto src:port > dst:port`, as [`wire::FlowKey`] prints it.
    pub flow: Option<String>,
    pub ecn: Ecn,
    /// Why a packet was dropped or marked (`loss`, `down`, `overlimit`, …).
    pub cause: Option<String>,
}

/// A link-log line that does not read; the message quotes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogError(pub String);

impl fmt::Display for LogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LogError {}

impl LogLine {
    /// Reads one line; `None` for the header and other `#` lines.
    pub fn parse(line: &str) -> Result<Option<LogLine>, LogError> {
        if line.starts_with('#') {
            return Ok(None);
        }
        let bad = |why: &str| LogError(format!("{why} in link-log line '{line}'"));
        let f: Vec<&str> = line.split('\t').collect();
        let [time, event, id, bytes, sojourn, flow, ecn, cause] = f[..] else {
            return Err(bad(&format!("{} fields, not 8", f.len())));
        };
        let num = |s: &str, what: &str| s.parse::<u64>().map_err(|_| bad(&format!("{what} '{s}'")));
        let opt = |s: &str| (s != "-").then(|| s.to_string());
        Ok(Some(LogLine {
            time_ns: num(time, "time")?,
            event: match event {
                "enqueue" => EventKind::Enqueue,
                "dequeue" => EventKind::Dequeue,
                "drop" => EventKind::Drop,
                "mark" => EventKind::Mark,
                _ => return Err(bad(&format!("event '{event}'"))),
            },
            id: num(id, "id")?,
            bytes: num(bytes, "bytes")?,
            sojourn_ns: match sojourn {
                "-" => None,
                s => Some(num(s, "sojourn")?),
            },
            flow: opt(flow),
            ecn: match ecn {
                "not-ect" => Ecn::NotEct,
                "ect0" => Ecn::Ect0,
                "ect1" => Ecn::Ect1,
                "ce" => Ecn::Ce,
                _ => return Err(bad(&format!("ecn '{ecn}'"))),
            },
            cause: opt(cause),
        }))
    }

    pub fn time_s(&self) -> f64 {
        self.time_ns as f64 / 1e9
    }
}

/// Every event line of a link log's text; `name` is used in messages.
pub fn parse_link_log(name: &str, text: &str) -> Result<Vec<LogLine>, LogError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        match LogLine::parse(line) {
            Ok(Some(l)) => out.push(l),
            Ok(None) => {}
            Err(e) => return Err(LogError(format!("{name}:{}: {e}", i + 1))),
        }
    }
    Ok(out)
}

/// Queue delay percentiles as summary.json writes them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DelaySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl From<link::Percentiles> for DelaySummary {
    fn from(p: link::Percentiles) -> Self {
        DelaySummary {
            p50: p.p50_ms,
            p95: p.p95_ms,
            p99: p.p99_ms,
            max: p.max_ms,
        }
    }
}

/// Per-queue figures of a two-queue discipline (DualPI2: `l` and `c`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct SubQueueSummary {
    pub packets: u64,
    pub queue_delay_ms: DelaySummary,
    pub marks: u64,
}

/// One link direction in summary.json.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct LinkSummary {
    pub name: String,
    pub direction: String,
    pub queue: String,
    pub packets_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub drops: BTreeMap<String, u64>,
    pub ce_marks: u64,
    pub queue_delay_ms: DelaySummary,
    pub throughput_bps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queues: Option<BTreeMap<String, SubQueueSummary>>,
    /// What the direction was configured to do, and what it did (the run's self-check).
    #[serde(default)]
    pub asked: AskedSummary,
    #[serde(default)]
    pub got: GotSummary,
    /// The self-check as one line for the end of a run ("asked …; got …").
    #[serde(skip)]
    pub check_line: String,
}

/// A link direction's configured values, as summary.json writes them (`asked`). Probabilities
/// are fractions (0.1 for 10 %).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct AskedSummary {
    pub rate_bps: Option<u64>,
    pub delay_ms: f64,
    pub jitter_ms: Option<f64>,
    pub jitter_distribution: Option<String>,
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub pps: Option<u32>,
    pub drop: Vec<String>,
    pub mtu: Option<u32>,
}

/// What a link direction did, as summary.json writes it (`got`): the rate while its
/// transmitter was busy, the delay added on the wire, and the impairments' realised fractions
/// and counts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct GotSummary {
    pub rate_bps: Option<f64>,
    pub added_delay_ms: DelaySummary,
    pub loss: f64,
    pub duplicate: f64,
    pub reorder: f64,
    pub corrupt: f64,
    pub filtered: u64,
    pub too_big: u64,
    pub blackholed: u64,
}

impl LinkSummary {
    pub fn new(
        name: &str,
        direction: &str,
        queue: &str,
        params: &link::LinkParams,
        s: &LinkStats,
    ) -> LinkSummary {
        let asked = link::Asked::of(params);
        let got = link::Got::of(s);
        let check_line = format!("asked {asked}; got {}", got.summary(&asked));
        let queues = queue.starts_with("dualpi2").then(|| {
            let sub = |class: usize| SubQueueSummary {
                packets: s.queue_delay_by_class[class].len(),
                queue_delay_ms: s.queue_delay_by_class[class].percentiles().into(),
                marks: s.marks_by_class[class],
            };
            BTreeMap::from([("c".to_string(), sub(0)), ("l".to_string(), sub(1))])
        });
        LinkSummary {
            name: name.into(),
            direction: direction.into(),
            queue: queue.into(),
            packets_in: s.packets_in,
            packets_out: s.packets_out,
            bytes_out: s.bytes_out,
            drops: s.drops.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ce_marks: s.ce_marks,
            queue_delay_ms: s.queue_delay.percentiles().into(),
            throughput_bps: s.throughput_bps().round(),
            queues,
            asked: AskedSummary {
                rate_bps: asked.rate_bps,
                delay_ms: asked.delay_ms,
                jitter_ms: asked.jitter_ms,
                jitter_distribution: asked.jitter_distribution.map(str::to_string),
                loss: asked.loss,
                duplicate: asked.duplicate,
                reorder: asked.reorder,
                corrupt: asked.corrupt,
                pps: asked.pps,
                drop: asked.filters,
                mtu: asked.mtu_bytes,
            },
            got: GotSummary {
                rate_bps: got.rate_bps.map(f64::round),
                added_delay_ms: got.added_delay.into(),
                loss: got.loss,
                duplicate: got.duplicate,
                reorder: got.reorder,
                corrupt: got.corrupt,
                filtered: got.filtered,
                too_big: got.too_big,
                blackholed: got.blackholed,
            },
            check_line,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Summary {
    pub links: Vec<LinkSummary>,
    /// Packets for addresses outside the lab, dropped at the first hop.
    pub no_route: u64,
    pub engine: EngineSummary,
    /// The NAT64 and DNS64 of a `--nat64` lab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nat64: Option<Nat64Summary>,
    /// What went wrong without stopping the lab, in words (a capture stopped by a full disk).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The translator's counters (see docs/nat64.md) and what the DNS64 was asked.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Nat64Summary {
    pub translated_6to4: u64,
    pub translated_4to6: u64,
    pub icmp_errors_translated: u64,
    pub time_exceeded_sent: u64,
    pub too_big_sent: u64,
    pub param_problem_sent: u64,
    /// Packets not translated, by reason (only reasons that occurred).
    pub drops: BTreeMap<String, u64>,
    pub sessions_created: u64,
    pub sessions_expired: u64,
    pub bindings_created: u64,
    pub table_full: u64,
    pub pool_exhausted: u64,
    pub dns: DnsSummary,
    /// The hosts' CLATs (464XLAT), when the lab has any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clat: Vec<ClatSummary>,
}

/// A host's CLAT: its addresses, its prefix and how it was found, its counters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ClatSummary {
    pub host: String,
    pub iface: String,
    /// The host's private IPv4 address and network (`192.0.0.2/29`).
    pub ipv4: String,
    /// The CLAT's own IPv6 address.
    pub ipv6: String,
    /// The NAT64 prefix it translates to.
    pub prefix: String,
    /// How that prefix was found (RFC 7050 discovery, with the answer, or given).
    pub prefix_source: String,
    /// IPv4 packets from the host sent on as IPv6.
    pub translated_4to6: u64,
    /// IPv6 packets to the CLAT handed to the host as IPv4.
    pub translated_6to4: u64,
    pub icmp_errors_translated: u64,
    /// Packets not translated, by reason (only reasons that occurred).
    pub drops: BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DnsSummary {
    /// UDP queries answered.
    pub answered: u64,
    /// TCP queries answered.
    pub answered_tcp: u64,
    /// Packets for the DNS64 that were not a well-formed UDP query to port 53.
    pub dropped: u64,
    /// Every (name, type) asked, with how often.
    pub queries: Vec<DnsQuerySummary>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DnsQuerySummary {
    pub name: String,
    #[serde(rename = "type")]
    pub qtype: String,
    pub count: u64,
}

/// One stall of the engine (see [`EngineSummary::longest_stall_ms`]).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Stall {
    /// When it began, in seconds since the lab started.
    pub at_s: f64,
    pub ms: f64,
}

/// How well the real-time loop kept to the links' schedule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct EngineSummary {
    /// Packets read from the hosts.
    pub packets: u64,
    /// Actual minus scheduled delivery time of every packet written into a host.
    pub delivery_lateness_ms: DelaySummary,
    pub write_errors: u64,
    /// CPU time latencylab itself used (user + system), not its programs'.
    pub cpu_s: f64,
    /// Milliseconds the engine waited in all, with `-o`, for the thread that writes the
    /// captures and link logs: the disk fell behind the traffic by more than that thread's
    /// buffers hold, and packets due meanwhile were late by as much (said in `warnings`).
    #[serde(default)]
    pub capture_wait_ms: f64,
    /// How many times it waited.
    #[serde(default)]
    pub capture_waits: u64,
    /// The CPU time (user + system) of the thread that writes the captures and link logs, part
    /// of `cpu_s`.
    #[serde(default)]
    pub capture_writer_cpu_s: f64,
    /// The engine's longest stall: the longest time a packet could have waited in a host's
    /// TUN queue before the engine read it (a loop turn's work, or a wake-up later than asked
    /// for: the process stopped or descheduled), invisible in `delivery_lateness_ms`.
    #[serde(default)]
    pub longest_stall_ms: f64,
    /// When that stall began, in seconds since the lab started.
    #[serde(default)]
    pub longest_stall_at_s: f64,
    /// The longest stalls over 1 ms (at most 128 of them, whenever in the run they came), in
    /// the order they happened.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stalls: Vec<Stall>,
    /// How many stalls over 1 ms there were, listed in `stalls` or not.
    #[serde(default)]
    pub stalls_over_1ms: u64,
    /// Their lengths added up.
    #[serde(default)]
    pub stalls_over_1ms_total_ms: f64,
    /// The longest stall over 1 ms that `stalls` does not list (0 when it lists them all): no
    /// stall missing from the list was longer.
    #[serde(default)]
    pub stalls_unlisted_max_ms: f64,
    /// The lab's start (the zero of every `_at_s` above) on the machine's CLOCK_MONOTONIC, so
    /// that a stall can be set beside another program's record of the same moment.
    #[serde(default)]
    pub clock_monotonic_start_ns: u64,
    /// Packets a host's kernel dropped at its own TUN device's transmit queue, by host (only
    /// hosts that dropped any): the host sent faster than the engine read, so they never
    /// reached the emulated link. Read when the lab ends.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub host_tx_dropped: BTreeMap<String, u64>,
    /// Reads from the hosts' TUN devices: fewer than `packets` when the hosts' kernels hand
    /// over TCP and UDP super-packets (TUN offloads, docs/PERFORMANCE.md).
    #[serde(default)]
    pub reads: u64,
    /// Writes into the hosts' TUN devices: fewer than the packets delivered when consecutive
    /// segments of one flow go in as one super-packet.
    #[serde(default)]
    pub writes: u64,
    /// Packets read that could not be cut into datagrams, and so dropped (named in
    /// `warnings`).
    #[serde(default)]
    pub offload_errors: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::{Duration, Instant};

    #[test]
    fn a_rotation_begins_a_file_when_the_next_record_would_not_fit_and_keeps_the_newest_n() {
        let limits = CaptureLimits {
            snaplen_bytes: None,
            file_size_bytes: Some(10),
            file_count: Some(2),
        };
        // A 2-byte header and two 4-byte records fill a file; the third begins the next.
        let mut r = Rotation::new(limits, 2);
        let got: Vec<_> = (0..5).map(|_| r.record(4)).collect();
        let next = |open, remove| Some(NextFile { open, remove });
        assert_eq!(got, vec![None, None, next(1, None), None, next(2, Some(0))]);
        // A record larger than the limit goes whole into a file of its own.
        assert_eq!(r.record(30), next(3, Some(1)));
        assert_eq!(r.record(1), next(4, Some(2)));
        // Without a size limit, one file however large.
        let mut r = Rotation::new(CaptureLimits::default(), 2);
        assert!((0..100).all(|_| r.record(1 << 20).is_none()));
    }

    #[test]
    fn a_written_event_reads_back_field_for_field() {
        let e = Event {
            time: Instant::from_nanos(20_000_000),
            kind: EventKind::Drop,
            id: 7,
            bytes: 1500,
            flow: None,
            ecn: Ecn::Ect1,
            sojourn: Some(Duration::from_nanos(3_000_000)),
            cause: Some(link::DropCause::Loss),
            class: 0,
        };
        let mut out = Vec::new();
        write_event(&mut out, &e).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text, "20000000\tdrop\t7\t1500\t3000000\t-\tect1\tloss\n");
        let l = LogLine::parse(text.trim_end()).unwrap().unwrap();
        assert_eq!(
            l,
            LogLine {
                time_ns: 20_000_000,
                event: EventKind::Drop,
                id: 7,
                bytes: 1500,
                sojourn_ns: Some(3_000_000),
                flow: None,
                ecn: Ecn::Ect1,
                cause: Some("loss".into()),
            }
        );
    }

    #[test]
    fn a_line_that_does_not_read_is_an_error_naming_the_line() {
        let text = format!("{LOG_HEADER}1\tenqueue\t1\t60\t-\t-\tnot-ect\t-\n2\tdequeue\t1\t60\n");
        let e = parse_link_log("path-up.log", &text).unwrap_err();
        assert_eq!(
            e.0,
            "path-up.log:3: 4 fields, not 8 in link-log line '2\tdequeue\t1\t60'"
        );
        assert!(LogLine::parse("1\tqueued\t1\t60\t-\t-\tce\t-")
            .unwrap_err()
            .0
            .starts_with("event 'queued'"));
        assert_eq!(parse_link_log("x", LOG_HEADER).unwrap(), []);
    }

    #[test]
    fn run_dir_paths_follow_the_documented_layout() {
        let d = RunDir::new("run1");
        assert_eq!(
            d.capture("client", "eth0"),
            Path::new("run1/captures/client-eth0.pcap")
        );
        assert_eq!(
            d.link_log("path", Side::Down),
            Path::new("run1/links/path-down.log")
        );
        assert_eq!(d.program_out("alice"), Path::new("run1/programs/alice.out"));
        assert_eq!(d.summary_json(), Path::new("run1/summary.json"));
        assert_eq!(
            RunDir::rotated(&d.capture("client", "eth0"), 12),
            Path::new("run1/captures/client-eth0.pcap.12")
        );
    }
}

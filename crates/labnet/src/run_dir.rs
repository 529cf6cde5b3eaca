//! What a run leaves in its output directory, defined once: every path ([`LAYOUT`]), the
//! link-log line (written and read here, nowhere else, with the queue delay over time read
//! from a log, [`queue_delay_series`]), the schema of `summary.json`, a demo's
//! `results.json` ([`Results`]) and the columns tables make of them ([`LINK_COLUMNS`]). Users
//! script against these (docs/run-dir.md, checked against [`LAYOUT`] by a test); the demos,
//! `ipv6-check`, the sweep, the CLI, the Python package (through [`schema`]) and the tests read
//! runs through this module only.
//!
//! Link log format (tab-separated, one line per packet event, a `#` header line first):
//! `time_ns  event  id  bytes  sojourn_ns  flow  ecn  cause`, where time is nanoseconds since the
//! lab started, event is enqueue/dequeue/drop/mark, sojourn is the time spent queued (dequeue,
//! and drops from the queue), flow is `proto src:port > dst:port`, ecn is
//! not-ect/ect0/ect1/ce, and cause names why a packet was dropped or marked; `-` where a field
//! does not apply. A line that does not read so is an error, never skipped.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use link::{Event, EventKind, LinkStats};
use serde::{Deserialize, Serialize};
use wire::Ecn;

use crate::setting::LinkState;
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
    /// The responsiveness test's JSON report (`shell --rpm`, a run file's `[rpm]`).
    pub fn rpm_json(&self) -> PathBuf {
        self.root.join("rpm.json")
    }
}

impl RunDir {
    /// A demo's figures: [`Results`].
    pub fn results_json(&self) -> PathBuf {
        self.root.join("results.json")
    }
    /// A demo's report page, beside its charts.
    pub fn report_html(&self) -> PathBuf {
        self.root.join("report.html")
    }
    /// One chart of a report, as a PNG file.
    pub fn chart_png(&self, chart: &str) -> PathBuf {
        self.root.join(format!("{chart}.png"))
    }
    /// The run directory of one lab of a demo (or a report of several labs), named after it.
    pub fn lab(&self, name: &str) -> RunDir {
        RunDir::new(self.root.join(name))
    }
    /// A sweep's shell run: COMMAND's standard output (the traffic programs' JSON lines).
    pub fn command_out(&self) -> PathBuf {
        self.root.join("command.out")
    }
    /// A sweep's run: `latencylab`'s own standard error.
    pub fn latencylab_err(&self) -> PathBuf {
        self.root.join("latencylab.err")
    }
    /// A sweep's run on Ray: the name of the node that ran it.
    pub fn ray_node(&self) -> PathBuf {
        self.root.join("ray-node")
    }
}

/// Every path a run writes, relative to its directory, with what it holds: docs/run-dir.md
/// shows this list, and a test holds the two together. `RunDir`'s methods build each.
pub const LAYOUT: &[(&str, &str)] = &[
    ("lab.json", "the lab as it ran, every default filled in"),
    (
        "summary.json",
        "per link direction and for the engine: counts and percentiles",
    ),
    (
        "captures/HOST-IFACE.pcap",
        "what tcpdump on that interface would see (LINKTYPE_RAW, ns timestamps)",
    ),
    (
        "links/LINK-up.log",
        "every packet event of a link direction (up is a→b)",
    ),
    ("links/LINK-down.log", "… and b→a"),
    (
        "captures/HOST-IFACE.pcap.N",
        "the N-th file after the first, with -C (links/LINK-SIDE.log.N too)",
    ),
    (
        "programs/NAME.out, .err",
        "a program's stdout and stderr (run files and demos)",
    ),
    (
        "rpm.json",
        "the responsiveness test's report, every probe kept (shell --rpm, [rpm])",
    ),
    (
        "results.json",
        "a demo's figures (the numbers of its table)",
    ),
    ("report.html, NAME.png", "a demo's report and its charts"),
    ("LAB/", "a demo's labs, each a run directory of its own"),
    (
        "command.out, latencylab.err",
        "in a sweep's run: COMMAND's stdout, latencylab's stderr",
    ),
    ("ray-node", "in a sweep's run on Ray: the node that ran it"),
];

impl AsRef<Path> for RunDir {
    fn as_ref(&self) -> &Path {
        &self.root
    }
}

/// The first line of every link log.
pub const LOG_HEADER: &str = "# time_ns\tevent\tid\tbytes\tsojourn_ns\tflow\tecn\tcause\n";

/// A link log's fields, in order.
pub const LOG_COLUMNS: [&str; 8] = [
    "time_ns",
    "event",
    "id",
    "bytes",
    "sojourn_ns",
    "flow",
    "ecn",
    "cause",
];

/// Every event a link log records (a duplicate made and a bit flipped on the wire too).
pub const EVENTS: [EventKind; 6] = [
    EventKind::Enqueue,
    EventKind::Dequeue,
    EventKind::Drop,
    EventKind::Mark,
    EventKind::Duplicate,
    EventKind::Corrupt,
];

/// Every cause a drop or mark can have: in a link log's `cause` and `summary.json`'s `drops`.
pub fn causes() -> Vec<&'static str> {
    use link::DropCause;
    // A new cause does not compile until it is listed below.
    let _every = |c: DropCause| match c {
        DropCause::Loss
        | DropCause::Down
        | DropCause::Blackhole
        | DropCause::Filter
        | DropCause::TooBig
        | DropCause::NoRoute
        | DropCause::Qdisc(_) => (),
    };
    let mut v: Vec<&str> = [
        DropCause::Loss,
        DropCause::Down,
        DropCause::Blackhole,
        DropCause::Filter,
        DropCause::TooBig,
        DropCause::NoRoute,
    ]
    .into_iter()
    .map(DropCause::name)
    .collect();
    v.extend(qdisc::Cause::ALL.iter().map(|c| c.name()));
    v
}

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
            event: EVENTS
                .into_iter()
                .find(|k| k.name() == event)
                .ok_or_else(|| bad(&format!("event '{event}'")))?,
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
        if let Some(l) = parse_numbered(name, i, line)? {
            out.push(l);
        }
    }
    Ok(out)
}

/// Line `i` (from 0) of link log `name`, its error naming the file and line.
fn parse_numbered(name: &str, i: usize, line: &str) -> Result<Option<LogLine>, LogError> {
    LogLine::parse(line).map_err(|e| LogError(format!("{name}:{}: {e}", i + 1)))
}

/// Queue delay over time from a link log: for each `bin_s` of lab time, the longest sojourn
/// of a packet dequeued in it, as (bin start s, ms), bins without a dequeue left out. The
/// maximum, not the mean, because the worst packet of each moment is what a delay-sensitive
/// flow behind it waits for. `name` is used in messages.
pub fn queue_delay_series(
    name: &str,
    log: impl BufRead,
    bin_s: f64,
) -> Result<Vec<(f64, f64)>, LogError> {
    queue_delay_series_of(name, log, bin_s, |_| true)
}

/// As [`queue_delay_series`], for the packets whose ECN field `keep` accepts: a dual queue's
/// L or C side.
///
/// The log is read as a stream, a line at a time, rather than as one text: a long run's log
/// is larger than what a report should hold in memory. The caller opens it.
pub fn queue_delay_series_of(
    name: &str,
    log: impl BufRead,
    bin_s: f64,
    keep: impl Fn(Ecn) -> bool,
) -> Result<Vec<(f64, f64)>, LogError> {
    let mut bins_ms: Vec<f64> = Vec::new();
    for (i, line) in log.lines().enumerate() {
        let line = line.map_err(|e| LogError(format!("reading {name}: {e}")))?;
        let Some(LogLine {
            time_ns,
            event: EventKind::Dequeue,
            sojourn_ns: Some(sojourn_ns),
            ecn,
            ..
        }) = parse_numbered(name, i, &line)?
        else {
            continue;
        };
        if !keep(ecn) {
            continue;
        }
        let bin = (time_ns as f64 / 1e9 / bin_s) as usize;
        if bins_ms.len() <= bin {
            bins_ms.resize(bin + 1, f64::NAN);
        }
        let ms = sojourn_ns as f64 / 1e6;
        if bins_ms[bin].is_nan() || ms > bins_ms[bin] {
            bins_ms[bin] = ms;
        }
    }
    Ok(bins_ms
        .iter()
        .enumerate()
        .filter(|(_, v)| !v.is_nan())
        .map(|(i, v)| (i as f64 * bin_s, *v))
        .collect())
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
    /// How far ahead of its time the engine was allowed to deliver a packet (`--precision`;
    /// 0: every packet at its own time).
    #[serde(default)]
    pub precision_ms: f64,
    /// How far from its scheduled time every packet was written into a host: actual minus
    /// scheduled, or scheduled minus actual for one written early (with `--precision`).
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

/// One column a table makes of each link direction of `summary.json` (the sweep's
/// `LINK_DIR_…` columns, the Python package's `Run.links()`): `key` is the path in the link's
/// object (`queue_delay_ms.p95`), its value divided by `divisor` (a division, not a product by
/// the inverse, so that `9891794 / 1e6` is the nearest double to 9.891794, which reads back
/// from JSON as itself), or the sum of an object's values when `sum`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LinkColumn {
    pub name: &'static str,
    pub key: &'static str,
    pub divisor: f64,
    pub sum: bool,
}

const fn col(name: &'static str, key: &'static str) -> LinkColumn {
    LinkColumn {
        name,
        key,
        divisor: 1.0,
        sum: false,
    }
}

/// The columns of a link direction, in a table's order.
pub const LINK_COLUMNS: &[LinkColumn] = &[
    LinkColumn {
        divisor: 1e6,
        ..col("throughput_mbps", "throughput_bps")
    },
    col("packets_in", "packets_in"),
    col("packets_out", "packets_out"),
    LinkColumn {
        sum: true,
        ..col("drops", "drops")
    },
    col("ce_marks", "ce_marks"),
    col("queue_delay_p50_ms", "queue_delay_ms.p50"),
    col("queue_delay_p95_ms", "queue_delay_ms.p95"),
    col("queue_delay_p99_ms", "queue_delay_ms.p99"),
    col("queue_delay_max_ms", "queue_delay_ms.max"),
];

impl LinkColumn {
    /// The column's value for one link direction of `summary.json`, as JSON.
    pub fn value(&self, link: &serde_json::Value) -> Option<f64> {
        let v = self.key.split('.').try_fold(link, |v, k| v.get(k))?;
        let x = if self.sum {
            // A fold from +0: `sum()` of no floats is -0, which a table would print as "-0".
            v.as_object()?
                .values()
                .filter_map(|x| x.as_f64())
                .fold(0.0, |a, b| a + b)
        } else {
            v.as_f64()?
        };
        Some(x / self.divisor)
    }
}

impl LinkSummary {
    /// The direction's [`LINK_COLUMNS`], by name.
    pub fn columns(&self) -> Vec<(&'static str, f64)> {
        let json = serde_json::to_value(self).expect("plain data serializes");
        LINK_COLUMNS
            .iter()
            .filter_map(|c| c.value(&json).map(|v| (c.name, v)))
            .collect()
    }
}

impl Summary {
    /// Reads `summary.json`'s text; `name` is used in messages.
    pub fn parse(name: &str, text: &str) -> Result<Summary, LogError> {
        serde_json::from_str(text).map_err(|e| LogError(format!("{name}: {e}")))
    }
}

/// One figure of a demo's `results.json`: a number, a yes/no, a word, or a group of figures
/// (one run's, under the run's name). Anything else (a list) is kept but is no figure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(untagged)]
pub enum Figure {
    Number(serde_json::Number),
    Bool(bool),
    Text(String),
    Group(BTreeMap<String, Figure>),
    Other(serde_json::Value),
}

/// A demo's `results.json`: its figures by name, as the demo's table shows them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Results(pub BTreeMap<String, Figure>);

impl Results {
    /// Reads `results.json`'s text; `name` is used in messages.
    pub fn parse(name: &str, text: &str) -> Result<Results, LogError> {
        serde_json::from_str(text)
            .map_err(|e| LogError(format!("{name}: {e} (an object of figures was expected)")))
    }

    /// The figures as a table's columns: a group's under `GROUP_NAME`, groups down to `depth`
    /// levels; lists and deeper groups are left out.
    pub fn columns(&self, depth: u32) -> BTreeMap<String, serde_json::Value> {
        fn walk(
            prefix: &str,
            m: &BTreeMap<String, Figure>,
            depth: u32,
            out: &mut BTreeMap<String, serde_json::Value>,
        ) {
            for (k, f) in m {
                let name = format!("{prefix}{k}");
                match f {
                    Figure::Number(n) => {
                        out.insert(name, serde_json::Value::Number(n.clone()));
                    }
                    Figure::Bool(b) => {
                        out.insert(name, (*b).into());
                    }
                    Figure::Text(t) => {
                        out.insert(name, t.clone().into());
                    }
                    Figure::Group(g) if depth > 1 => walk(&format!("{name}_"), g, depth - 1, out),
                    Figure::Group(_) | Figure::Other(_) => {}
                }
            }
        }
        let mut out = BTreeMap::new();
        walk("", &self.0, depth, &mut out);
        out
    }
}

/// [`LAYOUT`] as docs/run-dir.md shows it, one `DIR/PATH  what it holds` line each.
pub fn layout_text() -> String {
    let width = LAYOUT
        .iter()
        .map(|(p, _)| p.chars().count())
        .max()
        .unwrap_or(0)
        + 4;
    LAYOUT
        .iter()
        .map(|(p, what)| format!("{:<width$} {what}\n", format!("DIR/{p}")))
        .collect()
}

/// The run directory's definition as data, for readers in other languages (the Python
/// package keeps a copy, python/latencylab/run_dir.json, which a test compares with this):
/// the paths, the link log's columns, events and causes, and the link columns.
pub fn schema() -> serde_json::Value {
    let d = RunDir::new("");
    let name = |p: PathBuf| p.display().to_string();
    let files = serde_json::json!({
        "lab_json": name(d.lab_json()),
        "summary_json": name(d.summary_json()),
        "results_json": name(d.results_json()),
        "report_html": name(d.report_html()),
        "chart_png": name(d.chart_png("{chart}")),
        "capture": name(d.capture("{host}", "{iface}")),
        "link_log": name(d.link_log("{link}", Side::Up)).replace("-up.", "-{direction}."),
        "program_out": name(d.program_out("{program}")),
        "program_err": name(d.program_err("{program}")),
        "rpm_json": name(d.rpm_json()),
        "command_out": name(d.command_out()),
        "latencylab_err": name(d.latencylab_err()),
        "ray_node": name(d.ray_node()),
    });
    serde_json::json!({
        "files": files,
        "layout": LAYOUT.iter().map(|(p, what)| serde_json::json!({"path": p, "holds": what})).collect::<Vec<_>>(),
        "link_log_columns": LOG_COLUMNS,
        "link_log_events": EVENTS.iter().map(|e| e.name()).collect::<Vec<_>>(),
        "causes": causes(),
        "link_states": LinkState::ALL.map(LinkState::name),
        "link_columns": LINK_COLUMNS,
    })
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

    fn repo_file(path: &str) -> String {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// The section of `doc` from the heading `from` to the next heading of its level.
    fn section<'a>(doc: &'a str, from: &str) -> &'a str {
        let start = doc.find(from).unwrap_or_else(|| panic!("no '{from}'"));
        let rest = &doc[start + from.len()..];
        &rest[..rest.find("\n## ").unwrap_or(rest.len())]
    }

    fn keys(v: &serde_json::Value) -> Vec<String> {
        v.as_object().unwrap().keys().cloned().collect()
    }

    #[test]
    fn docs_run_dir_shows_the_layout_events_causes_states_and_keys_of_the_definition() {
        let doc = repo_file("docs/run-dir.md");
        assert!(
            doc.contains(&format!("```\n{}```", layout_text())),
            "docs/run-dir.md's layout block is not run_dir::layout_text():\n{}",
            layout_text()
        );
        let log = section(&doc, "## Link logs");
        for c in LOG_COLUMNS {
            assert!(log.contains(&format!("| `{c}` |")), "link log field {c}");
        }
        for e in EVENTS {
            assert!(
                log.contains(&format!("`{}`", e.name())),
                "event {}",
                e.name()
            );
        }
        for c in causes() {
            assert!(
                log.contains(&format!("`{c}`")),
                "cause {c} not in the link logs' table"
            );
        }
        let lab = section(&doc, "## `lab.json`");
        for st in LinkState::ALL {
            assert!(
                lab.contains(&format!("`\"{}\"`", st.name())),
                "state {}",
                st.name()
            );
        }
        for (k, _) in crate::setting::Direction::default().to_json() {
            assert!(lab.contains(&format!("| `{k}` |")), "lab.json key {k}");
        }
        let summary = section(&doc, "## `summary.json`");
        let s = serde_json::to_value(example_summary()).unwrap();
        // `key`, `key[]` (a list) or `key.sub`.
        let named = |k: &str| {
            ["`", "[]`", "."]
                .iter()
                .any(|end| summary.contains(&format!("`{k}{end}")))
        };
        for k in keys(&s) {
            assert!(named(&k), "summary.json key {k}");
        }
        for k in keys(&s["links"][0]) {
            assert!(named(&k), "summary.json links[] key {k}");
        }
        for k in keys(&s["engine"]) {
            assert!(
                summary.contains(&format!("`engine.{k}`")) || summary.contains(&format!("`{k}`")),
                "summary.json engine key {k}"
            );
        }
    }

    #[test]
    fn the_python_packages_copy_of_the_definition_is_the_definition() {
        let want = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python/latencylab/run_dir.json");
        if std::fs::read_to_string(&p).ok().as_deref() != Some(want.as_str()) {
            let fresh = std::env::temp_dir().join("run_dir.json");
            std::fs::write(&fresh, &want).unwrap();
            panic!(
                "python/latencylab/run_dir.json is not run_dir::schema(): the definition's is in {}",
                fresh.display()
            );
        }
    }

    fn example_summary() -> Summary {
        let params = link::LinkParams::default();
        let stats = LinkStats {
            packets_in: 10,
            packets_out: 9,
            drops: BTreeMap::from([("overlimit", 1)]),
            ..LinkStats::default()
        };
        let mut l = LinkSummary::new("path", "down", "dualpi2", &params, &stats);
        l.throughput_bps = 9_500_000.0;
        // Said at the end of a run, never written.
        l.check_line = String::new();
        l.drops.insert("loss".into(), 2);
        Summary {
            links: vec![l],
            no_route: 0,
            engine: serde_json::from_value(serde_json::json!({
                "packets": 1, "delivery_lateness_ms": {"p50": 0.0, "p95": 0.0, "p99": 0.0, "max": 0.0},
                "write_errors": 0, "cpu_s": 0.1,
                "stalls": [{"at_s": 1.0, "ms": 2.0}],
                "host_tx_dropped": {"client": 1}
            }))
            .unwrap(),
            nat64: Some(Nat64Summary::default()),
            warnings: vec!["a warning".into()],
        }
    }

    #[test]
    fn link_columns_read_the_typed_summary_and_results_flatten_to_columns() {
        let s = example_summary();
        let cols: BTreeMap<_, _> = s.links[0].columns().into_iter().collect();
        assert_eq!(cols["throughput_mbps"], 9.5);
        assert_eq!(cols["drops"], 3.0);
        assert_eq!(cols["packets_in"], 10.0);
        assert_eq!(cols.len(), LINK_COLUMNS.len());
        // A figure reads back from a journal's JSON as itself.
        let mbps = LINK_COLUMNS[0].value(&serde_json::json!({"throughput_bps": 9891794.0}));
        let text = serde_json::to_string(&mbps.unwrap()).unwrap();
        assert_eq!(serde_json::from_str::<f64>(&text).ok(), mbps, "{text}");
        let drops = LINK_COLUMNS.iter().find(|c| c.name == "drops").unwrap();
        let none = drops.value(&serde_json::json!({"drops": {}})).unwrap();
        assert!(none == 0.0 && none.is_sign_positive(), "{none}");
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(Summary::parse("summary.json", &text).unwrap(), s);
        assert!(Summary::parse("summary.json", "{}")
            .unwrap_err()
            .0
            .starts_with("summary.json: missing field"));
        let r = Results::parse(
            "results.json",
            r#"{"base_rtt_ms": 20, "ok": true, "fifo": {"queue": "fifo limit 300", "rtt_p95_ms": 372.5, "deep": {"x": 1}}, "runs": [1, 2]}"#,
        )
        .unwrap();
        let c = r.columns(2);
        assert_eq!(c["base_rtt_ms"], 20);
        assert_eq!(c["ok"], true);
        assert_eq!(c["fifo_queue"], "fifo limit 300");
        assert_eq!(c["fifo_rtt_p95_ms"], 372.5);
        assert!(!c.contains_key("fifo_deep_x") && !c.contains_key("runs"));
        assert!(Results::parse("results.json", "[1]").is_err());
    }

    #[test]
    fn queue_delay_series_keeps_the_longest_dequeue_sojourn_per_bin() {
        let log = format!(
            "{LOG_HEADER}\
             10000000\tenqueue\t1\t1500\t-\t-\tnot-ect\t-\n\
             20000000\tdequeue\t1\t1500\t3000000\t-\tnot-ect\t-\n\
             30000000\tdequeue\t2\t1500\t7000000\t-\tnot-ect\t-\n\
             40000000\tdrop\t3\t1500\t9000000\t-\tnot-ect\toverlimit\n\
             250000000\tdequeue\t4\t1500\t1000000\t-\tnot-ect\t-\n"
        );
        let s = queue_delay_series("l.log", log.as_bytes(), 0.1).unwrap();
        assert_eq!(s, vec![(0.0, 7.0), (0.2, 1.0)]);
    }

    #[test]
    fn queue_delay_series_of_counts_only_the_packets_whose_ecn_it_keeps() {
        let log = "20000000\tdequeue\t1\t1500\t3000000\t-\tect1\t-\n\
                   30000000\tdequeue\t2\t1500\t7000000\t-\tnot-ect\t-\n\
                   150000000\tdequeue\t3\t1500\t2000000\t-\tce\t-\n\
                   160000000\tdequeue\t4\t1500\t9000000\t-\tect0\t-\n";
        let l_side = |e: Ecn| matches!(e, Ecn::Ect1 | Ecn::Ce);
        let l = queue_delay_series_of("l.log", log.as_bytes(), 0.1, l_side).unwrap();
        assert_eq!(l, vec![(0.0, 3.0), (0.1, 2.0)]);
        let c = queue_delay_series_of("l.log", log.as_bytes(), 0.1, |e| !l_side(e)).unwrap();
        assert_eq!(c, vec![(0.0, 7.0), (0.1, 9.0)]);
    }

    #[test]
    fn a_link_log_line_that_does_not_read_is_an_error_not_a_gap() {
        let log = "10000000\tdequeue\t1\t1500\tsoon\t-\tnot-ect\t-\n";
        let e = queue_delay_series("l.log", log.as_bytes(), 0.1).unwrap_err();
        assert!(e.0.starts_with("l.log:1: sojourn 'soon'"), "{e}");
    }

    #[test]
    fn duplicates_and_bit_flips_in_a_link_log_read_back() {
        for e in EVENTS {
            let line = format!("5\t{}\t1\t60\t-\t-\tnot-ect\t-", e.name());
            assert_eq!(LogLine::parse(&line).unwrap().unwrap().event, e);
        }
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
        assert_eq!(d.results_json(), Path::new("run1/results.json"));
        assert_eq!(d.report_html(), Path::new("run1/report.html"));
        assert_eq!(d.chart_png("rtt"), Path::new("run1/rtt.png"));
        assert_eq!(
            d.lab("fifo").summary_json(),
            Path::new("run1/fifo/summary.json")
        );
        assert_eq!(d.command_out(), Path::new("run1/command.out"));
        // Every file the methods name is in the documented layout.
        let listed: String = LAYOUT.iter().map(|(p, _)| format!("{p} ")).collect();
        for f in [
            "lab.json",
            "summary.json",
            "results.json",
            "report.html",
            ".png",
            "command.out",
            "latencylab.err",
            "programs/NAME.out",
            ".err",
            "captures/HOST-IFACE.pcap",
            "links/LINK-up.log",
            ".pcap.N",
        ] {
            assert!(listed.contains(f), "{f}");
        }
        assert_eq!(
            RunDir::rotated(&d.capture("client", "eth0"), 12),
            Path::new("run1/captures/client-eth0.pcap.12")
        );
    }
}

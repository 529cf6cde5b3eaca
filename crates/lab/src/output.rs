//! What a run leaves in its output directory: `captures/HOST-IFACE.pcap`,
//! `links/LINK-DIRECTION.log`, `lab.json` and `summary.json`.
//!
//! Link log format (tab-separated, one line per packet event, a `#` header line first):
//! `time_ns  event  id  bytes  sojourn_ns  flow  ecn  cause`, where time is nanoseconds since the
//! lab started, event is enqueue/dequeue/drop/mark, sojourn is the time spent queued (dequeue,
//! and drops from the queue), flow is `proto src:port > dst:port`, ecn is
//! not-ect/ect0/ect1/ce, and cause names why a packet was dropped or marked; `-` where a field
//! does not apply.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use link::{Event, LinkStats};
use serde::Serialize;
use wire::pcap::PcapWriter;

pub const LOG_HEADER: &str = "# time_ns\tevent\tid\tbytes\tsojourn_ns\tflow\tecn\tcause\n";

/// Creates `dir` and its `captures/` and `links/` subdirectories.
pub fn prepare_dir(dir: &Path) -> Result<()> {
    for sub in ["captures", "links"] {
        let p = dir.join(sub);
        fs::create_dir_all(&p).with_context(|| format!("-o: cannot create {}", p.display()))?;
    }
    Ok(())
}

pub type Pcap = PcapWriter<BufWriter<File>>;

pub fn open_pcap(path: &Path) -> Result<Pcap> {
    let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
    PcapWriter::new(BufWriter::with_capacity(1 << 20, f))
        .with_context(|| format!("writing {}", path.display()))
}

/// One link direction's event log.
pub struct LinkLog {
    out: BufWriter<File>,
    pub path: PathBuf,
}

impl LinkLog {
    pub fn create(path: &Path) -> Result<LinkLog> {
        let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        out.write_all(LOG_HEADER.as_bytes())?;
        Ok(LinkLog {
            out,
            path: path.to_path_buf(),
        })
    }

    pub fn write(&mut self, e: &Event) -> std::io::Result<()> {
        let sojourn = e
            .sojourn
            .map_or("-".to_string(), |s| s.as_nanos().to_string());
        let flow = e.flow.map_or("-".to_string(), |f| f.to_string());
        let cause = e.cause.map_or("-", |c| c.name());
        writeln!(
            self.out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            e.time.as_nanos(),
            e.kind.name(),
            e.id,
            e.bytes,
            sojourn,
            flow,
            e.ecn.name(),
            cause
        )
    }

    pub fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}

/// Queue delay percentiles as summary.json writes them.
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
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
#[derive(Serialize, Clone, Debug, Default, PartialEq)]
pub struct SubQueueSummary {
    pub packets: u64,
    pub queue_delay_ms: DelaySummary,
    pub marks: u64,
}

/// One link direction in summary.json.
#[derive(Serialize, Clone, Debug, PartialEq)]
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
}

impl LinkSummary {
    pub fn new(name: &str, direction: &str, queue: &str, s: &LinkStats) -> LinkSummary {
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
        }
    }
}

#[derive(Serialize, Clone, Debug)]
pub struct Summary {
    pub links: Vec<LinkSummary>,
    /// Packets for addresses outside the lab, dropped at the first hop.
    pub no_route: u64,
    pub engine: EngineSummary,
    /// The NAT64 and DNS64 of a `--nat64` lab.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nat64: Option<Nat64Summary>,
}

/// The translator's counters (see docs/nat64.md) and what the DNS64 was asked.
#[derive(Serialize, Clone, Debug, Default)]
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
}

#[derive(Serialize, Clone, Debug, Default)]
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

#[derive(Serialize, Clone, Debug)]
pub struct DnsQuerySummary {
    pub name: String,
    #[serde(rename = "type")]
    pub qtype: String,
    pub count: u64,
}

/// How well the real-time loop kept to the links' schedule.
#[derive(Serialize, Clone, Debug)]
pub struct EngineSummary {
    /// Packets read from the hosts.
    pub packets: u64,
    /// Actual minus scheduled delivery time of every packet written into a host.
    pub delivery_lateness_ms: DelaySummary,
    pub write_errors: u64,
    /// CPU time latencylab itself used (user + system), not its programs'.
    pub cpu_s: f64,
}

pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(value).expect("plain data serializes");
    fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

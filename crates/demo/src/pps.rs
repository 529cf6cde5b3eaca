//! `latencylab demo pps`: packets per second, not bytes (experiment E9 of the 1998 talk).
//!
//! The line: no byte-rate limit at all, 10 ms each way, but a hop that forwards at most N
//! packets per second in each direction (the link's `pps` setting). The same bulk TCP download
//! (`bulk-server` / `bulk-client`) runs twice, same seed: run `mtu1500` with both hosts at
//! MTU 1500, run `mtu9000` at MTU 9000. Each packet costs the hop the same, whatever its size,
//! so goodput follows the bytes each packet carries: about 6× more at MTU 9000.
//!
//! Measured: the client's goodput (its `interval` and `total` lines), and the data packets
//! that came through the hop each second (the analyzer's series of the client's capture).
//!
//! This module runs and presents; it does not judge: the criteria are printed as checks, and
//! the end-to-end test asserts them.

use labnet::run_dir::RunDir;
use std::path::Path;

use analyze::Analysis;
use anyhow::{bail, Result};
use lab::config::{Direction, EcnMode, LabConfig};
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// One-way propagation delay of the line, each way.
const DELAY: &str = "10ms";
/// When the client starts, s after the lab: the server listens by then.
const CLIENT_START_S: f64 = 0.5;
/// The bulk server's port (bulk-server's default).
const PORT: u16 = 5201;
/// IPv6 (40) + TCP (20) + timestamps (12) header bytes per packet: what the MTU leaves for
/// payload (RFC 8200 section 3, RFC 9293 section 3.1, RFC 7323 section 3). The client reaches
/// `server` by name, over IPv6.
const HEADER_BYTES: u32 = 72;

/// The runs: directory (and key in `results.json`) and both hosts' MTU, bytes.
pub const RUNS: [(&str, u32); 2] = [("mtu1500", 1500), ("mtu9000", 9000)];

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    /// Both hosts' MTU, bytes.
    pub mtu: u32,
    /// The client's goodput over the whole transfer (its `total` line).
    pub goodput_mbps: f64,
    /// Data packets from the server that reached the client per second, from the first to
    /// the last (the client's capture).
    pub packets_per_s: f64,
    /// Payload bytes per data packet, on average.
    pub bytes_per_packet: f64,
    /// Packets the hop's queue dropped on the way to the client (`summary.json`): the
    /// download's congestion window outgrowing the queue.
    pub drops: u64,
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    /// The hop's ceiling, packets per second each way.
    pub pps_limit: u64,
    pub mtu1500: RunMetrics,
    pub mtu9000: RunMetrics,
}

impl Results {
    /// Goodput at MTU 9000 over goodput at MTU 1500.
    pub fn goodput_ratio(&self) -> f64 {
        self.mtu9000.goodput_mbps / self.mtu1500.goodput_mbps
    }
    /// What the ratio would be if goodput followed the payload per packet exactly.
    pub fn payload_ratio(&self) -> f64 {
        f64::from(self.mtu9000.mtu - HEADER_BYTES) / f64::from(self.mtu1500.mtu - HEADER_BYTES)
    }
}

/// What the demo leaves.
pub type Outcome = common::Outcome<Results>;

struct RunData {
    /// The run's directory.
    name: &'static str,
    color: Rgb,
    metrics: RunMetrics,
    analysis: Analysis,
    /// (s since the transfer began, Mbit/s), the client's intervals.
    goodput: Vec<(f64, f64)>,
    /// (s since the first data packet, packets in that second).
    packets: Vec<(f64, f64)>,
}

impl RunData {
    /// The run's values of each second, named by its MTU in the legend.
    fn series(&self, per_second: Vec<(f64, f64)>) -> Series {
        let name = format!("MTU {}", self.metrics.mtu);
        Series::step(name, self.color, per_second).keep_in_legend()
    }
}

/// The lab of one run, both hosts at `mtu`.
pub fn lab_config(mtu: u32, pps: u64, duration_s: f64, seed: u64) -> LabConfig {
    let queue = Direction::default().queue.to_string();
    let pps = pps.to_string();
    let dir = || {
        Direction::parse(&[
            ("rate", "unlimited"),
            ("delay", DELAY),
            ("queue", &queue),
            ("pps", &pps),
        ])
        .unwrap_or_else(|e| panic!("the pps demo's link direction: {e}"))
    };
    let host = |name: &str, index: usize| {
        let mut h = common::host(name, index, EcnMode::Passive);
        h.settings.mtu = mtu;
        h
    };
    // The lab ends with the client.
    common::two_hosts(
        seed,
        [host("client", 1), host("server", 2)],
        ("path", dir(), dir()),
        vec![
            common::program(
                "bulk-server",
                "server",
                0.0,
                "exec latencylab bulk-server".into(),
                false,
            ),
            common::program(
                "bulk-client",
                "client",
                CLIENT_START_S,
                format!("exec latencylab bulk-client server --duration {duration_s}s"),
                true,
            ),
        ],
    )
}

/// The runs: what [`run`] runs and `--export` writes.
pub fn runs(a: &Args) -> Vec<(usize, common::Run)> {
    let lab_s = a.seconds("duration") + CLIENT_START_S + 1.5;
    RUNS.iter()
        .enumerate()
        .map(|(i, &(dir, mtu))| {
            let run = common::Run {
                dir: dir.into(),
                msg: format!("MTU {mtu}, at most {} packets/s", a.count("pps")),
                expected_s: lab_s,
                config: lab_config(mtu, a.count("pps"), a.seconds("duration"), a.seed),
            };
            (i, run)
        })
        .collect()
}

/// Runs the labs, analyses them and writes `results.json`, the PNGs and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) = common::run_series(a, runs(a), (2.0, 2.0), collect)?;
    let results = Results {
        pps_limit: a.count("pps"),
        mtu1500: runs[0].metrics.clone(),
        mtu9000: runs[1].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| write_outputs(a, r, c, &runs))
}

/// Reads the `i`-th run's outputs back.
fn collect(i: usize, dir: &Path, result: &lab::RunResult) -> Result<RunData> {
    let (name, mtu) = RUNS[i];
    let drops = common::link_summary(result, "path", "down")?
        .drops
        .values()
        .sum();
    let client = common::program_records(dir, "bulk-client")?;
    let goodput: Vec<(f64, f64)> = client
        .iter()
        .filter_map(|r| match r {
            apps::Record::Interval {
                t_s,
                role,
                goodput_mbps,
                ..
            } if role == "receiver" => Some((*t_s, *goodput_mbps)),
            _ => None,
        })
        .collect();
    let total_mbps = common::total_goodput_mbps(&client, "receiver", dir, "bulk-client")?;
    let analysis = common::analyze_pcap(&RunDir::new(dir).capture("client", "eth0"))?;
    // The server's data as it arrived at the client: past the hop.
    let mut times_ns = Vec::new();
    let mut bytes = 0u64;
    for c in analysis
        .connections
        .iter()
        .filter(|c| c.a.port() == PORT || c.b.port() == PORT)
    {
        let d = if c.a.port() == PORT { &c.a2b } else { &c.b2a };
        for g in d.series.segments.iter().filter(|g| g.len > 0) {
            times_ns.push(g.time.as_nanos());
            bytes += u64::from(g.len);
        }
    }
    times_ns.sort_unstable();
    let (Some(&first), Some(&last)) = (times_ns.first(), times_ns.last()) else {
        bail!(
            "{}: the client's capture holds no data from port {PORT}",
            dir.display()
        );
    };
    let span_s = (last - first) as f64 / 1e9;
    let n = times_ns.len() as f64;
    let mut per_s: Vec<f64> = Vec::new();
    for t in &times_ns {
        let i = ((t - first) / 1_000_000_000) as usize;
        if per_s.len() <= i {
            per_s.resize(i + 1, 0.0);
        }
        per_s[i] += 1.0;
    }
    // The last second is partial: leave it out of the series, as the client does.
    if span_s > 1.0 && per_s.len() > (span_s as usize) {
        per_s.truncate(span_s as usize);
    }
    Ok(RunData {
        name,
        color: common::PAIR_COLORS[i],
        metrics: RunMetrics {
            mtu,
            goodput_mbps: total_mbps,
            packets_per_s: if span_s > 0.0 { n / span_s } else { 0.0 },
            bytes_per_packet: bytes as f64 / n,
            drops,
        },
        analysis,
        goodput,
        packets: per_s
            .iter()
            .enumerate()
            .map(|(i, p)| (i as f64 + 0.5, *p))
            .collect(),
    })
}

/// The experiment's criteria, on these numbers (the talk: about 5× more throughput with big
/// packets, because the hop's limit is packets, not bytes).
pub fn checks(r: &Results) -> Vec<Check> {
    let n = r.pps_limit as f64;
    let ratio = r.goodput_ratio();
    let want = r.payload_ratio();
    let near_n = |m: &RunMetrics| Check {
        what: format!(
            "MTU {}: the hop forwards about {n:.0} packets/s ({:.0}/s, within {:.0} to {:.0})",
            m.mtu,
            m.packets_per_s,
            0.85 * n,
            1.02 * n
        ),
        passed: (0.85 * n..=1.02 * n).contains(&m.packets_per_s),
    };
    vec![
        Check {
            what: format!(
                "goodput at MTU 9000 is near the payload ratio {want:.1}× of MTU 1500's \
                 ({ratio:.1}×, within {:.1} to {:.1}; the talk: about 5×)",
                0.7 * want,
                1.05 * want
            ),
            passed: (0.7 * want..=1.05 * want).contains(&ratio),
        },
        near_n(&r.mtu1500),
        near_n(&r.mtu9000),
    ]
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [(RUNS[0].0, &r.mtu1500), (RUNS[1].0, &r.mtu9000)];
    let (header, row) = common::run_columns(&runs);
    let rows = vec![
        row("MTU (bytes)", &|m| m.mtu.to_string()),
        row("goodput (Mbit/s)", &|m| format!("{:.1}", m.goodput_mbps)),
        row("packets/s through the hop", &|m| {
            format!("{:.0}", m.packets_per_s)
        }),
        row("payload per packet (bytes)", &|m| {
            format!("{:.0}", m.bytes_per_packet)
        }),
        row("drops at the hop", &|m| m.drops.to_string()),
    ];
    (header, rows)
}

fn goodput_chart(r: &Results, runs: &[RunData]) -> Chart {
    let mut c = Chart::new(
        "Goodput of the same download, each second",
        Axis::new("time", "s"),
        Axis::new("goodput", "Mbit/s").from_zero(),
    )
    .size(900, 420)
    .caption(
        format!(
            "The line has no byte-rate limit; the hop forwards at most {} packets a second. At \
             MTU 1500 each packet carries about {:.0} bytes of data: {:.1} Mbit/s. At MTU 9000 \
             it carries about {:.0}: {:.1} Mbit/s, {:.1}× more, from the same packet rate.",
            r.pps_limit,
            r.mtu1500.bytes_per_packet,
            r.mtu1500.goodput_mbps,
            r.mtu9000.bytes_per_packet,
            r.mtu9000.goodput_mbps,
            r.goodput_ratio()
        ) + &dip_note(r),
    );
    c.extend(runs.iter().map(|r| r.series(r.goodput.clone())));
    c
}

/// Why the goodput dips for a second where the packet rate does not: the hop's queue
/// overflowed (empty when it did not).
fn dip_note(r: &Results) -> String {
    if r.mtu1500.drops + r.mtu9000.drops == 0 {
        return String::new();
    }
    format!(
        " A dip and a catch-up mean the download outgrew the hop's queue ({} and {} packets \
         dropped): while a lost packet's retransmission crosses the full queue, the data \
         behind it waits in the client's buffer; the packet rate past the hop does not dip.",
        r.mtu1500.drops, r.mtu9000.drops
    )
}

fn packets_chart(r: &Results, runs: &[RunData]) -> Chart {
    let end = runs
        .iter()
        .flat_map(|r| r.packets.last().map(|p| p.0 + 0.5))
        .fold(1.0, f64::max);
    let n = r.pps_limit as f64;
    let mut c = Chart::new(
        "Data packets through the hop, each second",
        Axis::new("time", "s"),
        Axis::new("packets", "per s").from_zero(),
    )
    .size(900, 420)
    .caption(format!(
        "Both runs move the same number of packets: the hop's ceiling of {} a second (grey). \
         The packet rate, not the bytes, is what the hop limits, so the two lines lie on top \
         of each other while the goodput above differs {:.1}×.",
        r.pps_limit,
        r.goodput_ratio()
    ));
    c.push(Series::hline(
        format!("ceiling {} /s", r.pps_limit),
        Rgb::GREY,
        n,
        (0.0, end),
    ));
    c.extend(runs.iter().map(|r| r.series(r.packets.clone())));
    c
}

fn write_outputs(a: &Args, r: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut page = common::Report::new(
        "Packets per second, not bytes",
        format!(
            "One bulk TCP download of {:.0} s per run over a line with no byte-rate limit, \
             {DELAY} each way, through a hop that forwards at most {} packets/s each way; seed \
             {}. Run mtu1500: both hosts at MTU 1500. Run mtu9000: both at MTU 9000.",
            a.seconds("duration"),
            r.pps_limit,
            a.seed
        ),
        table_rows(r),
        "Goodput is the client's (bytes the application read over the whole transfer). \
         Packets/s counts the server's data packets in the client's capture, past the hop, \
         from the first to the last.",
        common::findings(checks),
    );
    let goodput = page.figure("goodput", goodput_chart(r, runs), false)?;
    let packets = page.figure("packets", packets_chart(r, runs), false)?;
    page.section(
        "Goodput and packet rate",
        "",
        vec![Block::Figure(goodput), Block::Figure(packets)],
    );
    page.analyzer(
        "Diagnoses of `latencylab analyze` on each run's client capture.",
        report::findings::analyzer_findings(runs.iter().map(|r| (r.name, &r.analysis))),
    );
    page.files(&[
        "mtu1500/, mtu9000/: each run's lab output: captures/*.pcap, summary.json, lab.json, \
         links/*.log, programs/*.out (bulk-client.out has the goodput of every second)",
    ]);
    page.write(&a.out_dir, r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics(mtu: u32, mbps: f64, pps: f64) -> RunMetrics {
        RunMetrics {
            mtu,
            goodput_mbps: mbps,
            packets_per_s: pps,
            bytes_per_packet: mbps * 1e6 / 8.0 / pps,
            drops: 0,
        }
    }

    #[test]
    fn checks_pass_when_goodput_follows_the_packet_size_and_fail_when_bytes_limit() {
        let r = |big_mbps, big_pps| Results {
            pps_limit: 1000,
            mtu1500: metrics(1500, 11.5, 995.0),
            mtu9000: metrics(9000, big_mbps, big_pps),
        };
        assert!(checks(&r(70.0, 990.0)).iter().all(|c| c.passed));
        // A byte-rate limit instead: the same goodput, fewer packets.
        let failed: Vec<_> = checks(&r(11.5, 160.0))
            .into_iter()
            .filter(|c| !c.passed)
            .collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
    }

    #[test]
    fn the_labs_differ_only_in_the_hosts_mtu() {
        let a = lab_config(1500, 1000, 10.0, 1);
        let b = lab_config(9000, 1000, 10.0, 1);
        a.validate().unwrap();
        b.validate().unwrap();
        assert!(a.hosts.iter().all(|h| h.settings.mtu == 1500));
        assert!(b.hosts.iter().all(|h| h.settings.mtu == 9000));
        assert_eq!(a.links, b.links);
        assert_eq!(a.programs, b.programs);
        assert!(a.programs[1].run.contains("--duration 10s"));
    }
}

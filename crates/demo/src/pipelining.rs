//! `latencylab demo pipelining`: the talk's newsletter page (159 resources from one host) over
//! 6 persistent HTTP/1.1 connections, with and without pipelining, at 100 ms RTT and again at
//! 300 ms (experiment E11 of "The Apex of Pipelines").
//!
//! The line: 20 Mbit/s down, 5 Mbit/s up, the RTT split evenly over both directions, a
//! 1000-packet FIFO. The server is `latencylab web-server`, the browser `latencylab page-load`
//! with `--per-host 6`, once with one request per connection at a time, once with up to
//! [`PIPELINE_DEPTH`] outstanding.
//!
//! Times are counted as the talk's browser counts them: from when the page needed the resource
//! (its HTML arrived) to its first byte (`ttfb`) and its last (`transaction`), so a request
//! waiting for a free connection waits in the number, as it waits in front of the user.

use std::path::Path;

use anyhow::Result;
use lab::config::LabConfig;
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;
use crate::web_common::{
    analyzer_section, last_byte_s, resource_bars, waterfall, waterfall_figures, web_lab, Line,
};

/// The page, shipped in `examples/pages/`.
pub const NEWSLETTER: &str = include_str!("../../../examples/pages/newsletter.toml");
/// Requests outstanding per connection when pipelining. Firefox's pipelining let up to 32
/// (`network.http.pipelining.maxrequests`); 8 is a moderate depth, enough that the 159
/// requests over 6 connections (27 each) need a few refills.
pub const PIPELINE_DEPTH: u16 = 8;
pub const DOWN: &str = "20mbit";
pub const UP: &str = "5mbit";
const QUEUE: &str = "fifo limit 1000";

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub rtt_ms: f64,
    pub pipeline_depth: u16,
    pub resources: usize,
    pub connections: u64,
    /// Page needed the resource → its first byte.
    pub ttfb_ms_mean: f64,
    /// Page needed the resource → its last byte.
    pub transaction_ms_mean: f64,
    /// Request sent → first byte (what the wire alone costs).
    pub wire_ttfb_ms_mean: f64,
    pub page_load_s: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    #[serde(rename = "no-pipelining")]
    pub no_pipelining: RunMetrics,
    pub pipelining: RunMetrics,
    #[serde(rename = "no-pipelining-300ms")]
    pub no_pipelining_slow: RunMetrics,
    #[serde(rename = "pipelining-300ms")]
    pub pipelining_slow: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// The lab of one run: client and server, one link, the server and the page load.
pub fn lab_config(rtt_ms: f64, depth: u16, page_file: &Path, seed: u64) -> LabConfig {
    let line = Line {
        down: DOWN,
        up: UP,
        rtt_ms,
        queue: QUEUE,
    };
    let load = format!("exec latencylab page-load http://server/ --per-host 6 --pipeline {depth}");
    web_lab(&line, &[], page_file, ("page-load", load), seed)
}

/// The runs: directory, whether at `--rtt2` (else `--rtt`), requests outstanding per
/// connection.
pub const RUNS: [(&str, bool, u16); 4] = [
    ("no-pipelining", false, 1),
    ("pipelining", false, PIPELINE_DEPTH),
    ("no-pipelining-300ms", true, 1),
    ("pipelining-300ms", true, PIPELINE_DEPTH),
];

/// One run's resource lines and numbers.
struct RunData {
    label: &'static str,
    metrics: RunMetrics,
    /// (queued, sent, first byte, last byte) ms, in the order the client finished them.
    bars: Vec<[f64; 4]>,
}

/// The four runs, each with its name, RTT and pipeline depth: what [`run`] runs and
/// `--export` writes. The page file they serve is written into the output directory.
#[allow(clippy::type_complexity)]
pub fn runs(a: &Args) -> Result<Vec<((&'static str, f64, u16), common::Run)>> {
    // Expected: about 27 rounds of one RTT without pipelining, a few with it, plus start-up.
    let expect = |rtt: f64, depth: u16| 3.0 + rtt / 1000.0 * if depth == 1 { 30.0 } else { 8.0 };
    let page_file = common::page_file(&a.out_dir, "newsletter.toml", NEWSLETTER)?;
    Ok(RUNS
        .map(|(name, slow, depth)| {
            let rtt = a.ms(if slow { "rtt2" } else { "rtt" });
            let run = common::Run {
                dir: name.into(),
                msg: format!("{name} ({rtt:.0} ms RTT)"),
                expected_s: expect(rtt, depth),
                config: lab_config(rtt, depth, &page_file, a.seed),
            };
            ((name, rtt, depth), run)
        })
        .into())
}

pub fn run(a: &Args) -> Result<Outcome> {
    let (series, runs) =
        common::run_series(a, runs(a)?, (0.0, 4.0), |(name, rtt, depth), dir, _| {
            collect(name, rtt, depth, dir)
        })?;
    let m = |i: usize| runs[i].metrics.clone();
    let results = Results {
        no_pipelining: m(0),
        pipelining: m(1),
        no_pipelining_slow: m(2),
        pipelining_slow: m(3),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.end(results, checks, rows, |r, c| {
        write_outputs(&a.out_dir, r, c, &runs)
    })
}

fn collect(label: &'static str, rtt_ms: f64, depth: u16, dir: &Path) -> Result<RunData> {
    let (bars, connections) = resource_bars(dir)?;
    // The HTML (needed at 0) is the page's start, not one of its subresources.
    let sub: Vec<&[f64; 4]> = bars.iter().filter(|b| b[0] > 0.0).collect();
    let n = sub.len().max(1) as f64;
    let mean = |f: &dyn Fn(&[f64; 4]) -> f64| sub.iter().map(|b| f(b)).sum::<f64>() / n;
    Ok(RunData {
        label,
        metrics: RunMetrics {
            rtt_ms,
            pipeline_depth: depth,
            resources: bars.len(),
            connections,
            ttfb_ms_mean: mean(&|b| b[2] - b[0]),
            transaction_ms_mean: mean(&|b| b[3] - b[0]),
            wire_ttfb_ms_mean: mean(&|b| b[2] - b[1]),
            page_load_s: last_byte_s(&bars),
        },
        bars,
    })
}

/// The expectations for E11: pipelining at most halves the mean TTFB, and the gap in ms
/// grows with the RTT.
pub fn checks(r: &Results) -> Vec<Check> {
    let c = |what: String, passed: bool| Check { what, passed };
    let gap = |a: &RunMetrics, b: &RunMetrics| a.ttfb_ms_mean - b.ttfb_ms_mean;
    vec![
        c(
            format!(
                "{:.0} ms RTT: pipelining's mean TTFB {:.0} ms ≤ half of {:.0} ms (seed: 1697 → 626 ms)",
                r.pipelining.rtt_ms, r.pipelining.ttfb_ms_mean, r.no_pipelining.ttfb_ms_mean
            ),
            r.pipelining.ttfb_ms_mean <= 0.5 * r.no_pipelining.ttfb_ms_mean,
        ),
        c(
            format!(
                "{:.0} ms RTT: pipelining's mean TTFB {:.0} ms ≤ half of {:.0} ms",
                r.pipelining_slow.rtt_ms,
                r.pipelining_slow.ttfb_ms_mean,
                r.no_pipelining_slow.ttfb_ms_mean
            ),
            r.pipelining_slow.ttfb_ms_mean <= 0.5 * r.no_pipelining_slow.ttfb_ms_mean,
        ),
        c(
            format!(
                "the saving grows with the RTT: {:.0} ms at {:.0} ms RTT > {:.0} ms at {:.0} ms",
                gap(&r.no_pipelining_slow, &r.pipelining_slow),
                r.pipelining_slow.rtt_ms,
                gap(&r.no_pipelining, &r.pipelining),
                r.pipelining.rtt_ms
            ),
            gap(&r.no_pipelining_slow, &r.pipelining_slow) > gap(&r.no_pipelining, &r.pipelining),
        ),
    ]
}

pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let m = [
        &r.no_pipelining,
        &r.pipelining,
        &r.no_pipelining_slow,
        &r.pipelining_slow,
    ];
    let runs: Vec<_> = RUNS.iter().map(|r| r.0).zip(m).collect();
    let (header, row) = common::run_columns(&runs);
    let rows = vec![
        row("RTT (ms)", &|m| format!("{:.0}", m.rtt_ms)),
        row("requests outstanding per connection", &|m| {
            m.pipeline_depth.to_string()
        }),
        row("resources / connections", &|m| {
            format!("{} / {}", m.resources, m.connections)
        }),
        row("mean time to first byte (ms)", &|m| {
            format!("{:.0}", m.ttfb_ms_mean)
        }),
        row("mean transaction time (ms)", &|m| {
            format!("{:.0}", m.transaction_ms_mean)
        }),
        row("  of which on the wire: TTFB (ms)", &|m| {
            format!("{:.0}", m.wire_ttfb_ms_mean)
        }),
        row("page load (s)", &|m| format!("{:.2}", m.page_load_s)),
    ];
    (header, rows)
}

fn write_outputs(dir: &Path, results: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut waterfalls: Vec<Chart> = runs
        .iter()
        .map(|r| {
            let m = &r.metrics;
            let caption = format!(
                "{}: {} resources over {} connections at {:.0} ms RTT, {} request{} outstanding \
                 per connection; mean time to first byte {:.0} ms. {}",
                r.label,
                m.resources,
                m.connections,
                m.rtt_ms,
                m.pipeline_depth,
                if m.pipeline_depth == 1 { "" } else { "s" },
                m.ttfb_ms_mean,
                if m.pipeline_depth == 1 {
                    "The grey staircase is the queue: each connection takes the next request \
                     only after the last response, one round trip per resource."
                } else {
                    "Requests leave in batches; the orange bars are the responses queued ahead \
                     on the same connection, not idle round trips."
                }
            );
            waterfall(&format!("Waterfall, {}", r.label), &r.bars, caption)
        })
        .collect();
    // Each RTT's two waterfalls on one scale.
    for pair in waterfalls.chunks_mut(2) {
        report::same_scale(pair);
    }
    // One design's mean TTFB at both RTTs.
    let ttfb_line = |name: &str, color: Rgb, a: &RunMetrics, b: &RunMetrics| {
        let points = vec![(a.rtt_ms, a.ttfb_ms_mean), (b.rtt_ms, b.ttfb_ms_mean)];
        Series::line(name, color, points).stroke(3)
    };
    let [orange, blue] = common::PAIR_COLORS;
    let ttfb = Chart::new(
        "Mean time to first byte against RTT",
        Axis::new("round-trip time", "ms").from_zero(),
        Axis::new("mean time to first byte", "ms").from_zero(),
    )
    .caption(
        "Without pipelining each of the ~27 requests per connection costs a round trip in \
         turn, so the mean grows by many times the added RTT; pipelined, the requests travel \
         together and it grows by a few times the added RTT. Black dots: the seed's Firefox \
         at 100 ms RTT.",
    )
    .with(ttfb_line(
        "no pipelining",
        orange,
        &results.no_pipelining,
        &results.no_pipelining_slow,
    ))
    .with(ttfb_line(
        "pipelining",
        blue,
        &results.pipelining,
        &results.pipelining_slow,
    ))
    .with(Series::scatter(
        "seed, 100 ms RTT",
        Rgb(0, 0, 0),
        vec![(100.0, 1697.0), (100.0, 626.0)],
    ));
    let mut page = common::Report::new(
        "HTTP/1.1 pipelining: the newsletter page over 6 connections",
        format!(
            "159 resources from one host (examples/pages/newsletter.toml), 6 persistent \
             connections, {DOWN} down / {UP} up; without pipelining and with up to \
             {PIPELINE_DEPTH} requests outstanding per connection, at {:.0} and {:.0} ms RTT.",
            results.no_pipelining.rtt_ms, results.no_pipelining_slow.rtt_ms
        ),
        table_rows(results),
        "Times per subresource, from the moment the HTML arrived and the page needed it, as \
         the seed's browser counts; 'on the wire' is from the request leaving to its first \
         byte.",
        common::findings(checks),
    );
    let labels: Vec<&str> = runs.iter().map(|r| r.label).collect();
    let mut figures = waterfall_figures(&mut page, labels.iter().copied().zip(waterfalls))?;
    for heading in ["Waterfalls", "Waterfalls at the larger RTT"] {
        let row = Block::Row(figures.drain(..2).collect());
        page.section(heading, "", vec![row]);
    }
    let ttfb = page.figure("ttfb-vs-rtt", ttfb, true)?;
    page.section("The gap grows with the RTT", "", vec![Block::Figure(ttfb)]);
    page.push(analyzer_section(dir, &labels)?);
    page.files(&[
        "no-pipelining/, pipelining/, ...: each run's lab output: captures/*.pcap, \
         programs/page-load.out (a JSON line per connection and per resource)",
    ]);
    page.write(dir, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(rtt: f64, depth: u16, ttfb: f64) -> RunMetrics {
        RunMetrics {
            rtt_ms: rtt,
            pipeline_depth: depth,
            resources: 159,
            connections: 6,
            ttfb_ms_mean: ttfb,
            transaction_ms_mean: ttfb + 10.0,
            wire_ttfb_ms_mean: rtt,
            page_load_s: 3.0,
        }
    }

    #[test]
    fn checks_want_half_the_ttfb_and_a_gap_that_grows_with_the_rtt() {
        let good = Results {
            no_pipelining: m(100.0, 1, 1700.0),
            pipelining: m(100.0, 8, 620.0),
            no_pipelining_slow: m(300.0, 1, 5000.0),
            pipelining_slow: m(300.0, 8, 1500.0),
        };
        assert!(checks(&good).iter().all(|c| c.passed));
        let flat = Results {
            pipelining_slow: m(300.0, 8, 4500.0),
            ..good
        };
        let failed: Vec<_> = checks(&flat).into_iter().filter(|c| !c.passed).collect();
        assert_eq!(failed.len(), 2, "{failed:?}");
    }

    #[test]
    fn the_lab_runs_the_server_and_waits_for_the_page_load() {
        let cfg = lab_config(300.0, 8, Path::new("/tmp/p.toml"), 1);
        cfg.validate().unwrap();
        assert_eq!(cfg.links[0].down.to_json()["delay"], "150ms");
        let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
        assert_eq!(waited.len(), 1);
        assert!(waited[0].run.contains("--pipeline 8"));
        web::page::Page::parse(NEWSLETTER).unwrap();
    }
}

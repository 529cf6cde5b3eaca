//! `latencylab demo conn-reuse`: a news front page over HTTP/1.1 at 250 ms RTT, loaded by two
//! connection-manager designs (experiment E12 of "Separating HTTP
//! Connections from TCP Connections"):
//!
//! - `bound`: a request that finds no idle connection opens one and waits for its handshake.
//! - `pool`: the request is queued and a connection opened for it, but it goes to whichever of
//!   the origin's connections frees up first; the new one joins the pool when ready.
//!
//! The page (`examples/pages/news.toml`) is a news front page of 267 resources over 35
//! host names, found in waves: the HTML's references as it arrives, then what its
//! stylesheets and scripts reference, then what the ad servers' answers do. The names are
//! served by four server hosts ([`SERVERS`]: the site, its CDN, an ad network, analytics and
//! social), each name an alias in the lab's `/etc/hosts`, behind one router. The line: 10
//! Mbit/s down, 2 Mbit/s up, the RTT split over both directions, a 1000-packet FIFO.
//!
//! The numbers come from `page-load --conn-manager`'s own count (its `conn_manager` line):
//! connections opened because a request had none, how many of those requests another
//! connection served before the new one was ready, and how much sooner.
//!
//! Where Chromium is installed, it loads both pages in the same lab too, with its network log
//! on (`--log-net-log`): its HTTP/1.1 socket pool binds a request to whichever socket of its
//! group is available first, the design `pool` models, and the log says which socket served
//! each request that opened a connection ([`web::netlog`]).

use std::collections::HashMap;
use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig};
use report::{Axis, Block, Chart, Rgb, Series};
use serde::Serialize;
use web::WebRecord;

use crate::chromium::{self, Load};
use crate::common::{self, Check};
use crate::params::Args;
use crate::web_common::{
    analyzer_section, last_byte_s, page_load_records, resource_bars, waterfall,
};

/// The page, shipped in `examples/pages/`.
pub const NEWS: &str = include_str!("../../../examples/pages/news.toml");
/// The server hosts and the page's host names each answers to (aliases in the lab's
/// `/etc/hosts`), as a site, a CDN, an ad network and an analytics service share their
/// addresses among many names. HTTP/1.1 browsers limit connections per name, not per
/// address (only HTTP/2 coalesces), so the grouping leaves the connection count as it is.
pub const SERVERS: [(&str, &[&str]); 4] = [
    ("origin", &["www", "markets", "comments"]),
    (
        "cdn",
        &[
            "static1", "static2", "img1", "img2", "img3", "img4", "img5", "img6", "graphics",
            "fonts", "video",
        ],
    ),
    (
        "adnet",
        &[
            "ad",
            "adserver",
            "adcdn",
            "adcdn2",
            "adtrack",
            "sync1",
            "sync2",
            "sync3",
            "sync4",
            "sync5",
            "adverify",
            "adverify-px",
        ],
    ),
    (
        "tracker",
        &[
            "analytics",
            "stats",
            "metrics",
            "metrics2",
            "social",
            "platform",
            "urls",
            "rec",
            "rec-img",
        ],
    ),
];
/// The page's names consolidated, one per service, for the second page: each name on the
/// left becomes the one on the right; the others keep theirs. The same resources, bytes and
/// waves, but a name's requests now span several waves (the CDN serves the stylesheets, then
/// the images they reference; the ad network the tags, then the ads and pixels), so more of
/// them arrive while a connection of their name is mid-response.
pub const CONSOLIDATED: [(&str, &str); 29] = [
    ("markets", "www"),
    ("comments", "www"),
    ("static2", "static1"),
    ("img1", "static1"),
    ("img2", "static1"),
    ("img3", "static1"),
    ("img4", "static1"),
    ("img5", "static1"),
    ("img6", "static1"),
    ("graphics", "static1"),
    ("fonts", "static1"),
    ("video", "static1"),
    ("adserver", "ad"),
    ("adcdn", "ad"),
    ("adcdn2", "ad"),
    ("adtrack", "ad"),
    ("sync1", "ad"),
    ("sync2", "ad"),
    ("sync3", "ad"),
    ("sync4", "ad"),
    ("sync5", "ad"),
    ("adverify", "ad"),
    ("adverify-px", "ad"),
    ("stats", "analytics"),
    ("metrics", "analytics"),
    ("metrics2", "analytics"),
    ("platform", "social"),
    ("urls", "social"),
    ("rec-img", "rec"),
];

/// `page` (a page file's text) with its names consolidated as [`CONSOLIDATED`] says.
pub fn consolidate(page: &str) -> String {
    let map: HashMap<&str, &str> = CONSOLIDATED.iter().copied().collect();
    page.lines()
        .map(|l| {
            let name = l
                .strip_prefix("host = \"")
                .and_then(|r| r.strip_suffix('"'));
            match name.and_then(|n| map.get(n)) {
                Some(to) => format!("host = \"{to}\""),
                None => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// When the page load starts, s after the lab: the servers are listening by then.
const CLIENT_START_S: f64 = 0.5;
/// The line's rate down, Mbit/s, unless `--down-mbit` says otherwise (the seed: "several
/// megabits").
pub const DOWN_MBIT: f64 = 10.0;
/// The uplink is this fraction of the downlink unless `--up-mbit` says otherwise, as on
/// ADSL and cable lines; it must carry the downlink's ACKs (about 2 % of its rate).
const UP_PER_DOWN: f64 = 0.2;
/// The servers' own links: no bottleneck of theirs.
const SERVER_QUEUE: &str = "fifo limit 1000";
/// Connections per host name, as browsers allow.
pub const PER_HOST: u16 = 6;
/// The talk's 141 of 219.
const SEED_SERVED_PCT: f64 = 64.0;
/// The lowest share the talk saw on any page (a Facebook wall, 9 of 27).
const SEED_LOWEST_PCT: f64 = 33.0;

/// The access line's bottleneck buffer, each direction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Buffer {
    /// A FIFO of this many packets (1000: netem's and Linux's `txqueuelen` default).
    Packets(u32),
    /// A FIFO of one bandwidth-delay product: the direction's rate times the RTT, in
    /// 1500-byte packets (the router-sizing rule of thumb).
    Bdp,
}

impl Buffer {
    pub fn parse(s: &str) -> Result<Buffer, String> {
        if s == "bdp" {
            return Ok(Buffer::Bdp);
        }
        match s.parse::<u32>() {
            Ok(n) if (2..=100_000).contains(&n) => Ok(Buffer::Packets(n)),
            _ => Err(format!(
                "cannot use '{s}' (a number of packets from 2 to 100000, or bdp)"
            )),
        }
    }

    /// Packets for a direction of `rate_mbit` at `rtt_ms`.
    pub fn packets(self, rate_mbit: f64, rtt_ms: f64) -> u32 {
        match self {
            Buffer::Packets(n) => n,
            // BDP = rate × RTT, over 1500-byte packets; at least 2.
            Buffer::Bdp => ((rate_mbit * 1e6 * rtt_ms / 1e3 / 8.0 / 1500.0).ceil() as u32).max(2),
        }
    }
}

/// Where a run's access line stands.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Line {
    pub rtt_ms: f64,
    pub down_mbit: f64,
    pub up_mbit: f64,
    pub buffer: Buffer,
}

impl Line {
    fn rate(mbit: f64) -> String {
        format!("{}kbit", (mbit * 1000.0).round() as u64)
    }

    fn queue(&self, mbit: f64) -> String {
        format!("fifo limit {}", self.buffer.packets(mbit, self.rtt_ms))
    }
}

/// The line of `--rtt`, `--down-mbit`, `--up-mbit` and `--buffer`.
pub fn line_of(a: &Args) -> Line {
    let down_mbit = a.number("down-mbit").unwrap_or(DOWN_MBIT);
    Line {
        rtt_ms: a.ms("rtt"),
        down_mbit,
        up_mbit: a.number("up-mbit").unwrap_or(down_mbit * UP_PER_DOWN),
        buffer: Buffer::parse(a.text("buffer").unwrap_or("bdp")).expect("read as declared"),
    }
}

/// `--html-scan`: `stream` or `whole`.
fn html_scan(a: &Args) -> &str {
    a.text("html-scan").unwrap_or("stream")
}

/// What Chromium's socket pool did with one page, from its network log.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChromiumMetrics {
    /// Socket requests for the page's names that got a socket.
    pub requests: usize,
    /// Requests that found no idle socket and opened a connection.
    pub new_connections_needed: usize,
    /// Of those, the share served by a socket that became free (its response ended) first,
    /// as `pool`'s `served_by_other_pct` counts.
    pub served_by_other_pct: f64,
    /// Of those, served by a socket that became free (its response ended) first.
    pub served_by_freed: usize,
    /// Of those, served by another new connection ready before their own (not counted above,
    /// as `pool` does not count it).
    pub served_by_other_new: usize,
    /// Mean of (own connection ready − socket received), ms, over the above.
    pub saved_ms_mean: f64,
    /// Connections Chromium opened for the page's names, backup attempts among them.
    pub connections: usize,
    pub backup_connections: usize,
    /// The last byte of the last response (Resource Timing's latest `responseEnd`), s.
    pub page_load_s: Option<f64>,
}

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub rtt_ms: f64,
    pub down_mbit: f64,
    pub up_mbit: f64,
    /// The access line's FIFO, packets, downlink.
    pub buffer_packets: u32,
    /// `stream` or `whole`: when the HTML's references were found.
    pub html_scan: String,
    pub resources: usize,
    /// Host names the page's resources are on.
    pub host_names: usize,
    /// Connections opened in all.
    pub connections: u64,
    /// Connections opened because a request found no idle one.
    pub new_connections_needed: usize,
    /// Of those, the share whose request another connection served during the handshake.
    pub served_by_other_pct: f64,
    /// Mean of (new connection ready − request sent elsewhere), ms; 0 when none.
    pub saved_ms_mean: f64,
    pub page_load_s: f64,
    /// From the client's event log: connections opened (after the HTML's) while another
    /// connection of the same name had a response under way, the only ones whose request
    /// another connection could take before the handshake ends.
    pub opened_while_name_busy: usize,
    /// The longest handshake of the run, ms: one RTT plus the queue the SYN-ACK waited in.
    pub handshake_ms_max: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    /// The news page.
    pub bound: RunMetrics,
    pub pool: RunMetrics,
    /// The same page with its names consolidated ([`CONSOLIDATED`]).
    pub bound_consolidated: RunMetrics,
    pub pool_consolidated: RunMetrics,
    /// Headless Chromium on the two pages; null where it did not run.
    pub chromium: Option<ChromiumMetrics>,
    pub chromium_consolidated: Option<ChromiumMetrics>,
    /// Why Chromium did not run or was not read, when it was not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chromium_note: Option<String>,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// The lab of one run: the client on the access `line` (its RTT split over both
/// directions), a router, and behind it the [`SERVERS`] (a gigabit each, no delay of their
/// own), each serving the page; `loader` (program name, command) on the client, waited for.
pub fn lab_config(line: &Line, page_file: &Path, loader: (&str, String), seed: u64) -> LabConfig {
    let one_way = format!("{}ms", line.rtt_ms / 2.0);
    let mut hosts = vec![common::host("client", 1, EcnMode::Passive)];
    let access = |mbit: f64| common::direction(&Line::rate(mbit), &one_way, &line.queue(mbit));
    let mut links = vec![common::link(
        "access",
        ("client", "isp"),
        access(line.up_mbit),
        access(line.down_mbit),
    )];
    let mut programs = Vec::new();
    for (i, (name, aliases)) in SERVERS.iter().enumerate() {
        let mut h = common::host(name, i + 2, EcnMode::Passive);
        h.aliases = aliases.iter().map(|a| a.to_string()).collect();
        hosts.push(h);
        let server = || common::direction("1gbit", "0ms", SERVER_QUEUE);
        links.push(common::link(name, ("isp", name), server(), server()));
        programs.push(common::program(
            &format!("web-server-{name}"),
            name,
            0.0,
            format!("exec latencylab web-server --page {}", page_file.display()),
            false,
        ));
    }
    programs.push(common::program(
        loader.0,
        "client",
        CLIENT_START_S,
        loader.1,
        true,
    ));
    common::lab(seed, hosts, &["isp"], links, programs)
}

/// The page load under `design` (`bound` or `pool`), finding the HTML's references as `scan`
/// says.
fn page_load(design: &str, scan: &str) -> (&'static str, String) {
    let cmd = format!(
        "exec latencylab page-load http://www/ --per-host {PER_HOST} --conn-manager {design} \
         --html-scan {scan}"
    );
    ("page-load", cmd)
}

struct RunData {
    label: &'static str,
    metrics: RunMetrics,
    bars: Vec<[f64; 4]>,
    saved_ms: Vec<f64>,
}

/// The page files the runs serve, in the output directory: the page as given, and
/// consolidated.
const PAGES: [&str; 2] = ["page.toml", "page-consolidated.toml"];

/// A run's expected length, s, for the progress bar: the lab's start, then about 16 round
/// trips (the HTML's, and four waves of handshakes and requests).
fn expected_s(a: &Args) -> f64 {
    4.0 + a.ms("rtt") / 1000.0 * 16.0
}

/// Drawing the report's expected length, s, for the progress bar.
const DRAW_S: f64 = 3.0;

/// The four runs: what [`run`] runs and `--export` writes. The page files they serve are
/// written into the output directory.
pub fn runs(a: &Args) -> Result<Vec<(&'static str, common::Run)>> {
    let line = line_of(a);
    let page_text = match a.text("page") {
        None => NEWS.to_string(),
        Some(p) => page_for_servers(Path::new(p)).map_err(|e| lab::UsageError(format!("{e:#}")))?,
    };
    let files = [
        common::page_file(&a.out_dir, PAGES[0], &page_text)?,
        common::page_file(&a.out_dir, PAGES[1], &consolidate(&page_text))?,
    ];
    Ok(RUNS
        .map(|(label, design, page)| {
            let run = common::Run {
                dir: label.into(),
                msg: format!("{label} ({:.0} ms RTT)", a.ms("rtt")),
                expected_s: expected_s(a),
                config: lab_config(&line, &files[page], page_load(design, html_scan(a)), a.seed),
            };
            (label, run)
        })
        .into())
}

pub fn run(a: &Args) -> Result<Outcome> {
    let line = line_of(a);
    for (what, v) in [("--down-mbit", line.down_mbit), ("--up-mbit", line.up_mbit)] {
        if !(0.1..=1000.0).contains(&v) {
            bail!("{what}: {v} Mbit/s is outside 0.1 to 1000");
        }
    }
    let skipped = chromium::skipped(a);
    // The bar's last part holds Chromium's loads, after the runs, before the drawing.
    let chromium_s = match skipped {
        None => CHROMIUM_RUNS.len() as f64 * (expected_s(a) + 6.0),
        Some(_) => 0.0,
    };
    let (mut series, runs) =
        common::run_series(a, runs(a)?, (0.0, chromium_s + DRAW_S), |label, dir, _| {
            collect(label, &line, html_scan(a), dir)
        })?;
    let (mut chromium, mut chromium_note) = ([None, None], skipped.clone());
    if skipped.is_none() {
        for (i, (dir, page)) in CHROMIUM_RUNS.iter().enumerate() {
            let msg = format!("headless Chromium, {dir} ({:.0} ms RTT)", a.ms("rtt"));
            let page_file = a.out_dir.join(PAGES[*page]);
            let got = series.progress().phase(&msg, expected_s(a) + 6.0, || {
                chromium_run(&a.out_dir.join(dir), &line, &page_file, a.seed)
            });
            match got {
                Ok(m) => chromium[i] = Some(m),
                Err(e) => chromium_note = Some(format!("{e:#}")),
            }
        }
    }
    let [chromium, chromium_consolidated] = chromium;
    let m = |i: usize| runs[i].metrics.clone();
    let results = Results {
        bound: m(0),
        pool: m(1),
        bound_consolidated: m(2),
        pool_consolidated: m(3),
        chromium,
        chromium_consolidated,
        chromium_note,
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.finish(DRAW_S, results, checks, rows, |r, c| {
        write_outputs(&a.out_dir, r, c, &runs)
    })
}

/// Chromium's runs: directory, page (0: as given, 1: consolidated).
pub const CHROMIUM_RUNS: [(&str, usize); 2] = [("chromium", 0), ("chromium-consolidated", 1)];

/// How Chromium loads the page: over HTTP/1.1, QUIC off, its network log on.
const CHROMIUM_LOAD: Load = Load {
    url: "http://www/",
    protocols: "--disable-quic",
    spki_pin: None,
    net_log: true,
};

/// Chromium loads `page_file`'s page in `dir`'s lab (the lab of the model's runs, Chromium in
/// place of `page-load`), and its network log is read.
fn chromium_run(dir: &Path, line: &Line, page_file: &Path, seed: u64) -> Result<ChromiumMetrics> {
    let got = CHROMIUM_LOAD.run(dir, |loader| lab_config(line, page_file, loader, seed))?;
    let kept = got.net_log();
    let text = fs::read_to_string(&kept).with_context(|| format!("reading {}", kept.display()))?;
    let log = web::netlog::parse(&text).with_context(|| format!("reading {}", kept.display()))?;
    let page = web::page::Page::parse(&fs::read_to_string(page_file)?)
        .map_err(|e| anyhow::anyhow!("{}: {e}", page_file.display()))?;
    let hosts = page.hosts().into_iter().collect();
    let s = web::netlog::socket_pool(&log, &hosts)
        .with_context(|| format!("reading {}", kept.display()))?;
    Ok(ChromiumMetrics {
        requests: s.requests,
        new_connections_needed: s.new_connections_needed,
        served_by_other_pct: s.served_by_freed_pct(),
        served_by_freed: s.served_by_freed,
        served_by_other_new: s.served_by_other_new,
        saved_ms_mean: mean_or_0(&s.saved_ms),
        connections: s.connect_jobs + s.backup_jobs,
        backup_connections: s.backup_jobs,
        page_load_s: got.page_load_s,
    })
}

/// The runs: directory, design, page (0: as given, 1: consolidated).
pub const RUNS: [(&str, &str, usize); 4] = [
    ("bound", "bound", 0),
    ("pool", "pool", 0),
    ("bound-consolidated", "bound", 1),
    ("pool-consolidated", "pool", 1),
];

/// Reads a page file given with `--page`, and checks that each of its host names is one the
/// lab's servers answer to.
pub fn page_for_servers(path: &Path) -> Result<String> {
    let text =
        fs::read_to_string(path).with_context(|| format!("--page: reading {}", path.display()))?;
    let page = web::page::Page::parse(&text)
        .map_err(|e| anyhow::anyhow!("--page: {}: {e}", path.display()))?;
    let known: Vec<&str> = SERVERS
        .iter()
        .flat_map(|(_, n)| n.iter().copied())
        .collect();
    if let Some(h) = page.hosts().iter().find(|h| !known.contains(&h.as_str())) {
        bail!(
            "--page: {}: host '{h}' is none of the lab's names ({})",
            path.display(),
            known.join(", ")
        );
    }
    Ok(text)
}

fn collect(label: &'static str, line: &Line, scan: &str, dir: &Path) -> Result<RunData> {
    let (bars, connections) = resource_bars(dir)?;
    let (path, recs) = page_load_records(dir)?;
    let Some((needed, served, saved_ms)) = recs.iter().find_map(|r| match r {
        WebRecord::ConnManager {
            new_connections_needed,
            served_by_other,
            saved_ms,
            ..
        } => Some((*new_connections_needed, *served_by_other, saved_ms.clone())),
        _ => None,
    }) else {
        bail!(
            "{}: no conn_manager line (see programs/page-load.err)",
            path.display()
        );
    };
    let opened_while_name_busy = opened_while_name_busy(&recs);
    let handshake_ms_max = recs
        .iter()
        .filter_map(|r| match r {
            WebRecord::Connection {
                start_ms, ready_ms, ..
            } => Some(ready_ms - start_ms),
            _ => None,
        })
        .fold(0.0, f64::max);
    let host_names = {
        let mut h: Vec<&str> = recs
            .iter()
            .filter_map(|r| match r {
                WebRecord::Resource { host, .. } => Some(host.as_str()),
                _ => None,
            })
            .collect();
        h.sort();
        h.dedup();
        h.len()
    };
    Ok(RunData {
        label,
        metrics: RunMetrics {
            rtt_ms: line.rtt_ms,
            down_mbit: line.down_mbit,
            up_mbit: line.up_mbit,
            buffer_packets: line.buffer.packets(line.down_mbit, line.rtt_ms),
            html_scan: scan.into(),
            resources: bars.len(),
            connections,
            new_connections_needed: needed,
            served_by_other_pct: 100.0 * served as f64 / needed.max(1) as f64,
            saved_ms_mean: mean_or_0(&saved_ms),
            page_load_s: last_byte_s(&bars),
            opened_while_name_busy,
            host_names,
            handshake_ms_max,
        },
        bars,
        saved_ms,
    })
}

/// The mean of `v`, 0 when it is empty (an empty sum is -0).
fn mean_or_0(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Connections (after the first) opened while another connection of their name had a
/// response under way (request sent, last byte not yet read), from the client's own lines.
fn opened_while_name_busy(recs: &[WebRecord]) -> usize {
    let busy: Vec<(&str, f64, f64)> = recs
        .iter()
        .filter_map(|r| match r {
            WebRecord::Resource {
                host,
                sent_ms,
                last_byte_ms,
                ..
            } => Some((host.as_str(), *sent_ms, *last_byte_ms)),
            _ => None,
        })
        .collect();
    recs.iter()
        .filter_map(|r| match r {
            WebRecord::Connection { host, start_ms, .. } => Some((host.as_str(), *start_ms)),
            _ => None,
        })
        .skip(1)
        .filter(|&(h, t)| {
            busy.iter()
                .any(|&(bh, sent, last)| bh == h && sent <= t && t < last)
        })
        .count()
}

/// The expectations for E12: `pool` serves a large share of would-be new connections by
/// another one (at least the lowest share the talk saw: asked of the news page, whose setup is
/// the closest to the talk's), each saving somewhere between nothing and one RTT, and the page
/// is no slower for it; `bound` never serves a request elsewhere.
pub fn checks(r: &Results) -> Vec<Check> {
    let c = |what: String, passed: bool| Check { what, passed };
    let p = &r.pool;
    let mut v = vec![c(
        format!(
            "pool: {:.0} % of the {} connections needed were served by another that freed up \
             during the handshake, at least {SEED_LOWEST_PCT:.0} % (seed: 141 of 219, \
             {SEED_SERVED_PCT:.0} %)",
            p.served_by_other_pct, p.new_connections_needed
        ),
        p.served_by_other_pct >= SEED_LOWEST_PCT,
    )];
    for (page, b, p) in [
        ("news", &r.bound, &r.pool),
        ("consolidated", &r.bound_consolidated, &r.pool_consolidated),
    ] {
        v.push(c(
            format!(
                "pool, {page}: each saved {:.0} ms on average, between 0 and one handshake \
                 (RTT {:.0} ms, the longest handshake through the queue {:.0} ms; seed: about \
                 80 ms at 250 ms RTT)",
                p.saved_ms_mean, p.rtt_ms, p.handshake_ms_max
            ),
            p.saved_ms_mean > 0.0 && p.saved_ms_mean < p.handshake_ms_max.max(p.rtt_ms),
        ));
        v.push(c(
            format!(
                "bound, {page}: no request is served by another connection ({:.0} %)",
                b.served_by_other_pct
            ),
            b.served_by_other_pct == 0.0,
        ));
        v.push(c(
            format!(
                "pool's page load {:.2} s is no slower than bound's {:.2} s, {page} (5 % \
                 allowed for noise)",
                p.page_load_s, b.page_load_s
            ),
            p.page_load_s <= 1.05 * b.page_load_s,
        ));
    }
    for (page, p, cr) in [
        ("news", &r.pool, &r.chromium),
        (
            "consolidated",
            &r.pool_consolidated,
            &r.chromium_consolidated,
        ),
    ] {
        let Some(cr) = cr else { continue };
        v.push(c(
            format!(
                "pool's share, {page}, {:.0} %, within 10 points of Chromium's {:.0} % ({} of its \
                 {} new connections served by a socket that freed up first, {} by another new \
                 one)",
                p.served_by_other_pct,
                cr.served_by_other_pct,
                cr.served_by_freed,
                cr.new_connections_needed,
                cr.served_by_other_new
            ),
            (p.served_by_other_pct - cr.served_by_other_pct).abs() <= 10.0,
        ));
    }
    v
}

pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [
        ("bound", &r.bound),
        ("pool", &r.pool),
        ("bound, consolidated", &r.bound_consolidated),
        ("pool, consolidated", &r.pool_consolidated),
    ];
    let chromium = [
        ("Chromium", r.chromium.as_ref()),
        ("Chromium, consolidated", r.chromium_consolidated.as_ref()),
    ];
    let (mut header, run_row) = common::run_columns(&runs);
    header.extend(chromium.iter().map(|(n, _)| n.to_string()));
    header.push("seed (NYT)".into());
    type Cr<'a> = &'a dyn Fn(&ChromiumMetrics) -> String;
    let row = |name: &str, f: &dyn Fn(&RunMetrics) -> String, cr: Option<Cr>, seed: &str| {
        let mut v = run_row(name, f);
        for (_, m) in &chromium {
            v.push(match (m, &cr) {
                (Some(m), Some(cr)) => cr(m),
                (None, Some(_)) => "not run".into(),
                _ => "".into(),
            });
        }
        v.push(seed.into());
        v
    };
    let rows = vec![
        row("RTT (ms)", &|m| format!("{:.0}", m.rtt_ms), None, "250"),
        row(
            "line down / up (Mbit/s), FIFO (packets)",
            &|m| format!("{} / {}, {}", m.down_mbit, m.up_mbit, m.buffer_packets),
            None,
            "several",
        ),
        row(
            "host names / resources",
            &|m| format!("{} / {}", m.host_names, m.resources),
            None,
            "",
        ),
        row(
            "connections opened",
            &|m| m.connections.to_string(),
            Some(&|c| format!("{} ({} backup)", c.connections, c.backup_connections)),
            "",
        ),
        row(
            "new connections needed",
            &|m| m.new_connections_needed.to_string(),
            Some(&|c| c.new_connections_needed.to_string()),
            "219",
        ),
        row(
            "  opened while the name had a response under way",
            &|m| m.opened_while_name_busy.to_string(),
            None,
            "",
        ),
        row(
            "  served by another connection (%)",
            &|m| format!("{:.0}", m.served_by_other_pct),
            Some(&|c| format!("{:.0}", c.served_by_other_pct)),
            "64",
        ),
        row(
            "    by one that freed up / another new one",
            &|_| String::new(),
            Some(&|c| format!("{} / {}", c.served_by_freed, c.served_by_other_new)),
            "",
        ),
        row(
            "  time saved each, mean (ms)",
            &|m| format!("{:.0}", m.saved_ms_mean),
            Some(&|c| format!("{:.0}", c.saved_ms_mean)),
            "~80",
        ),
        row(
            "longest handshake (ms)",
            &|m| format!("{:.0}", m.handshake_ms_max),
            None,
            "",
        ),
        row(
            "page load (s)",
            &|m| format!("{:.2}", m.page_load_s),
            Some(&|c| c.page_load_s.map_or("-".into(), |s| format!("{s:.2}"))),
            "",
        ),
    ];
    (header, rows)
}

fn saved_cdf(runs: &[(&str, &[f64])], rtt_ms: f64) -> Chart {
    let mut chart = Chart::new(
        "pool: time saved per request served by another connection",
        Axis::new("new connection ready − request sent elsewhere", "ms").from_zero(),
        Axis::new("requests", "%").from_zero(),
    )
    .caption(format!(
        "Each request that another connection served while its own new connection was still \
         in its handshake, by how much sooner it left, on the news page and on the same page \
         with its names consolidated. The seed expects these spread between 0 and one RTT \
         ({rtt_ms:.0} ms), about 80 ms on average: a straight line would be a uniform spread; \
         a dot per request."
    ));
    for ((label, saved), color) in runs.iter().zip([Rgb(0, 114, 178), Rgb(213, 94, 0)]) {
        // A dot per request: the line's steps, without its start at 0 %.
        let dots = report::chart::cdf_points(saved)
            .into_iter()
            .skip(1)
            .collect();
        chart = chart
            .with(Series::cdf(format!("{label} ({})", saved.len()), color, saved).stroke(3))
            .with(Series::scatter(
                format!("{label}: one request"),
                color,
                dots,
            ));
    }
    chart
}

/// What the page says of Chromium's runs.
fn chromium_note(r: &Results) -> String {
    let one = |page: &str, c: &Option<ChromiumMetrics>| match c {
        Some(c) => format!(
            "on the {page} page it opened {} connections ({} of them backup attempts), {} \
             because a request found none idle; {:.0} % of those requests were served by a \
             socket whose response had ended first ({} requests; {} more by another new \
             connection ready first), {:.0} ms sooner on average; last response {}",
            c.connections,
            c.backup_connections,
            c.new_connections_needed,
            c.served_by_other_pct,
            c.served_by_freed,
            c.served_by_other_new,
            c.saved_ms_mean,
            c.page_load_s
                .map_or("not timed".into(), |s| format!("at {s:.2} s"))
        ),
        None => format!("the {page} page was not loaded"),
    };
    let mut s = format!(
        "Headless Chromium in the same lab, its HTTP/1.1 socket pool binding each request to \
         whichever socket of its name is available first (6 per name), read from its network \
         log: {}; {}.",
        one("news", &r.chromium),
        one("consolidated", &r.chromium_consolidated)
    );
    if let Some(n) = &r.chromium_note {
        s.push_str(&format!(" ({n})"));
    }
    s
}

fn write_outputs(dir: &Path, results: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut wf: Vec<Chart> = runs
        .iter()
        .map(|r| {
            let m = &r.metrics;
            let caption = format!(
                "{}: {} resources on {} host names over {} connections at {:.0} ms RTT; page \
                 load {:.2} s. {}",
                r.label,
                m.resources,
                m.host_names,
                m.connections,
                m.rtt_ms,
                m.page_load_s,
                if r.label.starts_with("bound") {
                    "A request that opened a connection waits out its handshake (the grey bar \
                     before its first orange one), even when another connection freed up."
                } else {
                    "A queued request leaves on whichever connection of its host is free \
                     first, new or persistent; a new connection that finds nothing queued joins \
                     the pool."
                }
            );
            waterfall(&format!("Waterfall, {}", r.label), &r.bars, caption)
        })
        .collect();
    report::same_scale(&mut wf);
    let cdf = saved_cdf(
        &[
            ("news", &runs[1].saved_ms),
            ("consolidated", &runs[3].saved_ms),
        ],
        results.pool.rtt_ms,
    );
    let m = &results.pool;
    let mut page = common::Report::new(
        "Connection reuse: a request takes whichever connection frees up first",
        format!(
            "A news front page (examples/pages/news.toml: {} resources over {} host names on four \
             servers, found in four waves: the HTML's references as it arrives, then what \
             stylesheets, scripts and ad servers reference), and the same page with its names \
             consolidated to {} (one per service); {PER_HOST} connections per name, {} Mbit/s \
             down / {} up, a {}-packet FIFO, {:.0} ms RTT; connection manager `bound` against \
             `pool`.",
            m.resources,
            m.host_names,
            results.pool_consolidated.host_names,
            m.down_mbit,
            m.up_mbit,
            m.buffer_packets,
            m.rtt_ms
        ),
        table_rows(results),
        "'New connections needed': connections opened because a request found no idle \
             one; 'opened while the name had a response under way': of those, the ones opened \
             while another connection of the same name was between its request and its \
             response's last byte (from the client's log), the only ones another connection \
             can beat; 'served by another': the requests sent on a connection that freed up \
             before the new one's handshake ended. The seed's figures stand beside the news \
             page's setup, the closer to the seed's (many names, 219 connections).",
        common::findings(checks),
    );
    page.note(chromium_note(results));
    let ids: Vec<String> = runs
        .iter()
        .map(|r| format!("waterfall-{}", r.label))
        .collect();
    let mut wf = ids.iter().zip(wf).map(|(id, c)| (id.as_str(), c, true));
    let rows = vec![
        page.row(wf.by_ref().take(2).collect())?,
        page.row(wf.collect())?,
    ];
    page.section("Waterfalls", "", rows);
    let saved = page.figure("saved-ms", cdf, true)?;
    page.section("Time saved", "", vec![Block::Figure(saved)]);
    let labels: Vec<&str> = runs.iter().map(|r| r.label).collect();
    page.push(analyzer_section(dir, &labels)?);
    page.files(&[
        "page.toml, page-consolidated.toml: the two pages",
        "bound/, pool/, bound-consolidated/, pool-consolidated/: each run's lab output: \
         captures/*.pcap, programs/page-load.out (a JSON line per connection and per \
         resource, and the conn_manager line)",
        "chromium/, chromium-consolidated/: Chromium's runs: netlog.json (its network log; \
         open it in netlog-viewer), programs/chromium.out (the DOM after the load event)",
    ]);
    page.write(dir, results)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(needed: usize, pct: f64, saved: f64, load: f64) -> RunMetrics {
        RunMetrics {
            rtt_ms: 250.0,
            down_mbit: 10.0,
            up_mbit: 2.0,
            buffer_packets: 209,
            html_scan: "stream".into(),
            resources: 133,
            connections: 30,
            new_connections_needed: needed,
            served_by_other_pct: pct,
            saved_ms_mean: saved,
            page_load_s: load,
            opened_while_name_busy: 0,
            host_names: 35,
            handshake_ms_max: 260.0,
        }
    }

    #[test]
    fn checks_want_a_large_served_share_a_saving_under_one_rtt_and_no_slower_load() {
        let chromium = |pct: f64| ChromiumMetrics {
            requests: 300,
            new_connections_needed: 50,
            served_by_other_pct: pct,
            served_by_freed: 10,
            served_by_other_new: 2,
            saved_ms_mean: 60.0,
            connections: 60,
            backup_connections: 10,
            page_load_s: Some(3.0),
        };
        let good = Results {
            bound: m(30, 0.0, 0.0, 3.0),
            pool: m(40, 60.0, 90.0, 2.8),
            bound_consolidated: m(30, 0.0, 0.0, 3.0),
            pool_consolidated: m(40, 60.0, 90.0, 2.8),
            chromium: Some(chromium(55.0)),
            chromium_consolidated: None,
            chromium_note: None,
        };
        assert!(checks(&good).iter().all(|c| c.passed));
        let bad = Results {
            bound: m(30, 0.0, 0.0, 3.0),
            pool: m(40, 10.0, 300.0, 3.5),
            bound_consolidated: m(30, 0.0, 0.0, 3.0),
            pool_consolidated: m(40, 60.0, 90.0, 2.8),
            chromium: Some(chromium(24.0)),
            chromium_consolidated: Some(chromium(65.0)),
            chromium_note: None,
        };
        let failed = checks(&bad).into_iter().filter(|c| !c.passed).count();
        assert_eq!(failed, 4);
        let (header, rows) = table_rows(&bad);
        assert_eq!(header.len(), 8);
        let row = rows
            .iter()
            .find(|r| r[0].contains("by one that freed"))
            .unwrap();
        assert_eq!(row[5..7], ["10 / 2".to_string(), "10 / 2".to_string()]);
    }

    #[test]
    fn every_host_name_of_the_page_is_an_alias_of_exactly_one_server() {
        let line = Line {
            rtt_ms: 250.0,
            down_mbit: 10.0,
            up_mbit: 2.0,
            buffer: Buffer::Bdp,
        };
        let loader = page_load("pool", "stream");
        let cfg = lab_config(&line, Path::new("/tmp/p.toml"), loader, 1);
        cfg.validate().unwrap();
        let down = cfg.links[0].down.to_json();
        assert_eq!(down["delay"], "125ms");
        // 10 Mbit/s × 250 ms = 312.5 kB: 209 packets of 1500 bytes; 2 Mbit/s: 42.
        assert_eq!(down["queue"], "fifo limit 209", "{down:?}");
        assert_eq!(cfg.links[0].up.to_json()["queue"], "fifo limit 42");
        let page = web::page::Page::parse(NEWS).unwrap();
        let mut names: Vec<String> = cfg.hosts.iter().flat_map(|h| h.aliases.clone()).collect();
        names.sort();
        let mut used = page.hosts();
        used.sort();
        assert_eq!(names, used);
        let hosts = cfg.hosts_file();
        assert!(hosts.lines().any(|l| l.contains(" adverify-px")), "{hosts}");
        let waited: Vec<_> = cfg.programs.iter().filter(|p| p.wait).collect();
        assert!(waited[0].run.contains("--conn-manager pool"));
    }

    #[test]
    fn the_consolidated_page_has_the_same_resources_on_one_name_per_service() {
        let news = web::page::Page::parse(NEWS).unwrap();
        let one = web::page::Page::parse(&consolidate(NEWS)).unwrap();
        let mut hosts = one.hosts();
        hosts.sort();
        assert_eq!(
            hosts,
            ["ad", "analytics", "rec", "social", "static1", "www"]
        );
        assert_eq!(one.resources.len(), news.resources.len());
        for (a, b) in news.resources.iter().zip(&one.resources) {
            assert_eq!(
                (&a.path, a.bytes, &a.found_in),
                (&b.path, b.bytes, &b.found_in)
            );
        }
        // Every name it maps to is one the lab's servers answer to.
        let names: Vec<&str> = SERVERS
            .iter()
            .flat_map(|(_, n)| n.iter().copied())
            .collect();
        assert!(CONSOLIDATED.iter().all(|(_, to)| names.contains(to)));
    }

    #[test]
    fn the_news_page_has_many_names_and_is_found_in_waves() {
        let page = web::page::Page::parse(NEWS).unwrap();
        assert!(
            (20..=40).contains(&page.hosts().len()),
            "{:?}",
            page.hosts()
        );
        // How many loads deep each resource is found: the HTML's references 1, what they
        // reference 2, and so on.
        let depth = |start: &str| {
            let (mut path, mut d) = (start.to_string(), 1);
            while let Some(r) = page.resources.iter().find(|r| r.path == path) {
                match &r.found_in {
                    Some(p) => {
                        d += 1;
                        path = p.clone();
                    }
                    None => break,
                }
            }
            d
        };
        let depths: Vec<usize> = page.resources.iter().map(|r| depth(&r.path)).collect();
        assert_eq!(depths.iter().max(), Some(&4));
        let later = depths.iter().filter(|d| **d > 1).count();
        assert!(
            later * 3 > page.resources.len(),
            "{later} of {}",
            page.resources.len()
        );
    }
}

//! `latencylab demo conn-reuse`: a news front page over HTTP/1.1 at 250 ms RTT, loaded by two
//! connection-manager designs (experiment E12 of `shared/seeds/004`, "Separating HTTP
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

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lab::config::{EcnMode, LabConfig, LinkSpec, Program};
use report::{Axis, Block, Chart, Figure, Page, Rgb, Section, Series, Table};
use serde::Serialize;
use web::WebRecord;

use crate::common::{self, Check};
use crate::web_common::{analyzer_section, resource_bars, waterfall};

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
/// When the page load starts, s after the lab: the servers are listening by then.
const CLIENT_START_S: f64 = 0.5;
pub const DOWN: &str = "10mbit";
pub const UP: &str = "2mbit";
const QUEUE: &str = "fifo limit 1000";
/// Connections per host name, as browsers allow.
pub const PER_HOST: u16 = 6;
/// The seed's 141 of 219.
const SEED_SERVED_PCT: f64 = 64.0;
/// The lowest share the seed saw on any page (a Facebook wall, 9 of 27).
const SEED_LOWEST_PCT: f64 = 33.0;

#[derive(Clone, Debug)]
pub struct Options {
    pub out_dir: PathBuf,
    /// 250 ms by default, the seed's.
    pub rtt_ms: f64,
    pub seed: u64,
    pub quiet: bool,
}

/// One run's numbers, as `results.json` writes them.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RunMetrics {
    pub rtt_ms: f64,
    pub resources: usize,
    /// Connections opened in all.
    pub connections: u64,
    /// Connections opened because a request found no idle one.
    pub new_connections_needed: usize,
    /// Of those, the share whose request another connection served during the handshake.
    pub served_by_other_pct: f64,
    /// Mean of (new connection ready − request sent elsewhere), ms; 0 when none.
    pub saved_ms_mean: f64,
    pub page_load_s: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub bound: RunMetrics,
    pub pool: RunMetrics,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// The lab of one run: the client on the access line (`--rtt` split over both directions),
/// a router, and behind it the [`SERVERS`] (a gigabit each, no delay of their own), each
/// serving the page; the page load under `design` (`bound` or `pool`) on the client.
pub fn lab_config(rtt_ms: f64, design: &str, page_file: &Path, seed: u64) -> LabConfig {
    let one_way = format!("{}ms", rtt_ms / 2.0);
    let mut hosts = vec![common::host("client", 1, EcnMode::Passive)];
    let mut links = vec![LinkSpec {
        name: "access".into(),
        a: "client".into(),
        b: "isp".into(),
        up: common::direction(UP, &one_way, QUEUE),
        down: common::direction(DOWN, &one_way, QUEUE),
    }];
    let mut programs = Vec::new();
    for (i, (name, aliases)) in SERVERS.iter().enumerate() {
        let mut h = common::host(name, i + 2, EcnMode::Passive);
        h.aliases = aliases.iter().map(|a| a.to_string()).collect();
        hosts.push(h);
        links.push(LinkSpec {
            name: (*name).into(),
            a: "isp".into(),
            b: (*name).into(),
            up: common::direction("1gbit", "0ms", QUEUE),
            down: common::direction("1gbit", "0ms", QUEUE),
        });
        programs.push(Program {
            name: format!("web-server-{name}"),
            host: (*name).into(),
            at_s: 0.0,
            run: format!("exec latencylab web-server --page {}", page_file.display()),
            wait: false,
        });
    }
    programs.push(Program {
        name: "page-load".into(),
        host: "client".into(),
        at_s: CLIENT_START_S,
        run: format!(
            "exec latencylab page-load http://www/ --per-host {PER_HOST} --conn-manager {design}"
        ),
        wait: true,
    });
    LabConfig {
        seed,
        duration_s: None,
        hosts,
        routers: vec!["isp".into()],
        links,
        changes: vec![],
        programs,
        nat64: None,
    }
}

struct RunData {
    label: &'static str,
    metrics: RunMetrics,
    bars: Vec<[f64; 4]>,
    saved_ms: Vec<f64>,
}

pub fn run(opts: &Options) -> Result<Outcome> {
    if !(1.0..=2000.0).contains(&opts.rtt_ms) {
        bail!("--rtt: {} ms is outside 1 ms to 2000 ms", opts.rtt_ms);
    }
    // The lab's start, then about 16 round trips: the HTML's, and four waves of handshakes
    // and requests.
    let expect = 4.0 + opts.rtt_ms / 1000.0 * 16.0;
    let mut series = common::Series::new(&opts.out_dir, 2.0 * expect + 6.0, opts.quiet)?;
    let page_file = opts.out_dir.join("news.toml");
    fs::write(&page_file, NEWS).with_context(|| format!("writing {}", page_file.display()))?;
    let page_file = page_file.canonicalize()?;
    let labs = ["bound", "pool"].map(|design| {
        let run = common::Run {
            dir: design.into(),
            msg: format!("{design} ({:.0} ms RTT)", opts.rtt_ms),
            expected_s: expect,
            config: lab_config(opts.rtt_ms, design, &page_file, opts.seed),
        };
        (design, run)
    });
    let runs = series.run(labs.into(), None, |design, dir, _| {
        collect(design, opts.rtt_ms, dir)
    })?;
    let results = Results {
        bound: runs[0].metrics.clone(),
        pool: runs[1].metrics.clone(),
    };
    let (checks, rows) = (checks(&results), table_rows(&results));
    series.finish(3.0, results, checks, rows, |r, c| {
        write_outputs(&opts.out_dir, r, c, &runs)
    })
}

fn collect(label: &'static str, rtt_ms: f64, dir: &Path) -> Result<RunData> {
    let (bars, connections) = resource_bars(dir)?;
    let path = dir.join("programs").join("page-load.out");
    let recs = web::read_records(&path).map_err(|e| anyhow::anyhow!(e))?;
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
    let mean = if saved_ms.is_empty() {
        0.0
    } else {
        saved_ms.iter().sum::<f64>() / saved_ms.len() as f64
    };
    Ok(RunData {
        label,
        metrics: RunMetrics {
            rtt_ms,
            resources: bars.len(),
            connections,
            new_connections_needed: needed,
            served_by_other_pct: 100.0 * served as f64 / needed.max(1) as f64,
            saved_ms_mean: mean,
            page_load_s: bars.iter().map(|b| b[3]).fold(0.0, f64::max) / 1e3,
        },
        bars,
        saved_ms,
    })
}

/// Issue 16's "Done when" for E12: `pool` serves a large share of would-be new connections by
/// another one (at least the lowest share the seed saw), each saving somewhere between nothing
/// and one RTT, and the page is no slower for it.
pub fn checks(r: &Results) -> Vec<Check> {
    let c = |what: String, passed: bool| Check { what, passed };
    let p = &r.pool;
    vec![
        c(
            format!(
                "pool: {:.0} % of the {} connections needed were served by another that freed \
                 up during the handshake, at least {SEED_LOWEST_PCT:.0} % (seed: 141 of 219, \
                 {SEED_SERVED_PCT:.0} %)",
                p.served_by_other_pct, p.new_connections_needed
            ),
            p.served_by_other_pct >= SEED_LOWEST_PCT,
        ),
        c(
            format!(
                "pool: each saved {:.0} ms on average, between 0 and one RTT ({:.0} ms; seed: \
                 about 80 ms at 250 ms RTT)",
                p.saved_ms_mean, p.rtt_ms
            ),
            p.saved_ms_mean > 0.0 && p.saved_ms_mean < p.rtt_ms,
        ),
        c(
            format!(
                "bound: no request is served by another connection ({:.0} %)",
                r.bound.served_by_other_pct
            ),
            r.bound.served_by_other_pct == 0.0,
        ),
        c(
            format!(
                "pool's page load {:.2} s is no slower than bound's {:.2} s (5 % allowed for \
                 noise)",
                p.page_load_s, r.bound.page_load_s
            ),
            p.page_load_s <= 1.05 * r.bound.page_load_s,
        ),
    ]
}

pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let runs = [("bound", &r.bound), ("pool", &r.pool)];
    let mut header = common::run_header(&runs);
    header.push("seed (NYT)".into());
    let row = |name: &str, f: &dyn Fn(&RunMetrics) -> String, seed: &str| {
        let mut v = common::run_row(&runs, name, f);
        v.push(seed.into());
        v
    };
    let rows = vec![
        row("RTT (ms)", &|m| format!("{:.0}", m.rtt_ms), "250"),
        row(
            "resources / connections opened",
            &|m| format!("{} / {}", m.resources, m.connections),
            "",
        ),
        row(
            "new connections needed",
            &|m| m.new_connections_needed.to_string(),
            "219",
        ),
        row(
            "  served by another connection (%)",
            &|m| format!("{:.0}", m.served_by_other_pct),
            "64",
        ),
        row(
            "  time saved each, mean (ms)",
            &|m| format!("{:.0}", m.saved_ms_mean),
            "~80",
        ),
        row("page load (s)", &|m| format!("{:.2}", m.page_load_s), ""),
    ];
    (header, rows)
}

fn saved_cdf(saved_ms: &[f64], rtt_ms: f64) -> Chart {
    let mut v = saved_ms.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).expect("finite"));
    let n = v.len().max(1) as f64;
    let pts: Vec<(f64, f64)> = v
        .iter()
        .enumerate()
        .map(|(i, s)| (*s, 100.0 * (i + 1) as f64 / n))
        .collect();
    Chart::new(
        "pool: time saved per request served by another connection",
        Axis::new("new connection ready − request sent elsewhere", "ms").from_zero(),
        Axis::new("requests", "%").from_zero(),
    )
    .caption(format!(
        "Each request that another connection served while its own new connection was still \
         in its handshake, by how much sooner it left. The seed expects these spread between 0 \
         and one RTT ({rtt_ms:.0} ms), about 80 ms on average: a straight line would be a \
         uniform spread; a dot per request."
    ))
    .with(Series::cdf("saved", Rgb(0, 114, 178), saved_ms).stroke(3))
    .with(Series::scatter("one request", Rgb(0, 114, 178), pts))
}

fn write_outputs(dir: &Path, results: &Results, checks: &[Check], runs: &[RunData]) -> Result<()> {
    let mut wf: Vec<Chart> = runs
        .iter()
        .map(|r| {
            let m = &r.metrics;
            let caption = format!(
                "{}: {} resources over {} connections at {:.0} ms RTT; page load {:.2} s. {}",
                r.label,
                m.resources,
                m.connections,
                m.rtt_ms,
                m.page_load_s,
                if r.label == "bound" {
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
    let cdf = saved_cdf(&runs[1].saved_ms, results.pool.rtt_ms);
    let charts = [
        ("waterfall-bound", &wf[0]),
        ("waterfall-pool", &wf[1]),
        ("saved-ms", &cdf),
    ];
    let fig = |id: &str, c: &Chart| -> Result<Figure> {
        Figure::from_chart(id, c, true).with_context(|| format!("drawing {id}"))
    };
    let mut page =
        Page::new("Connection reuse: a request takes whichever connection frees up first");
    page.subtitle = format!(
        "A news front page (examples/pages/news.toml: {} resources over {} host names on four \
         servers, found in four waves: the HTML's references as it arrives, then what \
         stylesheets, scripts and ad servers reference), {PER_HOST} connections per name, {DOWN} down / {UP} up, {:.0} ms RTT; \
         connection manager `bound` against `pool`.",
        results.pool.resources,
        SERVERS.iter().map(|(_, names)| names.len()).sum::<usize>(),
        results.pool.rtt_ms
    );
    let (header, rows) = table_rows(results);
    page.push(
        Section::new("Results")
            .with(Block::Table(Table {
                header,
                rows,
                caption: "'New connections needed': connections opened because a request found \
                          no idle one; 'served by another': of those, the requests sent on a \
                          connection that freed up before the new one's handshake ended."
                    .into(),
            }))
            .with(common::findings(checks)),
    );
    page.push(Section::new("Waterfalls").with(Block::Row(vec![
        fig("waterfall-bound", &wf[0])?,
        fig("waterfall-pool", &wf[1])?,
    ])));
    page.push(Section::new("Time saved").with(Block::Figure(fig("saved-ms", &cdf)?)));
    let labels: Vec<&str> = runs.iter().map(|r| r.label).collect();
    page.push(analyzer_section(dir, &labels)?);
    page.push(Section::new("Files").with(Block::List(vec![
        "results.json: the numbers of the table".into(),
        "*.png: every chart of this page".into(),
        "bound/, pool/: each run's lab output: captures/*.pcap, programs/page-load.out (a JSON \
         line per connection and per resource, and the conn_manager line)"
            .into(),
    ])));
    common::write_report_files(dir, results, &charts, &page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(needed: usize, pct: f64, saved: f64, load: f64) -> RunMetrics {
        RunMetrics {
            rtt_ms: 250.0,
            resources: 133,
            connections: 30,
            new_connections_needed: needed,
            served_by_other_pct: pct,
            saved_ms_mean: saved,
            page_load_s: load,
        }
    }

    #[test]
    fn checks_want_a_large_served_share_a_saving_under_one_rtt_and_no_slower_load() {
        let good = Results {
            bound: m(30, 0.0, 0.0, 3.0),
            pool: m(40, 60.0, 90.0, 2.8),
        };
        assert!(checks(&good).iter().all(|c| c.passed));
        let bad = Results {
            bound: m(30, 0.0, 0.0, 3.0),
            pool: m(40, 10.0, 300.0, 3.5),
        };
        let failed = checks(&bad).into_iter().filter(|c| !c.passed).count();
        assert_eq!(failed, 3);
    }

    #[test]
    fn every_host_name_of_the_page_is_an_alias_of_exactly_one_server() {
        let cfg = lab_config(250.0, "pool", Path::new("/tmp/p.toml"), 1);
        cfg.validate().unwrap();
        assert_eq!(cfg.links[0].down.to_json()["delay"], "125ms");
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

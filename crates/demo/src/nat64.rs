//! `latencylab demo nat64`: what in an app breaks on an IPv6-only carrier network, and what
//! 464XLAT mends (experiment E1 of the 2015 talk).
//!
//! The lab is `ipv6-check`'s: the client IPv6-only behind DNS64 + NAT64 (the Well-Known
//! Prefix), the server IPv4-only running `probe-server`, 20 ms each way. Each class of app the
//! talk names is a `nat64-sample` client; each runs once in this lab through `ipv6-check`'s
//! evidence gathering (strace, the client's capture, the DNS64's log, the NAT64's counters)
//! and its rules, and once more where the client also has a CLAT (RFC 6877):
//! - `getaddrinfo`: the host name with `getaddrinfo(AF_UNSPEC)` (the talk: works);
//! - `v4-literal`: an IPv4 literal (breaks);
//! - `af-inet-only`: `gethostbyname` and `AF_INET` sockets (breaks);
//! - `preflight`: "is IPv4 up?" from the routes, then "no connection" (breaks);
//! - `local-synthesis`: RFC 7050 discovery of the prefix, RFC 6052 synthesis (works).
//!
//! This module runs and presents; it does not judge the samples itself: whether a sample got
//! through is its exit status, what broke is `ipv6-check`'s finding, and the criteria are
//! printed as checks, which the end-to-end test asserts.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};
use apps::nat64_sample::SampleClass;
use ipv6check::{Class, Evidence, Verdict};
use lab::config::LabConfig;
use labnet::shell::{shell_config, ShellOptions};
use report::{Block, Page, Section, Table};
use serde::Serialize;

use crate::common::{self, Check};
use crate::params::Args;

/// The server's port (`probe-server`'s default; it echoes the samples' request).
const PORT: u16 = 5202;
const SERVER: &str = "exec latencylab probe-server";

/// Runs COMMAND as the client of a NAT64 lab with `--server` and gathers `ipv6-check`'s
/// evidence: `(lab, output directory, COMMAND, server command line, quiet)`. The CLI hands in
/// its own, so that the demo's samples are checked exactly as `latencylab ipv6-check` checks.
pub type Gather = fn(&LabConfig, &Path, &[String], Option<&str>, bool) -> Result<Evidence>;

static GATHER: std::sync::OnceLock<Gather> = std::sync::OnceLock::new();

/// Runs every sample of this process's nat64 demos through `f` (the CLI's `ipv6-check`);
/// only the first call counts.
pub fn set_gather(f: Gather) {
    let _ = GATHER.set(f);
}

fn gather() -> Result<Gather> {
    GATHER
        .get()
        .copied()
        .context("the nat64 demo runs its samples through ipv6-check, which this program lacks")
}

/// The two networks each sample meets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Network {
    /// IPv6-only with DNS64 + NAT64.
    Ipv6Only,
    /// The same with a CLAT in the client (464XLAT, RFC 6877).
    Clat,
}

impl Network {
    pub fn name(self) -> &'static str {
        match self {
            Network::Ipv6Only => "ipv6-only",
            Network::Clat => "clat",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Network::Ipv6Only => "IPv6-only",
            Network::Clat => "IPv6-only + 464XLAT",
        }
    }
}

/// What each sample stands for, and what the talk says of it on an IPv6-only network: the
/// finding `ipv6-check` must name when it breaks, `None` when it works.
pub fn expected(c: SampleClass) -> (&'static str, Option<Class>) {
    match c {
        SampleClass::Getaddrinfo => ("host-name", None),
        SampleClass::V4Literal => ("ipv4-literal", Some(Class::Ipv4Literal)),
        SampleClass::AfInetOnly => ("af-inet-only", Some(Class::AOnly)),
        SampleClass::Preflight => ("ipv4-preflight", Some(Class::Ipv4Preflight)),
        SampleClass::LocalSynthesis => ("local-synthesis", None),
    }
}

/// One sample on one network.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SampleRun {
    /// The sample exited 0: it got through.
    pub ok: bool,
    /// From the sample's start to the first byte of the answer, ms.
    pub ttfb_ms: Option<f64>,
    /// Where it connected.
    pub addr: Option<String>,
    /// `ipv6-check`'s findings, most fundamental first (their class names).
    pub findings: Vec<String>,
    /// The sample's own line.
    pub line: String,
    /// `ipv6-check`'s report, as the command prints it.
    #[serde(skip)]
    pub report: String,
    /// The first finding's hint.
    #[serde(skip)]
    pub hint: Option<String>,
}

/// One entry of `results.json`'s `apps`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AppResult {
    /// The sample (`nat64-sample --class NAME`).
    pub name: String,
    /// What kind of app it stands for.
    pub class: String,
    pub nat64_ok: bool,
    /// `null` when the CLAT run was not made.
    pub clat_ok: Option<bool>,
    /// `ipv6-check`'s first finding on the IPv6-only network; `null` for none.
    pub finding: Option<String>,
    pub ipv6_only: SampleRun,
    pub clat: Option<SampleRun>,
}

impl AppResult {
    /// A sample's entry from its runs on the two networks (`clat`: `None` when not run).
    pub fn new(c: SampleClass, ipv6_only: SampleRun, clat: Option<SampleRun>) -> AppResult {
        AppResult {
            name: c.name().into(),
            class: expected(c).0.into(),
            nat64_ok: ipv6_only.ok,
            clat_ok: clat.as_ref().map(|r| r.ok),
            finding: ipv6_only.findings.first().cloned(),
            ipv6_only,
            clat,
        }
    }
}

/// `results.json`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Results {
    pub apps: Vec<AppResult>,
}

/// What the demo leaves: its results, the terminal table and checks, and where the report is.
pub type Outcome = common::Outcome<Results>;

/// The networks this build can make.
pub fn networks() -> Vec<Network> {
    vec![Network::Ipv6Only, Network::Clat]
}

/// The lab of one network: `ipv6-check`'s (`shell --nat64`, with `--clat` for 464XLAT), 20 ms
/// each way.
pub fn lab_config(net: Network, seed: u64) -> LabConfig {
    let mut o = ShellOptions {
        nat64: true,
        clat: net == Network::Clat,
        seed: Some(seed),
        ..ShellOptions::default()
    };
    o.link_option("--delay", None, "delay", Some("20ms"));
    shell_config(&o, &labnet::setting::no_files)
        .unwrap_or_else(|e| panic!("the nat64 demo's lab: {e}"))
}

/// The sample's command line: literal classes get the server's IPv4 address (what
/// `$LATENCYLAB_SERVER` holds), the others its name.
fn sample_command(cfg: &LabConfig, c: SampleClass, out: &Path) -> Vec<String> {
    let target = if c.wants_literal() {
        cfg.hosts
            .iter()
            .find(|h| h.name == "server")
            .map(|h| h.interfaces[0].ipv4.to_string())
            .expect("the shell lab has a server")
    } else {
        "server".to_string()
    };
    [
        "latencylab",
        "nat64-sample",
        "--class",
        c.name(),
        &target,
        &PORT.to_string(),
        "--out",
        &out.display().to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Each sample on each network as a lab of its own, with the server and the sample as
/// programs (the sample waited for, its line on its stdout): what `--export` writes. The demo
/// runs the same network and command through `ipv6-check`, which also watches the sample's
/// system calls.
pub fn runs(a: &Args) -> Vec<(SampleClass, common::Run)> {
    let mut out = Vec::new();
    for net in networks() {
        for &c in SampleClass::ALL.iter() {
            let mut config = lab_config(net, a.seed);
            let mut command = sample_command(&config, c, Path::new(""));
            command.truncate(command.len() - 2);
            config.programs = vec![
                common::program("server", "server", 0.0, SERVER.into(), false),
                common::program(
                    "sample",
                    "client",
                    0.5,
                    format!("exec {}", command.join(" ")),
                    true,
                ),
            ];
            let run = common::Run {
                dir: format!("{}/{}", net.name(), c.name()),
                msg: format!("{} on {}", c.name(), net.label()),
                expected_s: 3.0,
                config,
            };
            out.push((c, run));
        }
    }
    out
}

/// Runs every sample on every network, and writes `results.json` and `report.html`.
pub fn run(a: &Args) -> Result<Outcome> {
    if common::reanalysing() {
        bail!(
            "--reanalyse: demo nat64 judges each sample by its exit status, which a run \
             directory does not keep; run it again"
        );
    }
    let nets = networks();
    let total = nets.len() * SampleClass::ALL.len();
    let mut series = common::Series::new(&a.out_dir, total as f64 * 3.0 + 1.0, a.quiet)?;
    let mut runs: Vec<(SampleClass, Vec<SampleRun>)> =
        SampleClass::ALL.iter().map(|c| (*c, vec![])).collect();
    let mut k = 0;
    for net in &nets {
        let cfg = lab_config(*net, a.seed);
        for (c, per_net) in runs.iter_mut() {
            k += 1;
            let dir = a.out_dir.join(net.name()).join(c.name());
            let msg = format!("run {k}/{total}: {} on {}", c.name(), net.label());
            let r = series
                .progress()
                .phase(&msg, 3.0, || run_sample(a, &cfg, *c, &dir))?;
            per_net.push(r);
        }
    }
    let results = Results {
        apps: runs
            .into_iter()
            .map(|(c, per_net)| {
                let mut it = per_net.into_iter();
                let v6 = it.next().expect("the IPv6-only run is always made");
                AppResult::new(c, v6, it.next())
            })
            .collect(),
    };
    let checks = checks(&results);
    let rows = table_rows(&results);
    series.finish(1.0, results, checks, rows, |r, c| {
        common::write_report_files(&a.out_dir, r, &[], &page(a, r, c))
    })
}

/// One sample through `ipv6-check`, its lab's output in `dir`.
fn run_sample(_a: &Args, cfg: &LabConfig, c: SampleClass, dir: &Path) -> Result<SampleRun> {
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    lab::owner::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // The sample runs as the user who invoked sudo: its output file must be theirs.
    let out = dir.join("sample.jsonl");
    lab::owner::write(&out, "").with_context(|| format!("creating {}", out.display()))?;
    let command = sample_command(cfg, c, &out);
    let evidence = gather()?(cfg, dir, &command, Some(SERVER), true)
        .with_context(|| format!("running {} in {}", c.name(), dir.display()))?;
    let verdict = ipv6check::analyze(&evidence);
    let report = ipv6check::render(&evidence, &verdict);
    fs::write(dir.join("ipv6-check.txt"), &report)
        .with_context(|| format!("writing {}", dir.join("ipv6-check.txt").display()))?;
    let recs = apps::read_records(&out).with_context(|| format!("reading {}", out.display()))?;
    sample_run(&evidence, &verdict, &recs, report)
        .with_context(|| format!("{}: the sample wrote no nat64_sample line", out.display()))
}

/// One run's numbers from the check and the sample's record.
fn sample_run(
    e: &Evidence,
    v: &Verdict,
    recs: &[apps::Record],
    report: String,
) -> Option<SampleRun> {
    recs.iter().find_map(|r| match r {
        apps::Record::Nat64Sample {
            ttfb_ms,
            addr,
            line,
            ..
        } => Some(SampleRun {
            ok: e.exit_code == 0,
            ttfb_ms: *ttfb_ms,
            addr: addr.clone(),
            findings: v
                .findings
                .iter()
                .map(|f| f.class.name().to_string())
                .collect(),
            line: line.clone(),
            report: report.clone(),
            hint: v.findings.first().map(|f| f.hint.clone()),
        }),
        _ => None,
    })
}

/// The talk's expectations, on these results.
pub fn checks(r: &Results) -> Vec<Check> {
    let mut out = Vec::new();
    for a in &r.apps {
        let Some(c) = SampleClass::ALL.iter().find(|c| c.name() == a.name) else {
            continue;
        };
        let seen = a.finding.as_deref().unwrap_or("no finding");
        match expected(*c).1 {
            Some(want) => out.push(Check {
                what: format!(
                    "{}: breaks on IPv6-only and ipv6-check names {} ({}, {seen})",
                    a.name,
                    want.name(),
                    if a.nat64_ok { "it worked" } else { "it failed" },
                ),
                passed: !a.nat64_ok && a.finding.as_deref() == Some(want.name()),
            }),
            None => out.push(Check {
                what: format!(
                    "{}: works on IPv6-only with no finding ({}, {seen})",
                    a.name,
                    if a.nat64_ok { "it worked" } else { "it failed" },
                ),
                passed: a.nat64_ok && a.finding.is_none(),
            }),
        }
    }
    let clat_ok = r.apps.iter().filter(|a| a.clat_ok == Some(true)).count();
    let clat_run = r.apps.iter().all(|a| a.clat_ok.is_some());
    out.push(Check {
        what: if clat_run {
            format!(
                "every sample works with 464XLAT ({clat_ok} of {})",
                r.apps.len()
            )
        } else {
            "every sample works with 464XLAT (the 464XLAT runs were not made)".to_string()
        },
        passed: clat_run && clat_ok == r.apps.len(),
    });
    out
}

/// A run's cell: `ok` with the time to first byte, or `FAILS`; `-` when not run.
fn cell(r: Option<&SampleRun>) -> String {
    match r {
        None => "not run".into(),
        Some(r) if r.ok => r
            .ttfb_ms
            .map_or("ok".to_string(), |ms| format!("ok {ms:.0} ms")),
        Some(_) => "FAILS".into(),
    }
}

fn finding_cell(r: Option<&SampleRun>) -> String {
    match r {
        None => "-".into(),
        Some(r) if r.findings.is_empty() => "none".into(),
        Some(r) => r.findings.join(", "),
    }
}

/// The side-by-side table: header and rows.
pub fn table_rows(r: &Results) -> (Vec<String>, Vec<Vec<String>>) {
    let header = vec![
        "sample".to_string(),
        Network::Ipv6Only.label().to_string(),
        "ipv6-check finding".into(),
        Network::Clat.label().to_string(),
        "finding with 464XLAT".into(),
    ];
    let rows = r
        .apps
        .iter()
        .map(|a| {
            vec![
                a.name.clone(),
                cell(Some(&a.ipv6_only)),
                finding_cell(Some(&a.ipv6_only)),
                cell(a.clat.as_ref()),
                finding_cell(a.clat.as_ref()),
            ]
        })
        .collect();
    (header, rows)
}

/// What each sample does, in a sentence.
fn what_it_does(c: SampleClass) -> &'static str {
    match c {
        SampleClass::Getaddrinfo => {
            "resolves the host name with getaddrinfo(AF_UNSPEC) and tries every answer in order"
        }
        SampleClass::V4Literal => "connects an AF_INET socket to the IPv4 literal 10.77.2.1",
        SampleClass::AfInetOnly => {
            "resolves with gethostbyname (A records only) and connects AF_INET sockets"
        }
        SampleClass::Preflight => {
            "looks for an IPv4 default route in /proc/net/route and, finding none, reports \"no connection\""
        }
        SampleClass::LocalSynthesis => {
            "discovers the NAT64 prefix from the AAAA of ipv4only.arpa (RFC 7050) and synthesises the literal's IPv6 address (RFC 6052)"
        }
    }
}

/// The fix for a sample that breaks (the talk's advice, in a few words; ipv6-check's hint
/// says it whole in the report below the table).
fn fix(c: SampleClass, a: &AppResult) -> &'static str {
    if a.nat64_ok && a.ipv6_only.findings.is_empty() {
        return "none needed";
    }
    match c {
        SampleClass::V4Literal => "a host name, or RFC 7050 + RFC 6052 synthesis",
        SampleClass::AfInetOnly => "getaddrinfo(AF_UNSPEC) and its AF_INET6 answers",
        SampleClass::Preflight => "no IPv4 check: connect by name, report that error",
        SampleClass::Getaddrinfo | SampleClass::LocalSynthesis => "see ipv6-check's report below",
    }
}

/// A run's cell in the report's table: the outcome and the findings.
fn report_cell(r: Option<&SampleRun>) -> String {
    match r {
        None => "not run".into(),
        Some(r) if r.findings.is_empty() => cell(Some(r)),
        Some(r) => format!("{}: {}", cell(Some(r)), r.findings.join(", ")),
    }
}

fn page(a: &Args, r: &Results, checks: &[Check]) -> Page {
    let mut page = Page::new("IPv6-only networks: which apps break, and what 464XLAT mends");
    page.subtitle = format!(
        "Five small clients, one per class of app the talk names, each reaching an IPv4-only \
         server (probe-server on port {PORT}) from an IPv6-only client behind DNS64 + NAT64 \
         (prefix 64:ff9b::/96, 20 ms each way), each run through latencylab ipv6-check, then \
         again with a CLAT in the client (464XLAT, RFC 6877). Seed {}.",
        a.seed
    );
    let rows: Vec<Vec<String>> = r
        .apps
        .iter()
        .filter_map(|a| {
            let c = SampleClass::ALL.iter().find(|c| c.name() == a.name)?;
            Some(vec![
                a.name.clone(),
                report_cell(Some(&a.ipv6_only)),
                report_cell(a.clat.as_ref()),
                fix(*c, a).to_string(),
            ])
        })
        .collect();
    let samples = SampleClass::ALL
        .iter()
        .map(|c| format!("{}: {}", c.name(), what_it_does(*c)))
        .collect();
    page.push(
        Section::new("Results")
            .with(Block::List(samples))
            .with(Block::Table(Table {
                header: vec![
                    "app".into(),
                    Network::Ipv6Only.label().into(),
                    Network::Clat.label().into(),
                    "fix".into(),
                ],
                rows,
                caption: "ok: the sample got its answer (time from its start, lookups included, \
                          to the answer's first byte); FAILS: it exited non-zero, with \
                          ipv6-check's findings, most fundamental first."
                    .into(),
            }))
            .with(common::findings(checks)),
    );
    let mut said = Section::new("What each sample and ipv6-check said").with(Block::Paragraph(
        "Each sample's own line, then ipv6-check's report of the run, as latencylab \
         ipv6-check prints it."
            .into(),
    ));
    for a in &r.apps {
        for (net, run) in [
            (Network::Ipv6Only, Some(&a.ipv6_only)),
            (Network::Clat, a.clat.as_ref()),
        ] {
            if let Some(run) = run {
                said = said.with(Block::Pre(format!(
                    "{} on {}\n{}\n{}",
                    a.name,
                    net.label(),
                    run.line,
                    run.report.trim_end()
                )));
            }
        }
    }
    page.push(said);
    page.push(Section::new("Files").with(Block::List(vec![
        "results.json: apps, each with name, class, nat64_ok, clat_ok, finding, and per network \
         its time to first byte, address and findings"
            .into(),
        "ipv6-only/SAMPLE/ (and clat/SAMPLE/): each run's lab output: strace.txt, \
         captures/*.pcap, summary.json, sample.jsonl (the sample's line), ipv6-check.txt"
            .into(),
    ])));
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ok: bool, findings: &[&str]) -> SampleRun {
        SampleRun {
            ok,
            ttfb_ms: ok.then_some(80.0),
            addr: None,
            findings: findings.iter().map(|s| s.to_string()).collect(),
            line: String::new(),
            report: String::new(),
            hint: None,
        }
    }

    fn app(c: SampleClass, v6: SampleRun, clat: Option<SampleRun>) -> AppResult {
        AppResult::new(c, v6, clat)
    }

    fn as_the_talk_says(clat: bool) -> Results {
        let c = |ok| clat.then(|| run(ok, &[]));
        Results {
            apps: vec![
                app(SampleClass::Getaddrinfo, run(true, &[]), c(true)),
                app(
                    SampleClass::V4Literal,
                    run(false, &["ipv4-literal"]),
                    c(true),
                ),
                app(
                    SampleClass::AfInetOnly,
                    run(false, &["af-inet-only", "a-only-lookup"]),
                    c(true),
                ),
                app(
                    SampleClass::Preflight,
                    run(false, &["ipv4-preflight"]),
                    c(true),
                ),
                app(SampleClass::LocalSynthesis, run(true, &[]), c(true)),
            ],
        }
    }

    #[test]
    fn checks_pass_when_the_breaking_samples_break_with_their_finding_and_the_clat_mends_all() {
        let r = as_the_talk_says(true);
        let c = checks(&r);
        assert_eq!(c.len(), 6);
        assert!(c.iter().all(|c| c.passed), "{c:?}");
    }

    #[test]
    fn a_wrong_finding_a_false_finding_or_a_missing_clat_run_fails_its_check() {
        let mut r = as_the_talk_says(false);
        r.apps[1] = app(SampleClass::V4Literal, run(false, &["picked-ipv4"]), None);
        r.apps[0] = app(
            SampleClass::Getaddrinfo,
            run(true, &["udp-unanswered"]),
            None,
        );
        let failed: Vec<String> = checks(&r)
            .into_iter()
            .filter(|c| !c.passed)
            .map(|c| c.what)
            .collect();
        assert_eq!(failed.len(), 3, "{failed:?}");
        assert!(failed[0].starts_with("getaddrinfo: works"), "{failed:?}");
        assert!(failed[1].contains("names ipv4-literal"), "{failed:?}");
        assert!(failed[2].contains("not made"), "{failed:?}");
    }

    #[test]
    fn the_lab_is_ipv6_check_s_with_a_20_ms_path_and_literals_go_to_the_servers_ipv4() {
        let clat = lab_config(Network::Clat, 1);
        clat.validate().unwrap();
        assert_eq!(
            clat.nat64.as_ref().unwrap().clat,
            vec!["client".to_string()]
        );
        let cfg = lab_config(Network::Ipv6Only, 1);
        cfg.validate().unwrap();
        assert!(cfg.nat64.as_ref().unwrap().clat.is_empty());
        let out = Path::new("/x/sample.jsonl");
        let lit = sample_command(&cfg, SampleClass::V4Literal, out);
        assert_eq!(lit[4], "10.77.2.1");
        let name = sample_command(&cfg, SampleClass::AfInetOnly, out);
        assert_eq!(name[4], "server");
        assert_eq!(name.last().unwrap(), "/x/sample.jsonl");
    }

    #[test]
    fn the_table_has_a_row_per_sample_and_says_what_was_not_run() {
        let (header, rows) = table_rows(&as_the_talk_says(false));
        let t = common::text_table(&header, &rows);
        assert_eq!(t.lines().count(), 2 + 5, "{t}");
        assert!(t.contains("FAILS"), "{t}");
        assert!(t.contains("not run"), "{t}");
    }
}

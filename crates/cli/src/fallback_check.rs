//! `latencylab fallback-check`: runs COMMAND as the client of labs that each break one thing
//! apps assume about the network, one lab after another, and times from the client's captures
//! how long it took to get through. This module runs the labs and reads the captures; the
//! scenarios, the timeline and the verdicts are the pure crate `fallbackcheck`.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use fallbackcheck::{judge, render, Row, Scenario, Timeline};
use lab::{run_lab, RunOptions};
use labnet::run_dir::RunDir;

use crate::evidence::EvidenceDir;

/// Run COMMAND as the client of networks that half-work (IPv6 blackholed, IPv6 slow,
/// IPv6-only + NAT64, the first of two interfaces dead) and say how long it took to get
/// through in each, against RFC 8305's expectations.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  latencylab fallback-check -- curl -s -o /dev/null http://server/\n\nEach scenario is a lab of its own, run one after another; COMMAND reaches the server as `server`.\nThe table goes to stderr, after COMMAND's own output.\nExit status: 0 when every scenario got its first byte within RFC 8305's expectation, 1 when one did not, 2 for a bad option.\nWithout -o the evidence (each scenario's captures, lab.json, summary.json) is removed at the end; -o DIR keeps it in DIR/SCENARIO."
)]
pub struct FallbackCheckArgs {
    /// A shell command line run in `server` in each lab, started before COMMAND [default: an
    /// HTTP server on port 80 (latencylab web-server) answering GET / with a small page].
    #[arg(long, value_name = "CMD")]
    server: Option<String>,
    /// Run only this scenario; repeat for several [default: all]. One of ipv6-blackhole,
    /// ipv6-slow, ipv6-only-nat64, first-interface-dead.
    #[arg(long = "scenario", value_name = "NAME", value_parser = scenario_arg)]
    scenarios: Vec<Scenario>,
    /// How long COMMAND has in each scenario before it is stopped.
    #[arg(long, default_value = "10s", value_name = "TIME", value_parser = timeout_arg)]
    timeout: std::time::Duration,
    /// Keep each scenario's evidence (captures, lab.json, summary.json) in DIR/SCENARIO.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print nothing on stderr but the table and errors.
    #[arg(short, long)]
    quiet: bool,
    /// The client to check, run in `client`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn scenario_arg(s: &str) -> Result<Scenario, String> {
    Scenario::parse(s).map_err(|e| e.0)
}

fn timeout_arg(s: &str) -> Result<std::time::Duration, String> {
    match wire::units::parse_time(s) {
        Ok(d)
            if d >= std::time::Duration::from_secs(1)
                && d <= std::time::Duration::from_secs(300) =>
        {
            Ok(d)
        }
        Ok(_) => Err(format!("'{s}' is outside 1s to 300s (try 10s)")),
        Err(e) => Err(e.to_string()),
    }
}

/// The lab starts COMMAND once the server listens; this much more than `--timeout` is the
/// lab's whole life.
const STARTUP_S: f64 = 2.0;

/// The page the default server answers `GET /` with.
const DEFAULT_PAGE: &str = "name = \"fallback-check\"\n\n[html]\nhost = \"server\"\nbytes = 2000\n";

pub fn run(a: FallbackCheckArgs) -> Result<ExitCode> {
    if a.command.is_empty() {
        return Err(lab::UsageError(
            "fallback-check needs a COMMAND to check (try: latencylab fallback-check -- curl -s -o /dev/null http://server/)".into(),
        )
        .into());
    }
    let dir = EvidenceDir::create(a.out.as_deref(), "fallback-check")?;
    let result = check(&a, &dir.path);
    dir.finish("/SCENARIO (captures/, lab.json, summary.json)");
    result
}

fn check(a: &FallbackCheckArgs, dir: &Path) -> Result<ExitCode> {
    let server = match &a.server {
        Some(s) => s.clone(),
        None => {
            let page = dir.join("page.toml");
            lab::owner::write(&page, DEFAULT_PAGE)
                .with_context(|| format!("writing {}", page.display()))?;
            format!(
                "exec latencylab web-server --page {} --port 80 --out /dev/null",
                labnet::programs::sh_word(&page.display().to_string())
            )
        }
    };
    let scenarios = if a.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        let mut s = a.scenarios.clone();
        s.sort();
        s.dedup();
        s
    };
    let timeout_s = a.timeout.as_secs_f64();
    let mut rows = Vec::new();
    for s in scenarios {
        if !a.quiet {
            eprintln!("fallback-check: {}: {}", s.name(), s.describe());
        }
        let sub = dir.join(s.name());
        let cfg = s.lab_config(timeout_s + STARTUP_S, 1)?;
        let run = RunOptions {
            out_dir: Some(sub.clone()),
            command: Some(("client".into(), a.command.clone())),
            server: Some(("server".into(), server.clone())),
            quiet: true,
            // The captures are the evidence the time is read from.
            no_capture: false,
            capture: Default::default(),
        };
        let result = run_lab(&cfg, &run)?;
        let mut timeline = Timeline::default();
        for iface in s.client_interfaces() {
            read_capture(
                &RunDir::new(&sub).capture("client", iface),
                iface,
                &mut timeline,
            )?;
        }
        let attempts = timeline.attempts();
        rows.push(Row {
            scenario: s,
            verdict: judge(s, &attempts, result.server_listened != Some(false)),
            attempts,
            exit_code: result.exit_code,
            timeout_s,
        });
    }
    eprint!("{}", render(&rows));
    Ok(if rows.iter().all(|r| r.verdict.passed()) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Feeds every IP packet of one of the client's captures to `timeline`.
fn read_capture(pcap: &Path, iface: &str, timeline: &mut Timeline) -> Result<()> {
    let f = fs::File::open(pcap).with_context(|| format!("reading {}", pcap.display()))?;
    analyze::capture::for_each_ip_packet(f, |t, ip| timeline.packet(t.as_nanos(), iface, ip))
        .with_context(|| format!("reading {}", pcap.display()))
}

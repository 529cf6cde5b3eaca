//! `latencylab analyze`: read captures, print the statistics and diagnoses, and optionally
//! write plots, xplot files and an HTML page.
//!
//! Glue only: arguments (clap), files, a progress bar on large files when stderr is a
//! terminal, and exit codes. The analysis is the `analyze` crate's; drawing is `report`'s.
//! Exit codes: 0 analysed; 1 a report could not be written; 2 a usage error (a bad filter, a
//! capture that cannot be opened or is not a capture), with one line naming the culprit.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Captures larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 64 * 1024 * 1024;

#[derive(clap::Args, Debug)]
#[command(
    about = "Read pcap/pcapng captures and say where the delay came from",
    after_help = "Examples:\n  latencylab analyze out/run1/captures/client-eth0.pcap\n  tcpdump -i eth0 -s 96 -w - | latencylab analyze -\n  latencylab analyze --json capture.pcapng.gz | jq '.connections[].diagnoses'\n  latencylab analyze --filter 'port 5201' --html report.html --plots plots/ client.pcap server.pcap"
)]
pub struct AnalyzeArgs {
    /// Capture files: pcap or pcapng, optionally gzip-compressed; `-` reads standard input
    /// (`tcpdump -w - | latencylab analyze -`). Two captures of the same traffic (e.g. both
    /// ends) are analysed side by side, which enables `ecn_bleached`.
    #[arg(value_name = "CAPTURE", required = true)]
    pub captures: Vec<PathBuf>,
    /// Print the analysis as JSON (schema in docs/analyze.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Write one self-contained HTML page with the graphs, statistics and diagnoses.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write SVG and PNG plots (time-sequence, RTT, throughput, handshake CDF) into DIR.
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// Write xplot .xpl files (time-sequence graphs) into DIR.
    #[arg(long, value_name = "DIR")]
    pub xplot: Option<PathBuf>,
    /// Only connections matching EXPR, e.g. `port 80`, `host 10.0.0.1`, `10.0.0.1:5201`,
    /// `tcp and port 443 or udp`.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Analyse on N threads, each reading the captures and keeping the connections whose
    /// address pair hashes to it (default: one per core; standard input uses one).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
}

/// Runs `latencylab analyze`.
pub fn run(args: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let filter = match args.filter.as_deref().map(analyze::Filter::parse) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => return Ok(usage(&format!("--filter: {e}"))),
    };
    let opts = analyze::Options {
        keep_series: args.html.is_some() || args.plots.is_some() || args.xplot.is_some(),
        filter,
        ..analyze::Options::default()
    };
    let stdin = args.captures.iter().any(|p| p.as_os_str() == "-");
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let jobs = if stdin { 1 } else { args.jobs.unwrap_or(cores) };
    // Connections are independent: each thread reads every capture and keeps its share of
    // them (`analyze::Shard`); the shards' results are merged.
    let results: Vec<Result<analyze::Analysis, String>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..jobs)
            .map(|index| {
                let shard = analyze::Shard { index, count: jobs };
                let opts = analyze::Options {
                    shard,
                    ..opts.clone()
                };
                s.spawn(move || read_all(args, opts))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err("an analysis thread failed".into()))
            })
            .collect()
    });
    let mut parts = Vec::new();
    for r in results {
        match r {
            Ok(a) => parts.push(a),
            Err(line) => return Ok(usage(&line)),
        }
    }
    let analysis = analyze::Analysis::merge(parts);

    let stdout = io::stdout();
    let mut out = stdout.lock();
    let printed = if args.json {
        serde_json::to_writer_pretty(&mut out, &analysis.json_report())
            .map_err(io::Error::from)
            .and_then(|()| writeln!(out))
    } else {
        write!(out, "{}", analyze::text::summary(&analysis))
    };
    match printed {
        // A reader that stopped early (`| head`) is not a failure.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(ExitCode::SUCCESS),
        r => r.context("writing the analysis to stdout")?,
    }
    // Warnings go to stderr (the JSON also carries them), so that stdout stays the report.
    eprint!("{}", analyze::text::warnings(&analysis));
    if let Some(dir) = &args.plots {
        let files = report::analysis::write_plots(&analysis, dir)
            .with_context(|| format!("writing plots to {}", dir.display()))?;
        lab::owner::hand_over(dir)?;
        eprintln!(
            "latencylab: wrote {} plot files to {}",
            files.len(),
            dir.display()
        );
    }
    if let Some(dir) = &args.xplot {
        let files = report::analysis::write_xplot(&analysis, dir)
            .with_context(|| format!("writing xplot files to {}", dir.display()))?;
        lab::owner::hand_over(dir)?;
        eprintln!(
            "latencylab: wrote {} xplot files to {}",
            files.len(),
            dir.display()
        );
    }
    if let Some(path) = &args.html {
        report::analysis::write_html(&analysis, path)
            .with_context(|| format!("writing HTML to {}", path.display()))?;
        lab::owner::hand_over(path)?;
        eprintln!("latencylab: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Reads every capture into one analyzer (one shard of the connections); an error is the
/// usage line to print.
fn read_all(args: &AnalyzeArgs, opts: analyze::Options) -> Result<analyze::Analysis, String> {
    let first_shard = opts.shard.index == 0;
    let mut analyzer = analyze::Analyzer::new(opts);
    for path in &args.captures {
        let name = path.display().to_string();
        if path.as_os_str() == "-" {
            // `tcpdump -w - | latencylab analyze -`: read as a stream like any file.
            let name = "stdin".to_string();
            if let Err(e) = analyzer.add_capture(&name, io::stdin().lock()) {
                return Err(format!(
                    "standard input: {e} (accepted: pcap or pcapng, optionally gzip-compressed)"
                ));
            }
            continue;
        }
        let file = File::open(path).map_err(|e| format!("cannot open capture {name:?}: {e}"))?;
        let len = file.metadata().map(|m| m.len()).unwrap_or(0);
        let result = if first_shard && len >= PROGRESS_MIN_BYTES && io::stderr().is_terminal() {
            let bar = indicatif::ProgressBar::new(len).with_message(name.clone());
            bar.set_style(
                indicatif::ProgressStyle::with_template(
                    "{msg} {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
                )
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            let r = analyzer.add_capture(&name, bar.wrap_read(file));
            bar.finish_and_clear();
            r
        } else {
            analyzer.add_capture(&name, file)
        };
        if let Err(e) = result {
            return Err(format!(
                "{name:?}: {e} (accepted: pcap or pcapng, optionally gzip-compressed)"
            ));
        }
    }
    Ok(analyzer.finish())
}

/// Prints a usage error (one line) and gives exit status 2.
fn usage(line: &str) -> ExitCode {
    eprintln!("latencylab analyze: {line}");
    ExitCode::from(2)
}

//! `latencylab analyze`: read captures, print the statistics and diagnoses, and optionally
//! write plots, xplot files and an HTML page.
//!
//! Glue only: arguments (clap), files, a progress bar on large files when stderr is a
//! terminal, and exit codes. The analysis is the `analyze` crate's; drawing is `report`'s.
//! Exit codes: 0 analysed; 1 a report could not be written; 2 a usage error (a bad filter, a
//! capture that cannot be opened or is not a capture), with one line naming the culprit.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
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
    /// Use N threads (default: one per core): each reads the whole capture file (pcap or
    /// pcapng) and analyses the connections whose address pair falls to it; standard input
    /// and gzip-compressed captures are read on one thread. The result is one thread's.
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
    let mut inputs = Vec::new();
    for path in &args.captures {
        match Input::open(path) {
            Ok(i) => inputs.push(i),
            Err(line) => return Ok(usage(&line)),
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let jobs = args.jobs.unwrap_or(cores);
    // Connections are independent: `jobs` threads each read every packet's address pair and
    // analyse the connections that fall to them. That needs every capture in memory,
    // uncompressed (read `jobs` times); a stream is read on one thread.
    let in_place = inputs
        .iter()
        .all(|i| i.bytes().is_some_and(|b| !analyze::capture::is_gzip(b)));
    let result = if jobs > 1 && in_place {
        read_sharded(&inputs, &opts, jobs)
    } else {
        read_one(&inputs, opts)
    };
    let analysis = match result {
        Ok(a) => a,
        Err(line) => return Ok(usage(&line)),
    };

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

/// One capture to read: mapped into memory when it is a regular file, else a stream.
enum Input {
    Stdin,
    /// A file that cannot be mapped (a pipe, a device): read as a stream.
    Stream {
        name: String,
        file: File,
    },
    /// A regular file, its bytes as long as it was when opened (a capture still being
    /// written ends in a partial record, which is warned about).
    Mapped {
        name: String,
        map: Option<memmap2::Mmap>,
    },
}

impl Input {
    fn open(path: &Path) -> Result<Input, String> {
        if path.as_os_str() == "-" {
            return Ok(Input::Stdin);
        }
        let name = path.display().to_string();
        let file = File::open(path).map_err(|e| format!("cannot open capture {name:?}: {e}"))?;
        let meta = file
            .metadata()
            .map_err(|e| format!("cannot open capture {name:?}: {e}"))?;
        if !meta.is_file() {
            return Ok(Input::Stream { name, file });
        }
        if meta.len() == 0 {
            // Nothing to map (mmap refuses a length of zero); the reader names it empty.
            return Ok(Input::Mapped { name, map: None });
        }
        // SAFETY: the map is only read. Another process may append to the file meanwhile
        // (tcpdump still writing), which the map does not see; one that truncated it while we
        // read would make the kernel signal SIGBUS, which no check here could prevent.
        match unsafe { memmap2::Mmap::map(&file) } {
            Ok(map) => {
                // Read front to back: ask for read-ahead; a refusal only costs speed.
                let _ = map.advise(memmap2::Advice::Sequential);
                Ok(Input::Mapped {
                    name,
                    map: Some(map),
                })
            }
            Err(_) => Ok(Input::Stream { name, file }),
        }
    }

    fn bytes(&self) -> Option<&[u8]> {
        match self {
            Input::Mapped { map, .. } => Some(map.as_deref().unwrap_or(&[])),
            _ => None,
        }
    }

    fn name(&self) -> &str {
        match self {
            Input::Stdin => "stdin",
            Input::Stream { name, .. } | Input::Mapped { name, .. } => name,
        }
    }

    /// The usage line for a capture whose header cannot be read.
    fn bad(&self, e: &analyze::CaptureError) -> String {
        let what = match self {
            Input::Stdin => "standard input".to_string(),
            _ => format!("{:?}", self.name()),
        };
        format!("{what}: {e} (accepted: pcap or pcapng, optionally gzip-compressed)")
    }
}

/// Follows the reader through a mapped capture: drops the pages it left well behind from
/// this process (the page cache keeps them), so that resident memory does not grow with the
/// file, and moves a progress bar when stderr is a terminal and the file has taken more than
/// [`PROGRESS_AFTER`] so far.
struct Behind<'m> {
    map: Option<&'m memmap2::Mmap>,
    name: &'m str,
    released: usize,
    started: std::time::Instant,
    bar: Option<indicatif::ProgressBar>,
}

/// How long a capture is read before a progress bar shows.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl<'m> Behind<'m> {
    fn new(input: &'m Input) -> Behind<'m> {
        let map = match input {
            Input::Mapped { map: Some(m), .. } => Some(m),
            _ => None,
        };
        Behind {
            map,
            name: input.name(),
            released: 0,
            started: std::time::Instant::now(),
            bar: None,
        }
    }

    fn reached(&mut self, at: u64) {
        if self.bar.is_none() && self.started.elapsed() >= PROGRESS_AFTER {
            if let Some(m) = self.map.filter(|_| io::stderr().is_terminal()) {
                self.bar = Some(progress_bar(m.len() as u64, self.name));
            }
        }
        if let Some(bar) = &self.bar {
            bar.set_position(at);
        }
        let upto = usize::try_from(at).unwrap_or(usize::MAX);
        if let Some(map) = self.map.filter(|_| upto > self.released) {
            // SAFETY: the map is shared, read-only and backed by a file, so dropped pages
            // that are touched again are read back from the page cache (or the file) with the
            // same contents: nothing borrowed from the map changes.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    self.released,
                    upto - self.released,
                )
            };
            self.released = upto;
        }
    }
}

impl Drop for Behind<'_> {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

fn progress_bar(len: u64, name: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(len).with_message(name.to_string());
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Reads every capture on this thread into one analyzer; an error is the usage line to print.
fn read_one(inputs: &[Input], opts: analyze::Options) -> Result<analyze::Analysis, String> {
    let mut analyzer = analyze::Analyzer::new(opts);
    for input in inputs {
        let name = input.name().to_string();
        let result = match input {
            // `tcpdump -w - | latencylab analyze -`: read as a stream.
            Input::Stdin => analyzer.add_capture(&name, io::stdin().lock()),
            Input::Mapped { .. } => {
                // On this thread, every packet before the reader's position is done.
                let mut behind = Behind::new(input);
                let bytes = input.bytes().unwrap_or(&[]);
                analyzer.add_capture_bytes_with(&name, bytes, &mut |at| behind.reached(at))
            }
            Input::Stream { file, .. } => {
                let len = file.metadata().map(|m| m.len()).unwrap_or(0);
                if len >= PROGRESS_MIN_BYTES && io::stderr().is_terminal() {
                    let bar = progress_bar(len, &name);
                    let r = analyzer.add_capture(&name, bar.wrap_read(file));
                    bar.finish_and_clear();
                    r
                } else {
                    analyzer.add_capture(&name, file)
                }
            }
        };
        result.map_err(|e| input.bad(&e))?;
    }
    Ok(analyzer.finish())
}

/// How far (in bytes of the captures, end to end) one analysing thread may run ahead of the
/// slowest: the pages between them stay in memory, and nothing else bounds the gap when the
/// machine gives one thread less time than the other.
const AHEAD_MAX_BYTES: u64 = 8 << 20;

/// Reads every capture, mapped uncompressed ones all, on `jobs` threads at once: each walks
/// every record of every capture (the cheap part: record headers, link layer, the address
/// pair at fixed offsets) and analyses only the connections whose address pair falls to it
/// (the costly part). No packet is handed between threads; the walk done `jobs` times is the
/// price. The result is [`read_one`]'s: the same split as one reader handing packets to
/// `jobs` shards ([`analyze::Splitter`]), whose results are merged the same way.
fn read_sharded(
    inputs: &[Input],
    opts: &analyze::Options,
    jobs: u32,
) -> Result<analyze::Analysis, String> {
    use std::sync::{Condvar, Mutex};

    let n = jobs as usize;
    // Where each capture starts in the captures taken end to end.
    let starts: Vec<u64> = inputs
        .iter()
        .scan(0u64, |at, i| {
            let s = *at;
            *at += i.bytes().map_or(0, |b| b.len() as u64);
            Some(s)
        })
        .collect();
    // Each thread's position in the captures end to end (u64::MAX: done); a thread too far
    // ahead of the slowest waits for it.
    let reached = Mutex::new(vec![0u64; n]);
    let moved = Condvar::new();
    let slowest = |at: &[u64]| at.iter().copied().min().unwrap_or(u64::MAX);
    std::thread::scope(|s| {
        let mut workers = Vec::new();
        for w in 0..jobs {
            let (reached, moved, starts) = (&reached, &moved, &starts);
            workers.push(s.spawn(move || {
                // However this thread ends (a panic included), the others stop waiting for it.
                let _done = Done(reached, moved, w as usize);
                let mut splitter = analyze::Splitter::new(opts, jobs);
                let mut shard = analyze::ShardAnalyzer::new(opts);
                let mut failed = None;
                for (input, &base) in inputs.iter().zip(starts) {
                    let bytes = input.bytes().unwrap_or(&[]);
                    let mut keep = |k: u32, item| {
                        if k == w {
                            shard.handle(item);
                        }
                    };
                    // Every packet before `at` is analysed: report it, and wait while too
                    // far ahead of the slowest thread.
                    let mut progress = |at: u64| {
                        let mut all = reached.lock().unwrap_or_else(|e| e.into_inner());
                        all[w as usize] = base + at;
                        moved.notify_all();
                        while base + at > slowest(&all).saturating_add(AHEAD_MAX_BYTES) {
                            all = moved.wait(all).unwrap_or_else(|e| e.into_inner());
                        }
                    };
                    let r = splitter.add_capture(input.name(), bytes, &mut keep, &mut progress);
                    if let Err(e) = r {
                        failed = Some(input.bad(&e));
                        break;
                    }
                }
                (splitter, shard.finish(), failed)
            }));
        }
        // Pages every thread is past go (the page cache keeps them); the progress bar
        // follows the slowest thread.
        let mut behind: Vec<Behind<'_>> = inputs.iter().map(Behind::new).collect();
        loop {
            let at = slowest(&reached.lock().unwrap_or_else(|e| e.into_inner()));
            for (b, (input, &base)) in behind.iter_mut().zip(inputs.iter().zip(&starts)) {
                let len = input.bytes().map_or(0, |b| b.len() as u64);
                if at > base {
                    b.reached((at - base).min(len));
                }
            }
            if workers.iter().all(|h| h.is_finished()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        drop(behind);
        let mut parts = Vec::new();
        let mut first = None;
        for h in workers {
            let (splitter, part, failed) = h
                .join()
                .map_err(|_| "an analysis thread failed".to_string())?;
            if let Some(line) = failed {
                return Err(line);
            }
            parts.push(part);
            first.get_or_insert(splitter);
        }
        match first {
            Some(splitter) => Ok(splitter.finish(parts)),
            None => Err("no analysis thread".to_string()),
        }
    })
}

/// Marks a thread of [`read_sharded`] done when dropped: its position becomes the end.
struct Done<'a>(
    &'a std::sync::Mutex<Vec<u64>>,
    &'a std::sync::Condvar,
    usize,
);

impl Drop for Done<'_> {
    fn drop(&mut self) {
        let mut all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        all[self.2] = u64::MAX;
        self.1.notify_all();
    }
}

/// Prints a usage error (one line) and gives exit status 2.
fn usage(line: &str) -> ExitCode {
    eprintln!("latencylab analyze: {line}");
    ExitCode::from(2)
}

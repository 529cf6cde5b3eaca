//! `latencylab analyze`: read captures, print the statistics and diagnoses, and optionally
//! write plots, xplot files and an HTML page.
//!
//! Glue only: arguments (clap), files, a progress bar on large files when stderr is a
//! terminal, and exit codes. The analysis is the `analyze` crate's; drawing is `report`'s.
//! Exit codes: 0 analysed; 1 a report could not be written; 2 a usage error (a bad filter or
//! ladder window, a ladder window with one capture or nothing to draw into, a capture that
//! cannot be opened or is not a capture), with one line naming the culprit.

use std::fs::File;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;

use anyhow::Context;

/// Captures larger than this get a progress bar (when stderr is a terminal).
const PROGRESS_MIN_BYTES: u64 = 64 * 1024 * 1024;

#[derive(clap::Args, Debug)]
#[command(
    about = "Read pcap/pcapng captures and say where the delay came from",
    after_help = "Examples:\n  latencylab analyze out/run1/captures/client-eth0.pcap\n  tcpdump -i eth0 -s 96 -w - | latencylab analyze -\n  latencylab analyze --json capture.pcapng.gz | jq '.connections[].diagnoses'\n  latencylab analyze --filter 'port 5201' --html report.html --plots plots/ client.pcap server.pcap\n  latencylab analyze --plots plots/ --ladder-window 0.2s..0.6s client.pcap server.pcap"
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
    /// Write SVG and PNG plots (time-sequence, RTT, throughput, handshake CDF) into DIR; with
    /// two captures of the same traffic, also a ladder diagram of each connection seen in both
    /// (`a_b_ladder.png`: every packet from when it left one end to when it reached the other).
    #[arg(long, value_name = "DIR")]
    pub plots: Option<PathBuf>,
    /// The part of each connection its ladder diagram shows (--plots, --html; two captures):
    /// what the client sent or received from FROM to TO, in time since the first packet of all
    /// captures (the plots' time axis), e.g. `1.2s..1.5s`. Default: each connection's first 20
    /// packets (its handshake and first exchanges).
    #[arg(long, value_name = "FROM..TO", value_parser = ladder_window_arg)]
    pub ladder_window: Option<analyze::ladder::Window>,
    /// Write xplot .xpl files (time-sequence graphs) into DIR.
    #[arg(long, value_name = "DIR")]
    pub xplot: Option<PathBuf>,
    /// Only connections matching EXPR, e.g. `port 80`, `host 10.0.0.1`, `10.0.0.1:5201`,
    /// `tcp and port 443 or udp`.
    #[arg(long, value_name = "EXPR")]
    pub filter: Option<String>,
    /// Use N threads (default: one per core): a pcap file is read in parts by N threads and
    /// its connections analysed by N more, split by address pair; a pcapng file is read by
    /// one thread for the N; standard input and gzip-compressed captures are read on one
    /// thread. The result is one thread's.
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub jobs: Option<u32>,
}

/// clap's reading of `--ladder-window`.
fn ladder_window_arg(s: &str) -> Result<analyze::ladder::Window, String> {
    analyze::ladder::Window::parse_span(s).map_err(|e| e.to_string())
}

/// Runs `latencylab analyze`.
pub fn run(args: &AnalyzeArgs) -> anyhow::Result<ExitCode> {
    let filter = match args.filter.as_deref().map(analyze::Filter::parse) {
        None => None,
        Some(Ok(f)) => Some(f),
        Some(Err(e)) => return Ok(usage(&format!("--filter: {e}"))),
    };
    if args.ladder_window.is_some() {
        // Said before reading the captures, which can take long: a window that draws nothing
        // is a mistake worth stopping for.
        if args.captures.len() < 2 {
            return Ok(usage(
                "--ladder-window: a ladder diagram needs two captures of the same traffic, one \
                 at each end (client.pcap server.pcap); one was given",
            ));
        }
        if args.plots.is_none() && args.html.is_none() {
            return Ok(usage(
                "--ladder-window: ladder diagrams are drawn into --plots DIR or --html FILE; \
                 give one of them",
            ));
        }
    }
    let ladder = args.ladder_window.unwrap_or_default();
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
    // Connections are independent: readers find each packet's address pair and hand the
    // packets to `jobs` threads by that pair, which parse them. That needs every capture in
    // memory, uncompressed; a stream is read on one thread.
    let in_place = inputs
        .iter()
        .all(|i| i.bytes().is_some_and(|b| !analyze::capture::is_gzip(b)));
    // Uncompressed pcaps are read in parts on every thread; pcapng (whose blocks can only be
    // found from the start) by one reader handing packets to the others.
    let chunked = if jobs > 1 && in_place {
        read_chunked(&inputs, &opts, jobs)
    } else {
        None
    };
    let result = match chunked {
        Some(r) => r,
        None if jobs > 1 && in_place => read_split(&inputs, &opts, jobs),
        None => read_one(&inputs, opts),
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
    let drawn = args.plots.is_some() || args.html.is_some();
    if drawn && args.captures.len() > 1 && analyze::ladder::both_ends(&analysis).is_empty() {
        eprintln!(
            "latencylab analyze: no connection was seen in two captures with the same \
             addresses and ports (a NAT between them, or captures of other traffic): no ladder \
             diagram"
        );
    }
    if let Some(dir) = &args.plots {
        let files = report::analysis::write_plots(&analysis, dir, ladder)
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
        report::analysis::write_html(&analysis, path, ladder)
            .with_context(|| format!("writing HTML to {}", path.display()))?;
        lab::owner::hand_over(path)?;
        eprintln!("latencylab: wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Packets handed from the reader to a shard thread at a time.
const BATCH_PACKETS: usize = 512;
/// Batches in flight per shard thread before the reader waits.
const BATCHES_IN_FLIGHT: usize = 8;

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

/// Bytes of a mapped capture kept resident behind the reader when other threads analyse
/// its packets: those handed out but not yet analysed lie in them (at most
/// `BATCHES_IN_FLIGHT + 2` batches per thread; dropping their pages early would only cost a
/// page fault).
const RESIDENT_BEHIND_BYTES: usize = 16 << 20;

/// Follows the reader through a mapped capture: drops the pages it left well behind from
/// this process (the page cache keeps them), so that resident memory does not grow with the
/// file, and moves a progress bar when stderr is a terminal and the file has taken more than
/// [`PROGRESS_AFTER`] so far.
struct Behind<'m> {
    map: Option<&'m memmap2::Mmap>,
    name: &'m str,
    /// Bytes kept behind the reader.
    lag: usize,
    released: usize,
    started: std::time::Instant,
    bar: Option<indicatif::ProgressBar>,
}

/// How long a capture is read before a progress bar shows.
const PROGRESS_AFTER: std::time::Duration = std::time::Duration::from_secs(1);

impl<'m> Behind<'m> {
    fn new(input: &'m Input, lag: usize) -> Behind<'m> {
        let map = match input {
            Input::Mapped { map: Some(m), .. } => Some(m),
            _ => None,
        };
        Behind {
            map,
            name: input.name(),
            lag,
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
        let upto = usize::try_from(at)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.lag);
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
                let mut behind = Behind::new(input, 0);
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

/// Parts of the captures handed from a reading thread to each analysing thread before it
/// waits.
const PARTS_IN_FLIGHT: usize = 4;

/// Reads every capture, mapped uncompressed pcaps all, in parts on `jobs` threads, and
/// analyses their connections on `jobs` more, split by address pair; the result is
/// [`read_one`]'s. None when a capture cannot be read so (pcapng, gzip, a link type the
/// analyzer does not read) or its parts did not line up: read them another way.
fn read_chunked(
    inputs: &[Input],
    opts: &analyze::Options,
    jobs: u32,
) -> Option<Result<analyze::Analysis, String>> {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    let mut caps = Vec::new();
    for (i, input) in inputs.iter().enumerate() {
        match analyze::ChunkedCapture::new(input.name(), i, input.bytes()?, opts) {
            Ok(Some(c)) => caps.push(c),
            Ok(None) => return None,
            Err(e) => return Some(Err(input.bad(&e))),
        }
    }
    let order: Vec<(usize, usize)> = caps
        .iter()
        .enumerate()
        .flat_map(|(i, c)| (0..c.chunks()).map(move |k| (i, k)))
        .collect();
    let n = jobs as usize;
    let failed = AtomicBool::new(false);
    let done: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    // Pages of parts every analyser is done with go (the page cache keeps them), and the
    // progress bar follows: done by the analyser that finishes such a part, not by a thread
    // of its own, which a busy machine may leave waiting while the pages pile up. The parts
    // released so far, and each capture's follower.
    let released = Mutex::new((
        0usize,
        inputs.iter().map(|i| Behind::new(i, 0)).collect::<Vec<_>>(),
    ));
    type Part<'a> = (Arc<analyze::ChunkMeta>, Vec<analyze::Item<'a>>);
    std::thread::scope(|s| {
        // to[reader][analyser], from[analyser][reader]
        let mut to = Vec::new();
        let mut from: Vec<Vec<mpsc::Receiver<Part<'_>>>> = (0..n).map(|_| Vec::new()).collect();
        for _ in 0..n {
            let mut row = Vec::new();
            for f in from.iter_mut() {
                let (tx, rx) = mpsc::sync_channel::<Part<'_>>(PARTS_IN_FLIGHT);
                row.push(tx);
                f.push(rx);
            }
            to.push(row);
        }
        for (w, senders) in to.into_iter().enumerate() {
            let (caps, order, failed) = (&caps, &order, &failed);
            s.spawn(move || {
                for &(c, k) in order.iter().skip(w).step_by(n) {
                    if failed.load(Ordering::Relaxed) {
                        return;
                    }
                    let chunk = caps[c].read_chunk(k, jobs);
                    let meta = Arc::new(chunk.meta);
                    for (tx, items) in senders.iter().zip(chunk.items) {
                        // An analyser that stopped (parts out of line) no longer listens.
                        if tx.send((meta.clone(), items)).is_err() {
                            return;
                        }
                    }
                }
            });
        }
        let mut analysers = Vec::new();
        for (a, receivers) in from.into_iter().enumerate() {
            let (order, failed, done, released, caps) = (&order, &failed, &done, &released, &caps);
            analysers.push(s.spawn(move || {
                let mut consumer = analyze::ChunkConsumer::new(opts);
                let mut metas = Vec::new();
                for j in 0..order.len() {
                    let Ok((meta, items)) = receivers[j % n].recv() else {
                        failed.store(true, Ordering::Relaxed);
                        break;
                    };
                    consumer.chunk(&meta, items);
                    if consumer.failed() {
                        failed.store(true, Ordering::Relaxed);
                        break;
                    }
                    if a == 0 {
                        metas.push(meta);
                    }
                    done[a].store(j + 1, Ordering::Release);
                    let upto = done.iter().map(|d| d.load(Ordering::Acquire)).min();
                    let mut r = released.lock().unwrap_or_else(|e| e.into_inner());
                    let (gone, behind) = &mut *r;
                    while *gone < upto.unwrap_or(0) {
                        let (c, k) = order[*gone];
                        behind[c].reached(caps[c].span(k).end as u64);
                        *gone += 1;
                    }
                }
                (consumer.finish(), metas)
            }));
        }
        let mut parts = Vec::new();
        let mut metas = Vec::new();
        for (i, h) in analysers.into_iter().enumerate() {
            let Ok((part, m)) = h.join() else {
                return Some(Err("an analysis thread failed".to_string()));
            };
            parts.push(part);
            if i == 0 {
                metas = m;
            }
        }
        if failed.load(Ordering::Relaxed) {
            return None;
        }
        let metas: Vec<&analyze::ChunkMeta> = metas.iter().map(|m| m.as_ref()).collect();
        Some(Ok(analyze::finish_chunked(opts, &caps, &metas, parts)))
    })
}

/// Reads every (mapped, uncompressed) capture once on this thread and analyses its
/// connections on `jobs` threads, split by address pair; the result is the same as
/// [`read_one`]'s.
fn read_split(
    inputs: &[Input],
    opts: &analyze::Options,
    jobs: u32,
) -> Result<analyze::Analysis, String> {
    std::thread::scope(|s| {
        let mut senders = Vec::new();
        let mut workers = Vec::new();
        // Emptied batches come back to the reader: a fresh 100 KB allocation per batch cost
        // more in page faults than the hand-over itself.
        let (back_tx, back_rx) = mpsc::channel::<Vec<analyze::Item<'_>>>();
        for _ in 0..jobs {
            let (tx, rx) = mpsc::sync_channel::<Vec<analyze::Item<'_>>>(BATCHES_IN_FLIGHT);
            senders.push(tx);
            let back = back_tx.clone();
            workers.push(s.spawn(move || {
                let mut shard = analyze::ShardAnalyzer::new(opts);
                for mut batch in rx {
                    for item in batch.drain(..) {
                        shard.handle(item);
                    }
                    let _ = back.send(batch);
                }
                shard.finish()
            }));
        }
        drop(back_tx);
        let mut splitter = analyze::Splitter::new(opts, jobs);
        let mut batches: Vec<Vec<analyze::Item<'_>>> = (0..jobs)
            .map(|_| Vec::with_capacity(BATCH_PACKETS))
            .collect();
        let mut failed = None;
        for input in inputs {
            let bytes = input.bytes().unwrap_or(&[]);
            let mut behind = Behind::new(input, RESIDENT_BEHIND_BYTES);
            let mut sink = |shard: u32, item| {
                let b: &mut Vec<_> = &mut batches[shard as usize];
                b.push(item);
                if b.len() >= BATCH_PACKETS {
                    let empty = back_rx
                        .try_recv()
                        .unwrap_or_else(|_| Vec::with_capacity(BATCH_PACKETS));
                    let full = std::mem::replace(b, empty);
                    // A worker only stops early by panicking, which the join below reports.
                    let _ = senders[shard as usize].send(full);
                }
            };
            let r =
                splitter.add_capture(input.name(), bytes, &mut sink, &mut |at| behind.reached(at));
            if let Err(e) = r {
                failed = Some(input.bad(&e));
                break;
            }
        }
        for (tx, b) in senders.iter().zip(batches) {
            if !b.is_empty() {
                let _ = tx.send(b);
            }
        }
        drop(senders);
        let mut parts = Vec::new();
        for w in workers {
            parts.push(
                w.join()
                    .map_err(|_| "an analysis thread failed".to_string())?,
            );
        }
        match failed {
            Some(line) => Err(line),
            None => Ok(splitter.finish(parts)),
        }
    })
}

/// Prints a usage error (one line) and gives exit status 2.
fn usage(line: &str) -> ExitCode {
    eprintln!("latencylab analyze: {line}");
    ExitCode::from(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_gives_the_ladders_default_window_the_analyzer_uses() {
        use clap::Args;
        let cmd = AnalyzeArgs::augment_args(clap::Command::new("analyze"));
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id() == "ladder_window")
            .expect("--ladder-window");
        let help = arg.get_help().expect("help").to_string();
        let default = format!("first {} packets", analyze::ladder::OPENING_ARROWS);
        assert!(help.contains(&default), "{help}");
    }
}

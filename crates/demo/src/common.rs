//! What every demo needs around its labs: the progress bar, running its labs in turn each into
//! its own directory, reading back the programs' JSON lines and the link logs, the side-by-side
//! text table, and writing and handing back what it leaves. Nothing here knows which
//! experiment it serves.

use std::fs;
use std::io::{BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lab::config::{
    iface_addrs, Direction, EcnMode, Family, Host, HostSettings, Interface, LinkSpec, Program,
};
use lab::output::LinkSummary;
use lab::{LabConfig, RunOptions, RunResult};
use labnet::run_dir::RunDir;

/// A progress bar on stderr measured in seconds of expected work. Each phase advances it with
/// the wall clock (a lab's length is known in advance) and snaps to the phase's end when the
/// phase returns. Without a terminal the bar is hidden and each phase prints one line instead.
pub struct Progress {
    bar: ProgressBar,
    done_s: f64,
    lines: bool,
}

impl Progress {
    pub fn new(total_s: f64, quiet: bool) -> Progress {
        let tenths = (total_s * 10.0).ceil() as u64;
        // A watched lab's view holds the terminal: the phases print lines, which it shows.
        let terminal = std::io::stderr().is_terminal() && !runner_owns_terminal();
        let bar = if quiet || !terminal {
            ProgressBar::hidden()
        } else {
            let b = ProgressBar::with_draw_target(Some(tenths), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template("{elapsed:>4} [{bar:40}] {percent:>3}%  {msg}")
                    .expect("constant template")
                    .progress_chars("=> "),
            );
            b
        };
        Progress {
            bar,
            done_s: 0.0,
            lines: !quiet && !terminal,
        }
    }

    /// Runs `f`, moving the bar across `expected_s` seconds while it runs.
    pub fn phase<T>(&mut self, msg: &str, expected_s: f64, f: impl FnOnce() -> T) -> T {
        if self.lines {
            eprintln!("latencylab demo: {msg}");
        }
        self.bar.set_message(msg.to_string());
        let stop = AtomicBool::new(false);
        let start = StdInstant::now();
        let base = self.done_s;
        let out = std::thread::scope(|s| {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let t = start.elapsed().as_secs_f64().min(expected_s * 0.99);
                    self.bar.set_position(((base + t) * 10.0) as u64);
                    std::thread::sleep(StdDuration::from_millis(100));
                }
            });
            let out = f();
            stop.store(true, Ordering::Relaxed);
            out
        });
        self.done_s += expected_s;
        self.bar.set_position((self.done_s * 10.0) as u64);
        out
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// One lab of a demo's series.
pub struct Run {
    /// Its directory below the demo's.
    pub dir: String,
    /// What the progress bar says while it runs, after "run I/N: ".
    pub msg: String,
    /// How long the bar expects it to take, s.
    pub expected_s: f64,
    pub config: LabConfig,
}

/// What a demo leaves: its numbers, the side-by-side table for the terminal, the criteria and
/// where the report is.
pub struct Outcome<R> {
    pub results: R,
    pub table: String,
    pub checks: Vec<Check>,
    /// Criteria of the seed that this platform is known not to meet (empty for most demos).
    pub unreproducible: Vec<Unreproducible>,
    /// What went wrong in a run without stopping it (the machine too busy for the lab, a
    /// capture stopped by a full disk), each line naming its run: the figures of that run
    /// include it.
    pub warnings: Vec<String>,
    pub report: PathBuf,
}

impl<R> Outcome<R> {
    /// The outcome without its typed results, which `results.json` holds.
    pub fn erase(self) -> Outcome<()> {
        Outcome {
            results: (),
            table: self.table,
            checks: self.checks,
            unreproducible: self.unreproducible,
            warnings: self.warnings,
            report: self.report,
        }
    }
}

/// A demo from start to end: its output directory and its progress bar, the labs run in turn
/// and read back, and the report drawn last.
pub struct Series<'a> {
    out: &'a Path,
    progress: Progress,
    warnings: Vec<String>,
    /// What the bar expects drawing the report to take, s ([`run_series`]).
    draw_s: f64,
}

impl<'a> Series<'a> {
    /// Creates the output directory (`-o`) and the bar, which expects `total_s` seconds of
    /// work (hidden when `quiet`).
    pub fn new(out: &'a Path, total_s: f64, quiet: bool) -> Result<Series<'a>> {
        fs::create_dir_all(out).with_context(|| format!("-o: cannot create {}", out.display()))?;
        Ok(Series {
            out,
            progress: Progress::new(total_s, quiet),
            warnings: Vec::new(),
            draw_s: 0.0,
        })
    }

    /// The bar, for a phase of the demo's own.
    pub fn progress(&mut self) -> &mut Progress {
        &mut self.progress
    }

    /// Keeps the warnings of the lab run `name` (its summary's, as a lab run alone prints
    /// them at its end) for the outcome.
    pub fn warn_of(&mut self, name: &str, r: &RunResult) {
        let engine = labnet::messages::engine_warnings(&r.summary)
            .into_iter()
            .map(|l| l.replacen("latencylab: warning: ", "", 1));
        self.warnings.extend(
            engine
                .chain(r.summary.warnings.iter().cloned())
                .map(|w| format!("warning ({name}): {w}")),
        );
    }

    /// Runs the labs in turn, each into its own directory below the output directory (emptied
    /// first), under the bar as "run I/N: MSG", and reads each back with `collect` (its key,
    /// directory and lab result) as soon as it ends: under the bar as "analysing the DIR run"
    /// for `collect_s` seconds where given, else outside it. Returns what was read, in the
    /// order of `runs`; the first failure ends the series.
    pub fn run<K, T>(
        &mut self,
        runs: Vec<(K, Run)>,
        collect_s: Option<f64>,
        mut collect: impl FnMut(K, &Path, &RunResult) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = runs.len();
        let mut data = Vec::with_capacity(n);
        for (i, (key, run)) in runs.into_iter().enumerate() {
            let dir = self.out.join(&run.dir);
            let msg = format!("run {}/{n}: {}", i + 1, run.msg);
            let result = self
                .progress
                .phase(&msg, run.expected_s, || run_lab_in(&run.config, &dir))?;
            self.warn_of(&run.dir, &result);
            let d = match collect_s {
                Some(s) => {
                    let msg = format!("analysing the {} run", run.dir);
                    self.progress
                        .phase(&msg, s, || collect(key, &dir, &result))?
                }
                None => collect(key, &dir, &result)?,
            };
            data.push(d);
        }
        Ok(data)
    }

    /// [`Series::finish`] for a series that [`run_series`] started, which knows how long
    /// drawing takes.
    pub fn end<R>(
        self,
        results: R,
        checks: Vec<Check>,
        table: (Vec<String>, Vec<Vec<String>>),
        draw: impl FnOnce(&R, &[Check]) -> Result<()>,
    ) -> Result<Outcome<R>> {
        let draw_s = self.draw_s;
        self.finish(draw_s, results, checks, table, draw)
    }

    /// The last phase: `draw` writes the report's files under the bar ("drawing the report",
    /// `draw_s` seconds); then the bar goes and the outcome comes back, with the side-by-side
    /// table (header and rows) as text for the terminal.
    pub fn finish<R>(
        mut self,
        draw_s: f64,
        results: R,
        checks: Vec<Check>,
        (header, rows): (Vec<String>, Vec<Vec<String>>),
        draw: impl FnOnce(&R, &[Check]) -> Result<()>,
    ) -> Result<Outcome<R>> {
        self.progress
            .phase("drawing the report", draw_s, || draw(&results, &checks))?;
        self.progress.finish();
        Ok(Outcome {
            results,
            table: text_table(&header, &rows),
            checks,
            unreproducible: Vec::new(),
            warnings: self.warnings,
            report: RunDir::new(self.out).report_html(),
        })
    }
}

/// Starts a demo: its directory and bar (which expects each run's own time, `collect_s` to read
/// each back, and `draw_s` for the report), then runs the labs in turn and reads each back with
/// `collect` as [`Series::run`] does (outside the bar when `collect_s` is 0). Returns the series,
/// to draw the report with [`Series::finish`], and what was read, in the order of `runs`.
pub fn run_series<'a, K, T>(
    a: &'a crate::params::Args,
    runs: Vec<(K, Run)>,
    (collect_s, draw_s): (f64, f64),
    collect: impl FnMut(K, &Path, &RunResult) -> Result<T>,
) -> Result<(Series<'a>, Vec<T>)> {
    let total_s: f64 = runs.iter().map(|(_, r)| r.expected_s + collect_s).sum();
    let mut series = Series::new(&a.out_dir, total_s + draw_s, a.quiet)?;
    series.draw_s = draw_s;
    let collect_s = (collect_s > 0.0).then_some(collect_s);
    let data = series.run(runs, collect_s, collect)?;
    Ok((series, data))
}

/// A demo's report as it is built: the page, and every chart on it, which [`Report::write`]
/// writes as `ID.png` beside `report.html` and `results.json`. A chart reaches the page and the
/// files by one call ([`Report::figure`]), so the two cannot differ.
pub struct Report {
    page: report::Page,
    charts: Vec<(String, report::Chart)>,
}

impl Report {
    /// The page `title` (`subtitle` under it), opening with the results section: the table,
    /// what its numbers are (`caption`) and the checks (`findings`).
    pub fn new(
        title: &str,
        subtitle: String,
        table: (Vec<String>, Vec<Vec<String>>),
        caption: &str,
        findings: report::Block,
    ) -> Report {
        let mut page = report::Page::new(title);
        page.subtitle = subtitle;
        page.push(results_section(table, caption, findings));
        Report {
            page,
            charts: Vec::new(),
        }
    }

    /// `chart` as a figure of the page (`zoomable`: the reader can zoom into it), kept to be
    /// written as `ID.png`.
    pub fn figure(
        &mut self,
        id: &str,
        chart: report::Chart,
        zoomable: bool,
    ) -> Result<report::Figure> {
        let f = figure(id, &chart, zoomable)?;
        self.charts.push((id.to_string(), chart));
        Ok(f)
    }

    /// A paragraph at the end of the results section, under the checks.
    pub fn note(&mut self, text: String) {
        self.page.sections[0].push(report::Block::Paragraph(text));
    }

    /// Charts side by side, each as [`Report::figure`] makes it: (id, chart, zoomable).
    pub fn row(&mut self, charts: Vec<(&str, report::Chart, bool)>) -> Result<report::Block> {
        let figures = charts
            .into_iter()
            .map(|(id, c, zoom)| self.figure(id, c, zoom))
            .collect::<Result<_>>()?;
        Ok(report::Block::Row(figures))
    }

    /// A section of the page, made by the demo.
    pub fn push(&mut self, s: report::Section) {
        self.page.push(s);
    }

    /// A section `heading`: `text` (when not empty) above `blocks`.
    pub fn section(&mut self, heading: &str, text: &str, blocks: Vec<report::Block>) {
        let mut s = report::Section::new(heading);
        if !text.is_empty() {
            s.push(report::Block::Paragraph(text.into()));
        }
        for b in blocks {
            s.push(b);
        }
        self.page.push(s);
    }

    /// The section of what the analyzer found ([`analyzer_section`]).
    pub fn analyzer(&mut self, about: &str, findings: report::Block) {
        self.page.push(analyzer_section(about, findings));
    }

    /// The section of the files ([`files_section`]: `more` after `results.json` and the
    /// charts).
    pub fn files(&mut self, more: &[&str]) {
        self.page.push(files_section(more));
    }

    /// Writes `results.json`, the charts and `report.html` into `dir`.
    pub fn write(self, dir: &Path, results: &impl serde::Serialize) -> Result<()> {
        let charts: Vec<(&str, &report::Chart)> =
            self.charts.iter().map(|(n, c)| (n.as_str(), c)).collect();
        write_report_files(dir, results, &charts, &self.page)
    }
}

/// A program of a lab: started on `host` at `at_s` s, the lab ending with it when `wait`.
pub fn program(name: &str, host: &str, at_s: f64, run: String, wait: bool) -> Program {
    Program {
        name: name.into(),
        host: host.into(),
        at_s,
        run,
        wait,
    }
}

/// A host with one interface `eth0`, the `index`-th interface of the lab (from 1).
pub fn host(name: &str, index: usize, ecn: EcnMode) -> Host {
    let (ipv4, ipv6) = iface_addrs(index);
    Host {
        name: name.into(),
        settings: HostSettings {
            ecn,
            ..HostSettings::default()
        },
        family: Family::Dual,
        interfaces: vec![Interface {
            name: "eth0".into(),
            ipv4,
            ipv6,
        }],
        aliases: vec![],
    }
}

/// The lab of most demos: two hosts (the first at the lab's side `a` of the link) joined by one
/// link (`name`, its direction from the first host, its direction back) and the programs. It
/// ends with its waited-for program; the others then get SIGTERM and write their summaries.
pub fn two_hosts(
    seed: u64,
    [a, b]: [Host; 2],
    (name, up, down): (&str, Direction, Direction),
    programs: Vec<Program>,
) -> LabConfig {
    let path = link(name, (&a.name, &b.name), up, down);
    lab(seed, vec![a, b], &[], vec![path], programs)
}

/// A lab of `hosts` and `routers` joined by `links`, which nothing changes while it runs. It
/// ends with its waited-for program; the others then get SIGTERM and write their summaries.
pub fn lab(
    seed: u64,
    hosts: Vec<Host>,
    routers: &[&str],
    links: Vec<LinkSpec>,
    programs: Vec<Program>,
) -> LabConfig {
    LabConfig {
        seed,
        duration_s: None,
        links,
        hosts,
        routers: routers.iter().map(|r| r.to_string()).collect(),
        changes: vec![],
        programs,
        nat64: None,
        precision: Default::default(),
    }
}

/// The link `name` between the nodes `a` and `b`: `up` is its direction from `a`, `down` back.
pub fn link(name: &str, (a, b): (&str, &str), up: Direction, down: Direction) -> LinkSpec {
    LinkSpec {
        name: name.into(),
        a: a.into(),
        b: b.into(),
        up,
        down,
    }
}

/// One link direction: a rate, a one-way delay, a queue, no random loss. The values are a
/// demo's own constants, written as a user would write them: a bad one is a bug in the demo,
/// which its `lab_config` test finds.
pub fn direction(rate: &str, delay: &str, queue: &str) -> Direction {
    Direction::parse(&[("rate", rate), ("delay", delay), ("queue", queue)])
        .unwrap_or_else(|e| panic!("a demo's link direction: {e}"))
}

/// How a caller runs a demo's labs instead of [`lab::run_lab`]: the lab, its options and a
/// title for it (its directory's name). The CLI's `--watch` sets one.
pub type LabRunner = dyn Fn(&LabConfig, &RunOptions, &str) -> Result<RunResult> + Send + Sync;

static RUNNER: OnceLock<(Box<LabRunner>, bool)> = OnceLock::new();

/// Runs every lab of this process's demos with `f` from now on; `owns_terminal`: `f` draws on
/// the terminal while a lab runs, so the progress bar stays hidden. Only the first call counts.
pub fn set_lab_runner(f: Box<LabRunner>, owns_terminal: bool) {
    let _ = RUNNER.set((f, owns_terminal));
}

fn runner_owns_terminal() -> bool {
    RUNNER.get().is_some_and(|(_, t)| *t)
}

static REANALYSE: AtomicBool = AtomicBool::new(false);

/// From now on this process runs no lab: each lab a demo would run is read back from the run
/// directory an earlier run of the demo left ([`saved_run`]), so that its analysis, table and
/// report are made again from the same captures and logs.
pub fn set_reanalyse() {
    REANALYSE.store(true, Ordering::Relaxed);
}

/// Whether labs are read back rather than run ([`set_reanalyse`]).
pub fn reanalysing() -> bool {
    REANALYSE.load(Ordering::Relaxed)
}

/// Runs a lab as this process runs its labs: read back from its directory when reanalysing,
/// else through the runner of [`set_lab_runner`] (a watched run), which names it by the last
/// two parts of its directory (`bufferbloat/fifo`), or plainly.
pub fn run_lab(cfg: &LabConfig, opts: &RunOptions) -> Result<RunResult> {
    if reanalysing() {
        return saved_run(cfg, opts);
    }
    let Some((run, _)) = RUNNER.get() else {
        return lab::run_lab(cfg, opts);
    };
    let title = opts.out_dir.as_deref().map_or_else(
        || "lab".to_string(),
        |dir| {
            let last: Vec<String> = dir
                .components()
                .rev()
                .take(2)
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            last.into_iter().rev().collect::<Vec<_>>().join("/")
        },
    );
    run(cfg, opts, &title)
}

/// The lab `cfg` as an earlier run left it in its directory: its summary, once its `lab.json`
/// shows it was this very lab (a run of other options would be analysed as if it were this
/// one's). A run with a command is refused: its exit status is not kept.
fn saved_run(cfg: &LabConfig, opts: &RunOptions) -> Result<RunResult> {
    let dir = opts
        .out_dir
        .as_deref()
        .context("--reanalyse: a lab without a directory cannot be read back")?;
    let missing = |what: &str| {
        format!(
            "--reanalyse: {} has no {what} (run the demo there first, with the same options)",
            dir.display()
        )
    };
    if opts.command.is_some() {
        bail!(
            "--reanalyse: the run in {} judged a command by its exit status, which its run \
             directory does not keep; run the demo again",
            dir.display()
        );
    }
    let run = RunDir::new(dir);
    let text = fs::read_to_string(run.lab_json()).with_context(|| missing("lab.json"))?;
    let saved: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("--reanalyse: reading {}", run.lab_json().display()))?;
    let now = serde_json::to_value(cfg).expect("plain data serializes");
    if let Some(d) = first_difference(&saved, &now, String::new()) {
        bail!(
            "--reanalyse: the run in {} was made with other options than these ({d}); give \
             the options it was run with, or run it again",
            dir.display()
        );
    }
    let text = fs::read_to_string(run.summary_json()).with_context(|| missing("summary.json"))?;
    let summary = serde_json::from_str(&text)
        .with_context(|| format!("--reanalyse: reading {}", run.summary_json().display()))?;
    Ok(RunResult {
        exit_code: 0,
        summary,
        server_listened: None,
    })
}

/// Where two JSON documents first differ, as `KEY: was A, now B` (`KEY` a path such as
/// `links[0].up.rate`), or `None` when they are equal.
fn first_difference(
    was: &serde_json::Value,
    now: &serde_json::Value,
    at: String,
) -> Option<String> {
    use serde_json::Value as V;
    match (was, now) {
        (V::Object(a), V::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            keys.into_iter().find_map(|k| {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                let (x, y) = (a.get(k).unwrap_or(&V::Null), b.get(k).unwrap_or(&V::Null));
                first_difference(x, y, path)
            })
        }
        (V::Array(a), V::Array(b)) if a.len() != b.len() => {
            Some(format!("{at}: was {} entries, now {}", a.len(), b.len()))
        }
        (V::Array(a), V::Array(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, format!("{at}[{i}]"))),
        _ if was == now => None,
        _ => Some(format!("{at}: was {was}, now {now}")),
    }
}

/// Runs one lab with its output in `dir` (emptied first, so that no file of an earlier run
/// can be mistaken for this one's), quietly. When reanalysing, the run already in `dir` is read
/// back instead.
pub fn run_lab_in(cfg: &LabConfig, dir: &Path) -> Result<RunResult> {
    cfg.validate()
        .with_context(|| format!("the lab for {}", dir.display()))?;
    if dir.exists() && !reanalysing() {
        fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    let opts = RunOptions {
        out_dir: Some(dir.to_path_buf()),
        command: None,
        server: None,
        quiet: true,
        no_capture: false,
        capture: Default::default(),
    };
    let r = run_lab(cfg, &opts).with_context(|| format!("running the lab in {}", dir.display()))?;
    if r.exit_code != 0 {
        bail!(
            "the lab in {} ended with status {} (see its programs/ directory)",
            dir.display(),
            r.exit_code
        );
    }
    Ok(r)
}

/// The JSON lines a program of the lab wrote on its stdout.
pub fn program_records(run_dir: &Path, program: &str) -> Result<Vec<apps::Record>> {
    let path = RunDir::new(run_dir).program_out(program);
    apps::read_records(&path).with_context(|| format!("reading {}", path.display()))
}

/// The goodput of the `Total` line for `role` among a program's records (`program` in the
/// run directory `dir`), Mbit/s; an error naming the program's stderr if it wrote none.
pub fn total_goodput_mbps(
    records: &[apps::Record],
    role: &str,
    dir: &Path,
    program: &str,
) -> Result<f64> {
    records
        .iter()
        .find_map(|r| match r {
            apps::Record::Total {
                role: r,
                goodput_mbps,
                ..
            } if r == role => Some(*goodput_mbps),
            _ => None,
        })
        .with_context(|| {
            format!(
                "{}: {program} wrote no total (see programs/{program}.err)",
                dir.display()
            )
        })
}

/// One link direction of a run's summary.
pub fn link_summary<'a>(r: &'a RunResult, link: &str, direction: &str) -> Result<&'a LinkSummary> {
    r.summary
        .links
        .iter()
        .find(|l| l.name == link && l.direction == direction)
        .with_context(|| format!("summary has no link {link} {direction}"))
}

/// A run's link log, opened to be read a line at a time (by
/// [`labnet::run_dir::queue_delay_series`]).
pub fn open_link_log(path: &Path) -> Result<BufReader<fs::File>> {
    let f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    Ok(BufReader::new(f))
}

/// What a run shows in a row of a table with one column per run.
pub type Cell<'c, M> = &'c dyn Fn(&M) -> String;

/// A table with one column per run (`runs`: each run's name and numbers): its header (an empty
/// corner, then the run names), and a maker of its rows, each a label and `cell` of each run.
pub fn run_columns<'a, M>(
    runs: &'a [(&'a str, &'a M)],
) -> (Vec<String>, impl Fn(&str, Cell<'_, M>) -> Vec<String> + 'a) {
    let header = std::iter::once(String::new())
        .chain(runs.iter().map(|(n, _)| n.to_string()))
        .collect();
    let row = move |label: &str, cell: Cell<'_, M>| {
        std::iter::once(label.to_string())
            .chain(runs.iter().map(|(_, m)| cell(m)))
            .collect()
    };
    (header, row)
}

/// A plain-text table: the first column left-aligned, the others right-aligned.
pub fn text_table(header: &[String], rows: &[Vec<String>]) -> String {
    let cols = header.len();
    let mut width = vec![0; cols];
    for r in std::iter::once(header).chain(rows.iter().map(|r| r.as_slice())) {
        for (i, c) in r.iter().enumerate().take(cols) {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    let line = |r: &[String], out: &mut String| {
        for (i, c) in r.iter().enumerate().take(cols) {
            let pad = width[i] - c.chars().count();
            if i == 0 {
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            } else {
                out.push_str("   ");
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
        }
        out.push('\n');
    };
    line(header, &mut out);
    let total: usize = width.iter().sum::<usize>() + 3 * cols.saturating_sub(1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for r in rows {
        line(r, &mut out);
    }
    out
}

/// One criterion of an experiment, evaluated on a demo's numbers: printed as `ok` or `NOT`.
#[derive(Clone, Debug)]
pub struct Check {
    pub what: String,
    pub passed: bool,
}

/// A report's first section: the side-by-side table (header and rows), what its numbers are
/// (`caption`), and the checks (`findings`).
pub fn results_section(
    (header, rows): (Vec<String>, Vec<Vec<String>>),
    caption: &str,
    findings: report::Block,
) -> report::Section {
    report::Section::new("Results")
        .with(report::Block::Table(report::Table {
            header,
            rows,
            caption: caption.into(),
        }))
        .with(findings)
}

/// A chart as a report's figure (`zoomable`: the reader can zoom into it); an error names it.
pub fn figure(id: &str, chart: &report::Chart, zoomable: bool) -> Result<report::Figure> {
    report::Figure::from_chart(id, chart, zoomable).with_context(|| format!("drawing {id}"))
}

/// The colours of a demo's two runs in all its charts: the first (the trouble, as a rule)
/// orange, the second (the remedy) blue, a pair that colour-blind readers tell apart too.
pub const PAIR_COLORS: [report::Rgb; 2] = [report::Rgb(213, 94, 0), report::Rgb(0, 114, 178)];

/// The section of what the analyzer found: which captures it read and what to see (`about`),
/// then its diagnoses (`findings`).
pub fn analyzer_section(about: &str, findings: report::Block) -> report::Section {
    report::Section::new("What the analyzer found")
        .with(report::Block::Paragraph(about.into()))
        .with(findings)
}

/// The report's last section, of the files the demo leaves: `results.json`, the charts, then
/// `more` (each run's directory and what is in it).
pub fn files_section(more: &[&str]) -> report::Section {
    let mut files = vec![
        "results.json: the numbers of the table".to_string(),
        "*.png: every chart of this page".to_string(),
    ];
    files.extend(more.iter().map(|f| f.to_string()));
    report::Section::new("Files").with(report::Block::List(files))
}

/// The criteria as the report's findings block: "as expected" or "NOT as expected", each with
/// what was checked.
pub fn findings(checks: &[Check]) -> report::Block {
    report::Block::Findings(check_items(checks))
}

fn check_items(checks: &[Check]) -> Vec<(String, String)> {
    let label = |c: &Check| {
        if c.passed {
            "as expected"
        } else {
            "NOT as expected"
        }
    };
    checks
        .iter()
        .map(|c| (label(c).to_string(), c.what.clone()))
        .collect()
}

/// A criterion of a seed that a platform is known not to meet, with the one-line reason: the
/// third state of a check besides `ok` and `NOT`. It is still evaluated: it prints `ok` when it
/// holds after all, and `n/a` with the reason when it does not, so that an expected miss does not
/// read as a failure.
#[derive(Clone, Debug)]
pub struct Unreproducible {
    pub check: Check,
    /// The platform whose behaviour rules the criterion out ("Linux").
    pub platform: &'static str,
    /// Why, one line.
    pub reason: String,
}

impl Unreproducible {
    /// The terminal's word for it: `ok` when the criterion held anyway, else `n/a`.
    pub fn label(&self) -> &'static str {
        if self.check.passed {
            "ok "
        } else {
            "n/a"
        }
    }

    /// The terminal's line for it, after the label.
    pub fn line(&self) -> String {
        if self.check.passed {
            self.check.what.clone()
        } else {
            format!(
                "{}: not on {}, {}",
                self.check.what, self.platform, self.reason
            )
        }
    }
}

/// The criteria as the report's findings block, those a platform cannot meet last: "as
/// expected", "NOT as expected", or "not on PLATFORM" (with the reason) for a criterion that the
/// platform is known not to meet and did not meet.
pub fn findings_with(checks: &[Check], unreproducible: &[Unreproducible]) -> report::Block {
    let mut items = check_items(checks);
    for u in unreproducible {
        items.push(if u.check.passed {
            ("as expected".to_string(), u.check.what.clone())
        } else {
            (
                format!("not on {}", u.platform),
                format!("{}: {}", u.check.what, u.reason),
            )
        });
    }
    report::Block::Findings(items)
}

/// CLOCK_MONOTONIC at a program's `t_s = 0`, from its start line, so that the times of two
/// programs of one lab can be put on one axis.
pub fn monotonic_start(recs: &[apps::Record], dir: &Path, program: &str) -> Result<f64> {
    recs.iter()
        .find_map(|r| match r {
            apps::Record::Start { monotonic_s, .. } => Some(*monotonic_s),
            _ => None,
        })
        .with_context(|| {
            format!(
                "{}: {program} wrote no start line (see programs/{program}.err)",
                dir.display()
            )
        })
}

/// The analyzer's view of one capture, with the series the charts need.
pub fn analyze_pcap(pcap: &Path) -> Result<analyze::Analysis> {
    analyze_captures(&[pcap.to_path_buf()], true)
}

/// Writes a demo's files into `dir`: `results.json`, each chart as `NAME.png`, and the page as
/// `report.html`.
pub fn write_report_files(
    dir: &Path,
    results: &impl serde::Serialize,
    charts: &[(&str, &report::Chart)],
    page: &report::Page,
) -> Result<()> {
    let json = serde_json::to_string_pretty(results).expect("plain data serializes");
    let files = RunDir::new(dir);
    let path = files.results_json();
    fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
    for (name, chart) in charts {
        let p = files.chart_png(name);
        chart
            .write_png(&p)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    let p = files.report_html();
    page.write(&p)
        .with_context(|| format!("writing {}", p.display()))
}

/// The analysis of the given captures together (one clock: the lab's captures share it), with
/// the per-packet series when `keep_series`.
pub fn analyze_captures(
    pcaps: &[std::path::PathBuf],
    keep_series: bool,
) -> Result<analyze::Analysis> {
    let mut analyzer = analyze::Analyzer::new(analyze::Options {
        keep_series,
        ..Default::default()
    });
    for pcap in pcaps {
        let file = fs::File::open(pcap).with_context(|| format!("opening {}", pcap.display()))?;
        analyzer
            .add_capture(&pcap.display().to_string(), std::io::BufReader::new(file))
            .with_context(|| format!("reading {}", pcap.display()))?;
    }
    Ok(analyzer.finish())
}

/// The analyzer's diagnosis kinds (`nagle_delayed_ack`, …) for the connections to or from
/// `port`, at every vantage point, each named once, in name order.
pub fn diagnosis_kinds(a: &analyze::Analysis, port: u16) -> Vec<String> {
    let mut kinds: Vec<String> = a
        .connections
        .iter()
        .filter(|c| c.a.port() == port || c.b.port() == port)
        .flat_map(|c| c.diagnoses.iter().map(|d| d.kind.name().to_string()))
        .collect();
    kinds.sort();
    kinds.dedup();
    kinds
}

/// The report's "what the analyzer found" lines for one run: each diagnosis of the connections
/// to or from `port` with its summary, or one line saying there was none.
pub fn port_findings(label: &str, a: &analyze::Analysis, port: u16) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for c in a
        .connections
        .iter()
        .filter(|c| c.a.port() == port || c.b.port() == port)
    {
        let at = a
            .captures
            .get(c.vantage.capture)
            .map(|s| {
                Path::new(&s.name)
                    .file_name()
                    .map_or(s.name.clone(), |f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_default();
        for d in &c.diagnoses {
            // The direction whose data the diagnosis is about.
            let (from, to) = match d.dir {
                Some(analyze::Dir::BtoA) => (c.b, c.a),
                _ => (c.a, c.b),
            };
            out.push((
                format!("{label}: {}", d.kind.name()),
                format!("{from} → {to} (seen in {at}): {}", d.summary),
            ));
        }
    }
    if out.is_empty() {
        out.push((
            format!("{label}: nothing"),
            "the analyzer named no cause of delay".into(),
        ));
    }
    report::findings::grouped_findings(out)
}

/// The note above a program in an exported run file: what it is, when it starts, whether the
/// lab waits for it, and how to put another program in its place.
fn program_note(p: &Program) -> String {
    let mut note = String::new();
    let tool = p
        .run
        .strip_prefix("exec latencylab ")
        .and_then(|r| r.split_whitespace().next());
    if let Some(tool) = tool {
        note.push_str(&format!(
            "`latencylab {tool}`, as the demo starts it (options: `latencylab {tool} --help`).\n"
        ));
    }
    note.push_str(&format!("On {}, from {} s", p.host, p.at_s));
    if p.wait {
        note.push_str("; the lab ends when it ends.\n");
    } else {
        note.push_str(".\n");
    }
    note.push_str("Replace `run` with your own command (run by `sh -c`) to measure it here.");
    note
}

/// The file name of a run's run file in an export: its directory with `/` as `-`.
fn export_name(run: &Run) -> String {
    format!("{}.toml", run.dir.replace('/', "-"))
}

/// Writes each run's lab as a run file into `dir` (`RUN.toml`, as `latencylab run` reads
/// it, the programs as the demo starts them, each commented) and a `README.md` saying what
/// each is and what to change. `demo` names the demo, `about` says in a line what it
/// compares. Returns the run files' paths.
pub fn export(dir: &Path, demo: &str, about: &str, runs: &[Run]) -> Result<Vec<PathBuf>> {
    fs::create_dir_all(dir)
        .with_context(|| format!("--export: cannot create {}", dir.display()))?;
    let files = |p: &Path| -> std::result::Result<(String, String), String> {
        let text = fs::read_to_string(p).map_err(|e| e.to_string())?;
        Ok((p.display().to_string(), text))
    };
    let mut paths = Vec::new();
    let mut list = String::new();
    for run in runs {
        let name = export_name(run);
        let notes = labnet::run_file_text::Notes {
            header: vec![
                format!(
                    "The `{}` run of `latencylab demo {demo}`: {}.",
                    run.dir, run.msg
                ),
                format!("Run it: latencylab run {name} -o out/{}", run.dir),
                "Written by `latencylab demo --export` from the lab the demo itself runs.".into(),
            ],
            programs: run
                .config
                .programs
                .iter()
                .map(|p| (p.name.clone(), program_note(p)))
                .collect(),
        };
        let text = labnet::run_file_text::to_run_file(&run.config, &notes, &files)
            .with_context(|| format!("--export: the {} run", run.dir))?;
        let path = dir.join(&name);
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        list.push_str(&format!("- `{name}`: {}\n", run.msg));
        paths.push(path);
    }
    let first = runs.first().map(export_name).unwrap_or_default();
    let readme = format!(
        "# The labs of `latencylab demo {demo}`\n\n\
         {about}\n\n\
         Each file is one run of the demo, as a run file for `latencylab run`\n\
         (see docs/run-files.md in the latencylab repository):\n\n\
         {list}\n\
         Run one and draw its charts (without `sudo` where the machine lets a user make a lab,\n\
         with it elsewhere: docs/guide.md, \"Without root\"):\n\n\
         ```\n\
         latencylab run {first} -o out/run\n\
         latencylab report out/run\n\
         ```\n\n\
         What to change:\n\n\
         - A `[[program]]`'s `run`: put your own command there (it runs with `sh -c` on the\n  \
           program's host; every host resolves the others by name, and `$LATENCYLAB_<HOST>`\n  \
           holds each host's address, e.g. `$LATENCYLAB_SERVER`). Keep `wait = true` on the program whose end should\n  \
           end the lab, or set `duration` at the top.\n\
         - A `[[link]]`'s `rate`, `delay`, `queue` or any impairment (`jitter`, `loss`, `pps`,\n  \
           ...): the keys of docs/run-files.md. Keys under `[link.up]` / `[link.down]` apply\n  \
           to one direction only.\n\
         - `seed`: the same seed gives the same random choices (losses, AQM drops).\n\n\
         The demo's own table and checks come from reading these runs' program outputs\n\
         (`programs/NAME.out`), link logs and captures; `latencylab report` draws the\n\
         standard charts for any run.\n"
    );
    let path = dir.join("README.md");
    fs::write(&path, readme).with_context(|| format!("writing {}", path.display()))?;
    Ok(paths)
}

/// Writes a file a demo's programs read (a web demo's page) into `dir` as `name`, and gives
/// its absolute path, which the programs' command lines name.
pub fn page_file(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("-o: cannot create {}", dir.display()))?;
    let path = dir.join(name);
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    path.canonicalize()
        .with_context(|| format!("finding {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reports_charts_are_on_its_page_and_each_written_as_its_png() {
        let dir = std::env::temp_dir().join(format!("demo-report-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let chart = |t: &str| {
            report::Chart::new(t, report::Axis::new("x", "s"), report::Axis::new("y", "ms")).with(
                report::Series::line("a", report::Rgb::GREY, vec![(0.0, 1.0), (1.0, 2.0)]),
            )
        };
        let table = (
            vec!["".into(), "run".into()],
            vec![vec!["p50".into(), "3".into()]],
        );
        let mut r = Report::new("T", "sub".into(), table, "cap", findings(&[]));
        let one = r.figure("one", chart("One"), false).unwrap();
        let row = r.row(vec![
            ("two", chart("Two"), true),
            ("three", chart("Three"), false),
        ]);
        r.section("S", "words", vec![report::Block::Figure(one), row.unwrap()]);
        r.note("a note under the checks".into());
        r.files(&["run/: its files"]);
        r.write(&dir, &serde_json::json!({"p50": 3})).unwrap();
        let html = fs::read_to_string(dir.join("report.html")).unwrap();
        let pngs: Vec<bool> = ["one", "two", "three"]
            .iter()
            .map(|id| dir.join(format!("{id}.png")).exists() && html.contains(id))
            .collect();
        let json = fs::read_to_string(dir.join("results.json")).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(pngs, [true, true, true]);
        assert!(
            html.contains("run/: its files")
                && html.contains("words")
                && html.contains("a note under the checks"),
            "{html}"
        );
        assert!(json.contains("\"p50\": 3"), "{json}");
    }

    #[test]
    fn a_series_draws_its_report_last_from_the_numbers_and_says_where_it_is() {
        let out = std::env::temp_dir().join(format!("demo-series-{}", std::process::id()));
        let series = Series::new(&out, 1.0, true).unwrap();
        assert!(out.is_dir());
        let check = Check {
            what: "x".into(),
            passed: true,
        };
        let mut drawn = None;
        let o = series
            .finish(
                0.0,
                7_u32,
                vec![check],
                (
                    vec!["".into(), "run".into()],
                    vec![vec!["x".into(), "1".into()]],
                ),
                |r, c| {
                    drawn = Some((*r, c.len()));
                    Ok(())
                },
            )
            .unwrap();
        fs::remove_dir_all(&out).unwrap();
        assert_eq!(drawn, Some((7, 1)));
        assert_eq!(
            (o.results, o.table.as_str()),
            (7, "    run\n-------\nx     1\n")
        );
        assert_eq!(o.report, out.join("report.html"));
    }

    #[test]
    fn a_runs_warnings_reach_the_outcome_naming_the_run() {
        let summary = |p99_ms: f64, warnings: Vec<String>| labnet::run_dir::Summary {
            links: vec![],
            no_route: 0,
            engine: serde_json::from_value(serde_json::json!({
                "packets": 1,
                "delivery_lateness_ms": {"p50": 0.0, "p95": 0.0, "p99": p99_ms, "max": p99_ms},
                "write_errors": 0, "cpu_s": 0.1
            }))
            .unwrap(),
            nat64: None,
            warnings,
        };
        let out = std::env::temp_dir().join(format!("demo-warn-{}", std::process::id()));
        let mut series = Series::new(&out, 1.0, true).unwrap();
        let ran = |s| RunResult {
            exit_code: 0,
            summary: s,
            server_listened: None,
        };
        series.warn_of("quiet", &ran(summary(0.2, vec![])));
        series.warn_of(
            "busy",
            &ran(summary(12.0, vec!["a capture stopped".into()])),
        );
        let o = series
            .finish(0.0, (), vec![], (vec![], vec![]), |_, _| Ok(()))
            .unwrap();
        fs::remove_dir_all(&out).unwrap();
        assert_eq!(o.warnings.len(), 2, "{:?}", o.warnings);
        assert!(
            o.warnings[0]
                .starts_with("warning (busy): the emulator delivered packets 12.0 ms late"),
            "{:?}",
            o.warnings
        );
        assert_eq!(o.warnings[1], "warning (busy): a capture stopped");
    }

    #[test]
    fn a_series_whose_output_directory_cannot_be_made_names_the_option_and_the_path() {
        let file = std::env::temp_dir().join(format!("demo-series-file-{}", std::process::id()));
        fs::write(&file, "").unwrap();
        let under = file.join("out");
        let e = Series::new(&under, 1.0, true)
            .err()
            .expect("a file is in the way");
        fs::remove_file(&file).unwrap();
        let e = format!("{e:#}");
        assert!(
            e.starts_with("-o: cannot create ") && e.contains("demo-series-file"),
            "{e}"
        );
    }

    /// Each demo's runs with its defaults (Chromium left out), by name.
    fn every_demos_runs(out: &Path) -> Vec<(&'static str, Vec<Run>)> {
        crate::params::DEMOS
            .iter()
            .map(|d| {
                let mut a = crate::params::Args::new(d, out.to_path_buf());
                if d.param("no-chromium").is_some() {
                    a.set("no-chromium", "true").unwrap();
                }
                if d.param("runs").is_some() {
                    a.set("runs", "1").unwrap();
                }
                let runs = (d.runs)(&a).unwrap_or_else(|e| panic!("{}: {e:#}", d.name));
                (d.name, runs)
            })
            .collect()
    }

    #[test]
    fn every_demos_runs_export_as_run_files_that_read_back_as_the_labs_the_demo_runs() {
        let out = std::env::temp_dir().join(format!("demo-export-{}", std::process::id()));
        let all = every_demos_runs(&out);
        assert_eq!(all.len(), crate::params::DEMOS.len());
        for (name, runs) in all {
            let dir = out.join(name);
            let files = export(&dir, name, "what it compares", &runs)
                .unwrap_or_else(|e| panic!("{name}: {e:#}"));
            assert_eq!(files.len(), runs.len(), "{name}");
            for (file, run) in files.iter().zip(&runs) {
                let text = fs::read_to_string(file).unwrap();
                let back = labnet::run_file::parse_run_file(
                    "x.toml",
                    &text,
                    Path::new(""),
                    None,
                    &labnet::setting::no_files,
                )
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
                assert_eq!(back, run.config, "{}", file.display());
                assert!(
                    text.contains("# Replace `run` with your own command"),
                    "{text}"
                );
            }
            let readme = fs::read_to_string(dir.join("README.md")).unwrap();
            assert!(
                readme.contains(&format!("latencylab demo {name}`")),
                "{readme}"
            );
        }
        fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn run_columns_give_a_column_per_run_under_its_name() {
        let (fifo, codel) = (7_u32, 0_u32);
        let runs = [("fifo", &fifo), ("codel", &codel)];
        let (header, row) = run_columns(&runs);
        assert_eq!(header, ["", "fifo", "codel"]);
        assert_eq!(row("drops", &|m| m.to_string()), ["drops", "7", "0"]);
    }

    #[test]
    fn text_table_aligns_numbers_right_under_their_header() {
        let t = text_table(
            &["".into(), "fifo".into()],
            &[vec!["drops".into(), "7".into()]],
        );
        assert_eq!(t, "        fifo\n------------\ndrops      7\n");
    }
}

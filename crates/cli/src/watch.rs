//! `--watch` and `--live FILE`: the figures of every link while the lab runs.
//!
//! The engine hands a snapshot of the counters it keeps anyway to a channel every 100 ms of lab
//! time (`lab::run_lab_live`); a thread of this module turns them into rows
//! (`labnet::live::Meter`), appends them to the `--live` file as JSON lines and, with
//! `--watch`, draws them full-screen on the terminal with ratatui. The engine never waits for
//! this thread.
//!
//! While the view is up, the terminal belongs to it: the programs' output and the lab's own
//! messages go into pipes, their last lines are shown under the links, and all of it is written
//! to the real standard output and error when the view ends. The view leaves the terminal as it
//! found it on every exit: the end of the lab, Ctrl-C or SIGTERM (which end the lab), an error,
//! or a panic of this process.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter, IsTerminal, Read, Seek, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration as StdDuration;

use crate::watch_web::{Feed, WebView};
use analyze::text::rate;
use anyhow::{Context, Result};
use lab::live::{Meter, Row, Series, Snapshot, Window};
use lab::{LabConfig, RunOptions, RunResult, UsageError};
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
use ratatui::crossterm::QueueableCommand;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Sparkline};
use ratatui::{Terminal, TerminalOptions, Viewport};

/// The options every lab command shares for watching a run.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct WatchArgs {
    /// Show every link live, full-screen in this terminal, ten times a second: configured and
    /// delivered rate, queue now, sparklines of queue delay and throughput, drops by cause, CE
    /// marks, the engine's delivery error (late, or early within --precision), and the programs' last lines (printed whole at the end).
    /// Ctrl-C ends the lab.
    #[arg(long)]
    pub watch: bool,
    /// Write one JSON line per link direction every 100 ms to FILE while the lab runs (made
    /// anew), for notebooks and other tools to follow the run: see docs/run-dir.md.
    #[arg(long, value_name = "FILE")]
    pub live: Option<PathBuf>,
    /// Serve the same view as a page in a browser, on 127.0.0.1 of this machine only: its
    /// address is printed when the lab starts (PORT: that port; none: one the system picks).
    /// The charts move ten times a second and the page says when the lab has ended.
    #[arg(long, value_name = "PORT", num_args = 0..=1, default_missing_value = "0")]
    pub watch_web: Option<u16>,
}

impl WatchArgs {
    /// Whether anything watches the run.
    pub fn any(&self) -> bool {
        self.watch || self.live.is_some() || self.watch_web.is_some()
    }
}

/// Starts the page server of `--watch-web` (if asked) and prints its address.
pub fn start_web(w: &WatchArgs) -> Result<Option<WebView>> {
    let Some(port) = w.watch_web else {
        return Ok(None);
    };
    let v = WebView::start(port)?;
    eprintln!(
        "live view: {} (open it in a browser on this machine; it is served until the lab ends)",
        v.url()
    );
    Ok(Some(v))
}

/// How many intervals the sparklines show: the last 6 seconds.
const HISTORY: usize = 60;
/// How many lines of the programs' output the view keeps.
const OUTPUT_LINES: usize = 200;

/// With `--watch`, `--live` or `--watch-web`, every lab this process runs through
/// [`demo::run_lab`] (a demo's several, `ipv6-check`'s one) runs watched, each in turn: the
/// `--live` file holds every lab's lines, each with its lab's name, and the page shows each lab
/// as it comes. `one`: the name of the only lab the command runs (its lines then carry no
/// name). Returns the page server, which outlives the labs: finish it after the last.
pub fn watch_every_lab(w: &WatchArgs, one: Option<&'static str>) -> Result<Option<WebView>> {
    if !w.any() {
        return Ok(None);
    }
    let web = start_web(w)?;
    let feed = web.as_ref().map(|v| v.feed());
    let w = WatchArgs {
        watch_web: None,
        ..w.clone()
    };
    let owns_terminal = w.watch;
    let first = std::sync::atomic::AtomicBool::new(true);
    demo::set_lab_runner(
        Box::new(move |cfg, opts, title| {
            let fed = Fed {
                web: feed.clone(),
                title: one.unwrap_or(title),
                one_of_many: one.is_none(),
                append_live: !first.swap(false, std::sync::atomic::Ordering::Relaxed),
            };
            run_lab_fed(cfg, opts, &w, fed)
        }),
        owns_terminal,
    );
    Ok(web)
}

/// Runs the lab, watched as `w` asks (or plainly when it asks nothing); `title` names it on
/// the page of `--watch-web`.
pub fn run_lab(
    cfg: &LabConfig,
    opts: &RunOptions,
    w: &WatchArgs,
    title: &str,
) -> Result<RunResult> {
    let web = start_web(w)?;
    let fed = Fed {
        web: web.as_ref().map(|v| v.feed()),
        title,
        one_of_many: false,
        append_live: false,
    };
    let result = run_lab_fed(cfg, opts, w, fed);
    if let Some(v) = web {
        v.finish();
    }
    result
}

/// How a lab is followed beyond `WatchArgs`: for one of a demo's labs, by a page server that
/// outlives it and a `--live` file that holds every lab's lines.
pub struct Fed<'a> {
    /// The page server's publishing half.
    pub web: Option<Feed>,
    /// The lab's name on the page (and in its `--live` lines when it is one of many).
    pub title: &'a str,
    /// One lab of several: its `--live` lines carry its name (`lab`).
    pub one_of_many: bool,
    /// Add to the `--live` file instead of making it anew (a demo's labs after its first).
    pub append_live: bool,
}

/// [`run_lab`] followed as `fed` says besides `w`.
pub fn run_lab_fed(
    cfg: &LabConfig,
    opts: &RunOptions,
    w: &WatchArgs,
    fed: Fed,
) -> Result<RunResult> {
    let web = fed.web;
    if !w.watch && w.live.is_none() && web.is_none() {
        return lab::run_lab(cfg, opts);
    }
    if let Some(f) = &web {
        f.new_lab(fed.title);
    }
    let live_file = match &w.live {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .append(fed.append_live)
                .truncate(!fed.append_live)
                .open(p)
                .map_err(|e| {
                    UsageError(format!(
                        "--live: cannot create '{}': {e} (give a file in a directory you can \
                         write)",
                        p.display()
                    ))
                })?,
        ),
        None => None,
    };
    let lab_name = fed.one_of_many.then(|| fed.title.to_string());
    // No thread of the view may take the stop signals that the lab turns into events: they
    // are blocked before the first one starts, and every thread inherits that.
    let old_mask = lab::block_stop_signals()?;
    let screen = if w.watch {
        match Screen::take() {
            Ok(s) => Some(s),
            Err(e) => {
                lab::restore_signals(old_mask);
                return Err(e);
            }
        }
    } else {
        None
    };
    let output = screen.as_ref().map(|s| s.output.clone());
    let (tx, rx) = mpsc::sync_channel(16);
    let viewer = std::thread::spawn(move || view(rx, live_file, lab_name, screen, output, web));
    let result = lab::run_lab_live(cfg, opts, Some(tx));
    let viewed = viewer.join();
    lab::restore_signals(old_mask);
    match viewed {
        Ok(r) => r.context("--live")?,
        Err(p) => std::panic::resume_unwind(p),
    }
    result
}

/// The view's thread: rows to the file and the screen until the lab's last snapshot (or the
/// channel closes), then the terminal back as it was.
fn view(
    rx: Receiver<Snapshot>,
    file: Option<File>,
    lab_name: Option<String>,
    mut screen: Option<Screen>,
    output: Option<Arc<Mutex<Captured>>>,
    web: Option<Feed>,
) -> Result<()> {
    let mut file = file.map(BufWriter::new);
    let mut meter = Meter::default();
    let mut history = Window::new(HISTORY);
    let mut rows: Vec<Row> = Vec::new();
    let mut ended = false;
    while !ended {
        match rx.recv_timeout(StdDuration::from_millis(100)) {
            Ok(snap) => {
                ended = snap.last;
                rows = meter.rows(snap);
                if let Some(n) = &lab_name {
                    for r in &mut rows {
                        r.lab.clone_from(n);
                    }
                }
                history.push(&rows);
                if let Some(f) = &web {
                    f.rows(&rows);
                }
                if let Some(f) = &mut file {
                    for r in &rows {
                        serde_json::to_writer(&mut *f, r)?;
                        f.write_all(b"\n")?;
                    }
                    f.flush()?;
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => ended = true,
        }
        if let (Some(s), Some(out)) = (&mut screen, &output) {
            let lines = out.lock().map(|o| o.last_lines()).unwrap_or_default();
            // A terminal that cannot be drawn on ends the view, not the lab.
            if s.draw(&rows, history.series(), &lines, ended).is_err() {
                screen = None;
            }
        }
    }
    drop(screen);
    Ok(())
}

/// How much of the programs' output is kept in memory before the rest goes to a file.
const SPOOL_MEMORY: usize = 1 << 20;
/// The longest unfinished line the view keeps (a program that never writes a newline).
const PARTIAL_MAX: usize = 4096;

/// Bytes kept to be written out at the end: in memory up to a limit, then in an unnamed
/// temporary file, so that a chatty program cannot fill the memory.
struct Spool {
    memory: Vec<u8>,
    limit: usize,
    file: Option<File>,
}

impl Spool {
    fn new(limit: usize) -> Spool {
        Spool {
            memory: Vec::new(),
            limit,
            file: None,
        }
    }

    fn write(&mut self, bytes: &[u8]) {
        if self.file.is_none() && self.memory.len() + bytes.len() > self.limit {
            // An unnamed file in the temporary directory, gone with its descriptor. Where the
            // system has none, the output stays in memory.
            self.file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_TMPFILE)
                .mode(0o600)
                .open(std::env::temp_dir())
                .ok();
            if let Some(f) = &mut self.file {
                if f.write_all(&self.memory).is_ok() {
                    self.memory = Vec::new();
                } else {
                    self.file = None;
                }
            }
        }
        match &mut self.file {
            Some(f) => {
                let _ = f.write_all(bytes);
            }
            None => self.memory.extend_from_slice(bytes),
        }
    }

    /// Everything written, in order, to `out`.
    fn copy_to(&mut self, out: &mut impl Write) -> io::Result<()> {
        if let Some(f) = &mut self.file {
            f.seek(io::SeekFrom::Start(0))?;
            io::copy(f, out)?;
        }
        out.write_all(&self.memory)?;
        out.flush()
    }
}

/// What the lab's programs and the lab itself wrote while the view held the terminal.
struct Captured {
    /// Everything written to standard output and error, to be written there at the end.
    stdout: Spool,
    stderr: Spool,
    /// The last lines of both, for the view.
    lines: VecDeque<String>,
    partial: String,
}

impl Default for Captured {
    fn default() -> Captured {
        Captured {
            stdout: Spool::new(SPOOL_MEMORY),
            stderr: Spool::new(SPOOL_MEMORY),
            lines: VecDeque::new(),
            partial: String::new(),
        }
    }
}

impl Captured {
    fn take(&mut self, bytes: &[u8], stdout: bool) {
        if stdout {
            self.stdout.write(bytes);
        } else {
            self.stderr.write(bytes);
        }
        self.partial.push_str(&String::from_utf8_lossy(bytes));
        while let Some(i) = self.partial.find('\n') {
            let line: String = self.partial.drain(..=i).collect();
            if self.lines.len() == OUTPUT_LINES {
                self.lines.pop_front();
            }
            self.lines.push_back(line.trim_end().replace('\t', "    "));
        }
        if self.partial.len() > PARTIAL_MAX {
            let mut cut = self.partial.len() - PARTIAL_MAX;
            while !self.partial.is_char_boundary(cut) {
                cut += 1;
            }
            self.partial.drain(..cut);
        }
    }

    fn last_lines(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lines.iter().cloned().collect();
        if !self.partial.is_empty() {
            v.push(self.partial.clone());
        }
        v
    }
}

/// The terminal while the view holds it: the alternate screen, the cursor hidden, standard
/// output and error going into pipes. Dropping it gives everything back.
struct Screen {
    terminal: Terminal<CrosstermBackend<File>>,
    /// The terminal, to ask its size and to put it back.
    tty: File,
    area: Rect,
    /// The process's own standard output and error, to put back.
    saved: [OwnedFd; 2],
    output: Arc<Mutex<Captured>>,
    readers: Vec<JoinHandle<()>>,
}

/// Puts the terminal back (alternate screen left, cursor shown) on `tty`.
fn restore_terminal(tty: &mut File) {
    let _ = tty
        .queue(LeaveAlternateScreen)
        .and_then(|t| t.queue(Show))
        .and_then(|t| t.flush());
}

impl Screen {
    fn take() -> Result<Screen> {
        let tty = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/tty")
            .ok()
            .filter(|t| t.is_terminal())
            .ok_or_else(|| {
                UsageError(
                    "--watch needs a terminal (none here): use --live FILE to follow a run \
                     from a script"
                        .into(),
                )
            })?;
        let output = Arc::new(Mutex::new(Captured::default()));
        // The process's own standard output and error, close-on-exec (std's F_DUPFD_CLOEXEC).
        let saved = [
            io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .context("--watch: dup")?,
            io::stderr()
                .as_fd()
                .try_clone_to_owned()
                .context("--watch: dup")?,
        ];
        let mut readers = Vec::new();
        for fd in [1, 2] {
            let (r, w) = pipe()?;
            dup2(w.as_raw_fd(), fd)?;
            drop(w);
            let out = output.clone();
            readers.push(std::thread::spawn(move || {
                let mut r = File::from(r);
                let mut buf = [0u8; 4096];
                while let Ok(n) = r.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut o) = out.lock() {
                        o.take(&buf[..n], fd == 1);
                    }
                }
            }));
        }
        // A panic puts the terminal back before its message is printed.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if let Ok(mut tty) = std::fs::OpenOptions::new().write(true).open("/dev/tty") {
                restore_terminal(&mut tty);
            }
            hook(info);
        }));
        let mut tty_out = tty.try_clone().context("--watch: the terminal")?;
        let tty_draw = tty.try_clone().context("--watch: the terminal")?;
        tty_out
            .queue(EnterAlternateScreen)
            .and_then(|t| t.queue(Hide))
            .and_then(|t| t.flush())
            .context("--watch: the terminal")?;
        let area = tty_area(tty.as_raw_fd());
        let terminal = Terminal::with_options(
            CrosstermBackend::new(tty_draw),
            TerminalOptions {
                viewport: Viewport::Fixed(area),
            },
        )
        .context("--watch: the terminal")?;
        Ok(Screen {
            terminal,
            tty: tty_out,
            area,
            saved,
            output,
            readers,
        })
    }

    fn draw(
        &mut self,
        rows: &[Row],
        history: &[Series],
        out: &[String],
        ended: bool,
    ) -> Result<()> {
        let area = tty_area(self.tty.as_raw_fd());
        if area != self.area {
            self.terminal.resize(area)?;
            self.area = area;
        }
        self.terminal
            .draw(|f| draw_view(f, rows, history, out, ended))?;
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        restore_terminal(&mut self.tty);
        // Standard output and error back; the pipes' last writers close with them, and the
        // readers end once the programs' copies are gone too.
        for (fd, saved) in [1, 2].into_iter().zip(&self.saved) {
            let _ = dup2(saved.as_raw_fd(), fd);
        }
        // A process of the lab that outlived it could hold a pipe open: a second at most.
        for _ in 0..100 {
            if self.readers.iter().all(|r| r.is_finished()) {
                break;
            }
            std::thread::sleep(StdDuration::from_millis(10));
        }
        if let Ok(mut o) = self.output.lock() {
            let _ = o.stdout.copy_to(&mut io::stdout());
            let _ = o.stderr.copy_to(&mut io::stderr());
        }
    }
}

/// A pipe whose ends this process does not hand to the programs it starts (close-on-exec);
/// the copy of the write end on standard output or error is theirs.
fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`, which lives for the call.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error()).context("--watch: pipe");
    }
    // SAFETY: both were just made by pipe2 and nothing else owns them.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

fn dup2(from: RawFd, to: RawFd) -> Result<()> {
    // SAFETY: dup2 on two descriptor numbers; `to` is standard output or error, which this
    // process keeps open for its whole life.
    if unsafe { libc::dup2(from, to) } < 0 {
        return Err(io::Error::last_os_error()).context("--watch: dup2");
    }
    Ok(())
}

/// The terminal's size, or 80×24 where it does not say (a pseudo-terminal nobody sized).
fn tty_area(fd: RawFd) -> Rect {
    let mut ws = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one winsize into `ws`, which lives for the call.
    let ok = unsafe { libc::ioctl(fd, libc::TIOCGWINSZ, &mut ws) } == 0;
    if !ok || ws.ws_row == 0 || ws.ws_col == 0 {
        return Rect::new(0, 0, 80, 24);
    }
    Rect::new(0, 0, ws.ws_col, ws.ws_row)
}

fn ms(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v:.1} ms")
    }
}

/// The text of one link direction's first line: what it is asked and what it does now.
fn link_line(r: &Row) -> String {
    let asked = r.rate_bps.map_or("unlimited".into(), |b| rate(b as f64));
    let queue = match r.backlog_ms {
        Some(t) => format!("{} pkts, {}", r.backlog_packets, ms(t)),
        None => format!("{} pkts", r.backlog_packets),
    };
    format!(
        "{} {:<4} {} of {}  queue {}",
        r.link,
        r.dir,
        rate(r.delivered_bps),
        asked,
        queue
    )
}

/// The third line: drops (in all, and by cause in the last interval) and CE marks.
fn drops_line(r: &Row) -> String {
    let now: Vec<String> = r.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let now = if now.is_empty() {
        String::new()
    } else {
        format!(" (now {})", now.join(", "))
    };
    format!(
        " drops {}{now}  CE marks {} (now {})",
        r.drops_total, r.ce_marks_total, r.ce_marks
    )
}

/// The view: a title line, three lines (two sparklines) per link direction, the programs'
/// last lines below. Plain text only: it reads the same without colours.
fn draw_view(
    f: &mut ratatui::Frame,
    rows: &[Row],
    history: &[Series],
    out: &[String],
    ended: bool,
) {
    let area = f.area();
    let t_s = rows.first().map_or(0.0, |r| r.t_s);
    let late = rows.first().map_or(0.0, |r| r.engine_late_max_ms);
    let state = if ended {
        "the lab has ended"
    } else {
        "Ctrl-C ends the lab"
    };
    let title = format!(
        "latencylab  {t_s:6.1} s  delivery error max {:.3} ms  {state}",
        late
    );
    let per_link = 3u16;
    let links_h = (rows.len() as u16 * per_link).min(area.height.saturating_sub(3));
    let [top, links, rule, progs] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(links_h),
        Constraint::Length(1),
        Constraint::Min(0),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(title), top);
    for (i, (r, h)) in rows.iter().zip(history).enumerate() {
        let y = links.y + i as u16 * per_link;
        if y + per_link > links.y + links.height {
            break;
        }
        let w = links.width;
        f.render_widget(Paragraph::new(link_line(r)), Rect::new(links.x, y, w, 1));
        f.render_widget(
            Paragraph::new(drops_line(r)),
            Rect::new(links.x, y + 2, w, 1),
        );
        let half = w / 2;
        let label_w = 18u16.min(half);
        let queue_delay_us: Vec<u64> = h
            .queue_delay_ms
            .iter()
            .map(|q| (q.unwrap_or(0.0) * 1e3) as u64)
            .collect();
        let delivered_kbps: Vec<u64> = h.delivered_bps.iter().map(|b| (b / 1e3) as u64).collect();
        let qmax = queue_delay_us.iter().copied().max().unwrap_or(0);
        let tmax = delivered_kbps.iter().copied().max().unwrap_or(0);
        let q_label = format!(" delay {:>8}", r.queue_delay_ms.map_or("-".into(), ms));
        let t_label = format!(" max {:>9}", rate(tmax as f64 * 1e3));
        let y1 = y + 1;
        f.render_widget(Paragraph::new(q_label), Rect::new(links.x, y1, label_w, 1));
        let spark_w = half.saturating_sub(label_w);
        let qdata = tail(&queue_delay_us, spark_w);
        f.render_widget(
            Sparkline::default().data(qdata).max(qmax.max(1)),
            Rect::new(links.x + label_w, y1, spark_w, 1),
        );
        f.render_widget(
            Paragraph::new(t_label),
            Rect::new(links.x + half, y1, label_w, 1),
        );
        let tdata = tail(&delivered_kbps, spark_w);
        let tcap = r.rate_bps.map_or(tmax, |b| b / 1000).max(1);
        f.render_widget(
            Sparkline::default().data(tdata).max(tcap),
            Rect::new(links.x + half + label_w, y1, spark_w, 1),
        );
    }
    f.render_widget(
        Paragraph::new(format!(
            "{:-<1$}",
            "-- programs' output (all of it is printed when the lab ends) ", rule.width as usize
        )),
        rule,
    );
    let n = progs.height as usize;
    let shown: Vec<Line> = out[out.len().saturating_sub(n)..]
        .iter()
        .map(|l| Line::raw(l.clone()))
        .collect();
    f.render_widget(Paragraph::new(shown), progs);
}

/// The last `n` values of `q`.
fn tail(q: &[u64], n: u16) -> &[u64] {
    &q[q.len().saturating_sub(n as usize)..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;

    fn row(link: &str, dir: &str, delivered_bps: f64, q_ms: f64) -> Row {
        Row {
            t_s: 3.2,
            link: link.into(),
            dir: dir.into(),
            rate_bps: Some(10_000_000),
            delivered_bps,
            queue_delay_ms: Some(q_ms),
            backlog_packets: 80,
            backlog_ms: Some(96.0),
            drops: [("overlimit".to_string(), 2)].into(),
            drops_total: 5,
            ce_marks: 0,
            ce_marks_total: 0,
            packets_total: 1000,
            bytes_total: 1_500_000,
            engine_late_max_ms: 0.02,
            last: false,
            lab: String::new(),
        }
    }

    fn screen_text(width: u16, rows: &[Row], out: &[String]) -> String {
        let mut history = Window::new(HISTORY);
        for _ in 0..70 {
            history.push(rows);
        }
        let mut t = Terminal::new(TestBackend::new(width, 24)).unwrap();
        t.draw(|f| draw_view(f, rows, history.series(), out, false))
            .unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_view_fits_80_columns_with_every_figure_of_each_direction() {
        let rows = [
            row("path", "down", 9.81e6, 120.0),
            row("path", "up", 0.2e6, 0.1),
        ];
        let s = screen_text(80, &rows, &["bulk-client: 9.4 Mbit/s".into()]);
        assert!(s.contains("path down 9.81 Mbit/s of 10.00 Mbit/s"), "{s}");
        assert!(s.contains("queue 80 pkts, 96.0 ms"), "{s}");
        assert!(
            s.contains("drops 5 (now overlimit 2)  CE marks 0 (now 0)"),
            "{s}"
        );
        assert!(s.contains("delay   120 ms"), "{s}");
        assert!(s.contains("path up"), "{s}");
        assert!(s.contains("bulk-client: 9.4 Mbit/s"), "{s}");
        assert!(s.contains("Ctrl-C ends the lab"), "{s}");
        assert!(s.lines().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn output_keeps_every_byte_and_the_last_lines() {
        let mut c = Captured::default();
        c.take(b"one\ntw", true);
        c.take(b"o\n", false);
        c.take(b"three", true);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        c.stdout.copy_to(&mut out).unwrap();
        c.stderr.copy_to(&mut err).unwrap();
        assert_eq!(
            (out.as_slice(), err.as_slice()),
            (&b"one\ntwthree"[..], &b"o\n"[..])
        );
        assert_eq!(c.last_lines(), ["one", "two", "three"]);
        for i in 0..OUTPUT_LINES + 5 {
            c.take(format!("{i}\n").as_bytes(), true);
        }
        assert_eq!(c.lines.len(), OUTPUT_LINES);
    }

    #[test]
    fn a_spool_past_its_memory_goes_to_a_file_and_gives_back_every_byte_in_order() {
        let mut s = Spool::new(10);
        s.write(b"0123456");
        assert!(s.file.is_none());
        s.write(b"789abc");
        s.write(b"def");
        assert!(s.file.is_some() && s.memory.is_empty());
        let mut out = Vec::new();
        s.copy_to(&mut out).unwrap();
        assert_eq!(out, b"0123456789abcdef");
    }

    #[test]
    fn a_line_without_end_is_kept_to_its_last_characters() {
        let mut c = Captured::default();
        let long = "é".repeat(PARTIAL_MAX);
        c.take(long.as_bytes(), true);
        let last = c.last_lines().pop().unwrap();
        assert!(last.len() <= PARTIAL_MAX && last.ends_with('é'));
    }
}

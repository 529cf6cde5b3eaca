//! `latencylab demo NAME`: whole experiments behind one command, each leaving a report.
//!
//! Glue only: arguments, printing the table and where the report is, exit codes. What each
//! demo runs and draws is the `demo` crate's. Exit codes: 0 the demo ran (whether or not its
//! numbers met the expectations, which it prints); 1 a failure while running; 2 a usage error
//! (a bad option, or not root).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
#[command(
    about = "Run a whole experiment (labs, traffic, analysis) and leave a report",
    after_help = "Examples:\n  latencylab demo bufferbloat\n  latencylab demo bufferbloat -o out/bb --duration 20s\n  latencylab demo l4s -o out/l4s"
)]
pub struct DemoArgs {
    #[command(subcommand)]
    pub demo: Demo,
}

#[derive(clap::Subcommand, Debug)]
pub enum Demo {
    /// A home line (10 Mbit/s down, 1 up, 20 ms) with a streaming download and a latency
    /// probe, once with a FIFO queue and once with CoDel + ECN (about 75 s with the default
    /// duration)
    #[command(
        after_help = "Example:\n  latencylab demo bufferbloat -o out/bufferbloat --duration 30s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/fifo and DIR/codel."
    )]
    Bufferbloat(BufferbloatArgs),
    /// A video call on a 10 Mbit/s, 20 ms line shared with three downloads: FIFO with a
    /// classic call, DualPI2 with an L4S call, and DualPI2 behind a hop that bleaches ECN
    /// (about 110 s with the default duration)
    #[command(
        after_help = "Example:\n  latencylab demo l4s -o out/l4s --duration 20s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/classic, DIR/l4s and DIR/bleached."
    )]
    L4s(L4sArgs),
    /// Screen sharing over a 400 kbit/s DSL uplink with a 120 KB send buffer: frames written
    /// while the socket takes them, then with TCP_NOTSENT_LOWAT 16 KB (about 70 s with the
    /// default duration)
    #[command(
        mut_arg("out", |a| a.default_value("out/notsent-lowat")),
        after_help = "Example:\n  latencylab demo notsent-lowat -o out/notsent-lowat --duration 20s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/unbounded and DIR/lowat."
    )]
    NotsentLowat(RunLengthArgs),
    /// Many short connections with one request each over a 100 ms RTT, without and with TCP
    /// Fast Open, then both again with late duplicates of the client's packets (about 50 s
    /// with the default number of requests)
    #[command(
        after_help = "Example:\n  latencylab demo tfo -o out/tfo --requests 20\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/plain, DIR/tfo, DIR/duplicate-plain and DIR/duplicate-tfo."
    )]
    Tfo(TfoArgs),
    /// Short connections from a home line to servers at a measured spread of RTTs, and the
    /// CDF of their handshake times (about 5 s)
    #[command(
        after_help = "Example:\n  latencylab demo handshake-cdf -o out/handshake-cdf --servers 20 --per-server 5\n\nLeaves DIR/report.html, DIR/handshake-cdf.png, DIR/results.json, and the lab's captures and logs in DIR/browsing."
    )]
    HandshakeCdf(HandshakeCdfArgs),
    /// The seed's 159-resource newsletter page over 6 HTTP/1.1 connections, with and without
    /// pipelining, at 100 ms and 300 ms RTT (about 20 s)
    #[command(
        after_help = "Example:\n  latencylab demo pipelining -o out/pipelining\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/no-pipelining, DIR/pipelining, DIR/no-pipelining-300ms and DIR/pipelining-300ms."
    )]
    Pipelining(PipeliningArgs),
    /// A news front page over HTTP/1.1 at 250 ms RTT, its requests placed by two connection
    /// managers: `bound` (wait for the connection opened for you) and `pool` (take whichever
    /// frees up first) (about 30 s)
    #[command(
        after_help = "Example:\n  latencylab demo conn-reuse -o out/conn-reuse\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/bound, DIR/pool, DIR/bound-consolidated and DIR/pool-consolidated."
    )]
    ConnReuse(ConnReuseArgs),
    /// A photo page over HTTP/1.1 at 250 ms RTT, then clicks on 25 kB photos over the idle
    /// connection idle longest or the one that moved the largest burst, with the server
    /// keeping its window after idle and (control) not (about 90 s)
    #[command(
        after_help = "Example:\n  latencylab demo cwnd-reuse -o out/cwnd-reuse\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/oldest, DIR/largest-burst, DIR/oldest-ssai1 and DIR/largest-burst-ssai1."
    )]
    CwndReuse(CwndReuseArgs),
    /// A sharded portal page (6 host names, one server) on a 40 ms line over 36, 6 and 1
    /// HTTP/1.1 connections and over HTTP/2, and in headless Chromium where installed
    /// (about 40 s)
    #[command(
        after_help = "Example:\n  latencylab demo http-parallel -o out/http-parallel\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/36-conns, DIR/6-conns, DIR/1-conn, DIR/h2, DIR/h2-coalesced and DIR/chromium."
    )]
    HttpParallel(HttpParallelArgs),
    /// One page over HTTP/1.1 (6 connections), HTTP/2 and HTTP/3 (sequential and round-robin
    /// scheduling) at 40 ms RTT under 0, 1, 2, 5 % and bursty loss, and in headless Chromium
    /// over QUIC where installed (about 2 minutes)
    #[command(
        after_help = "Example:\n  latencylab demo hol-blocking -o out/hol-blocking --runs 2\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/PROTOCOL-lossL-sS (PROTOCOL: h1, h2, h3-seq, h3-rr; L: 0, 1, 2, 5, bursty) and DIR/chromium-h3."
    )]
    HolBlocking(HolBlockingArgs),
    /// A request/response program writing each 70-byte message as 28 + 42 bytes over a
    /// 500 ms satellite path: Nagle on, TCP_NODELAY, and one writev() (about 80 s with the
    /// default duration)
    #[command(
        after_help = "Example:\n  latencylab demo nagle -o out/nagle --duration 20s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/nagle, DIR/nodelay and DIR/writev."
    )]
    Nagle(NagleArgs),
    /// One bulk TCP download through a hop that forwards at most N packets a second, at MTU
    /// 1500 and at MTU 9000 (about 50 s with the default duration)
    #[command(
        after_help = "Example:\n  latencylab demo pps -o out/pps --duration 10s --pps 1000\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/mtu1500 and DIR/mtu9000."
    )]
    Pps(PpsArgs),
    /// A bulk upload in 1000-byte writes into an 8 KB receive buffer on a 100 Mbit/s LAN, the
    /// receiver deferring its ACKs (Linux's default), then with TCP_QUICKACK after every read
    /// (about 75 s with the default duration)
    #[command(
        mut_arg("out", |a| a.default_value("out/delayed-ack")),
        after_help = "Example:\n  latencylab demo delayed-ack -o out/delayed-ack --duration 10s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/delayed and DIR/quickack."
    )]
    DelayedAck(RunLengthArgs),
    /// A phone with Wi-Fi and cellular whose Wi-Fi passes nothing from 2 s to 20 s, making a
    /// request a second: plain connect, an RFC 8305 race with a Better Route probe, and MPTCP
    /// (about 105 s with the default duration)
    #[command(
        after_help = "Example:\n  latencylab demo fallback -o out/fallback --duration 35s\n\nLeaves DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs in DIR/wifi-only, DIR/fallback and DIR/mptcp."
    )]
    Fallback(FallbackArgs),
    /// One small client per class of app on an IPv6-only network (host name, IPv4 literal,
    /// AF_INET-only, "is IPv4 up?" preflight, RFC 7050 local synthesis), each through
    /// ipv6-check, then with 464XLAT (about 5 s)
    #[command(
        after_help = "Example:\n  latencylab demo nat64 -o out/nat64\n\nLeaves DIR/report.html, DIR/results.json, and each run's evidence (strace, captures, ipv6-check's report) in DIR/ipv6-only/SAMPLE and DIR/clat/SAMPLE."
    )]
    Nat64(Nat64Args),
    /// Responsiveness under working conditions (RPM) on the bufferbloat demo's home line under
    /// FIFO, CoDel, FQ-CoDel, PIE and DualPI2, each loaded round trip taken apart queue by
    /// queue (about 80 s with the default duration)
    #[command(
        after_help = "Example:\n  latencylab demo responsiveness -o out/responsiveness --duration 10s\n\nLeaves DIR/report.html, DIR/parts.png, DIR/results.json, and each run's captures and logs in DIR/fifo, DIR/codel, DIR/fq-codel, DIR/pie and DIR/dualpi2."
    )]
    Responsiveness(ResponsivenessArgs),
}

/// What every demo takes. Each demo flattens it first into its own options and names its
/// default output directory with `mut_arg("out", …)`. `--seed` and `--quiet` carry a late
/// display order so that `--help` lists them after the demo's own options, as it always has.
#[derive(clap::Args, Debug)]
pub struct CommonArgs {
    /// Output directory
    #[arg(short = 'o', long = "out", value_name = "DIR", default_value = "out")]
    pub out: PathBuf,
    /// Seed for every random choice in the labs
    #[arg(long, default_value_t = 1, display_order = 900)]
    pub seed: u64,
    /// No progress bar
    #[arg(short, long, display_order = 901)]
    pub quiet: bool,
    /// Run nothing: write each run's lab as a run file for `latencylab run` into DIR, with a
    /// README.md of what to change
    #[arg(long, value_name = "DIR", display_order = 902)]
    pub export: Option<PathBuf>,
    /// `--watch`, `--live FILE` and `--watch-web` follow each of the demo's labs in turn
    #[command(flatten)]
    pub watch: crate::watch::WatchArgs,
}

impl CommonArgs {
    /// Where the demo writes: the export directory when exporting (a web demo's page file
    /// goes next to its run files), else `-o`.
    fn dir(&self) -> PathBuf {
        self.export.clone().unwrap_or_else(|| self.out.clone())
    }
}

/// `--export DIR`: each run's lab as `DIR/RUN.toml` and a README, from the runs the demo
/// itself would run.
fn export<K>(dir: &Path, demo: &str, runs: Vec<(K, demo::Run)>) -> anyhow::Result<ExitCode> {
    use clap::CommandFactory;
    let about = crate::Cli::command()
        .find_subcommand("demo")
        .and_then(|d| d.find_subcommand(demo))
        .and_then(|d| d.get_about())
        .map(|a| a.to_string())
        .unwrap_or_default();
    let runs: Vec<demo::Run> = runs.into_iter().map(|(_, r)| r).collect();
    let files = demo::export(dir, demo, &about, &runs)?;
    if let Err(e) = lab::owner::hand_over(dir) {
        eprintln!("latencylab: cannot give {} to the user: {e}", dir.display());
    }
    // What was written, one path a line; a reader that stops early (`| head`) is no error.
    let mut out = std::io::stdout().lock();
    for f in files.iter().chain([&dir.join("README.md")]) {
        let _ = writeln!(out, "{}", f.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The options of `demo nat64`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/nat64")))]
pub struct Nat64Args {
    #[command(flatten)]
    pub common: CommonArgs,
}

/// The options of `demo fallback`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/fallback")))]
pub struct FallbackArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// How long the phone makes requests: a time (35s) or a number of seconds, from 23s
    /// (the Wi-Fi comes back at 20 s)
    #[arg(long, value_name = "TIME", default_value = "35s")]
    pub duration: String,
}

/// The options of `demo pps`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/pps")))]
pub struct PpsArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Length of each run's transfer: a time (20s, 1m)
    #[arg(long, value_name = "TIME", default_value = "20s")]
    pub duration: String,
    /// The hop's ceiling, packets per second each way (from 100 to 100000)
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub pps: u64,
}

/// The options of `demo handshake-cdf`.
#[derive(clap::Args, Debug)]
#[command(
    mut_arg("out", |a| a.default_value("out/handshake-cdf")),
    mut_arg("seed", |a| a.help("Seed for every random choice in the lab"))
)]
pub struct HandshakeCdfArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Servers, each at its own round trip (from 2 to 60)
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub servers: usize,
    /// Connections to each server (from 1 to 50)
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub per_server: u64,
}

/// The options of `demo tfo`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/tfo")))]
pub struct TfoArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Requests per run, each on a connection of its own (from 3 to 1000)
    #[arg(long, value_name = "N", default_value_t = 30)]
    pub requests: u64,
}

/// The options of `demo nagle`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/nagle")))]
pub struct NagleArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// How long each run's client keeps exchanging: a time (20s, 1m)
    #[arg(long, value_name = "TIME", default_value = "20s")]
    pub duration: String,
}

/// The options of a demo whose runs last `--duration` (notsent-lowat, delayed-ack). Its help
/// has always named the default directory `out/DEMO`: each demo's variant sets the real one,
/// which the help keeps hidden.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a
    .hide_default_value(true)
    .help("Output directory [default: out/DEMO]")))]
pub struct RunLengthArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Length of each run: a time (30s, 1m)
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub duration: String,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/http-parallel")))]
pub struct HttpParallelArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Do not load the page in headless Chromium even where it is installed
    #[arg(long)]
    pub no_chromium: bool,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/hol-blocking")))]
pub struct HolBlockingArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Runs per protocol and loss setting, each with the next seed from the first one
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub runs: u64,
    /// Do not load the page in headless Chromium even where it is installed
    #[arg(long)]
    pub no_chromium: bool,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/cwnd-reuse")))]
pub struct CwndReuseArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The RTT: a time (250ms)
    #[arg(long, value_name = "TIME", default_value = "250ms")]
    pub rtt: String,
    /// How long the connections sit idle before each click: a time (3s)
    #[arg(long, value_name = "TIME", default_value = "3s")]
    pub idle: String,
    /// Clicks per run, 1 to 3
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub clicks: usize,
    /// Skip the control runs with the server's tcp_slow_start_after_idle=1
    #[arg(long)]
    pub no_control: bool,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/conn-reuse")))]
pub struct ConnReuseArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The RTT: a time (250ms)
    #[arg(long, value_name = "TIME", default_value = "250ms")]
    pub rtt: String,
    /// The line's rate down, Mbit/s (e.g. 25)
    #[arg(long, value_name = "MBIT", default_value_t = demo::conn_reuse::DOWN_MBIT)]
    pub down_mbit: f64,
    /// The line's rate up, Mbit/s (a fifth of --down-mbit unless given)
    #[arg(long, value_name = "MBIT")]
    pub up_mbit: Option<f64>,
    /// The line's FIFO each way: bdp (rate × RTT) or a number of packets (e.g. 1000)
    #[arg(long, value_name = "PACKETS|bdp", default_value = "bdp", value_parser = demo::conn_reuse::Buffer::parse)]
    pub buffer: demo::conn_reuse::Buffer,
    /// When page-load finds the HTML's references: stream (as it arrives) or whole
    #[arg(long, value_enum, value_name = "WHEN", default_value = "stream")]
    pub html_scan: web::client::HtmlScan,
    /// Load this page file instead of the news page (its host names must be the lab's)
    #[arg(long, value_name = "FILE")]
    pub page: Option<std::path::PathBuf>,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/pipelining")))]
pub struct PipeliningArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The first RTT: a time (100ms)
    #[arg(long, value_name = "TIME", default_value = "100ms")]
    pub rtt: String,
    /// The second, larger RTT: a time (300ms)
    #[arg(long, value_name = "TIME", default_value = "300ms")]
    pub rtt2: String,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/l4s")))]
pub struct L4sArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Length of the call in each run: a time (30s, 1m)
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub duration: String,
}

#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/bufferbloat")))]
pub struct BufferbloatArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Length of each run: a time (30s, 1m)
    #[arg(long, value_name = "TIME", default_value = "30s")]
    pub duration: String,
}

/// The options of `demo responsiveness`.
#[derive(clap::Args, Debug)]
#[command(mut_arg("out", |a| a.default_value("out/responsiveness")))]
pub struct ResponsivenessArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Each test's time limit: a time (15s); a test that finds stable working conditions
    /// sooner ends sooner
    #[arg(long, value_name = "TIME", default_value = "15s")]
    pub duration: String,
}

impl Demo {
    /// The options every demo has.
    fn common(&self) -> &CommonArgs {
        match self {
            Demo::Bufferbloat(a) => &a.common,
            Demo::L4s(a) => &a.common,
            Demo::NotsentLowat(a) => &a.common,
            Demo::Tfo(a) => &a.common,
            Demo::HandshakeCdf(a) => &a.common,
            Demo::Pipelining(a) => &a.common,
            Demo::ConnReuse(a) => &a.common,
            Demo::CwndReuse(a) => &a.common,
            Demo::HttpParallel(a) => &a.common,
            Demo::Nagle(a) => &a.common,
            Demo::Pps(a) => &a.common,
            Demo::DelayedAck(a) => &a.common,
            Demo::Fallback(a) => &a.common,
            Demo::Nat64(a) => &a.common,
            Demo::Responsiveness(a) => &a.common,
            Demo::HolBlocking(a) => &a.common,
        }
    }
}

/// With `--watch`, `--live` or `--watch-web`, the demo's labs run watched (not when it only
/// exports them).
fn watched(c: &CommonArgs) -> anyhow::Result<Option<crate::watch_web::WebView>> {
    if c.export.is_some() {
        return Ok(None);
    }
    crate::watch::watch_every_lab(&c.watch, None)
}

/// Runs `latencylab demo …`.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    // Before any thread exists (the analysis between runs may leave worker threads), so that
    // Ctrl-C, SIGTERM and SIGCHLD reach each lab; one that comes between labs ends the next.
    let old = lab::block_stop_signals()?;
    let web = watched(args.demo.common())?;
    let r = match &args.demo {
        Demo::Bufferbloat(a) => bufferbloat(a),
        Demo::L4s(a) => l4s(a),
        Demo::NotsentLowat(a) => notsent_lowat(a),
        Demo::Tfo(a) => tfo(a),
        Demo::HandshakeCdf(a) => handshake_cdf(a),
        Demo::Pipelining(a) => pipelining(a),
        Demo::ConnReuse(a) => conn_reuse(a),
        Demo::CwndReuse(a) => cwnd_reuse(a),
        Demo::HttpParallel(a) => http_parallel(a),
        Demo::HolBlocking(a) => hol_blocking(a),
        Demo::Nagle(a) => nagle(a),
        Demo::Pps(a) => pps(a),
        Demo::DelayedAck(a) => delayed_ack(a),
        Demo::Fallback(a) => fallback(a),
        Demo::Nat64(a) => nat64(a),
        Demo::Responsiveness(a) => responsiveness(a),
    };
    if let Some(v) = web {
        v.finish();
    }
    lab::restore_signals(old);
    r
}

fn l4s(a: &L4sArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("l4s", "duration", &a.duration)?.seconds();
    let opts = demo::l4s::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "l4s", demo::l4s::runs(&opts));
    }
    let outcome = demo::l4s::run(&opts)?;
    done(&outcome, &a.common.out, &["classic", "l4s", "bleached"])
}

fn notsent_lowat(a: &RunLengthArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("notsent-lowat", "duration", &a.duration)?.seconds();
    let opts = demo::notsent_lowat::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "notsent-lowat", demo::notsent_lowat::runs(&opts));
    }
    let outcome = demo::notsent_lowat::run(&opts)?;
    done(&outcome, &a.common.out, &["unbounded", "lowat"])
}

fn nagle(a: &NagleArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("nagle", "duration", &a.duration)?.seconds();
    let opts = demo::nagle::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "nagle", demo::nagle::runs(&opts));
    }
    let outcome = demo::nagle::run(&opts)?;
    done(&outcome, &a.common.out, &["nagle", "nodelay", "writev"])
}

fn delayed_ack(a: &RunLengthArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("delayed-ack", "duration", &a.duration)?.seconds();
    let opts = demo::delayed_ack::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "delayed-ack", demo::delayed_ack::runs(&opts));
    }
    let outcome = demo::delayed_ack::run(&opts)?;
    done(&outcome, &a.common.out, &["delayed", "quickack"])
}

fn pps(a: &PpsArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("pps", "duration", &a.duration)?.seconds();
    param("pps", "pps", &a.pps.to_string())?;
    let opts = demo::pps::Options {
        out_dir: a.common.dir(),
        duration_s,
        pps: a.pps,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "pps", demo::pps::runs(&opts));
    }
    let outcome = demo::pps::run(&opts)?;
    done(&outcome, &a.common.out, &["mtu1500", "mtu9000"])
}

fn fallback(a: &FallbackArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("fallback", "duration", &a.duration)?.seconds();
    let opts = demo::fallback::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "fallback", demo::fallback::runs(&opts));
    }
    let outcome = demo::fallback::run(&opts)?;
    done(&outcome, &a.common.out, &["wifi-only", "fallback", "mptcp"])
}

fn nat64(a: &Nat64Args) -> anyhow::Result<ExitCode> {
    let opts = demo::nat64::Options {
        out_dir: a.common.dir(),
        seed: a.common.seed,
        quiet: a.common.quiet,
        gather: crate::ipv6_check::gather,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "nat64", demo::nat64::runs(&opts));
    }
    let outcome = demo::nat64::run(&opts)?;
    done(&outcome, &a.common.out, &["ipv6-only", "clat"])
}

fn tfo(a: &TfoArgs) -> anyhow::Result<ExitCode> {
    param("tfo", "requests", &a.requests.to_string())?;
    let opts = demo::tfo::Options {
        out_dir: a.common.dir(),
        requests: a.requests,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "tfo", demo::tfo::runs(&opts));
    }
    let outcome = demo::tfo::run(&opts)?;
    done(
        &outcome,
        &a.common.out,
        &["plain", "tfo", "duplicate-plain", "duplicate-tfo"],
    )
}

fn handshake_cdf(a: &HandshakeCdfArgs) -> anyhow::Result<ExitCode> {
    param("handshake-cdf", "servers", &a.servers.to_string())?;
    param("handshake-cdf", "per-server", &a.per_server.to_string())?;
    let opts = demo::handshake_cdf::Options {
        out_dir: a.common.dir(),
        servers: a.servers,
        per_server: a.per_server,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(
            dir,
            "handshake-cdf",
            demo::handshake_cdf::runs(&opts).into(),
        );
    }
    let outcome = demo::handshake_cdf::run(&opts)?;
    done(&outcome, &a.common.out, &["browsing"])
}

fn http_parallel(a: &HttpParallelArgs) -> anyhow::Result<ExitCode> {
    let opts = demo::http_parallel::Options {
        out_dir: a.common.dir(),
        seed: a.common.seed,
        no_chromium: a.no_chromium,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "http-parallel", demo::http_parallel::runs(&opts)?);
    }
    let outcome = demo::http_parallel::run(&opts)?;
    done(
        &outcome,
        &a.common.out,
        &[
            "36-conns",
            "6-conns",
            "1-conn",
            "h2",
            "h2-coalesced",
            "chromium",
        ],
    )
}

fn hol_blocking(a: &HolBlockingArgs) -> anyhow::Result<ExitCode> {
    param("hol-blocking", "runs", &a.runs.to_string())?;
    let opts = demo::hol_blocking::Options {
        out_dir: a.common.dir(),
        seed: a.common.seed,
        seeds: a.runs,
        no_chromium: a.no_chromium,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "hol-blocking", demo::hol_blocking::runs(&opts)?);
    }
    let outcome = demo::hol_blocking::run(&opts)?;
    done(
        &outcome,
        &a.common.out,
        &[
            "PROTOCOL-lossL-sS (PROTOCOL: h1, h2, h3-seq, h3-rr; L: 0, 1, 2, 5, bursty)",
            "chromium-h3",
        ],
    )
}

fn conn_reuse(a: &ConnReuseArgs) -> anyhow::Result<ExitCode> {
    let rtt_ms = param("conn-reuse", "rtt", &a.rtt)?.seconds() * 1e3;
    param("conn-reuse", "down-mbit", &a.down_mbit.to_string())?;
    if let Some(up) = a.up_mbit {
        param("conn-reuse", "up-mbit", &up.to_string())?;
    }
    if let Some(p) = &a.page {
        demo::conn_reuse::page_for_servers(p).map_err(|e| lab::UsageError(format!("{e:#}")))?;
    }
    let opts = demo::conn_reuse::Options {
        out_dir: a.common.dir(),
        rtt_ms,
        down_mbit: a.down_mbit,
        up_mbit: a.up_mbit,
        buffer: a.buffer,
        html_scan: a.html_scan,
        page: a.page.clone(),
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "conn-reuse", demo::conn_reuse::runs(&opts)?);
    }
    let outcome = demo::conn_reuse::run(&opts)?;
    let runs = demo::conn_reuse::RUNS.map(|(dir, _, _)| dir);
    done(&outcome, &a.common.out, &runs)
}

fn cwnd_reuse(a: &CwndReuseArgs) -> anyhow::Result<ExitCode> {
    let rtt_ms = param("cwnd-reuse", "rtt", &a.rtt)?.seconds() * 1e3;
    let idle_s = param("cwnd-reuse", "idle", &a.idle)?.seconds();
    param("cwnd-reuse", "clicks", &a.clicks.to_string())?;
    let opts = demo::cwnd_reuse::Options {
        out_dir: a.common.dir(),
        rtt_ms,
        idle_s,
        clicks: a.clicks,
        control: !a.no_control,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "cwnd-reuse", demo::cwnd_reuse::runs(&opts)?);
    }
    let outcome = demo::cwnd_reuse::run(&opts)?;
    let runs = demo::cwnd_reuse::run_dirs(!a.no_control);
    done(&outcome, &a.common.out, &runs)
}

fn pipelining(a: &PipeliningArgs) -> anyhow::Result<ExitCode> {
    let rtt_ms = param("pipelining", "rtt", &a.rtt)?.seconds() * 1e3;
    let rtt2_ms = param("pipelining", "rtt2", &a.rtt2)?.seconds() * 1e3;
    let opts = demo::pipelining::Options {
        out_dir: a.common.dir(),
        rtts_ms: [rtt_ms, rtt2_ms],
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "pipelining", demo::pipelining::runs(&opts)?);
    }
    let outcome = demo::pipelining::run(&opts)?;
    done(
        &outcome,
        &a.common.out,
        &[
            "no-pipelining",
            "pipelining",
            "no-pipelining-300ms",
            "pipelining-300ms",
        ],
    )
}

fn bufferbloat(a: &BufferbloatArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("bufferbloat", "duration", &a.duration)?.seconds();
    let opts = demo::bufferbloat::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "bufferbloat", demo::bufferbloat::runs(&opts));
    }
    let outcome = demo::bufferbloat::run(&opts)?;
    done(&outcome, &a.common.out, &["fifo", "codel"])
}

fn responsiveness(a: &ResponsivenessArgs) -> anyhow::Result<ExitCode> {
    let duration_s = param("responsiveness", "duration", &a.duration)?.seconds();
    let opts = demo::responsiveness::Options {
        out_dir: a.common.dir(),
        duration_s,
        seed: a.common.seed,
        quiet: a.common.quiet,
    };
    if let Some(dir) = &a.common.export {
        return export(dir, "responsiveness", demo::responsiveness::runs(&opts));
    }
    let outcome = demo::responsiveness::run(&opts)?;
    done(
        &outcome,
        &a.common.out,
        &["fifo", "codel", "fq-codel", "pie", "dualpi2"],
    )
}

/// A demo's option read as the demo's declaration says (`demo::params`), or the one-line
/// usage error naming the option.
fn param(demo: &str, name: &str, text: &str) -> anyhow::Result<demo::params::Value> {
    let d = demo::params::find(demo).expect("every demo is declared");
    d.read(name, text)
        .map_err(|e| lab::UsageError(format!("--{name}: {e}")).into())
}

/// Prints a demo's outcome as [`print_outcome`] does: the demo ran, whatever its numbers.
fn done<R>(o: &demo::Outcome<R>, out: &Path, runs: &[&str]) -> anyhow::Result<ExitCode> {
    print_outcome(&o.table, &o.checks, &o.unreproducible, &o.report, out, runs);
    Ok(ExitCode::SUCCESS)
}

/// The table, each criterion as `ok` or `NOT` (or `n/a` with the reason, for one the platform
/// is known not to meet), and where everything is.
fn print_outcome(
    table: &str,
    checks: &[demo::Check],
    unreproducible: &[demo::Unreproducible],
    report: &Path,
    out: &Path,
    runs: &[&str],
) {
    // Under sudo, the report and every run's files are the user's.
    if let Err(e) = lab::owner::hand_over(out) {
        eprintln!("latencylab: cannot give {} to the user: {e}", out.display());
    }
    print!("{table}");
    println!();
    for c in checks {
        println!("{} {}", if c.passed { "ok " } else { "NOT" }, c.what);
    }
    for u in unreproducible {
        println!("{} {}", u.label(), u.line());
    }
    println!();
    println!("report: {}", report.display());
    let dirs: Vec<String> = runs
        .iter()
        .map(|r| format!("{}/{r}", out.display()))
        .collect();
    println!(
        "numbers: {}; each run's captures and logs: {}",
        out.join("results.json").display(),
        dirs.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_demo_time_needs_its_unit_and_the_message_names_the_option() {
        assert_eq!(param("nagle", "duration", "12s").unwrap().seconds(), 12.0);
        let e = param("pipelining", "rtt", "100").unwrap_err();
        let e = e
            .downcast_ref::<lab::UsageError>()
            .expect("a usage error")
            .0
            .clone();
        assert!(
            e.starts_with("--rtt: cannot use '100'") && e.contains("100ms"),
            "{e}"
        );
    }

    #[test]
    fn each_demos_options_are_its_declared_parameters() {
        let common = [
            "out",
            "seed",
            "quiet",
            "export",
            "help",
            "watch",
            "live",
            "watch-web",
        ];
        let subs = demo_commands();
        for sub in &subs {
            let d = demo::params::find(sub.get_name())
                .unwrap_or_else(|| panic!("demo {} is not declared", sub.get_name()));
            let mut options: Vec<&str> = sub
                .get_arguments()
                .filter_map(|a| a.get_long())
                .filter(|l| !common.contains(l))
                .collect();
            let mut declared: Vec<&str> = d.params.iter().map(|p| p.name).collect();
            options.sort_unstable();
            declared.sort_unstable();
            assert_eq!(options, declared, "demo {}", d.name);
        }
        assert_eq!(subs.len(), demo::params::DEMOS.len());
    }

    fn demo_commands() -> Vec<clap::Command> {
        use clap::Args;
        let cmd = DemoArgs::augment_args(clap::Command::new("demo"));
        cmd.get_subcommands().cloned().collect()
    }

    #[test]
    fn each_demo_writes_by_default_into_out_slash_its_own_name() {
        for sub in demo_commands() {
            let out = sub
                .get_arguments()
                .find(|a| a.get_id() == "out")
                .unwrap_or_else(|| panic!("demo {} has no --out", sub.get_name()));
            let defaults: Vec<_> = out.get_default_values().iter().collect();
            // A demo without a clap default picks its directory itself.
            if !defaults.is_empty() {
                let want = format!("out/{}", sub.get_name());
                assert_eq!(defaults, [&want], "demo {}", sub.get_name());
            }
        }
    }

    #[test]
    fn each_demo_lists_its_own_options_between_out_and_seed_quiet_help() {
        for mut sub in demo_commands() {
            let help = sub.render_help().to_string();
            let at = |flag: &str| {
                help.find(flag)
                    .unwrap_or_else(|| panic!("demo {}: no {flag} in\n{help}", sub.get_name()))
            };
            let (out, seed, quiet, h) = (at("--out"), at("--seed"), at("--quiet"), at("--help"));
            assert!(out < seed && seed < quiet && quiet < h, "{help}");
            for a in sub.get_arguments().filter_map(|a| a.get_long()) {
                if !["out", "seed", "quiet", "export", "help"].contains(&a) {
                    let own = at(&format!("--{a} "));
                    assert!(out < own && own < seed, "--{a}: {help}");
                }
            }
        }
    }
}

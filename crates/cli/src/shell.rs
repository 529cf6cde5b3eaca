//! `latencylab shell` and `latencylab run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use lab::config::Side;
use lab::files::{self, run_file_config};
use lab::RunOptions;

use crate::watch;
use labnet::run_dir::CaptureLimits;
use labnet::shell::{shell_config, ShellOptions};

/// A two-host lab, `client` and `server`, joined by an emulated path; COMMAND runs in `client`.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  latencylab shell --down 10mbit --up 1mbit --rtt 40ms --queue 'fifo limit 1000' \\\n      --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server --duration 10s\n\nInside the lab `server` and `client` resolve by name, and $LATENCYLAB_SERVER holds the server's address."
)]
pub struct ShellArgs {
    /// Capacity both ways (tc units: 10mbit, 500kbit, 1gbit, 125kbps). Default: unlimited.
    #[arg(long, value_name = "RATE")]
    rate: Option<String>,
    /// Capacity server→client.
    #[arg(long, value_name = "RATE")]
    down: Option<String>,
    /// Capacity client→server.
    #[arg(long, value_name = "RATE")]
    up: Option<String>,
    /// One-way propagation delay each way (20ms, 250us, 1.5s).
    #[arg(long, value_name = "TIME")]
    delay: Option<String>,
    /// Round-trip propagation delay: each way gets half.
    #[arg(long, value_name = "TIME")]
    rtt: Option<String>,
    /// One-way delay server→client.
    #[arg(long, value_name = "TIME")]
    down_delay: Option<String>,
    /// One-way delay client→server.
    #[arg(long, value_name = "TIME")]
    up_delay: Option<String>,
    /// Bottleneck queue both ways, tc syntax ('fifo limit 1000', 'bfifo limit 150kb').
    #[arg(long, value_name = "SPEC")]
    queue: Option<String>,
    /// Bottleneck queue server→client only (as --queue).
    #[arg(long, value_name = "SPEC")]
    down_queue: Option<String>,
    /// Bottleneck queue client→server only (as --queue).
    #[arg(long, value_name = "SPEC")]
    up_queue: Option<String>,
    /// Random loss both ways, netem syntax ('1%', 'gemodel 1% 10% 70% 0.1%').
    #[arg(long, value_name = "SPEC")]
    loss: Option<String>,
    /// Random loss server→client only (as --loss).
    #[arg(long, value_name = "SPEC")]
    down_loss: Option<String>,
    /// Random loss client→server only (as --loss).
    #[arg(long, value_name = "SPEC")]
    up_loss: Option<String>,
    /// Capacity server→client from a Mahimahi packet-delivery trace.
    #[arg(long, value_name = "FILE")]
    down_trace: Option<String>,
    /// Capacity client→server from a Mahimahi packet-delivery trace.
    #[arg(long, value_name = "FILE")]
    up_trace: Option<String>,
    /// Bytes of link-layer overhead charged per packet (as netem's rate packetoverhead).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    overhead: Option<u32>,
    /// Clear the ECN field of every packet on the path, both ways (a middlebox that bleaches ECN).
    #[arg(long)]
    bleach_ecn: bool,
    /// Delay variation around the delay, both ways: TIME [uniform|normal|pareto|paretonormal]
    /// [CORR%] [reorder]. Keeps packet order unless `reorder` is given (netem reorders).
    #[arg(long, value_name = "TIME [DIST]", num_args = 1..=4)]
    jitter: Vec<String>,
    /// Delay variation server→client only (as --jitter).
    #[arg(long, value_name = "TIME [DIST]", num_args = 1..=4)]
    down_jitter: Vec<String>,
    /// Delay variation client→server only (as --jitter).
    #[arg(long, value_name = "TIME [DIST]", num_args = 1..=4)]
    up_jitter: Vec<String>,
    /// Duplicate PCT of packets both ways, the copy TIME after the original ('10%', '5% 200ms').
    #[arg(long, value_name = "PCT [TIME]", num_args = 1..=2)]
    duplicate: Vec<String>,
    /// Duplicates server→client only (as --duplicate).
    #[arg(long, value_name = "PCT [TIME]", num_args = 1..=2)]
    down_duplicate: Vec<String>,
    /// Duplicates client→server only (as --duplicate).
    #[arg(long, value_name = "PCT [TIME]", num_args = 1..=2)]
    up_duplicate: Vec<String>,
    /// Send PCT of packets at once, skipping the delay (netem's reorder; needs --delay).
    #[arg(long, value_name = "PCT [CORR]", num_args = 1..=2)]
    reorder: Vec<String>,
    /// Reordering server→client only (as --reorder).
    #[arg(long, value_name = "PCT [CORR]", num_args = 1..=2)]
    down_reorder: Vec<String>,
    /// Reordering client→server only (as --reorder).
    #[arg(long, value_name = "PCT [CORR]", num_args = 1..=2)]
    up_reorder: Vec<String>,
    /// Flip one random bit in PCT of packets both ways ('0.1%').
    #[arg(long, value_name = "PCT")]
    corrupt: Option<String>,
    /// Bit flips server→client only (as --corrupt).
    #[arg(long, value_name = "PCT")]
    down_corrupt: Option<String>,
    /// Bit flips client→server only (as --corrupt).
    #[arg(long, value_name = "PCT")]
    up_corrupt: Option<String>,
    /// At most N packets per second each way, whatever their size (a router whose CPU is the
    /// limit); combines with --rate.
    #[arg(long, value_name = "N")]
    pps: Option<String>,
    /// Packet-rate ceiling server→client only (as --pps).
    #[arg(long, value_name = "N")]
    down_pps: Option<String>,
    /// Packet-rate ceiling client→server only (as --pps).
    #[arg(long, value_name = "N")]
    up_pps: Option<String>,
    /// Deliver in bursts at slot boundaries, netem's slots: MIN [MAX] [packets N] [bytes B].
    #[arg(long, value_name = "MIN [MAX]", num_args = 1..=6)]
    slot: Vec<String>,
    /// Slotted delivery server→client only (as --slot).
    #[arg(long, value_name = "MIN [MAX]", num_args = 1..=6)]
    down_slot: Vec<String>,
    /// Slotted delivery client→server only (as --slot).
    #[arg(long, value_name = "MIN [MAX]", num_args = 1..=6)]
    up_slot: Vec<String>,
    /// Drop packets matching FILTER both ways ('tcp syn', 'udp port 443', 'ipv6', 'icmp',
    /// 'ecn ect1', combined with and/not); repeat for several.
    #[arg(long, value_name = "FILTER")]
    drop: Vec<String>,
    /// Drop matching packets server→client only (as --drop).
    #[arg(long, value_name = "FILTER")]
    down_drop: Vec<String>,
    /// Drop matching packets client→server only (as --drop).
    #[arg(long, value_name = "FILTER")]
    up_drop: Vec<String>,
    /// A narrow path: packets larger than BYTES get ICMP fragmentation needed / Packet Too Big
    /// back from the path's entry ('--link-mtu 1400'; IPv4 without DF is fragmented).
    #[arg(long, value_name = "BYTES")]
    link_mtu: Option<String>,
    /// A narrow path server→client only (as --link-mtu).
    #[arg(long, value_name = "BYTES")]
    down_link_mtu: Option<String>,
    /// A narrow path client→server only (as --link-mtu).
    #[arg(long, value_name = "BYTES")]
    up_link_mtu: Option<String>,
    /// Packets matching FILTER take TIME longer each way, without holding back the rest (a
    /// slower path for part of the traffic: --slow 'ipv6 150ms').
    #[arg(long, value_name = "FILTER TIME")]
    slow: Option<String>,
    /// A shell command line run in `server` for the life of the lab, started before COMMAND.
    #[arg(long, value_name = "CMD")]
    pub(crate) server: Option<String>,
    /// A named network (`latencylab profiles` lists them: 3g, slow-4g, cable, dsl, ...): its
    /// rates and round trip, which the link options given override.
    #[arg(long, value_name = "NAME")]
    profile: Option<String>,
    /// Measure responsiveness under working conditions (RPM): `rpm-server` in `server`, `rpm`
    /// in `client`, and where the probes' time went, queue by queue (see docs/rpm.md).
    #[arg(long, conflicts_with_all = ["command", "server"])]
    rpm: bool,
    /// An IPv6-only client: no IPv4 at all, the lab's DNS64 as resolver, and a NAT64 in front
    /// of the IPv4-only server (a carrier's IPv6-only network; see docs/nat64.md).
    #[arg(long)]
    nat64: bool,
    /// 464XLAT on the IPv6-only network, as mobile carriers deploy it. The client also gets 192.0.0.2/29
    /// and an IPv4 default route into a CLAT (a stateless translator on its side of the lab),
    /// so IPv4 literals and AF_INET-only programs work through the NAT64. The CLAT's prefix is
    /// discovered per RFC 7050 from ipv4only.arpa (see docs/nat64.md).
    #[arg(long)]
    clat: bool,
    /// With --clat: the NAT64 prefix the CLAT translates to, instead of discovering it
    /// (e.g. 64:ff9b::/96).
    #[arg(long, value_name = "PREFIX")]
    clat_prefix: Option<String>,
    /// TCP congestion control of both hosts (default cubic, whatever this machine uses).
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// TCP ECN of both hosts: on, off, passive (default passive, as Linux).
    #[arg(long, value_name = "MODE")]
    ecn: Option<String>,
    /// Interface MTU of both hosts (default 1500).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    mtu: Option<u32>,
    /// TCP slow start after idle of both hosts (net.ipv4.tcp_slow_start_after_idle): 1 (as
    /// Linux: an idle connection restarts from the initial window) or 0 (it keeps its window,
    /// as many web servers are set: '--slow-start-after-idle 0').
    #[arg(long, value_name = "0|1", value_parser = clap::builder::BoolishValueParser::new())]
    slow_start_after_idle: Option<bool>,
    /// Seed for every random choice (loss, AQM), so that a run can be repeated.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    seed: Option<u64>,
    /// Keep captures, link logs, lab.json and summary.json in DIR.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
    /// With -o: keep only lab.json and summary.json, no pcaps or link logs (for multi-Gbit/s
    /// runs, where writing every packet would measure the disk).
    #[arg(long)]
    pub(crate) no_capture: bool,
    #[command(flatten)]
    pub(crate) capture: CaptureArgs,
    #[command(flatten)]
    pub(crate) watch: watch::WatchArgs,
    /// Print nothing but errors on stderr.
    #[arg(short, long)]
    pub(crate) quiet: bool,
    /// The program to run in `client` (default: $SHELL).
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) command: Vec<String>,
}

/// Any topology, from a TOML run file (see docs/run-files.md).
#[derive(Args, Debug)]
#[command(after_help = "Example:\n  latencylab run examples/wifi-cellular.toml -o out/wifi")]
pub struct RunArgs {
    /// The run file.
    file: PathBuf,
    /// Override the file's seed.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Keep captures, link logs, programs' output, lab.json and summary.json in DIR.
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print nothing but errors on stderr.
    #[arg(short, long)]
    quiet: bool,
    /// With -o: keep only lab.json, summary.json and the programs' output, no pcaps or link
    /// logs.
    #[arg(long)]
    no_capture: bool,
    #[command(flatten)]
    capture: CaptureArgs,
    #[command(flatten)]
    watch: watch::WatchArgs,
}

/// How much the captures and link logs of `-o` keep, in tcpdump's words (`-s`, `-C`, `-W`).
#[derive(Args, Debug, Default)]
pub struct CaptureArgs {
    /// With -o: keep the first BYTES of each packet in the captures, from its IP header
    /// (`--snaplen 128` keeps the headers the analysis needs; the original length is kept).
    #[arg(long, value_name = "BYTES", requires = "out", value_parser = clap::value_parser!(u32).range(1..=262_144))]
    snaplen: Option<u32>,
    /// With -o: start a new file once a capture or link log holds MB million bytes
    /// (`client-eth0.pcap`, then `client-eth0.pcap.1`, `.2`, …), as tcpdump -C.
    #[arg(short = 'C', long = "file-size", value_name = "MB", requires = "out", value_parser = clap::value_parser!(u64).range(1..))]
    file_size_mb: Option<u64>,
    /// With -C: keep at most N files of each capture and link log, removing the oldest, as
    /// tcpdump -W (`-C 100 -W 10`: at most 1 GB per interface).
    #[arg(short = 'W', long = "file-count", value_name = "N", requires = "file_size_mb", value_parser = clap::value_parser!(u64).range(1..))]
    file_count: Option<u64>,
}

impl CaptureArgs {
    pub(crate) fn limits(&self) -> CaptureLimits {
        CaptureLimits {
            snaplen_bytes: self.snaplen,
            file_size_bytes: self.file_size_mb.map(|mb| mb * 1_000_000),
            file_count: self.file_count,
        }
    }
}

fn exit(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code.clamp(0, 255)).unwrap_or(1))
}

/// The lab options of `shell` (and of `ipv6-check`, which shares them): each link option as
/// the setting it names, for one direction or both.
pub(crate) fn shell_options(a: &ShellArgs) -> ShellOptions {
    let (up, down) = (Some(Side::Up), Some(Side::Down));
    let mut o = ShellOptions {
        cc: a.cc.clone(),
        ecn: a.ecn.clone(),
        mtu: a.mtu,
        slow_start_after_idle: a.slow_start_after_idle,
        seed: a.seed,
        nat64: a.nat64,
        clat: a.clat,
        clat_prefix: a.clat_prefix.clone(),
        profile: a.profile.clone(),
        ..ShellOptions::default()
    };
    o.link_option("--rate", None, "rate", a.rate.as_ref());
    o.link_option("--down", down, "rate", a.down.as_ref());
    o.link_option("--up", up, "rate", a.up.as_ref());
    o.link_option("--down-trace", down, "trace", a.down_trace.as_ref());
    o.link_option("--up-trace", up, "trace", a.up_trace.as_ref());
    o.link_option("--delay", None, "delay", a.delay.as_ref());
    o.link_option("--rtt", None, "rtt", a.rtt.as_ref());
    o.link_option("--down-delay", down, "delay", a.down_delay.as_ref());
    o.link_option("--up-delay", up, "delay", a.up_delay.as_ref());
    o.link_option("--queue", None, "queue", a.queue.as_ref());
    o.link_option("--down-queue", down, "queue", a.down_queue.as_ref());
    o.link_option("--up-queue", up, "queue", a.up_queue.as_ref());
    o.link_option("--loss", None, "loss", a.loss.as_ref());
    o.link_option("--down-loss", down, "loss", a.down_loss.as_ref());
    o.link_option("--up-loss", up, "loss", a.up_loss.as_ref());
    o.link_option("--overhead", None, "overhead", a.overhead);
    o.link_option(
        "--bleach-ecn",
        None,
        "bleach_ecn",
        a.bleach_ecn.then_some(true),
    );
    // Options that take several words (netem's `--duplicate 10% 50ms`) or repeat (`--drop`).
    let words = |v: &Vec<String>| (!v.is_empty()).then(|| v.join(" "));
    let filters = |v: &Vec<String>| (!v.is_empty()).then(|| v.join(" or "));
    for (name, side, key, value) in [
        ("--jitter", None, "jitter", words(&a.jitter)),
        ("--down-jitter", down, "jitter", words(&a.down_jitter)),
        ("--up-jitter", up, "jitter", words(&a.up_jitter)),
        ("--duplicate", None, "duplicate", words(&a.duplicate)),
        (
            "--down-duplicate",
            down,
            "duplicate",
            words(&a.down_duplicate),
        ),
        ("--up-duplicate", up, "duplicate", words(&a.up_duplicate)),
        ("--reorder", None, "reorder", words(&a.reorder)),
        ("--down-reorder", down, "reorder", words(&a.down_reorder)),
        ("--up-reorder", up, "reorder", words(&a.up_reorder)),
        ("--corrupt", None, "corrupt", a.corrupt.clone()),
        ("--down-corrupt", down, "corrupt", a.down_corrupt.clone()),
        ("--up-corrupt", up, "corrupt", a.up_corrupt.clone()),
        ("--pps", None, "pps", a.pps.clone()),
        ("--down-pps", down, "pps", a.down_pps.clone()),
        ("--up-pps", up, "pps", a.up_pps.clone()),
        ("--slot", None, "slot", words(&a.slot)),
        ("--down-slot", down, "slot", words(&a.down_slot)),
        ("--up-slot", up, "slot", words(&a.up_slot)),
        ("--drop", None, "drop", filters(&a.drop)),
        ("--down-drop", down, "drop", filters(&a.down_drop)),
        ("--up-drop", up, "drop", filters(&a.up_drop)),
        ("--link-mtu", None, "mtu", a.link_mtu.clone()),
        ("--down-link-mtu", down, "mtu", a.down_link_mtu.clone()),
        ("--up-link-mtu", up, "mtu", a.up_link_mtu.clone()),
        ("--slow", None, "slow", a.slow.clone()),
    ] {
        o.link_option(name, side, key, value);
    }
    o
}

pub fn shell(a: ShellArgs) -> Result<ExitCode> {
    let cfg = shell_config(&shell_options(&a), &files::read)?;
    if a.rpm {
        let limits = a.capture.limits();
        return crate::rpm_cmd::in_lab(&cfg, a.out, a.quiet, a.no_capture, limits);
    }
    let command = if a.command.is_empty() {
        vec![std::env::var("SHELL").unwrap_or_else(|_| "/bin/sh".into())]
    } else {
        a.command
    };
    let run = RunOptions {
        out_dir: a.out,
        command: Some(("client".into(), command)),
        server: a.server.map(|s| ("server".into(), s)),
        quiet: a.quiet,
        no_capture: a.no_capture,
        capture: a.capture.limits(),
    };
    Ok(exit(watch::run_lab(&cfg, &run, &a.watch)?.exit_code))
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let cfg = run_file_config(&a.file, a.seed)?;
    let run = RunOptions {
        out_dir: a.out,
        command: None,
        server: None,
        quiet: a.quiet,
        no_capture: a.no_capture,
        capture: a.capture.limits(),
    };
    Ok(exit(watch::run_lab(&cfg, &run, &a.watch)?.exit_code))
}

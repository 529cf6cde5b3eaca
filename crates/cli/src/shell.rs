//! `latencylab shell` and `latencylab run`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::builder::BoolishValueParser;
use clap::{Arg, ArgAction, ArgMatches, Args};
use lab::files::{self, run_file_config_set};
use lab::RunOptions;
use labnet::options::{self, Form, LabOption};
use labnet::run_dir::CaptureLimits;
use labnet::run_file::SetValue;
use labnet::shell::{shell_config, ShellOptions};
use labnet::UsageError;

use crate::watch;

/// A two-host lab, `client` and `server`, joined by an emulated path; COMMAND runs in `client`.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  latencylab shell --down 10mbit --up 1mbit --rtt 40ms --queue 'fifo limit 1000' \\\n      --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server --duration 10s\n\nInside the lab `server` and `client` resolve by name, and $LATENCYLAB_SERVER holds the server's address."
)]
pub struct ShellArgs {
    // Every link, host and lab setting, from labnet's table of options.
    #[command(flatten)]
    pub(crate) lab: LabArgs,
    /// Measure responsiveness under working conditions (RPM): `rpm-server` in `server`, `rpm`
    /// in `client`, and where the probes' time went, queue by queue (see docs/rpm.md).
    #[arg(long, conflicts_with_all = ["command", "server"])]
    pub(crate) rpm: bool,
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
    /// Set one value over the file's own, as the file would write it; repeat for several
    /// ('--set link.path.down.queue=fq_codel', '--set host.phone.cc=bbr', '--set
    /// duration=10s'). KEY is link.NAME.KEY, link.NAME.up.KEY, link.NAME.down.KEY,
    /// host.NAME.KEY, program.NAME.KEY, nat64.KEY or a top-level key.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = parse_set)]
    set: Vec<SetValue>,
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
    /// Whether any of them is given.
    pub(crate) fn any(&self) -> bool {
        self.snaplen.is_some() || self.file_size_mb.is_some() || self.file_count.is_some()
    }

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

/// The lab options of `shell` (and of `ipv6-check`, which shares them), as given.
#[derive(Clone, Debug, Default)]
pub struct LabArgs {
    /// Each option given and its value, in the table's order.
    given: Vec<(&'static LabOption, String)>,
}

/// The clap argument of one option of the table.
fn arg(o: &'static LabOption) -> Arg {
    let help = o.help.strip_suffix('.').unwrap_or(&o.help).to_string();
    let a = Arg::new(o.flag).long(o.flag).help(help);
    let a = if o.value_name.is_empty() {
        a
    } else {
        a.value_name(o.value_name)
    };
    match o.form {
        Form::Flag => a.action(ArgAction::SetTrue),
        Form::Text => a.action(ArgAction::Set),
        Form::Words(n) => a.action(ArgAction::Append).num_args(1..=n),
        Form::Filters => a.action(ArgAction::Append),
        // Negative numbers reach the parser, to be refused naming the option.
        Form::U32 => a
            .value_parser(clap::value_parser!(u32))
            .allow_negative_numbers(true),
        Form::U64 => a
            .value_parser(clap::value_parser!(u64))
            .allow_negative_numbers(true),
        Form::ZeroOne => a.value_parser(BoolishValueParser::new()),
    }
}

impl clap::Args for LabArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        options::table().iter().fold(cmd, |c, o| c.arg(arg(o)))
    }
    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl clap::FromArgMatches for LabArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut given = Vec::new();
        for o in options::table() {
            let value = match o.form {
                Form::Flag => m.get_flag(o.flag).then(|| "true".to_string()),
                Form::U32 => m.get_one::<u32>(o.flag).map(u32::to_string),
                Form::U64 => m.get_one::<u64>(o.flag).map(u64::to_string),
                Form::ZeroOne => m.get_one::<bool>(o.flag).map(bool::to_string),
                Form::Text | Form::Words(_) | Form::Filters => m
                    .get_many::<String>(o.flag)
                    .map(|v| o.form.join(&v.cloned().collect::<Vec<_>>())),
            };
            if let Some(v) = value {
                given.push((o, v));
            }
        }
        Ok(LabArgs { given })
    }
    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// The lab options of `shell` (and of `ipv6-check`), read into the shell's lab.
pub(crate) fn shell_options(a: &ShellArgs) -> Result<ShellOptions, UsageError> {
    options::shell_options(a.lab.given.iter().map(|(o, v)| (*o, v.as_str())))
}

pub fn shell(a: ShellArgs) -> Result<ExitCode> {
    let opts = shell_options(&a)?;
    let cfg = shell_config(&opts, &files::read)?;
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
        server: opts.server.map(|s| ("server".into(), s)),
        quiet: a.quiet,
        no_capture: a.no_capture,
        capture: a.capture.limits(),
    };
    Ok(exit(
        watch::run_lab(&cfg, &run, &a.watch, "shell")?.exit_code,
    ))
}

/// `--set KEY=VALUE`, read once here: a malformed one is clap's usage error.
fn parse_set(s: &str) -> Result<SetValue, String> {
    SetValue::parse(s).map_err(|e| e.0)
}

pub fn run(a: RunArgs) -> Result<ExitCode> {
    let cfg = run_file_config_set(&a.file, a.seed, &a.set)?;
    crate::rpm_cmd::before_run_file(&cfg, a.out.as_deref());
    let run = RunOptions {
        out_dir: a.out.clone(),
        command: None,
        server: None,
        quiet: a.quiet,
        no_capture: a.no_capture,
        capture: a.capture.limits(),
    };
    let title = format!("run {}", a.file.display());
    let result = watch::run_lab(&cfg, &run, &a.watch, &title)?;
    crate::rpm_cmd::after_run_file(&cfg, a.out.as_deref(), &result);
    Ok(exit(result.exit_code))
}

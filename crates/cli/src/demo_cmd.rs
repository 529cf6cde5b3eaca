//! `latencylab demo NAME`: whole experiments behind one command, each leaving a report.
//!
//! Glue only: each demo's command is built from its declaration (`demo::params::DEMOS`: its
//! help, options and defaults), then the options are read as the declaration says, and the
//! demo runs or exports its runs; this prints the table and where everything is. Exit codes:
//! 0 the demo ran (whether or not its numbers met the expectations, which it prints); 1 a
//! failure while running; 2 a usage error (a bad option, or not root).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use demo::params::{Declaration, Kind, Param, DEMOS};

/// `latencylab demo NAME [OPTIONS]`: the demo and its options as given.
#[derive(Debug)]
pub struct DemoArgs {
    demo: &'static Declaration,
    /// Each of the demo's own options, as given or defaulted: (name, text).
    values: Vec<(&'static str, String)>,
    common: CommonArgs,
}

/// What every demo takes besides its own options.
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
    /// Run no lab: analyse the runs an earlier run of this demo left in the output directory
    /// (with the same options) again, and write its table, results.json and report anew;
    /// needs no root
    #[arg(long, display_order = 903, conflicts_with = "export")]
    pub reanalyse: bool,
    /// `--watch`, `--live FILE` and `--watch-web` follow each of the demo's labs in turn
    #[command(flatten)]
    pub watch: crate::watch::WatchArgs,
}

impl DemoArgs {
    /// Whether this command builds labs (it neither exports them nor reads old ones back).
    pub fn runs_labs(&self) -> bool {
        self.common.export.is_none() && !self.common.reanalyse
    }
}

impl CommonArgs {
    /// Where the demo writes: the export directory when exporting (a web demo's page file
    /// goes next to its run files), else `-o`.
    fn dir(&self) -> PathBuf {
        self.export.clone().unwrap_or_else(|| self.out.clone())
    }
}

/// A demo's command, from its declaration: its own options between `--out` and `--seed`.
fn demo_command(d: &'static Declaration) -> Command {
    let example = if d.example.is_empty() {
        String::new()
    } else {
        format!(" {}", d.example)
    };
    let out_default: &'static str = Box::leak(format!("out/{}", d.name).into_boxed_str());
    let mut c = CommonArgs::augment_args(Command::new(d.name))
        .about(d.about)
        .after_help(format!(
            "Example:\n  latencylab demo {0} -o out/{0}{example}\n\nLeaves {1}.",
            d.name, d.leaves
        ))
        .mut_arg("out", |a| a.default_value(out_default));
    for (i, p) in d.params.iter().enumerate() {
        c = c.arg(param_arg(p).display_order(10 + i));
    }
    c
}

/// One declared parameter as an option. Its value is read by the declaration, not by clap,
/// so that a bad one gets the same message here as in a sweep.
fn param_arg(p: &'static Param) -> Arg {
    let a = Arg::new(p.name).long(p.name).help(p.help);
    match p.kind {
        Kind::Flag => a.action(ArgAction::SetTrue),
        _ => {
            let a = a.value_name(p.value_name);
            match p.default {
                Some(d) => a.default_value(d),
                None => a,
            }
        }
    }
}

impl Args for DemoArgs {
    fn augment_args(cmd: Command) -> Command {
        cmd.about("Run a whole experiment (labs, traffic, analysis) and leave a report")
            .after_help(
                "Examples:\n  latencylab demo bufferbloat\n  latencylab demo bufferbloat -o out/bb --duration 20s\n  latencylab demo l4s -o out/l4s",
            )
            .subcommand_required(true)
            .subcommands(DEMOS.iter().map(demo_command))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for DemoArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let (name, sub) = m
            .subcommand()
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
        let demo = demo::params::find(name)
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        let values = demo
            .params
            .iter()
            .filter_map(|p| match p.kind {
                Kind::Flag => sub.get_flag(p.name).then(|| (p.name, "true".to_string())),
                _ => sub.get_one::<String>(p.name).map(|v| (p.name, v.clone())),
            })
            .collect();
        Ok(DemoArgs {
            demo,
            values,
            common: CommonArgs::from_arg_matches(sub)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// `--export DIR`: each run's lab as `DIR/RUN.toml` and a README, from the runs the demo
/// itself would run.
fn export(dir: &Path, d: &Declaration, runs: Vec<demo::Run>) -> anyhow::Result<ExitCode> {
    let files = demo::export(dir, d.name, d.about, &runs)?;
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

/// Runs `latencylab demo …`.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    // The nat64 demo runs each sample as `ipv6-check` does.
    demo::nat64::set_gather(crate::ipv6_check::gather);
    // Before any thread exists (the analysis between runs may leave worker threads), so that
    // Ctrl-C, SIGTERM and SIGCHLD reach each lab; one that comes between labs ends the next.
    let old = lab::block_stop_signals()?;
    // With `--watch`, `--live` or `--watch-web`, the demo's labs run watched (not when it
    // only exports them).
    if args.common.reanalyse {
        if args.common.watch.any() {
            let u = "--reanalyse runs no lab for --watch, --live or --watch-web to follow: give one or the other";
            return Err(lab::UsageError(u.into()).into());
        }
        demo::set_reanalyse();
    }
    let web = match args.runs_labs() {
        false => None,
        true => crate::watch::watch_every_lab(&args.common.watch, None)?,
    };
    let r = run_demo(args);
    if let Some(v) = web {
        v.finish();
    }
    lab::restore_signals(old);
    r
}

/// The demo's options read as its declaration says, or the one-line usage error naming the
/// option.
fn demo_args(args: &DemoArgs) -> Result<demo::params::Args, lab::UsageError> {
    let c = &args.common;
    let mut a = demo::params::Args::new(args.demo, c.dir());
    a.seed = c.seed;
    a.quiet = c.quiet;
    for (name, text) in &args.values {
        a.set(name, text)
            .map_err(|e| lab::UsageError(format!("--{name}: {e}")))?;
    }
    Ok(a)
}

fn run_demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let (d, c) = (args.demo, &args.common);
    let a = demo_args(args)?;
    if let Some(dir) = &c.export {
        return export(dir, d, (d.runs)(&a)?);
    }
    if !crate::without_web::BUILT {
        let runs = (d.runs)(&a)?;
        let mut programs = runs.iter().flat_map(|r| &r.config.programs);
        if programs.any(|p| crate::without_web::runs_web_program(&p.run)) {
            return Err(crate::without_web::not_built(&format!("`demo {}`", d.name)).into());
        }
    }
    let o = (d.run)(&a)?;
    // Under sudo, the report and every run's files are the user's.
    if let Err(e) = lab::owner::hand_over(&c.out) {
        eprintln!(
            "latencylab: cannot give {} to the user: {e}",
            c.out.display()
        );
    }
    print_outcome(&o, d, &c.out);
    Ok(ExitCode::SUCCESS)
}

/// The table, each criterion as `ok` or `NOT` (or `n/a` with the reason, for one the platform
/// is known not to meet), and where everything is.
fn print_outcome(o: &demo::Outcome<()>, d: &Declaration, out: &Path) {
    print!("{}", o.table);
    println!();
    for w in warning_lines(&o.warnings) {
        println!("{w}");
    }
    for c in &o.checks {
        println!("{} {}", if c.passed { "ok " } else { "NOT" }, c.what);
    }
    for u in &o.unreproducible {
        println!("{} {}", u.label(), u.line());
    }
    println!();
    println!("report: {}", o.report.display());
    let dir = out.display().to_string();
    let rest = d
        .leaves
        .strip_prefix("DIR/report.html, ")
        .unwrap_or(d.leaves);
    println!("also: {}", rest.replace("DIR", &dir));
}

/// Warnings printed in full; the rest are counted in one line.
const WARNINGS_SHOWN: usize = 6;

/// The runs' warnings as printed: up to [`WARNINGS_SHOWN`] in full, then one line counting the
/// rest and naming their runs (a demo of many runs on a busy machine would otherwise print a
/// screenful of one kind of warning before its checks).
fn warning_lines(warnings: &[String]) -> Vec<String> {
    if warnings.len() <= WARNINGS_SHOWN + 1 {
        return warnings.to_vec();
    }
    let (shown, rest) = warnings.split_at(WARNINGS_SHOWN);
    let mut runs: Vec<&str> = rest
        .iter()
        .filter_map(|w| w.strip_prefix("warning (")?.split_once("): "))
        .map(|(run, _)| run)
        .collect();
    runs.dedup();
    let mut lines = shown.to_vec();
    lines.push(format!(
        "warning: {} more like these, of the run{} {}: each run's summary.json holds its \
         engine's figures",
        rest.len(),
        if runs.len() == 1 { "" } else { "s" },
        runs.join(", ")
    ));
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `latencylab demo ARGS…` read as `run` reads it.
    fn parse(args: &[&str]) -> Result<demo::params::Args, lab::UsageError> {
        let m = demo_commands_root()
            .try_get_matches_from(std::iter::once("demo").chain(args.iter().copied()))
            .map_err(|e| lab::UsageError(e.to_string()))?;
        demo_args(&DemoArgs::from_arg_matches(&m).unwrap())
    }

    fn demo_commands_root() -> clap::Command {
        DemoArgs::augment_args(clap::Command::new("demo"))
    }

    #[test]
    fn many_warnings_are_shown_in_part_and_the_rest_counted_by_run() {
        let w = |run: &str, i: usize| format!("warning ({run}): the emulator stalled for {i} ms");
        let few: Vec<String> = (0..WARNINGS_SHOWN + 1).map(|i| w("a", i)).collect();
        assert_eq!(warning_lines(&few), few);
        let mut many: Vec<String> = (0..WARNINGS_SHOWN).map(|i| w("a", i)).collect();
        many.extend([w("b", 1), w("b", 2), w("c-loss2-s1", 3)]);
        let lines = warning_lines(&many);
        assert_eq!(lines.len(), WARNINGS_SHOWN + 1);
        assert_eq!(lines[..WARNINGS_SHOWN], many[..WARNINGS_SHOWN]);
        assert!(
            lines[WARNINGS_SHOWN]
                .starts_with("warning: 3 more like these, of the runs b, c-loss2-s1:"),
            "{}",
            lines[WARNINGS_SHOWN]
        );
    }

    #[test]
    fn a_demo_time_needs_its_unit_and_the_message_names_the_option() {
        let a = parse(&["nagle", "--duration", "12s"]).unwrap();
        assert_eq!(a.seconds("duration"), 12.0);
        assert_eq!(parse(&["nagle"]).unwrap().seconds("duration"), 20.0);
        let e = parse(&["pipelining", "--rtt", "100"]).unwrap_err().0;
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
            "reanalyse",
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
        demo_commands_root().get_subcommands().cloned().collect()
    }

    #[test]
    fn flags_counts_words_the_seed_and_the_output_directory_reach_the_demo() {
        let a = parse(&[
            "cwnd-reuse",
            "-o",
            "x/y",
            "--no-control",
            "--clicks",
            "2",
            "--seed",
            "9",
            "-q",
        ])
        .unwrap();
        assert!(a.flag("no-control"));
        assert_eq!((a.count("clicks"), a.seed, a.quiet), (2, 9, true));
        assert_eq!(a.out_dir, PathBuf::from("x/y"));
        let a = parse(&["conn-reuse"]).unwrap();
        assert_eq!(a.out_dir, PathBuf::from("out/conn-reuse"));
        assert_eq!(
            (a.text("html-scan"), a.number("up-mbit")),
            (Some("stream"), None)
        );
        let e = parse(&["conn-reuse", "--html-scan", "lazy"]).unwrap_err().0;
        assert!(
            e.contains("--html-scan") && e.contains("stream, whole"),
            "{e}"
        );
        let e = parse(&["pps", "--pps", "10"]).unwrap_err().0;
        assert!(
            e.starts_with("--pps: cannot use '10' (from 100 to 100000"),
            "{e}"
        );
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
                if !["out", "seed", "quiet", "export", "reanalyse", "help"].contains(&a) {
                    let own = at(&format!("--{a} "));
                    assert!(out < own && own < seed, "--{a}: {help}");
                }
            }
        }
    }
}

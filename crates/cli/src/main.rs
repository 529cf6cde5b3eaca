//! The `latencylab` binary: argument parsing, printing and exit codes over the library crates.
//!
//! Exit codes: COMMAND's own status for `shell`; for `ipv6-check`, 0 when nothing broke and 1
//! when something did; 0 for a run that ended normally; 1 for a
//! failure while running; 2 for a usage error (a bad option, file or value, or missing
//! privileges), always with one line naming the culprit and what would have been accepted.

mod analyze_cmd;
mod demo_cmd;
mod ipv6_check;
mod shell;
mod sweep_cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "latencylab",
    version,
    about = "Build the network your users have, run real programs in it, and see where each millisecond went.",
    after_help = "Examples:\n  sudo latencylab shell --down 10mbit --up 1mbit --rtt 40ms -o run1 -- curl -s http://server/\n  sudo latencylab run examples/wifi-cellular.toml -o run2\n  sudo latencylab ipv6-check -- ./my-app"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    Shell(Box<shell::ShellArgs>),
    Run(shell::RunArgs),
    Ipv6Check(Box<ipv6_check::CheckArgs>),
    Analyze(analyze_cmd::AnalyzeArgs),
    Demo(demo_cmd::DemoArgs),
    Sweep(sweep_cmd::SweepArgs),
    #[command(flatten)]
    App(apps::AppCommand),
    #[command(flatten)]
    Web(web::WebCommand),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    // Lab commands without root enter a user namespace of their own, while the process still
    // has one thread (the kernel requires it).
    if matches!(
        cli.command,
        Command::Shell(_) | Command::Run(_) | Command::Ipv6Check(_) | Command::Demo(_)
    ) {
        if let Err(u) = lab::userns::enter() {
            eprintln!("latencylab: {u}");
            return ExitCode::from(2);
        }
    }
    let result = match cli.command {
        Command::Shell(a) => shell::shell(*a),
        Command::Run(a) => shell::run(a),
        Command::Ipv6Check(a) => ipv6_check::run(*a),
        Command::Analyze(a) => analyze_cmd::run(&a),
        Command::Demo(a) => demo_cmd::run(&a),
        Command::Sweep(a) => sweep_cmd::run(&a),
        Command::App(a) => apps::run(a),
        Command::Web(a) => web::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Some(u) = e.downcast_ref::<lab::UsageError>() {
                eprintln!("latencylab: {u}");
                ExitCode::from(2)
            } else {
                eprintln!("latencylab: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

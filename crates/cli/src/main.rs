//! The `latencylab` binary: argument parsing, printing and exit codes over the library crates.
//!
//! Exit codes: COMMAND's own status for `shell`; for `ipv6-check`, 0 when nothing broke and 1
//! when something did; for `fallback-check`, 0 when every scenario got through in time and 1
//! when one did not; 0 for a run that ended normally; 1 for a
//! failure while running; 2 for a usage error (a bad option, file or value, or missing
//! privileges), always with one line naming the culprit and what would have been accepted.

mod analyze_cmd;
mod demo_cmd;
mod evidence;
mod fallback_check;
mod ipv6_check;
mod report_cmd;
mod rpm_cmd;
mod run_report;
mod shell;
mod sweep_cmd;
mod watch;
mod watch_web;
mod without_web;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "latencylab",
    version,
    about = "Build the network your users have, run real programs in it, and see where each millisecond went.",
    after_help = "Examples:\n  latencylab shell --down 10mbit --up 1mbit --rtt 40ms \\\n      --server 'latencylab bulk-server' -o out/run1 -- latencylab bulk-client server\n  latencylab run examples/wifi-cellular.toml -o out/wifi\n  latencylab ipv6-check --server 'latencylab probe-server' -- ./my-app server\n\nThe lab commands (shell, run, demo, ipv6-check, fallback-check, sweep) run as you where this\nmachine lets a user create user namespaces and open /dev/net/tun, and with sudo elsewhere\n(docs/guide.md, \"Without root\"). The other commands never need root."
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
    FallbackCheck(Box<fallback_check::FallbackCheckArgs>),
    Analyze(analyze_cmd::AnalyzeArgs),
    Demo(demo_cmd::DemoArgs),
    Report(report_cmd::ReportArgs),
    Sweep(sweep_cmd::SweepArgs),
    #[command(flatten)]
    App(apps::AppCommand),
    #[cfg(feature = "web")]
    #[command(flatten)]
    Web(web::WebCommand),
    #[cfg(feature = "web")]
    #[command(flatten)]
    Rpm(rpm::RpmCommand),
    /// A build without the web programs: one of them, or a command that does not exist.
    #[cfg(not(feature = "web"))]
    #[command(external_subcommand)]
    Missing(Vec<String>),
    /// List the named networks of --profile, with their figures and sources
    Profiles(rpm_cmd::ProfilesArgs),
}

/// The command line as clap sees it, with what the derive cannot say: `ipv6-check` shares
/// `shell`'s options but is always an IPv6-only lab, so its `--nat64` is hidden.
fn command() -> clap::Command {
    Cli::command().mut_subcommand("ipv6-check", |c| c.mut_arg("nat64", |a| a.hide(true)))
}

/// Help and version go to stdout with status 0; a usage error is one line on stderr, as every
/// other error of latencylab, with status 2. A bare `latencylab` (no subcommand) still gets
/// the whole help, on stderr.
fn usage_error(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !e.use_stderr() {
        let _ = e.print();
        return ExitCode::SUCCESS;
    }
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        let _ = e.print();
        return ExitCode::from(2);
    }
    eprintln!("latencylab: {}", one_line(&e.render().to_string()));
    ExitCode::from(2)
}

/// clap's error text (`error: ...`, a blank line, `tip: ...`, `Usage: ...`, `For more
/// information, try '--help'.`) as one line: the error, its tips, and where to look.
fn one_line(text: &str) -> String {
    let mut parts = Vec::new();
    let mut lines = text.lines().map(str::trim);
    while let Some(line) = lines.next() {
        if let Some(e) = line.strip_prefix("error: ") {
            let mut e = e.to_string();
            // A list follows on the next lines ("the following required arguments were not
            // provided:"), up to a blank line.
            if e.ends_with(':') {
                let list: Vec<&str> = lines.by_ref().take_while(|l| !l.is_empty()).collect();
                e = format!("{e} {}", list.join(", "));
            }
            parts.push(e);
        } else if let Some(t) = line.strip_prefix("tip: ") {
            parts.push(t.to_string());
        }
    }
    if parts.is_empty() {
        parts.push(
            text.lines()
                .next()
                .unwrap_or("bad arguments")
                .trim()
                .to_string(),
        );
    }
    format!("{} (see --help)", parts.join("; "))
}

/// Whether this process builds labs itself, and so must enter a user namespace of its own
/// when it is not root. `sweep` builds none: each of its runs is a `latencylab` child process
/// that enters its own; nor does a demo that only exports its labs or reanalyses old ones.
fn enters_user_namespace(c: &Command) -> bool {
    matches!(
        c,
        Command::Shell(_) | Command::Run(_) | Command::Ipv6Check(_) | Command::FallbackCheck(_)
    ) || matches!(c, Command::Demo(d) if d.runs_labs())
}

fn main() -> ExitCode {
    let cli = match command()
        .try_get_matches()
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    // Lab commands without root enter a user namespace of their own, while the process still
    // has one thread (the kernel requires it).
    if enters_user_namespace(&cli.command) {
        if let Err(u) = lab::userns::enter() {
            eprintln!("latencylab: {u}");
            return ExitCode::from(2);
        }
    }
    let result = match cli.command {
        Command::Shell(a) => shell::shell(*a),
        Command::Run(a) => shell::run(a),
        Command::Ipv6Check(a) => ipv6_check::run(*a),
        Command::FallbackCheck(a) => fallback_check::run(*a),
        Command::Analyze(a) => analyze_cmd::run(&a),
        Command::Demo(a) => demo_cmd::run(&a),
        Command::Report(a) => report_cmd::run(&a),
        Command::Sweep(a) => sweep_cmd::run(&a),
        Command::App(a) => apps::run(a),
        #[cfg(feature = "web")]
        Command::Web(a) => web::run(a),
        #[cfg(feature = "web")]
        Command::Rpm(a) => rpm::run(a),
        #[cfg(not(feature = "web"))]
        Command::Missing(words) => Err(without_web::missing(&words[0]).into()),
        Command::Profiles(a) => rpm_cmd::profiles(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            if let Some(u) = usage_message(&e) {
                eprintln!("latencylab: {u}");
                ExitCode::from(2)
            } else {
                eprintln!("latencylab: {e:#}");
                ExitCode::from(1)
            }
        }
    }
}

/// The message of a usage error (exit status 2), whichever part of the command line it came
/// from: the lab's options, a traffic program's, the web's or the responsiveness test's.
fn usage_message(e: &anyhow::Error) -> Option<String> {
    if let Some(u) = e.downcast_ref::<lab::UsageError>() {
        return Some(u.to_string());
    }
    if let Some(u) = e.downcast_ref::<apps::common::UsageError>() {
        return Some(u.to_string());
    }
    #[cfg(feature = "web")]
    if let Some(u) = e.downcast_ref::<web::UsageError>() {
        return Some(u.to_string());
    }
    #[cfg(feature = "web")]
    if let Some(u) = e.downcast_ref::<rpm::UsageError>() {
        return Some(u.to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The commands that build labs, as the README and the guide list them: each runs without
    /// root where the machine allows unprivileged user namespaces and `/dev/net/tun`, and needs
    /// sudo elsewhere. Every other command never needs root.
    const LAB_COMMANDS: [&str; 6] = [
        "shell",
        "run",
        "demo",
        "ipv6-check",
        "fallback-check",
        "sweep",
    ];

    fn error_line(args: &[&str]) -> String {
        let e = command().try_get_matches_from(args).unwrap_err();
        one_line(&e.render().to_string())
    }

    #[test]
    fn clap_errors_become_one_line_naming_the_option_and_the_value() {
        let l = error_line(&["latencylab", "shell", "--seed", "x"]);
        assert!(!l.contains('\n'), "{l}");
        assert!(l.contains("'x'") && l.contains("--seed"), "{l}");
        let l = error_line(&["latencylab", "shell", "--overhead", "-5"]);
        assert!(!l.contains('\n') && l.contains("--overhead"), "{l}");
        let l = error_line(&["latencylab", "shell", "--sed", "1"]);
        assert!(l.contains("--sed") && l.contains("--seed"), "{l}");
        // An option that needs another names the one missing.
        let l = error_line(&["latencylab", "shell", "--snaplen", "128"]);
        assert!(!l.contains('\n') && l.contains("--out <DIR>"), "{l}");
    }

    #[test]
    fn ipv6_check_hides_nat64_which_shell_shows() {
        let mut c = command();
        let help = |c: &mut clap::Command, name: &str| {
            c.find_subcommand_mut(name)
                .unwrap()
                .render_long_help()
                .to_string()
        };
        assert!(help(&mut c, "shell").contains("--nat64"));
        assert!(!help(&mut c, "ipv6-check").contains("--nat64"));
    }

    fn repo_file(path: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(path);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Every option `shell` takes, as clap parses it: each lab option is one of labnet's
    /// table, can be a sweep's axis, and is in the guide's table of options (which is the
    /// table's own, printed).
    #[test]
    fn every_shell_option_is_in_the_option_table_the_sweep_axes_and_the_docs() {
        let guide = repo_file("docs/guide.md");
        let (_, rest) = guide
            .split_once("<!-- shell-options -->\n")
            .expect("docs/guide.md has no <!-- shell-options --> block");
        let (block, _) = rest.split_once("<!-- /shell-options -->").unwrap();
        // That the block is the table's, printed, is labnet's test.
        // Options of the run, not of the lab: where it writes and how much it says.
        let run_only = [
            "help",
            "command",
            "out",
            "no_capture",
            "snaplen",
            "file_size_mb",
            "file_count",
            "quiet",
            "rpm",
            "watch",
            "live",
            "watch_web",
        ];
        let dir = std::env::temp_dir().join(format!("cli-options-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cell.trace"), "1\n2\n").unwrap();
        let c = command();
        let shell = c.find_subcommand("shell").unwrap();
        let mut lab_options = 0;
        for a in shell.get_arguments() {
            let id = a.get_id().as_str();
            if run_only.contains(&id) {
                let long = a.get_long().map(|l| format!("`--{l}"));
                let short = a.get_short().map(|c| format!("`-{c}"));
                if long.is_some() || short.is_some() {
                    assert!(
                        [long, short]
                            .iter()
                            .flatten()
                            .any(|n| guide.contains(n.as_str())),
                        "shell --{id} not in docs/guide.md"
                    );
                }
                continue;
            }
            lab_options += 1;
            let o = labnet::options::find(id)
                .unwrap_or_else(|| panic!("shell --{id} is not in labnet's option table"));
            use labnet::options::Form;
            let value = match o.form {
                Form::Flag => "true".to_string(),
                Form::U32 | Form::U64 | Form::ZeroOne => o.example.to_string(),
                _ => format!("'{}'", o.example),
            };
            let nat64 = if id.starts_with("clat") {
                "nat64 = true\n"
            } else {
                ""
            };
            let text = format!("[shell]\ncommand = 'true'\n{nat64}[axes]\n{id} = [{value}]\n");
            if let Err(e) = sweep::SweepFile::parse(&text, &dir) {
                panic!("shell --{id} cannot be swept: {e}");
            }
            assert!(
                block.contains(&format!("`--{id}")),
                "shell --{id} is not in docs/guide.md's table"
            );
        }
        assert_eq!(lab_options, labnet::options::table().len());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The `LATENCYLAB_*` variables the engine reads change how it runs, not the lab: each is
    /// documented as a knob for developers, and none is read anywhere else unnoticed.
    #[test]
    fn every_environment_knob_the_lab_reads_is_documented_for_developers() {
        let guide = repo_file("docs/guide.md");
        let (_, knobs) = guide
            .split_once("### Knobs for developers")
            .expect("docs/guide.md has no 'Knobs for developers' section");
        let knobs = knobs.split("\n## ").next().unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut found = Vec::new();
        for krate in ["lab", "labnet", "link", "qdisc", "launcher", "sinks"] {
            let src = root.join("crates").join(krate).join("src");
            for f in std::fs::read_dir(&src).unwrap().flatten() {
                let text = std::fs::read_to_string(f.path()).unwrap_or_default();
                for part in text.split("var(\"LATENCYLAB_").skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    found.push(format!("LATENCYLAB_{name}"));
                }
                for part in text.split("var_os(\"LATENCYLAB_").skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                        .collect();
                    found.push(format!("LATENCYLAB_{name}"));
                }
            }
        }
        assert!(found.len() >= 5, "{found:?}");
        for k in &found {
            assert!(
                knobs.contains(&format!("`{k}")),
                "{k} is read but not in the guide's knobs"
            );
        }
    }

    #[test]
    fn every_shell_option_has_help() {
        let c = command();
        let shell = c.find_subcommand("shell").unwrap();
        for a in shell.get_arguments() {
            let id = a.get_id().as_str();
            assert!(
                a.get_help().is_some() || matches!(id, "help" | "command"),
                "shell --{id} has no help text"
            );
        }
        let run = c.find_subcommand("run").unwrap();
        for a in run.get_arguments() {
            assert!(
                a.get_help().is_some(),
                "run --{} has no help text",
                a.get_id()
            );
        }
    }

    /// The smallest command line of each subcommand that parses (its required arguments).
    fn minimal_args(name: &str) -> Vec<&str> {
        let mut v = vec!["latencylab", name];
        v.extend(match name {
            "run" | "analyze" => &["FILE"][..],
            "demo" => &["bufferbloat"][..],
            "sweep" => &["FILE", "-o", "DIR"][..],
            _ => &[][..],
        });
        v
    }

    #[test]
    fn exactly_the_lab_commands_enter_a_user_namespace_or_start_children_that_do() {
        let c = command();
        let mut checked = 0;
        for sub in c.get_subcommands() {
            let name = sub.get_name();
            let Ok(m) = command().try_get_matches_from(minimal_args(name)) else {
                // Traffic programs with required arguments are not lab commands.
                assert!(!LAB_COMMANDS.contains(&name), "{name} did not parse");
                continue;
            };
            let cli = Cli::from_arg_matches(&m).unwrap();
            let lab = LAB_COMMANDS.contains(&name);
            // `sweep` runs each lab as a `latencylab` child (a lab command itself).
            assert_eq!(
                enters_user_namespace(&cli.command),
                lab && name != "sweep",
                "{name}"
            );
            checked += 1;
        }
        assert!(checked >= LAB_COMMANDS.len() + 2, "only {checked} parsed");
    }

    /// The user-facing files: README, docs (not the performance notes), examples, the Python
    /// package.
    fn user_files() -> Vec<(String, String)> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let mut files = vec![root.join("README.md")];
        for dir in ["docs", "examples", "python/latencylab"] {
            for e in std::fs::read_dir(root.join(dir)).unwrap() {
                let p = e.unwrap().path();
                let ext = p.extension().and_then(|e| e.to_str());
                if matches!(ext, Some("md" | "toml" | "py")) && !p.ends_with("PERFORMANCE.md") {
                    files.push(p);
                }
            }
        }
        files
            .into_iter()
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                (p.display().to_string(), text)
            })
            .collect()
    }

    #[test]
    fn the_docs_state_one_privilege_rule_naming_exactly_the_lab_commands() {
        let files = user_files();
        // The statement, where it is made: "The lab commands (`shell`, ..., `sweep`)".
        let mut statements = 0;
        for (path, text) in &files {
            let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
            for (i, _) in flat.match_indices("lab commands (") {
                let rest = &flat[i + "lab commands (".len()..];
                let list = &rest[..rest.find(')').unwrap()];
                let mut named: Vec<&str> = list.split(", ").map(|n| n.trim_matches('`')).collect();
                named.sort_unstable();
                let mut want = LAB_COMMANDS.to_vec();
                want.sort_unstable();
                assert_eq!(named, want, "{path}: the list of lab commands");
                statements += 1;
            }
        }
        assert!(statements >= 2, "README and guide state the rule");
        // No page tells a user that a lab command needs root or sudo.
        for (path, text) in &files {
            for (n, line) in text.lines().enumerate() {
                let l = line.to_lowercase();
                let cmd = l.trim_start_matches(['#', ' ', '$']);
                let sudo_first =
                    cmd.starts_with("sudo latencylab") || cmd.starts_with("sudo python");
                let needs_root = (l.contains("need root") || l.contains("needs root"))
                    && !l.contains("never need root");
                assert!(!sudo_first && !needs_root, "{path}:{}: {line}", n + 1);
            }
        }
        let help = command().render_long_help().to_string();
        assert!(!help.contains("sudo latencylab"), "{help}");
        for sub in command().get_subcommands_mut() {
            let h = sub.render_long_help().to_string();
            assert!(!h.contains("sudo latencylab"), "{}: {h}", sub.get_name());
        }
    }

    #[test]
    fn the_readme_table_names_every_command() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let table = &readme[readme
            .find("## Every command")
            .expect("the table's heading")..];
        for sub in command().get_subcommands() {
            let name = sub.get_name();
            assert!(
                table.contains(&format!("| `{name}")) || table.contains(&format!(", `{name}`")),
                "README.md's table of commands lacks {name}"
            );
        }
    }
}

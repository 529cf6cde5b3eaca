//! How a lab starts the responsiveness test, whichever way it is asked for (a run file's
//! `[rpm]`, `latencylab shell --rpm`): the hosts of its two ends, the server's command, and the
//! client's URL, port, options and report path, written once here for both. What the test
//! measures and how is the `rpm` crate's, not this module's; when the programs start and what
//! is printed after are the callers'.
//!
//! The `rpm` crate depends on this one, so its `rpm::algorithm::Load` cannot be used here:
//! [`Load`] is its twin, read once from a run file's word, and a test in the `rpm` crate parses
//! the command lines made here with the client's own options, for every load.

use std::borrow::Cow;
use std::path::Path;

use wire::units::format_duration_exact;
use wire::Duration;

use crate::programs::sh_word;
use crate::run_dir::RunDir;

/// The names of the two programs a run file's `[rpm]` adds: `rpm-server` on its server host
/// and `rpm` on its client host, whose report is the run directory's `rpm.json`.
pub const RPM_SERVER_PROGRAM: &str = "rpm-server";
pub const RPM_PROGRAM: &str = "rpm";
/// The port `rpm-server` listens on in a lab.
pub const RPM_PORT: u16 = 4043;

/// Which directions the test loads (`rpm --load`, `[rpm]`'s `load`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Load {
    Both,
    Down,
    Up,
}

impl Load {
    pub const ALL: [Load; 3] = [Load::Both, Load::Down, Load::Up];

    /// The word of `rpm --load` and of `[rpm]`'s `load`.
    pub fn word(self) -> &'static str {
        match self {
            Load::Both => "both",
            Load::Down => "down",
            Load::Up => "up",
        }
    }

    /// The load a [`Load::word`] names; `None` for any other text.
    pub fn from_word(s: &str) -> Option<Load> {
        Load::ALL.into_iter().find(|l| l.word() == s)
    }

    /// The words, as a message offers them: `both, down or up`.
    pub fn words() -> String {
        let words = Load::ALL.map(Load::word);
        let (last, rest) = words.split_last().expect("a load at least");
        format!("{} or {last}", rest.join(", "))
    }
}

/// The test as a lab runs it: where its two ends run, and the client's options (`None`: the
/// client's default).
#[derive(Clone, Debug, PartialEq)]
pub struct RpmInLab {
    /// The host that runs `rpm`.
    pub client: String,
    /// The host that runs `rpm-server`; the client reaches it by this name.
    pub server: String,
    /// `rpm --flows`: exactly this many load-generating connections each way.
    pub flows: Option<u16>,
    /// `rpm --load`.
    pub load: Option<Load>,
    /// `rpm --max-duration`.
    pub max_duration: Option<Duration>,
    /// `rpm --seed`: which load-generating connection each self probe goes on.
    pub seed: Option<u64>,
}

impl Default for RpmInLab {
    /// Between the two hosts of `latencylab shell`'s lab, which are also `[rpm]`'s defaults,
    /// with the client's own defaults.
    fn default() -> RpmInLab {
        RpmInLab {
            client: "client".into(),
            server: "server".into(),
            flows: None,
            load: None,
            max_duration: None,
            seed: None,
        }
    }
}

impl RpmInLab {
    /// `EXE rpm-server --port 4043`.
    pub fn server_argv(&self, exe: &str) -> Vec<String> {
        vec![
            exe.into(),
            "rpm-server".into(),
            "--port".into(),
            RPM_PORT.to_string(),
        ]
    }

    /// [`RpmInLab::server_argv`] as a shell line, which a lab runs with `sh -c`.
    pub fn server_line(&self, exe: &str) -> String {
        exec_line(&self.server_argv(exe))
    }

    /// `EXE rpm https://SERVER:4043` and the options set, with no report file.
    fn client_words(&self, exe: &str) -> Vec<String> {
        let mut argv = vec![
            exe.into(),
            "rpm".into(),
            format!("https://{}:{RPM_PORT}", self.server),
        ];
        if let Some(n) = self.flows {
            argv.extend(["--flows".into(), n.to_string()]);
        }
        if let Some(l) = self.load {
            argv.extend(["--load".into(), l.word().into()]);
        }
        if let Some(d) = self.max_duration {
            argv.extend(["--max-duration".into(), format_duration_exact(d)]);
        }
        if let Some(n) = self.seed {
            argv.extend(["--seed".into(), n.to_string()]);
        }
        argv
    }

    /// The client's command, writing its report into the run directory `run_dir`.
    pub fn client_argv(&self, exe: &str, run_dir: &Path) -> Vec<String> {
        let mut argv = self.client_words(exe);
        let report = RunDir::new(run_dir).rpm_json();
        argv.extend(["--out".into(), report.to_string_lossy().into_owned()]);
        argv
    }

    /// The client as a program's shell line: its report goes into the run directory when the
    /// lab has one (`$LATENCYLAB_OUT` is set and not empty), and nowhere otherwise.
    pub fn client_line(&self, exe: &str) -> String {
        let report = RunDir::new("$LATENCYLAB_OUT").rpm_json();
        format!(
            "{} ${{LATENCYLAB_OUT:+--out \"{}\"}}",
            exec_line(&self.client_words(exe)),
            report.display()
        )
    }
}

/// `exec` and the words, each quoted for `sh` where it needs to be; bare words stay bare, so
/// that the line reads as a person would write it (`exec latencylab rpm-server --port 4043`).
fn exec_line(argv: &[String]) -> String {
    let words: Vec<Cow<str>> = argv.iter().map(|w| sh_word(w)).collect();
    format!("exec {}", words.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `sh` makes of `line` once its leading `exec EXE` is replaced by a printer: the
    /// words it would have run EXE with, each between bars.
    fn words_run(line: &str, exe: &str, out_dir: &str) -> String {
        let prefix = format!("exec {}", sh_word(exe));
        assert!(line.starts_with(&prefix), "{line}");
        let line = line.replacen(&prefix, "printf '|%s'", 1);
        let o = std::process::Command::new("sh")
            .args(["-c", &format!("{line}; echo '|'")])
            .env("LATENCYLAB_OUT", out_dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim_end().to_string()
    }

    #[test]
    fn every_load_reads_back_from_its_word_and_nothing_else_reads() {
        for l in Load::ALL {
            assert_eq!(Load::from_word(l.word()), Some(l));
        }
        for w in ["", "Both", "down ", "sideways", "updown"] {
            assert_eq!(Load::from_word(w), None, "{w:?}");
        }
        assert_eq!(Load::words(), "both, down or up");
    }

    #[test]
    fn the_default_client_runs_against_server_with_only_its_report_path() {
        let t = RpmInLab::default();
        assert_eq!((t.client.as_str(), t.server.as_str()), ("client", "server"));
        assert_eq!(
            t.client_argv("/opt/ll/latencylab", Path::new("/tmp/run 1")),
            [
                "/opt/ll/latencylab",
                "rpm",
                "https://server:4043",
                "--out",
                "/tmp/run 1/rpm.json"
            ]
        );
        assert_eq!(
            t.server_line("latencylab"),
            "exec latencylab rpm-server --port 4043"
        );
    }

    #[test]
    fn the_clients_options_follow_its_url_in_both_of_its_forms() {
        let t = RpmInLab {
            client: "laptop".into(),
            server: "cdn".into(),
            flows: Some(4),
            load: Some(Load::Down),
            max_duration: Some(Duration::from_millis(2500)),
            seed: Some(7),
        };
        let options = [
            "--flows",
            "4",
            "--load",
            "down",
            "--max-duration",
            "2500ms",
            "--seed",
            "7",
        ];
        let argv = t.client_argv("latencylab", Path::new("out"));
        assert_eq!(argv[2], "https://cdn:4043");
        assert_eq!(argv[3..11], options);
        assert_eq!(argv[11..], ["--out", "out/rpm.json"]);
        // The program's line: the same words, and the report only where there is a run
        // directory to put it in.
        let line = t.client_line("latencylab");
        let words = format!("|rpm|https://cdn:4043|{}", options.join("|"));
        assert_eq!(
            words_run(&line, "latencylab", "/tmp/x y"),
            format!("{words}|--out|/tmp/x y/rpm.json|")
        );
        assert_eq!(words_run(&line, "latencylab", ""), format!("{words}|"));
    }

    #[test]
    fn a_path_with_spaces_or_quotes_reaches_the_program_as_one_word() {
        let exe = "/home/o'neil/my bin/latencylab";
        let t = RpmInLab::default();
        let line = t.server_line(exe);
        assert_eq!(words_run(&line, exe, ""), "|rpm-server|--port|4043|");
        // The whole server line, executable and all, through sh to a printer named as it.
        let printed = std::process::Command::new("sh")
            .args(["-c", &line.replacen("exec ", "printf '|%s' ", 1)])
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&printed.stdout),
            format!("|{exe}|rpm-server|--port|4043")
        );
    }
}

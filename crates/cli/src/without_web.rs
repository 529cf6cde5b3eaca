//! What a build without the `web` feature (`./scripts/demo`'s quick first build) says when it
//! is asked for what it leaves out: the web programs and the responsiveness test.

/// The subcommands only a build with the `web` feature has.
pub const WEB_COMMANDS: [&str; 4] = ["web-server", "page-load", "rpm-server", "rpm"];

/// Whether this binary has them.
pub const BUILT: bool = cfg!(feature = "web");

/// Whether a program's command line (as a lab runs it) starts one of them.
pub fn runs_web_program(command: &str) -> bool {
    let words: Vec<&str> = command.split_whitespace().collect();
    words.windows(2).any(|w| {
        (w[0] == "latencylab" || w[0].ends_with("/latencylab")) && WEB_COMMANDS.contains(&w[1])
    })
}

/// The one-line answer to `WHAT`, which needs them.
pub fn not_built(what: &str) -> lab::UsageError {
    lab::UsageError(format!(
        "{what} needs the web programs ({}), which this build leaves out (./scripts/demo \
         builds without them, to be quick): ./scripts/install or `cargo build --release -p \
         latencylab` builds them",
        WEB_COMMANDS.join(", ")
    ))
}

/// The answer to a subcommand clap did not know, in a build without them.
#[cfg(not(feature = "web"))]
pub fn missing(name: &str) -> lab::UsageError {
    if WEB_COMMANDS.contains(&name) {
        not_built(&format!("`latencylab {name}`"))
    } else {
        lab::UsageError(format!(
            "unrecognized subcommand '{name}' (`latencylab --help` lists the commands)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_that_runs_a_web_command_is_found_in_its_command_line() {
        assert!(runs_web_program(
            "exec latencylab page-load http://server/ --per-host 6"
        ));
        assert!(runs_web_program("/usr/local/bin/latencylab rpm-server"));
        assert!(runs_web_program(
            "latencylab rpm https://server:4043 --json"
        ));
        assert!(!runs_web_program("exec latencylab probe-client server"));
        assert!(!runs_web_program("curl http://server/page-load"));
        assert!(!runs_web_program("latencylab"));
    }

    #[test]
    fn every_demo_that_starts_a_web_program_is_found_by_its_runs() {
        // The demos as declared, with their defaults: the ones that run a web program are
        // the ones a build without them refuses up front.
        let dir = std::env::temp_dir().join(format!("ll-without-web-{}", std::process::id()));
        let mut found = Vec::new();
        for d in demo::params::DEMOS {
            let a = demo::params::Args::new(d, dir.join(d.name));
            let runs = (d.runs)(&a).unwrap();
            if runs
                .iter()
                .any(|r| r.config.programs.iter().any(|p| runs_web_program(&p.run)))
            {
                found.push(d.name);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
        for web in [
            "http-parallel",
            "pipelining",
            "conn-reuse",
            "hol-blocking",
            "responsiveness",
        ] {
            assert!(found.contains(&web), "{web} not found among {found:?}");
        }
        assert!(!found.contains(&"bufferbloat"), "{found:?}");
    }
}

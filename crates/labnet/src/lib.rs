//! The pure core of a lab: what a lab is, as typed values parsed once at the edge and checked
//! completely before anything is created. No sockets, clocks, threads or file reads: the
//! shell (`lab`) reads files and hands their text in.
//!
//! Layout: [`spec`] (hosts, links, schedule, validation, names), [`setting`] (the settings of
//! a link direction, one table for options, run files, changes and `lab.json`), [`options`]
//! (the one table of `latencylab shell`'s options, from which its flags, the sweep's axes and
//! the docs' table come), [`shell`] (the two-host preset of `latencylab shell`), [`profiles`]
//! (named networks), [`run_file`] (the TOML run file; [`run_file_text`] writes a lab back as
//! one), [`rpm_lab`] (how a lab starts the responsiveness test, for `[rpm]` and `shell --rpm`),
//! [`run_dir`] (what a run leaves on disk: paths, the link-log line, the summary), [`translator`] and
//! [`dns_tcp`] (the NAT64 and DNS64 endpoints of a NAT64 lab), [`clat`] (its hosts' CLATs), [`forwarder`] (the lab's
//! network as a state machine), [`schedule`] (program starts, link changes, the lab's end),
//! [`lifecycle`] (the real-time loop's stop rules, waits and scheduling policy), [`programs`]
//! (the programs of a running lab, their environment), [`messages`] (what a lab says on
//! stderr), [`system`] (names, sysctls, checks and `/proc` readings of the shell) and [`sim`]
//! (whole labs in simulated time).

pub mod clat;
pub mod dns_tcp;
pub mod forwarder;
pub mod lifecycle;
pub mod live;
pub mod messages;
pub mod options;
pub mod profiles;
pub mod programs;
pub mod rpm_lab;
pub mod run_dir;
pub mod run_file;
pub mod run_file_text;
pub mod schedule;
pub mod setting;
pub mod shell;
pub mod sim;
pub mod spec;
pub mod system;
pub mod translator;

pub use setting::{Direction, Files, Setting};
pub use spec::{LabConfig, UsageError};

/// The fuzz target `lab_spec` and its proptest twin: `text` as a run file (its traces, if
/// any, missing) and as a link log. Either may fail; neither may panic.
#[doc(hidden)]
pub fn fuzz_entry(text: &str) {
    let _ = run_file::parse_run_file(
        "fuzz.toml",
        text,
        std::path::Path::new(""),
        None,
        &setting::no_files,
    );
    let _ = run_dir::parse_link_log("fuzz.log", text);
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn arbitrary_text_as_a_run_file_or_a_link_log_never_panics(s in "\\PC{0,300}") {
            super::fuzz_entry(&s);
        }

        #[test]
        fn run_file_like_text_never_panics(
            key in "(rate|trace|delay|rtt|loss|queue|overhead|bleach_ecn|state|at|direction)",
            value in "[-0-9a-z%. ]{0,20}",
        ) {
            let text = format!(
                "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\nname = \"l\"\na = \"a\"\nb = \"b\"\n{key} = \"{value}\"\n[[change]]\nat = \"{value}\"\nlink = \"l\"\n{key} = \"{value}\"\n"
            );
            super::fuzz_entry(&text);
        }
    }
}

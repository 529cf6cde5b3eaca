//! Responsiveness under working conditions, in round trips per minute (RPM), as
//! draft-ietf-ippm-responsiveness-09 defines it.
//!
//! - [`algorithm`]: the draft's arithmetic as a state machine in simulated time (pure).
//! - [`config`]: the `/.well-known/nq` configuration document (pure).
//! - [`report`]: the client's JSON report and its text summary (pure).
//! - [`attribution`]: a lab run's loaded round trip taken apart by queue (pure).
//! - [`server`], [`client`]: `latencylab rpm-server` and `latencylab rpm` (tokio, hyper,
//!   rustls; one thread each).
//! - [`socket`]: their TCP connections, kept to a few milliseconds of unsent data.

pub mod algorithm;
pub mod attribution;
#[cfg(feature = "net")]
pub mod client;
pub mod config;
pub mod report;
pub mod run;
#[cfg(feature = "net")]
pub mod server;
#[cfg(feature = "net")]
pub mod socket;

use std::fmt;
use std::os::fd::AsRawFd;
#[cfg(feature = "net")]
use std::process::ExitCode;

/// A bad option: the CLI prints it and exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The header of the server's answer to `/small` that holds when the request reached it, in
/// nanoseconds of CLOCK_MONOTONIC. Not part of the draft; a client ignores it unless it shares
/// the server's clock (in a lab, every host does).
pub const RECEIVED_HEADER: &str = "x-received-monotonic-ns";

/// CLOCK_MONOTONIC in nanoseconds: the lab's clock too.
pub fn monotonic_ns() -> u64 {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always readable");
    t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
}

/// TCP_NOTSENT_LOWAT of the test's connections at the start; a connection that sends load
/// then keeps it at 5 ms of its own rate ([`socket::Paced`]).
pub const NOTSENT_LOWAT_BYTES: u32 = 16 * 1024;

/// Bytes of a stream's data HTTP/2 may hold above the socket, at either end, and the size of
/// the chunks the load's bodies hand it. hyper's default (400 KB) is seconds of data for one of
/// sixteen flows sharing a few Mbit/s; 4 KiB is 18 ms of such a flow's 230 kB/s (draft section
/// 6.1.1: keep what a request waits behind in the sender to a few milliseconds).
pub const H2_SEND_BUFFER_BYTES: usize = 4 * 1024;

/// Bytes of TLS records rustls may hold above the socket, at either end. Its default (64 KiB)
/// sits between HTTP/2 and the socket, which [`socket::Paced`] keeps to 5 ms of data, so that
/// the rest of a sender's backlog would pile up here instead: a second for one of sixteen
/// flows sharing 20 Mbit/s.
pub const TLS_BUFFER_BYTES: usize = 4 * 1024;

/// The least low-water mark: four full-size TCP segments of a 1500-byte MTU. A connection
/// writes when less than half its mark is unsent ([`socket::Paced`]), so this keeps two full
/// segments ready for each acknowledgement that opens the window; with less, a slow connection
/// (with TCP_NODELAY, as the test's are) sends the short remainders as packets of their own,
/// half its packets under full size on a 1 Mbit/s uplink shared by four.
pub const MIN_LOWAT_BYTES: u32 = 4 * 1448;

/// TCP_NOTSENT_LOWAT for a connection sending `bytes_per_s`: 5 ms of it (draft section
/// 6.1.1: "multiply this by 5 ms to get the desired buffer size"), at least
/// [`MIN_LOWAT_BYTES`] and at most 4 MiB.
pub fn lowat_for_rate(bytes_per_s: f64) -> u32 {
    (bytes_per_s * 0.005).clamp(MIN_LOWAT_BYTES as f64, 4.0 * 1024.0 * 1024.0) as u32
}

/// Sets TCP_NOTSENT_LOWAT (0 leaves the system's default). A failure only costs
/// responsiveness, so it is not an error.
pub fn set_notsent_lowat(s: &impl AsRawFd, bytes: u32) {
    if bytes == 0 {
        return;
    }
    let v = bytes as libc::c_int;
    // SAFETY: a valid descriptor, and a pointer to a c_int with its exact length.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_NOTSENT_LOWAT,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_low_water_mark_is_five_ms_of_the_rate_within_bounds() {
        // 100 Mbit/s: 62 500 bytes, the draft's own example.
        assert_eq!(lowat_for_rate(12_500_000.0), 62_500);
        assert_eq!(lowat_for_rate(125_000.0), MIN_LOWAT_BYTES);
        assert_eq!(lowat_for_rate(1e12), 4 * 1024 * 1024);
    }

    /// A lab writes its own command lines for the test (`labnet::rpm_lab`, which cannot use
    /// this crate's types); they must be ones the two subcommands read as meant.
    #[cfg(feature = "net")]
    #[test]
    fn a_labs_command_lines_are_read_by_the_subcommands_as_meant_for_every_load() {
        use clap::{Parser, ValueEnum};
        use labnet::rpm_lab::{self, RpmInLab};
        use std::path::Path;

        #[derive(Parser)]
        struct Cli {
            #[command(subcommand)]
            command: RpmCommand,
        }
        let parse = |argv: Vec<String>| {
            Cli::try_parse_from(&argv)
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
                .command
        };

        // The client's words for a load and the lab's are the same words, both ways.
        let cli_words: Vec<String> = algorithm::Load::value_variants()
            .iter()
            .map(|l| l.to_possible_value().unwrap().get_name().to_string())
            .collect();
        let lab_words: Vec<&str> = rpm_lab::Load::ALL.iter().map(|l| l.word()).collect();
        assert_eq!(cli_words, lab_words);

        for load in rpm_lab::Load::ALL {
            let test = RpmInLab {
                client: "laptop".into(),
                server: "cdn".into(),
                flows: Some(8),
                load: Some(load),
                max_duration: Some(wire::Duration::from_millis(2500)),
                seed: Some(7),
            };
            let RpmCommand::Rpm(a) = parse(test.client_argv("latencylab", Path::new("run"))) else {
                panic!("not the client")
            };
            assert_eq!(a.url, "https://cdn:4043");
            assert_eq!(a.flows, Some(8));
            assert_eq!(a.load.name(), load.word());
            assert_eq!(a.max_duration, wire::Duration::from_millis(2500));
            assert_eq!(a.seed, 7);
            assert_eq!(a.out.as_deref(), Some(Path::new("run/rpm.json")));
        }
        // Unset, the client's own defaults apply.
        let test = RpmInLab::default();
        let RpmCommand::Rpm(a) = parse(test.client_argv("latencylab", Path::new("run"))) else {
            panic!("not the client")
        };
        assert_eq!(
            (a.url.as_str(), a.flows, a.load),
            ("https://server:4043", None, algorithm::Load::Both)
        );
        let RpmCommand::RpmServer(s) = parse(test.server_argv("latencylab")) else {
            panic!("not the server")
        };
        assert_eq!(s.port, rpm_lab::RPM_PORT);
    }
}

#[cfg(feature = "net")]
#[derive(clap::Subcommand, Clone, Debug)]
pub enum RpmCommand {
    /// Serve the responsiveness test (draft-ietf-ippm-responsiveness): /.well-known/nq,
    /// small, large and upload, over HTTP/2 and HTTP/1.1 with TLS
    #[command(
        after_help = "Examples:\n  latencylab rpm-server\n  latencylab rpm-server --port 443 --ca-out ca.pem\n\nThe configuration is at https://HOST:PORT/.well-known/nq; any host name the client uses is\nechoed in its URLs."
    )]
    RpmServer(server::RpmServerArgs),
    /// Measure responsiveness under working conditions in RPM against a test server
    #[command(
        after_help = "Examples:\n  latencylab rpm https://server:4043\n  latencylab rpm https://server:4043 --flows 8 --json > rpm.json\n  latencylab shell --down 20mbit --up 20mbit --rtt 20ms --rpm"
    )]
    Rpm(client::RpmArgs),
}

#[cfg(feature = "net")]
pub fn run(cmd: RpmCommand) -> anyhow::Result<ExitCode> {
    let r = match &cmd {
        RpmCommand::RpmServer(a) => server::run(a),
        RpmCommand::Rpm(a) => client::run(a),
    };
    r.map(|()| ExitCode::SUCCESS)
}

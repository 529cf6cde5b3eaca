//! Responsiveness under working conditions, in round trips per minute (RPM), as
//! draft-ietf-ippm-responsiveness-09 defines it.
//!
//! - [`algorithm`]: the draft's arithmetic as a state machine in simulated time (pure).
//! - [`config`]: the `/.well-known/nq` configuration document (pure).
//! - [`report`]: the client's JSON report and its text summary (pure).
//! - [`attribution`]: a lab run's loaded round trip taken apart by queue (pure).
//! - [`server`], [`client`]: `latencylab rpm-server` and `latencylab rpm` (tokio, hyper,
//!   rustls; one thread each).

pub mod algorithm;
pub mod attribution;
pub mod client;
pub mod config;
pub mod report;
pub mod server;

use std::fmt;
use std::os::fd::AsRawFd;
use std::process::ExitCode;

/// A bad option: `run` prints it and exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// TCP_NOTSENT_LOWAT of the test's connections by default: draft section 6.1.1 asks for
/// about 5 ms of unsent data at the connection's rate; 16 KiB is 5 ms at 26 Mbit/s, and
/// little more than a packet's worth of delay at the rates labs usually emulate.
pub const NOTSENT_LOWAT_BYTES: u32 = 16 * 1024;

/// Bytes of a stream's data HTTP/2 may hold above the socket, at either end. hyper's default
/// (400 KB) is seconds of data for one of sixteen flows sharing a few Mbit/s.
pub const H2_SEND_BUFFER_BYTES: usize = 64 * 1024;

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
        after_help = "Examples:\n  latencylab rpm https://server:4043\n  latencylab rpm https://server:4043 --flows 8 --json > rpm.json\n  sudo latencylab shell --down 20mbit --up 20mbit --rtt 20ms --rpm"
    )]
    Rpm(client::RpmArgs),
}

pub fn run(cmd: RpmCommand) -> anyhow::Result<ExitCode> {
    let r = match &cmd {
        RpmCommand::RpmServer(a) => server::run(a),
        RpmCommand::Rpm(a) => client::run(a),
    };
    match r {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) => match e.downcast_ref::<UsageError>() {
            Some(u) => {
                eprintln!("latencylab: {u}");
                Ok(ExitCode::from(2))
            }
            None => Err(e),
        },
    }
}

//! apps: the reference traffic programs that users run inside lab hosts (or on any network):
//! bulk TCP, a streaming-video sender with a playback-buffer receiver, latency probes over TCP
//! and UDP, and an L4S-capable video call over UDP. Each writes its measurements as JSON lines
//! ([`records`]), stops by itself (`--duration`) or on SIGTERM/Ctrl-C, and is reachable as a
//! `latencylab` subcommand through [`AppCommand`].
//!
//! The measurement logic that can be pure is pure and tested in simulated time ([`stats`],
//! [`playback`], the call's packet formats and accounting); the rest is a thin layer of std
//! sockets and threads. Nothing here builds networks: the `lab` crate runs these programs in
//! its hosts.
//!
//! For the CLI: flatten [`AppCommand`] into the `latencylab` subcommands and call [`run`].
//! For the demos: [`read_records`] / [`parse_records`] read a program's `--out` file back as
//! [`Record`]s, [`Percentiles::of`] summarises samples. Schemas and options: `docs/apps.md`.

pub mod bulk;
pub mod call;
pub mod chunk;
pub mod common;
pub mod fallback;
pub mod nat64_sample;
pub mod playback;
pub mod probe;
pub mod records;
pub mod rr;
pub mod screen;
pub mod stats;
pub mod stream;
mod sys;
pub mod tfo;

use std::process::ExitCode;

pub use records::{parse_records, read_records, Record};
pub use stats::{percentile_sorted, Percentiles};

/// The programs, as subcommands; the `latencylab` CLI flattens this enum into its own.
#[derive(clap::Subcommand, Clone, Debug)]
pub enum AppCommand {
    /// Bulk TCP server: sends or receives for as long as each client asks.
    #[command(after_help = "Example:\n  latencylab bulk-server --port 5201 --out server.jsonl")]
    BulkServer(bulk::BulkServerArgs),
    /// Bulk TCP client: downloads (or uploads) for --duration, reports goodput per interval.
    #[command(
        after_help = "Example:\n  latencylab bulk-client server:5201 --direction download --duration 10s --out bulk.jsonl"
    )]
    BulkClient(bulk::BulkClientArgs),
    /// Latency probe server: echoes TCP and UDP probes on one port.
    #[command(after_help = "Example:\n  latencylab probe-server --port 5202")]
    ProbeServer(probe::ProbeServerArgs),
    /// Latency probe client: a small TCP request/response and a UDP ping, every RTT a line.
    #[command(
        after_help = "Example:\n  latencylab probe-client server:5202 --interval 100ms --duration 30s --out probe.jsonl"
    )]
    ProbeClient(probe::ProbeClientArgs),
    /// Streaming video server: writes chunks of bitrate × chunk on the media schedule asked for.
    #[command(after_help = "Example:\n  latencylab stream-server --port 5203")]
    StreamServer(stream::StreamServerArgs),
    /// Streaming video client: a playback-buffer model, stalls, and the gaps between reads.
    #[command(
        after_help = "Example:\n  latencylab stream-client server:5203 --bitrate 8mbit --chunk 250ms --ahead 30s --duration 30s --out stream.jsonl"
    )]
    StreamClient(stream::StreamClientArgs),
    /// Video call over UDP with an L4S-capable transport (ECT(1), CE feedback, ECN validation).
    #[command(
        after_help = "Example:\n  latencylab call --connect server:6000 --mode l4s --max-rate 8mbit --duration 30s --out call.jsonl\n\nThe other endpoint: latencylab call --listen 6000 --mode l4s --duration 40s"
    )]
    Call(call::CallArgs),
    /// Screen-sharing server: sends frames drawing the latest click, unbounded or with
    /// TCP_NOTSENT_LOWAT, and samples its unsent bytes.
    #[command(
        after_help = "Example:\n  latencylab screen-server --mode lowat --lowat 16kb --sndbuf 120kb --out screen-server.jsonl"
    )]
    ScreenServer(screen::ScreenServerArgs),
    /// Screen-sharing viewer: clicks at seeded random moments, measures click-to-frame.
    #[command(
        after_help = "Example:\n  latencylab screen-viewer server:5204 --click-every 1s --duration 30s --out viewer.jsonl"
    )]
    ScreenViewer(screen::ScreenViewerArgs),
    /// Request/response server for TCP Fast Open: counts how often it acts on each request.
    #[command(after_help = "Example:\n  latencylab tfo-server --port 5205 --out tfo-server.jsonl")]
    TfoServer(tfo::TfoServerArgs),
    /// Request/response client: one request per connection, with or without TCP Fast Open.
    #[command(
        after_help = "Example:\n  latencylab tfo-client server:5205 --fastopen --count 30 --interval 200ms --out tfo.jsonl"
    )]
    TfoClient(tfo::TfoClientArgs),
    /// Request/response server: answers each whole 70-byte message, written as 28 + 42 bytes.
    #[command(after_help = "Example:\n  latencylab rr-server --port 5206 --nodelay")]
    RrServer(rr::RrServerArgs),
    /// Request/response client: 70-byte requests written as 28 + 42 bytes, each exchange timed.
    #[command(
        after_help = "Example:\n  latencylab rr-client server:5206 --interval 200ms --duration 20s --out rr.jsonl"
    )]
    RrClient(rr::RrClientArgs),
    /// Chunked upload receiver: a chosen receive buffer, optionally TCP_QUICKACK after every read.
    #[command(after_help = "Example:\n  latencylab chunk-server --rcvbuf 4096 --quickack")]
    ChunkServer(chunk::ChunkServerArgs),
    /// Chunked upload sender: writes --chunk bytes per write() as fast as the socket takes them.
    #[command(
        after_help = "Example:\n  latencylab chunk-client server:5207 --chunk 1000 --nodelay --duration 10s --out chunk.jsonl"
    )]
    ChunkClient(chunk::ChunkClientArgs),
    /// Request server for fallback-client: answers each 16-byte request; MPTCP where the
    /// kernel offers it, plain TCP otherwise.
    #[command(after_help = "Example:\n  latencylab fallback-server --port 5208")]
    FallbackServer(fallback::FallbackServerArgs),
    /// A request every second over two interfaces: plain connect, an RFC 8305 race with a
    /// Better Route probe, or one MPTCP connection.
    #[command(
        after_help = "Example:\n  latencylab fallback-client server:5208 --mode race --duration 25s --out f.jsonl"
    )]
    FallbackClient(fallback::FallbackClientArgs),
    /// A client that reaches a server the way one class of app does (getaddrinfo, an IPv4
    /// literal, AF_INET-only code, an "is IPv4 up?" preflight, RFC 7050 local synthesis), for
    /// IPv6-only networks; one line says what it did, exit 1 when it did not get through.
    #[command(
        after_help = "Example:\n  latencylab nat64-sample --class af-inet-only server 5202\n  latencylab nat64-sample --class local-synthesis 10.77.2.1 5202\n\nAny server that answers a short request works: an echo server (latencylab probe-server) or an HTTP server."
    )]
    Nat64Sample(nat64_sample::Nat64SampleArgs),
}

/// Runs one program. A usage error found after parsing (options that contradict each other)
/// is printed on stderr and gives exit status 2; other failures are returned with context.
pub fn run(cmd: AppCommand) -> anyhow::Result<ExitCode> {
    let r = match &cmd {
        AppCommand::BulkServer(a) => bulk::run_server(a),
        AppCommand::BulkClient(a) => bulk::run_client(a),
        AppCommand::ProbeServer(a) => probe::run_server(a),
        AppCommand::ProbeClient(a) => probe::run_client(a),
        AppCommand::StreamServer(a) => stream::run_server(a),
        AppCommand::StreamClient(a) => stream::run_client(a),
        AppCommand::Call(a) => call::run(a),
        AppCommand::ScreenServer(a) => screen::run_server(a),
        AppCommand::ScreenViewer(a) => screen::run_viewer(a),
        AppCommand::TfoServer(a) => tfo::run_server(a),
        AppCommand::TfoClient(a) => tfo::run_client(a),
        AppCommand::RrServer(a) => rr::run_server(a),
        AppCommand::RrClient(a) => rr::run_client(a),
        AppCommand::ChunkServer(a) => chunk::run_server(a),
        AppCommand::ChunkClient(a) => chunk::run_client(a),
        AppCommand::FallbackServer(a) => fallback::run_server(a),
        AppCommand::FallbackClient(a) => fallback::run_client(a),
        AppCommand::Nat64Sample(a) => nat64_sample::run(a),
    };
    match r {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.is::<nat64_sample::NotThrough>() => Ok(ExitCode::from(1)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    /// The way the `latencylab` CLI embeds the programs.
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        cmd: AppCommand,
    }

    #[test]
    fn bad_option_values_exit_with_status_2_and_are_quoted() {
        let err = Cli::try_parse_from([
            "latencylab",
            "stream-client",
            "server",
            "--bitrate",
            "8mbits",
        ])
        .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("'8mbits'"), "{err}");
        let err = Cli::try_parse_from(["latencylab", "bulk-client", "server", "--duration", "10"])
            .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("'10'"), "{err}");
    }

    #[test]
    fn a_call_needs_exactly_one_of_listen_and_connect() {
        let err = Cli::try_parse_from(["latencylab", "call"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        let err =
            Cli::try_parse_from(["latencylab", "call", "--listen", "6000", "--connect", "h:1"])
                .unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(Cli::try_parse_from(["latencylab", "call", "--listen", "6000"]).is_ok());
    }

    #[test]
    fn every_program_parses_its_documented_example_and_shows_it_in_help() {
        let mut cmd = Cli::command();
        for sub in cmd.get_subcommands_mut() {
            let help = sub.render_long_help().to_string();
            let example = help
                .lines()
                .skip_while(|l| !l.starts_with("Example:"))
                .nth(1)
                .unwrap_or_else(|| panic!("{} has no example:\n{help}", sub.get_name()))
                .trim()
                .to_string();
            let args: Vec<&str> = example.split_whitespace().collect();
            assert_eq!(args[1], sub.get_name());
            Cli::try_parse_from(&args).unwrap_or_else(|e| panic!("{example}: {e}"));
        }
    }
}

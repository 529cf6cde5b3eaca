//! latencylab's web programs: `web-server`, an HTTP/1.1 and HTTP/2 server (hyper, rustls)
//! that serves a page description under any of its host names, and `page-load`, a
//! browser-like client that loads such a page over connections it is told how to use, and
//! writes when each request was sent and answered.
//!
//! - [`page`]: the page description format, the HTML it renders to, the URLs an HTML
//!   references (pure).
//! - [`records`]: the JSON lines both programs write, and their reader (pure).
//! - [`connmgr`]: which request goes on which HTTP/1.1 connection, and when to open one
//!   (pure).
//! - [`netlog`]: Chromium's network log, read for what its socket pool did with each
//!   request (pure).
//! - [`tls`]: the lab-local CA and the rustls configurations.
//! - [`http3`]: HTTP/3 over QUIC (quinn, h3) for both programs.
//! - [`server`], [`client`]: the programs (tokio, one thread each).

#[cfg(feature = "net")]
pub mod client;
pub mod connmgr;
#[cfg(feature = "net")]
pub mod http3;
pub mod netlog;
pub mod page;
pub mod records;
#[cfg(feature = "net")]
pub mod server;
#[cfg(feature = "net")]
pub mod tls;

use std::fmt;
#[cfg(feature = "net")]
use std::io::Write;
#[cfg(feature = "net")]
use std::path::PathBuf;
#[cfg(feature = "net")]
use std::process::ExitCode;

#[cfg(feature = "net")]
use anyhow::Context;

pub use records::{read_records, WebRecord};

/// A bad option or input file: the CLI prints it and exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

#[cfg(feature = "net")]
#[derive(clap::Subcommand, Clone, Debug)]
pub enum WebCommand {
    /// Serve a page description over HTTP/1.1 and HTTP/2 (h2c, or h2 over TLS), and HTTP/3
    /// over QUIC with --tls --http3
    #[command(
        after_help = "Examples:\n  latencylab web-server --page examples/pages/portal.toml --port 8080\n  latencylab web-server --page examples/pages/portal.toml --port 8443 --tls --ca-out ca.pem\n  latencylab web-server --page examples/pages/article.toml --port 443 --tls --http3 --ca-out ca.pem"
    )]
    WebServer(server::WebServerArgs),
    /// Load a page like a browser: the HTML, then what it references, over the connections
    /// you choose
    #[command(
        after_help = "Examples:\n  latencylab page-load http://server/ --per-host 6 --out load.jsonl\n  latencylab page-load http://server/ --per-host 6 --pipeline 4\n  latencylab page-load https://server/ --http 2 --coalesce --ca ca.pem\n  latencylab page-load https://server/ --http 3 --ca ca.pem"
    )]
    PageLoad(client::PageLoadArgs),
}

#[cfg(feature = "net")]
pub fn run(cmd: WebCommand) -> anyhow::Result<ExitCode> {
    let r = match &cmd {
        WebCommand::WebServer(a) => server::run(a),
        WebCommand::PageLoad(a) => client::run(a),
    };
    r.map(|()| ExitCode::SUCCESS)
}

/// Where the JSON lines go: a file, or stdout. Every line is flushed, so that a server
/// stopped by a signal has written all it said.
#[cfg(feature = "net")]
pub struct Output(Box<dyn Write + Send>);

#[cfg(feature = "net")]
impl Output {
    pub fn open(path: Option<&PathBuf>) -> anyhow::Result<Output> {
        Ok(Output(match path {
            Some(p) => Box::new(
                std::fs::File::create(p)
                    .with_context(|| format!("--out: cannot create {}", p.display()))?,
            ),
            None => Box::new(std::io::stdout()),
        }))
    }

    pub fn emit(&mut self, r: &WebRecord) {
        // A full disk or a closed pipe loses lines, not the load.
        let _ = serde_json::to_writer(&mut self.0, r);
        let _ = self.0.write_all(b"\n");
        let _ = self.0.flush();
    }

    pub fn flush(&mut self) {
        let _ = self.0.flush();
    }
}

/// `host:port`, with brackets around an IPv6 address.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

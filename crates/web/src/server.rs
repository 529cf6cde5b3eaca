//! `latencylab web-server`: serves a page description over HTTP/1.1 (keep-alive; pipelined
//! requests are answered in order, RFC 9112 section 9.3.2) and HTTP/2 (prior knowledge over
//! cleartext, RFC 9113 section 3.3, or ALPN over TLS), and with `--http3` HTTP/3 over QUIC on
//! the same port number in UDP ([`crate::http3`]), announced on the TCP side with `Alt-Svc`
//! (RFC 7838 section 3). hyper and h3 do the protocols; this module maps paths to the page's
//! resources, waits each resource's think time, and sets up TLS.
//!
//! Any host name is answered: the page's names (`server`, `img1`, ...) are all meant to be
//! aliases of this one host, as a sharded site's are.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

use crate::page::Page;
use crate::records::WebRecord;
use crate::UsageError;

#[derive(clap::Args, Clone, Debug)]
pub struct WebServerArgs {
    /// The page description to serve (TOML; see docs/apps.md)
    #[arg(long, value_name = "FILE")]
    pub page: PathBuf,
    /// TCP port (0: any free port, printed in the `listening` line)
    #[arg(long, default_value_t = 80)]
    pub port: u16,
    /// Address to listen on (all addresses by default)
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Serve HTTPS (HTTP/2 or HTTP/1.1 by ALPN) with a certificate from a CA made at start
    #[arg(long)]
    pub tls: bool,
    /// With --tls: write the CA's certificate here (PEM), for clients to trust
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub ca_out: Option<PathBuf>,
    /// With --tls: write the server certificate's public key hash here, base64 of the
    /// SHA-256 of its SubjectPublicKeyInfo, as Chromium's
    /// --ignore-certificate-errors-spki-list takes it
    #[arg(long, value_name = "FILE", requires = "tls")]
    pub spki_out: Option<PathBuf>,
    /// With --tls: also serve HTTP/3 over QUIC on UDP, on the same port number, and announce
    /// it with Alt-Svc on the TCP side
    #[arg(long, requires = "tls")]
    pub http3: bool,
    /// With --http3: the order in which ready responses share the connection: sequential
    /// (one after another, as Chrome asks) or round-robin (a packet of each in turn)
    #[arg(long, value_enum, value_name = "ORDER", default_value = "round-robin")]
    pub scheduling: crate::http3::Scheduling,
    /// Write the JSON lines here instead of stdout
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// What the server answers: path to (content type, body, think time), and the headers it adds
/// to every answer.
pub struct Site {
    by_path: HashMap<String, (&'static str, Bytes, Duration)>,
    extra: Vec<(&'static str, String)>,
}

impl Site {
    pub fn new(p: &Page, scheme: &str, port: u16) -> Site {
        Site::with_headers(p, scheme, port, Vec::new())
    }

    /// [`Site::new`], adding `extra` headers to every answer.
    pub fn with_headers(
        p: &Page,
        scheme: &str,
        port: u16,
        extra: Vec<(&'static str, String)>,
    ) -> Site {
        let mut by_path = HashMap::new();
        by_path.insert(
            "/".to_string(),
            (
                p.html.kind.content_type(),
                Bytes::from(p.render_html(scheme, port)),
                Duration::from_millis(p.html.think_ms),
            ),
        );
        for r in &p.resources {
            by_path.insert(
                r.path.clone(),
                (
                    r.kind.content_type(),
                    Bytes::from(p.body_of(r, scheme, port)),
                    Duration::from_millis(r.think_ms),
                ),
            );
        }
        Site { by_path, extra }
    }

    /// The answer to `path`, after its think time: the head and the body.
    pub async fn lookup(&self, path: &str) -> (Response<()>, Bytes) {
        match self.by_path.get(path) {
            Some((ctype, body, think)) => {
                if !think.is_zero() {
                    tokio::time::sleep(*think).await;
                }
                let mut b = Response::builder()
                    .header("content-type", *ctype)
                    .header("cache-control", "no-store");
                for (k, v) in &self.extra {
                    b = b.header(*k, v.as_str());
                }
                (b.body(()).expect("valid headers"), body.clone())
            }
            None => (
                Response::builder()
                    .status(StatusCode::NOT_FOUND)
                    .body(())
                    .expect("constant headers"),
                Bytes::from_static(b"not in the page\n"),
            ),
        }
    }

    async fn answer(&self, req: Request<Incoming>) -> Response<Full<Bytes>> {
        let (head, body) = self.lookup(req.uri().path()).await;
        head.map(|()| Full::new(body))
    }
}

pub fn run(a: &WebServerArgs) -> Result<()> {
    let page = Page::load(&a.page).map_err(|e| UsageError(format!("--page: {e}")))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(a, page))
}

async fn serve(a: &WebServerArgs, page: Page) -> Result<()> {
    let bind = a.bind.as_deref().unwrap_or("::");
    let addr: SocketAddr = crate::join_host_port(bind, a.port)
        .parse()
        .map_err(|_| UsageError(format!("--bind: '{bind}' is not an IP address")))?;
    let listener = bind_dual(addr).with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    let mut quic = None;
    let tls = if a.tls {
        let mut names = page.hosts();
        for n in ["localhost", "127.0.0.1", "::1"] {
            names.push(n.to_string());
        }
        let id = crate::tls::make_identity(&names)?;
        if a.http3 {
            let cfg = crate::http3::server_config(&id, a.scheduling)?;
            let udp = SocketAddr::new(addr.ip(), local.port());
            quic = Some(
                quinn::Endpoint::server(cfg, udp)
                    .with_context(|| format!("listening on UDP {udp}"))?,
            );
        }
        // The files last, once the server can answer: a client waiting for them may start.
        if let Some(p) = &a.spki_out {
            std::fs::write(p, format!("{}\n", id.spki_sha256_base64))
                .with_context(|| format!("--spki-out: writing {}", p.display()))?;
        }
        if let Some(p) = &a.ca_out {
            std::fs::write(p, &id.ca_pem)
                .with_context(|| format!("--ca-out: writing {}", p.display()))?;
        }
        Some(tokio_rustls::TlsAcceptor::from(crate::tls::server_config(
            &id,
        )?))
    } else {
        None
    };
    let scheme = if a.tls { "https" } else { "http" };
    let mut extra = Vec::new();
    if quic.is_some() {
        // RFC 7838 section 3: the same host, this port, over h3, for a day.
        extra.push(("alt-svc", format!("h3=\":{}\"; ma=86400", local.port())));
        extra.push((crate::http3::SCHEDULING_HEADER, a.scheduling.name().into()));
    }
    let site = Arc::new(Site::with_headers(&page, scheme, local.port(), extra));
    let mut out = crate::Output::open(a.out.as_ref())?;
    out.emit(&WebRecord::Listening {
        addr: local.to_string(),
        tls: a.tls,
        resources: page.resources.len() + 1,
        http3: a.http3.then_some(a.scheduling),
    });
    out.flush();
    if let Some(endpoint) = quic {
        let out = Arc::new(std::sync::Mutex::new(out));
        tokio::spawn(crate::http3::serve(endpoint, site.clone(), out));
    }
    loop {
        let (tcp, _) = match listener.accept().await {
            Ok(c) => c,
            // Out of descriptors or a connection reset before accept: keep serving the others.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let site = site.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                Some(acc) => {
                    if let Ok(s) = acc.accept(tcp).await {
                        serve_conn(TokioIo::new(s), site).await;
                    }
                }
                None => serve_conn(TokioIo::new(tcp), site).await,
            }
        });
    }
}

async fn serve_conn<I>(io: I, site: Arc<Site>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut b = auto::Builder::new(TokioExecutor::new());
    // Pipelined responses that are ready together leave in one write, as a server that
    // pipelines well does.
    b.http1().keep_alive(true).pipeline_flush(true);
    // RFC 9113 section 6.5.2 recommends no fewer than 100; browsers see 100 to 256 in the wild.
    b.http2().max_concurrent_streams(256);
    let svc = hyper::service::service_fn(move |req| {
        let site = site.clone();
        async move { Ok::<_, Infallible>(site.answer(req).await) }
    });
    // A client that goes away mid-response is no error of the server's.
    let _ = b.serve_connection(io, svc).await;
}

/// A listener on `addr`. On `::` Linux (net.ipv6.bindv6only = 0) takes IPv4 too, so one
/// server answers both families of the lab's dual-stack hosts.
pub fn bind_dual(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let sock = if addr.is_ipv6() {
        tokio::net::TcpSocket::new_v6()?
    } else {
        tokio::net::TcpSocket::new_v4()?
    };
    sock.set_reuseaddr(true)?;
    sock.bind(addr)?;
    sock.listen(1024)
}

//! `latencylab page-load`: loads a page as a browser's network stack does, and can be told
//! how. The HTML first, then every resource it references (`src`/`href` URLs), each origin's
//! requests in document order:
//!
//! - HTTP/1.1: up to `--per-host` persistent connections per origin (and `--max-connections`
//!   in all), each taking the origin's next request when it has room; with `--pipeline N` a
//!   connection keeps up to N requests outstanding, answered in order (RFC 9112 section 9.3.2).
//!   The requests are written here and the responses read with `httparse` (hyper's own parser),
//!   because hyper's client does not pipeline.
//! - HTTP/2 (`--http 2`): one hyper HTTP/2 connection per origin (or one in all with
//!   `--coalesce`, as browsers coalesce names that share an address and a certificate), every
//!   request its own stream at once.
//!
//! - HTTP/3 (`--http 3`, https only): one QUIC connection per origin (or one in all with
//!   `--coalesce`), every request its own stream at once ([`crate::http3`]).
//!
//! It writes a JSON line per connection and per resource and one for the page
//! ([`crate::records`]). It caches nothing: every load is a cold one.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OnceCell, Semaphore};

use crate::connmgr::{Action, ConnId, ConnManager, Design, IdleChoice, Params, ReqId};
use crate::page::{referenced_urls, RefScanner};
use crate::records::WebRecord;
use crate::{Output, UsageError};

#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum HttpVersion {
    #[value(name = "1.1")]
    Http11,
    #[value(name = "2")]
    Http2,
    #[value(name = "3")]
    Http3,
}

#[derive(clap::Args, Clone, Debug)]
pub struct PageLoadArgs {
    /// The page's URL: http://HOST[:PORT]/ or https://HOST[:PORT]/
    pub url: String,
    /// HTTP version: 1.1 (parallel connections, optionally pipelined), 2 (multiplexed) or 3
    /// (multiplexed over QUIC; https only)
    #[arg(long, value_enum, default_value = "1.1")]
    pub http: HttpVersion,
    /// HTTP/1.1: persistent connections per origin (browsers use 6)
    #[arg(long, value_name = "N", default_value_t = 6, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub per_host: u16,
    /// HTTP/1.1: connections in all, over every origin (no limit by default)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=4096))]
    pub max_connections: Option<u16>,
    /// HTTP/1.1: requests outstanding per connection (1: no pipelining)
    #[arg(long, value_name = "DEPTH", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub pipeline: u16,
    /// HTTP/2 and HTTP/3: one connection for every host name (they must all name the same server)
    #[arg(long)]
    pub coalesce: bool,
    /// For https: the CA certificate (PEM) to trust, e.g. what `web-server --ca-out` wrote
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// Connect every origin to this address (HOST:PORT) instead of resolving its name; the
    /// requests keep their own host names
    #[arg(long, value_name = "ADDR")]
    pub connect_to: Option<String>,
    /// Give up after this long: a time (30s, 2m) or a number of seconds
    #[arg(long, value_name = "TIME", default_value = "120s", value_parser = parse_secs)]
    pub timeout: Duration,
    /// Write the JSON lines here instead of stdout
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// HTTP/1.1: place requests with a connection manager that finds them as the HTML
    /// arrives: `bound` (a request waits for the connection opened for it) or `pool` (it
    /// takes whichever connection frees up first). Without it, each origin's connections all
    /// open once the HTML has arrived.
    #[arg(long, value_enum, value_name = "DESIGN")]
    pub conn_manager: Option<Design>,
    /// With --conn-manager: which idle connection a request takes
    #[arg(long, value_enum, value_name = "CHOICE", default_value = "oldest")]
    pub idle_choice: IdleChoice,
    /// With --conn-manager: once the page has loaded, wait --follow-after, then fetch this
    /// URL (a click on a link) over the page's idle connections; repeat for several clicks,
    /// each after the last one's response and another --follow-after
    #[arg(long, value_name = "URL")]
    pub follow: Vec<String>,
    /// How long the connections stay idle before each --follow
    #[arg(long, value_name = "TIME", default_value = "2s", value_parser = parse_secs)]
    pub follow_after: Duration,
    /// With --conn-manager: when the HTML's references are found: `stream` (after each read
    /// of its body, as a browser's streaming parser and preload scanner find them) or `whole`
    /// (once the whole HTML has arrived)
    #[arg(long, value_enum, value_name = "WHEN", default_value = "stream")]
    pub html_scan: HtmlScan,
}

pub use crate::page::HtmlScan;

fn parse_secs(s: &str) -> Result<Duration, String> {
    let (num, mul) = if let Some(v) = s.strip_suffix("ms") {
        (v, 0.001)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else {
        (s, 1.0)
    };
    match num.parse::<f64>() {
        Ok(v) if v > 0.0 && v * mul <= 86_400.0 => Ok(Duration::from_secs_f64(v * mul)),
        _ => Err(format!("cannot read '{s}' as a time (try 30s, 500ms, 2m)")),
    }
}

/// An absolute http(s) URL, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub path: String,
}

impl Url {
    pub fn parse(s: &str) -> Result<Url, String> {
        let (tls, rest) = if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!("'{s}' is not an http:// or https:// URL"));
        };
        let (auth, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let default = if tls { 443 } else { 80 };
        let (host, port) = if let Some(h) = auth.strip_prefix('[') {
            let (h, p) = h
                .split_once(']')
                .ok_or_else(|| format!("'{s}': unclosed '[' in the host"))?;
            (h.to_string(), p.strip_prefix(':').unwrap_or(""))
        } else {
            match auth.rsplit_once(':') {
                Some((h, p)) => (h.to_string(), p),
                None => (auth.to_string(), ""),
            }
        };
        let port = if port.is_empty() {
            default
        } else {
            port.parse()
                .map_err(|_| format!("'{s}': port '{port}' is not a number from 1 to 65535"))?
        };
        if host.is_empty() || port == 0 {
            return Err(format!("'{s}' has no host or a port of 0"));
        }
        Ok(Url {
            tls,
            host,
            port,
            path: path.to_string(),
        })
    }

    pub(crate) fn authority(&self) -> String {
        let default = if self.tls { 443 } else { 80 };
        let h = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == default {
            h
        } else {
            format!("{h}:{}", self.port)
        }
    }

    pub(crate) fn origin(&self) -> (String, u16) {
        (self.host.clone(), self.port)
    }

    pub(crate) fn full(&self) -> String {
        format!(
            "{}://{}{}",
            if self.tls { "https" } else { "http" },
            self.authority(),
            self.path
        )
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}
type BoxIo = Box<dyn Io>;

/// One request the page needs.
#[derive(Clone, Debug)]
pub(crate) struct Req {
    pub(crate) url: Url,
    pub(crate) queued_ms: f64,
}

/// What every task of one load shares.
pub(crate) struct Ctx {
    start: Instant,
    out: Mutex<Output>,
    tls: Option<tokio_rustls::TlsConnector>,
    connect_to: Option<SocketAddr>,
    next_conn: Mutex<u64>,
    done: Mutex<Vec<Done>>,
    protocol: &'static str,
    /// The server's stream scheduling, as its responses stated it (HTTP/3).
    scheduling: Mutex<Option<String>>,
}

#[derive(Clone, Debug)]
pub(crate) struct Done {
    pub(crate) queued_ms: f64,
    pub(crate) sent_ms: f64,
    pub(crate) first_ms: f64,
    pub(crate) last_ms: f64,
    pub(crate) bytes: u64,
    pub(crate) longest_gap_ms: f64,
}

/// The longest wait between two arrivals of one response's bytes, from its first byte on:
/// how long the response stood still mid-transfer (behind a lost packet, or behind other
/// responses sharing the connection).
pub(crate) struct Gaps {
    last_ms: f64,
    longest_ms: f64,
}

impl Gaps {
    pub(crate) fn new(first_byte_ms: f64) -> Gaps {
        Gaps {
            last_ms: first_byte_ms,
            longest_ms: 0.0,
        }
    }

    pub(crate) fn arrived(&mut self, now_ms: f64) {
        self.longest_ms = self.longest_ms.max(now_ms - self.last_ms);
        self.last_ms = now_ms;
    }

    pub(crate) fn longest_ms(&self) -> f64 {
        self.longest_ms
    }
}

impl Ctx {
    pub(crate) fn ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1e3
    }

    /// The next connection number.
    pub(crate) fn next_conn_no(&self) -> u64 {
        let mut n = self.next_conn.lock().expect("lock");
        *n += 1;
        *n
    }

    /// The address to connect `url` to: `--connect-to`, or its name resolved.
    pub(crate) async fn resolve(&self, url: &Url) -> Result<SocketAddr> {
        match self.connect_to {
            Some(a) => Ok(a),
            None => tokio::net::lookup_host((url.host.as_str(), url.port))
                .await
                .with_context(|| format!("resolving {}", url.host))?
                .next()
                .ok_or_else(|| anyhow!("{} has no address", url.host)),
        }
    }

    pub(crate) fn saw_scheduling(&self, s: &str) {
        let mut v = self.scheduling.lock().expect("lock");
        if v.is_none() {
            *v = Some(s.to_string());
        }
    }

    pub(crate) fn emit(&self, r: &WebRecord) {
        let mut o = self.out.lock().expect("output lock");
        o.emit(r);
    }

    /// Opens a connection to `url`'s origin (TCP, then TLS if https) and records it.
    async fn connect(&self, url: &Url) -> Result<(BoxIo, u64)> {
        let conn = self.next_conn_no();
        Ok((self.connect_as(url, conn).await?, conn))
    }

    /// Opens connection number `conn` (the caller numbers them).
    async fn connect_as(&self, url: &Url, conn: u64) -> Result<BoxIo> {
        {
            let mut n = self.next_conn.lock().expect("lock");
            *n = (*n).max(conn);
        }
        let start_ms = self.ms();
        let addr = self.resolve(url).await?;
        let tcp = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to {} ({addr})", url.authority()))?;
        tcp.set_nodelay(true)?;
        let tcp_ms = self.ms();
        let io: BoxIo = match (&self.tls, url.tls) {
            (Some(c), true) => {
                let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                    .map_err(|_| anyhow!("'{}' is not a valid TLS server name", url.host))?;
                Box::new(
                    c.connect(name, tcp)
                        .await
                        .with_context(|| format!("TLS with {}", url.authority()))?,
                )
            }
            (None, true) => {
                bail!("https needs --ca FILE (the CA the server's certificate is signed by)")
            }
            _ => Box::new(tcp),
        };
        self.emit(&WebRecord::Connection {
            conn,
            host: url.host.clone(),
            start_ms,
            tcp_ms,
            ready_ms: self.ms(),
            protocol: self.protocol.into(),
        });
        Ok(io)
    }

    pub(crate) fn finish(&self, req: &Req, conn: u64, new_conn: bool, status: u16, d: Done) {
        self.emit(&WebRecord::Resource {
            url: req.url.full(),
            host: req.url.host.clone(),
            conn,
            new_conn,
            status,
            bytes: d.bytes,
            queued_ms: d.queued_ms,
            sent_ms: d.sent_ms,
            first_byte_ms: d.first_ms,
            last_byte_ms: d.last_ms,
            longest_gap_ms: Some(d.longest_gap_ms),
        });
        self.done.lock().expect("lock").push(d);
    }
}

pub fn run(a: &PageLoadArgs) -> Result<()> {
    let url = Url::parse(&a.url).map_err(|e| UsageError(format!("URL: {e}")))?;
    let connect_to = match &a.connect_to {
        None => None,
        Some(s) => Some(s.parse::<SocketAddr>().map_err(|_| {
            UsageError(format!(
                "--connect-to: '{s}' is not an address and port (e.g. 127.0.0.1:8080, [::1]:443)"
            ))
        })?),
    };
    let follow = a
        .follow
        .iter()
        .map(|f| Url::parse(f).map_err(|e| UsageError(format!("--follow: {e}"))))
        .collect::<Result<VecDeque<Url>, UsageError>>()?;
    if a.conn_manager.is_some() && (a.http != HttpVersion::Http11 || a.pipeline != 1) {
        return Err(UsageError(
            "--conn-manager places one request at a time on HTTP/1.1 connections: drop \
             --http 2 and --pipeline"
                .into(),
        )
        .into());
    }
    if a.conn_manager.is_none() && !follow.is_empty() {
        return Err(UsageError("--follow needs --conn-manager bound or pool".into()).into());
    }
    if a.http == HttpVersion::Http3 && !url.tls {
        return Err(UsageError(format!(
            "--http 3: HTTP/3 runs over QUIC, which is always encrypted: use https:// (not '{}') \
             and --ca",
            a.url
        ))
        .into());
    }
    let alpn = match a.http {
        HttpVersion::Http11 => crate::tls::ALPN_HTTP11,
        HttpVersion::Http2 => crate::tls::ALPN_H2,
        HttpVersion::Http3 => crate::http3::ALPN_H3,
    };
    let ca_pem = match &a.ca {
        Some(p) => {
            Some(std::fs::read(p).map_err(|e| UsageError(format!("--ca: {}: {e}", p.display())))?)
        }
        None => None,
    };
    let tls = match &ca_pem {
        Some(pem) if a.http != HttpVersion::Http3 => {
            let p = a.ca.as_ref().expect("read above");
            let cfg = crate::tls::client_config(pem, alpn)
                .map_err(|e| UsageError(format!("--ca: {}: {e:#}", p.display())))?;
            Some(tokio_rustls::TlsConnector::from(cfg))
        }
        _ => None,
    };
    let quic = match (&ca_pem, a.http) {
        (Some(pem), HttpVersion::Http3) => {
            let p = a.ca.as_ref().expect("read above");
            Some(
                crate::http3::client_config(pem)
                    .map_err(|e| UsageError(format!("--ca: {}: {e:#}", p.display())))?,
            )
        }
        (None, HttpVersion::Http3) => {
            return Err(UsageError(
                "--http 3 needs --ca FILE (the CA the server's certificate is signed by)".into(),
            )
            .into())
        }
        _ => None,
    };
    let ctx = Arc::new(Ctx {
        start: Instant::now(),
        out: Mutex::new(Output::open(a.out.as_ref())?),
        tls,
        connect_to,
        next_conn: Mutex::new(0),
        done: Mutex::new(Vec::new()),
        protocol: match a.http {
            HttpVersion::Http11 => "http/1.1",
            HttpVersion::Http2 => "h2",
            HttpVersion::Http3 => "h3",
        },
        scheduling: Mutex::new(None),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let load = async {
        match a.http {
            HttpVersion::Http11 => match a.conn_manager {
                Some(design) => {
                    let params = Params {
                        design,
                        idle_choice: a.idle_choice,
                        per_host: usize::from(a.per_host),
                    };
                    let scan = a.html_scan;
                    load_managed(&ctx, &url, params, scan, follow, a.follow_after).await
                }
                None => load_h1(&ctx, &url, a).await,
            },
            HttpVersion::Http2 => load_h2(&ctx, &url, a.coalesce).await,
            HttpVersion::Http3 => {
                let cfg = quic.clone().expect("made above for HTTP/3");
                crate::http3::load(&ctx, &url, cfg, a.coalesce).await
            }
        }
    };
    rt.block_on(async {
        tokio::time::timeout(a.timeout, load)
            .await
            .map_err(|_| anyhow!("the page did not load within --timeout {:?}", a.timeout))?
    })?;
    let done = ctx.done.lock().expect("lock").clone();
    let n = done.len().max(1) as f64;
    let mean = |f: &dyn Fn(&Done) -> f64| done.iter().map(f).sum::<f64>() / n;
    let page = WebRecord::Page {
        url: url.full(),
        protocol: ctx.protocol.into(),
        resources: done.len(),
        page_load_ms: done.iter().map(|d| d.last_ms).fold(0.0, f64::max),
        ttfb_ms_mean: mean(&|d| d.first_ms - d.sent_ms),
        transaction_ms_mean: mean(&|d| d.last_ms - d.sent_ms),
        wait_ms_mean: mean(&|d| d.sent_ms - d.queued_ms),
        connections: *ctx.next_conn.lock().expect("lock"),
        bytes: done.iter().map(|d| d.bytes).sum(),
        longest_gap_ms_mean: Some(mean(&|d| d.longest_gap_ms)),
        scheduling: ctx.scheduling.lock().expect("lock").clone(),
    };
    ctx.emit(&page);
    ctx.out.lock().expect("lock").flush();
    Ok(())
}

/// The subresources of an HTML document, as requests queued now.
pub(crate) fn subresources(ctx: &Ctx, html: &[u8]) -> Result<Vec<Req>> {
    let now = ctx.ms();
    referenced_urls(html)
        .iter()
        .map(|u| {
            Ok(Req {
                url: Url::parse(u).map_err(|e| anyhow!("the page references {e}"))?,
                queued_ms: now,
            })
        })
        .collect()
}

type Queue = Arc<Mutex<VecDeque<Req>>>;

async fn load_h1(ctx: &Arc<Ctx>, url: &Url, a: &PageLoadArgs) -> Result<()> {
    let permits = Arc::new(Semaphore::new(
        a.max_connections
            .map_or(Semaphore::MAX_PERMITS, usize::from),
    ));
    let depth = usize::from(a.pipeline);
    // The HTML on a connection of its own, which then serves the HTML's origin like the rest.
    let html_permit = permits.clone().acquire_owned().await?;
    let (io, conn) = ctx.connect(url).await?;
    let html_q: Queue = Arc::new(Mutex::new(VecDeque::from([Req {
        url: url.clone(),
        queued_ms: 0.0,
    }])));
    let mut h = H1Conn::new(io, conn);
    let body = h.serve(ctx, &html_q, None, 1, true).await?;
    let mut queues: Vec<((String, u16), Queue)> = Vec::new();
    for r in subresources(ctx, &body)? {
        if r.url.tls != url.tls {
            bail!("the page mixes http and https ({})", r.url.full());
        }
        let key = r.url.origin();
        match queues.iter().find(|(k, _)| *k == key) {
            Some((_, q)) => q.lock().expect("lock").push_back(r),
            None => queues.push((key, Arc::new(Mutex::new(VecDeque::from([r]))))),
        }
    }
    let mut tasks = tokio::task::JoinSet::new();
    let mut reuse = Some((h, html_permit));
    for (origin, q) in &queues {
        for _ in 0..a.per_host {
            let carried = if *origin == url.origin() {
                reuse.take()
            } else {
                None
            };
            let (ctx, q, permits) = (ctx.clone(), q.clone(), permits.clone());
            tasks.spawn(async move {
                let (mut c, _permit, fresh, first) = match carried {
                    Some((c, p)) => (c, p, false, None),
                    None => {
                        // A connection is opened only for a request that has none: the
                        // permit first (the request stays queued for a connection that
                        // frees up meanwhile), then the request.
                        let p = permits.acquire_owned().await?;
                        let Some(first) = q.lock().expect("lock").pop_front() else {
                            return Ok(());
                        };
                        let (io, conn) = ctx.connect(&first.url).await?;
                        (H1Conn::new(io, conn), p, true, Some(first))
                    }
                };
                c.serve(&ctx, &q, first, depth, fresh).await.map(|_| ())
            });
        }
    }
    // The HTML's connection has no more to do when its origin has no other resource.
    drop(reuse);
    while let Some(r) = tasks.join_next().await {
        r.context("a connection task")??;
    }
    Ok(())
}

/// One HTTP/1.1 connection: writes requests, reads responses in order.
struct H1Conn {
    rd: tokio::io::ReadHalf<BoxIo>,
    wr: tokio::io::WriteHalf<BoxIo>,
    conn: u64,
    buf: Vec<u8>,
    /// When the oldest unread byte in `buf` arrived, ms.
    oldest_ms: f64,
    last_read_ms: f64,
}

impl H1Conn {
    fn new(io: BoxIo, conn: u64) -> H1Conn {
        let (rd, wr) = tokio::io::split(io);
        H1Conn {
            rd,
            wr,
            conn,
            buf: Vec::new(),
            oldest_ms: 0.0,
            last_read_ms: 0.0,
        }
    }

    async fn fill(&mut self, ctx: &Ctx) -> Result<()> {
        let mut tmp = [0u8; 64 * 1024];
        let n = self.rd.read(&mut tmp).await?;
        if n == 0 {
            bail!("connection {} closed by the server mid-response", self.conn);
        }
        self.last_read_ms = ctx.ms();
        if self.buf.is_empty() {
            self.oldest_ms = self.last_read_ms;
        }
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(())
    }

    fn consume(&mut self, n: usize) {
        self.buf.drain(..n);
        // What is left arrived with the latest read.
        self.oldest_ms = self.last_read_ms;
    }

    /// Sends `first`, then takes requests from `q` until it is empty, keeping up to `depth` outstanding, and
    /// returns the last response's body (the HTML's, when that is what it fetched).
    async fn serve(
        &mut self,
        ctx: &Ctx,
        q: &Queue,
        mut first: Option<Req>,
        depth: usize,
        fresh: bool,
    ) -> Result<Vec<u8>> {
        let mut outstanding: VecDeque<(Req, f64, bool)> = VecDeque::new();
        let mut first_on_conn = fresh;
        let mut last_body = Vec::new();
        loop {
            let mut wire = Vec::new();
            while outstanding.len() < depth {
                let next = first.take().or_else(|| q.lock().expect("lock").pop_front());
                let Some(r) = next else {
                    break;
                };
                wire.extend_from_slice(
                    format!(
                        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: latencylab-page-load\r\nAccept: */*\r\n\r\n",
                        r.url.path,
                        r.url.authority()
                    )
                    .as_bytes(),
                );
                outstanding.push_back((r, ctx.ms(), first_on_conn));
                first_on_conn = false;
            }
            if !wire.is_empty() {
                self.wr.write_all(&wire).await?;
                self.wr.flush().await?;
            }
            let Some((req, sent_ms, new_conn)) = outstanding.pop_front() else {
                return Ok(last_body);
            };
            let keep = req.url.path == "/";
            let (status, bytes, first_ms, longest_gap_ms, body) =
                self.read_response(ctx, keep, None).await?;
            last_body = body;
            let d = Done {
                queued_ms: req.queued_ms,
                sent_ms,
                first_ms,
                last_ms: ctx.ms(),
                bytes,
                longest_gap_ms,
            };
            ctx.finish(&req, self.conn, new_conn, status, d);
        }
    }

    /// Reads one response (Content-Length framing): status, body bytes, when its first byte
    /// arrived, and the body itself when `keep` and it can reference other resources (HTML,
    /// CSS, JavaScript, or no content type at all); an image's body is never kept.
    /// `on_body`, when `keep`, sees the body so far after each read.
    async fn read_response(
        &mut self,
        ctx: &Ctx,
        keep: bool,
        mut on_body: Option<&mut BodyHook<'_>>,
    ) -> Result<(u16, u64, f64, f64, Vec<u8>)> {
        if self.buf.is_empty() {
            self.fill(ctx).await?;
        }
        let first_ms = self.oldest_ms;
        let mut gaps = Gaps::new(first_ms);
        let (head_len, status, len, text) = loop {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            match resp
                .parse(&self.buf)
                .map_err(|e| anyhow!("connection {}: bad response head: {e}", self.conn))?
            {
                httparse::Status::Complete(n) => {
                    let status = resp.code.unwrap_or(0);
                    let mut len = None;
                    let mut text = true;
                    for h in resp.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-type") {
                            let v = String::from_utf8_lossy(h.value).to_ascii_lowercase();
                            text = ["text/html", "text/css", "javascript"]
                                .iter()
                                .any(|t| v.contains(t));
                        }
                        if h.name.eq_ignore_ascii_case("content-length") {
                            len = std::str::from_utf8(h.value)
                                .ok()
                                .and_then(|v| v.trim().parse::<u64>().ok());
                        }
                        if h.name.eq_ignore_ascii_case("transfer-encoding") {
                            bail!("connection {}: chunked responses are not supported (the server must send Content-Length)", self.conn);
                        }
                    }
                    let len = len.ok_or_else(|| {
                        anyhow!(
                            "connection {}: a response without Content-Length",
                            self.conn
                        )
                    })?;
                    break (n, status, len, text);
                }
                httparse::Status::Partial => {
                    if self.buf.len() > 64 * 1024 {
                        bail!("connection {}: response head over 64 KiB", self.conn);
                    }
                    self.fill(ctx).await?
                }
            }
        };
        self.consume(head_len);
        let keep = keep && text;
        let mut left = len;
        let mut body = Vec::new();
        loop {
            let take = (self.buf.len() as u64).min(left) as usize;
            if keep {
                body.extend_from_slice(&self.buf[..take]);
                if let Some(f) = on_body.as_mut() {
                    f(&body);
                }
            }
            self.consume(take);
            left -= take as u64;
            if left == 0 {
                break;
            }
            self.fill(ctx).await?;
            gaps.arrived(self.last_read_ms);
        }
        Ok((status, len, first_ms, gaps.longest_ms(), body))
    }
}

/// Sees a response body so far, after each read.
type BodyHook<'a> = dyn FnMut(&[u8]) + Send + 'a;

/// What the tasks of a managed load tell its loop.
enum Event {
    Ready(ConnId, Result<BoxIo>),
    /// A response ended: its length, and the URLs it references not yet reported.
    Done(ConnId, Box<H1Conn>, Result<(u64, Vec<String>)>),
    /// URLs a response references (the HTML's found since the last such event).
    Found(Vec<String>),
}

/// Writes `req` on `c` and reads its response. The HTML's references (`page`: how it is
/// scanned) go to `found` as they arrive with [`HtmlScan::Stream`], as a browser's preload
/// scanner finds them. Returns the response's length and the references not reported so far:
/// a stylesheet's or script's, or the HTML's with [`HtmlScan::Whole`], which a browser finds
/// once the file is whole (it applies or runs it), by which time the connection that carried
/// it is free again, so the loop takes them only after it has freed the connection.
async fn transact(
    ctx: &Ctx,
    c: &mut H1Conn,
    req: &Req,
    new_conn: bool,
    page: Option<HtmlScan>,
    found: tokio::sync::mpsc::UnboundedSender<Event>,
) -> Result<(u64, Vec<String>)> {
    let wire = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: latencylab-page-load\r\nAccept: */*\r\n\r\n",
        req.url.path,
        req.url.authority()
    );
    let sent_ms = ctx.ms();
    c.wr.write_all(wire.as_bytes()).await?;
    c.wr.flush().await?;
    let mut scanner = RefScanner::default();
    let mut scan = |body: &[u8]| {
        let urls = scanner.scan(body);
        if !urls.is_empty() {
            let _ = found.send(Event::Found(urls));
        }
    };
    let (status, bytes, first_ms, longest_gap_ms, body) = if page == Some(HtmlScan::Stream) {
        c.read_response(ctx, true, Some(&mut scan)).await?
    } else {
        c.read_response(ctx, true, None).await?
    };
    let rest = scanner.scan(&body);
    let d = Done {
        queued_ms: req.queued_ms,
        sent_ms,
        first_ms,
        last_ms: ctx.ms(),
        bytes,
        longest_gap_ms,
    };
    ctx.finish(req, c.conn, new_conn, status, d);
    Ok((bytes, rest))
}

/// Of the URLs a response references, those not requested yet, parsed, now marked requested.
fn new_urls(
    urls: Vec<String>,
    requested: &mut std::collections::HashSet<String>,
    page: &Url,
) -> Result<Vec<Url>> {
    let mut out = Vec::new();
    for u in urls {
        if !requested.insert(u.clone()) {
            continue;
        }
        let u = Url::parse(&u).map_err(|e| anyhow!("the page references {e}"))?;
        if u.tls != page.tls {
            bail!("the page mixes http and https ({})", u.full());
        }
        out.push(u);
    }
    Ok(out)
}

fn origin_key(u: &Url) -> String {
    format!("{}:{}", u.host, u.port)
}

/// HTTP/1.1 under a [`ConnManager`]: the HTML's references become requests as its bytes
/// arrive, a stylesheet's or script's once it has arrived (each URL once); the manager says
/// when to open a connection and which request goes where; this loop does the I/O and tells
/// it what happened. Then each of `follow` in turn, once every
/// request so far has been answered and the connections have been idle `follow_after`.
async fn load_managed(
    ctx: &Arc<Ctx>,
    url: &Url,
    params: Params,
    html_scan: HtmlScan,
    mut follow: VecDeque<Url>,
    follow_after: Duration,
) -> Result<()> {
    let mut mgr = ConnManager::new(params);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let mut tasks = tokio::task::JoinSet::new();
    let mut reqs: HashMap<ReqId, Req> = HashMap::new();
    let mut origins: HashMap<String, Url> = HashMap::new();
    let mut idle: HashMap<ConnId, Box<H1Conn>> = HashMap::new();
    let mut used: std::collections::HashSet<ConnId> = std::collections::HashSet::new();
    let mut requested = std::collections::HashSet::from([url.full()]);
    let now = |ctx: &Ctx| ctx.start.elapsed();
    let mut next_req: ReqId = 0;
    let mut outstanding = 0usize;
    let mut add = |mgr: &mut ConnManager,
                   u: Url,
                   reqs: &mut HashMap<ReqId, Req>,
                   origins: &mut HashMap<String, Url>| {
        let key = origin_key(&u);
        origins.entry(key.clone()).or_insert_with(|| u.clone());
        reqs.insert(
            next_req,
            Req {
                url: u,
                queued_ms: ctx.ms(),
            },
        );
        mgr.request(now(ctx), next_req, &key);
        next_req += 1;
    };
    add(&mut mgr, url.clone(), &mut reqs, &mut origins);
    outstanding += 1;
    loop {
        while let Some(act) = mgr.poll() {
            match act {
                Action::Open { conn, origin } => {
                    let u = origins[&origin].clone();
                    let (ctx, tx) = (ctx.clone(), tx.clone());
                    tasks.spawn(async move {
                        let r = ctx.connect_as(&u, conn).await;
                        let _ = tx.send(Event::Ready(conn, r));
                    });
                }
                Action::Dispatch { req, conn } => {
                    let mut c = idle
                        .remove(&conn)
                        .ok_or_else(|| anyhow!("connection {conn} is not idle"))?;
                    let r = reqs
                        .remove(&req)
                        .ok_or_else(|| anyhow!("no request {req}"))?;
                    let fresh = used.insert(conn);
                    let (ctx, tx) = (ctx.clone(), tx.clone());
                    tasks.spawn(async move {
                        let page = (req == 0).then_some(html_scan);
                        let res = transact(&ctx, &mut c, &r, fresh, page, tx.clone()).await;
                        let _ = tx.send(Event::Done(conn, c, res));
                    });
                }
            }
        }
        if outstanding == 0 {
            match follow.pop_front() {
                Some(u) => {
                    tokio::time::sleep(follow_after).await;
                    if u.tls != url.tls {
                        bail!("--follow {} mixes http and https with the page", u.full());
                    }
                    add(&mut mgr, u, &mut reqs, &mut origins);
                    outstanding += 1;
                    continue;
                }
                None => break,
            }
        }
        match rx
            .recv()
            .await
            .ok_or_else(|| anyhow!("the load's tasks ended early"))?
        {
            Event::Ready(conn, io) => {
                idle.insert(conn, Box::new(H1Conn::new(io?, conn)));
                mgr.connected(now(ctx), conn);
            }
            Event::Done(conn, c, res) => {
                let (bytes, urls) = res?;
                idle.insert(conn, c);
                mgr.finished(now(ctx), conn, bytes);
                outstanding -= 1;
                for u in new_urls(urls, &mut requested, url)? {
                    add(&mut mgr, u, &mut reqs, &mut origins);
                    outstanding += 1;
                }
            }
            Event::Found(urls) => {
                for u in new_urls(urls, &mut requested, url)? {
                    add(&mut mgr, u, &mut reqs, &mut origins);
                    outstanding += 1;
                }
            }
        }
    }
    let s = mgr.stats();
    ctx.emit(&WebRecord::ConnManager {
        design: params.design,
        idle_choice: params.idle_choice,
        new_connections_needed: s.new_connections_needed,
        served_by_other: s.served_by_other,
        saved_ms: s.saved_ms,
    });
    tasks.abort_all();
    Ok(())
}

type H2Sender = SendRequest<Empty<Bytes>>;

async fn h2_connect(ctx: &Ctx, url: &Url) -> Result<(H2Sender, u64)> {
    let (io, conn) = ctx.connect(url).await?;
    let (sender, driver) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .with_context(|| format!("HTTP/2 handshake with {}", url.authority()))?;
    tokio::spawn(async move {
        let _ = driver.await;
    });
    Ok((sender, conn))
}

async fn h2_fetch(
    ctx: &Ctx,
    mut sender: H2Sender,
    conn: u64,
    new_conn: bool,
    req: Req,
) -> Result<Vec<u8>> {
    let r = hyper::Request::get(req.url.full())
        .header("user-agent", "latencylab-page-load")
        .body(Empty::<Bytes>::new())
        .context("building a request")?;
    let sent_ms = ctx.ms();
    let resp = sender
        .send_request(r)
        .await
        .with_context(|| format!("GET {}", req.url.full()))?;
    let first_ms = ctx.ms();
    let status = resp.status().as_u16();
    let mut body = resp.into_body();
    let mut bytes = 0u64;
    let mut kept = Vec::new();
    let mut gaps = Gaps::new(first_ms);
    while let Some(f) = body.frame().await {
        let f = f.with_context(|| format!("reading {}", req.url.full()))?;
        gaps.arrived(ctx.ms());
        if let Some(d) = f.data_ref() {
            bytes += d.len() as u64;
            if req.url.path == "/" {
                kept.extend_from_slice(d);
            }
        }
    }
    let d = Done {
        queued_ms: req.queued_ms,
        sent_ms,
        first_ms,
        last_ms: ctx.ms(),
        bytes,
        longest_gap_ms: gaps.longest_ms(),
    };
    ctx.finish(&req, conn, new_conn, status, d);
    Ok(kept)
}

async fn load_h2(ctx: &Arc<Ctx>, url: &Url, coalesce: bool) -> Result<()> {
    let (sender, conn) = h2_connect(ctx, url).await?;
    let html = h2_fetch(
        ctx,
        sender.clone(),
        conn,
        true,
        Req {
            url: url.clone(),
            queued_ms: 0.0,
        },
    )
    .await?;
    type Cell = Arc<OnceCell<(H2Sender, u64)>>;
    let mut conns: HashMap<(String, u16), Cell> = HashMap::new();
    let first: Cell = Arc::new(OnceCell::new_with(Some((sender, conn))));
    conns.insert(url.origin(), first.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for r in subresources(ctx, &html)? {
        if r.url.tls != url.tls {
            bail!("the page mixes http and https ({})", r.url.full());
        }
        let cell = if coalesce {
            first.clone()
        } else {
            conns.entry(r.url.origin()).or_default().clone()
        };
        let ctx = ctx.clone();
        tasks.spawn(async move {
            let mut opened = false;
            let (s, c) = cell
                .get_or_try_init(|| {
                    opened = true;
                    h2_connect(&ctx, &r.url)
                })
                .await?
                .clone();
            h2_fetch(&ctx, s, c, opened, r).await.map(|_| ())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a stream task")??;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_host_port_and_path() {
        let u = Url::parse("http://img1/i/1.gif").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.path.as_str()),
            (false, "img1", 80, "/i/1.gif")
        );
        let u = Url::parse("https://[::1]:8443").unwrap();
        assert_eq!(
            (u.tls, u.host.as_str(), u.port, u.path.as_str()),
            (true, "::1", 8443, "/")
        );
        assert_eq!(u.full(), "https://[::1]:8443/");
        assert!(Url::parse("ftp://x/").unwrap_err().contains("'ftp://x/'"));
        assert!(Url::parse("http://x:99999/")
            .unwrap_err()
            .contains("'99999'"));
        assert!(Url::parse("http://:80/").is_err());
    }

    #[test]
    fn times_read_as_seconds_unless_a_unit_says_otherwise() {
        assert_eq!(parse_secs("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_secs("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_secs("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_secs("7").unwrap(), Duration::from_secs(7));
        assert!(parse_secs("soon").unwrap_err().contains("'soon'"));
        assert!(parse_secs("0s").is_err());
    }
}

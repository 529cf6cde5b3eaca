//! `latencylab rpm URL`: the client of draft-ietf-ippm-responsiveness-09 on hyper's HTTP/2
//! over rustls (or clear text for `http://`). It fetches the configuration, opens the
//! load-generating connections (GET of the large object down, an endless POST up, both at
//! once, as `networkQuality` does by default), launches foreign and self probes, and feeds
//! what it measures to the pure [`crate::algorithm::RpmTest`], which decides everything else.
//!
//! Times are read from CLOCK_MONOTONIC here, and only here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context as TaskContext, Poll};

use anyhow::{anyhow, bail, Context, Result};
use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::{combinators::BoxBody, BodyExt, Empty};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use web::client::Url;
use wire::{Duration, Instant};

use crate::algorithm::{Action, Dir, Load, Params, RpmTest, Sample};
use crate::config::NqConfig;
use crate::report::{IdleSummary, ProbeRecord, ProbeSummary, RpmReport};
use crate::UsageError;

#[derive(clap::Args, Clone, Debug)]
pub struct RpmArgs {
    /// The test server: its configuration URL, or only its origin, to which
    /// `/.well-known/nq` is added (https://server:4043)
    pub url: String,
    /// Exactly N load-generating connections each way from the start, none added (as
    /// Flent's tests load a path); default: one more each interval, up to 16
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub flows: Option<u16>,
    /// Which directions load the path: both at once (the draft's test, and networkQuality's
    /// default), or downloads or uploads alone (networkQuality -s and Cloudflare's mach measure
    /// each direction in turn: run `--load down`, then `--load up`)
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = Load::Both)]
    pub load: Load,
    /// Print the whole report as JSON (every probe, foreign and self apart) instead of text
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Verify the server's certificate against this CA (PEM); without it any certificate is
    /// accepted, as a measurement needs no identity
    #[arg(long, value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// The test's time limit (the draft's result with its confidence is reported then)
    #[arg(long, value_name = "TIME", default_value = "20s", value_parser = parse_time)]
    pub max_duration: Duration,
    /// ID, the interval of evaluation (the draft's table says 5s; networkQuality and
    /// goresponsiveness use 1s)
    #[arg(long, value_name = "TIME", default_value = "1s", value_parser = parse_time)]
    pub interval: Duration,
    /// Seed of the choice of the connection each self probe goes on
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// TCP_NOTSENT_LOWAT of the client's connections at first, bytes; an upload then keeps it
    /// at 5 ms of its own rate and writes only below it (0: the system's default, and writes
    /// whenever the socket takes data)
    #[arg(long, value_name = "BYTES", default_value_t = crate::NOTSENT_LOWAT_BYTES)]
    pub notsent_lowat: u32,
}

fn parse_time(s: &str) -> Result<Duration, String> {
    match wire::units::parse_time(s) {
        Ok(d) if d >= Duration::from_millis(100) => Ok(d),
        Ok(_) => Err(format!("'{s}' is too short (at least 100ms)")),
        Err(e) => Err(e.to_string()),
    }
}

pub use crate::monotonic_ns;

type ReqBody = BoxBody<Bytes, std::convert::Infallible>;

/// An endless upload body of zeros that counts what it hands to HTTP/2 (its connection
/// keeps its own unsent bytes at 5 ms of the rate: [`crate::socket::Paced`]).
struct Upload {
    chunk: Bytes,
    counter: Arc<AtomicU64>,
}

impl Body for Upload {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let n = self.chunk.len() as u64;
        self.counter.fetch_add(n, Ordering::Relaxed);
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }
    fn is_end_stream(&self) -> bool {
        false
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// A connection ready for HTTP/2 requests, and what it took to set up.
struct Conn {
    sender: SendRequest<ReqBody>,
    local: SocketAddr,
    remote: SocketAddr,
    tcp: std::time::Duration,
    /// Per round trip of the TLS handshake (one for TLS 1.3, two for 1.2).
    tls: Option<std::time::Duration>,
}

/// A load-generating connection that self probes may use.
struct Live {
    id: u64,
    dir: Dir,
    sender: SendRequest<ReqBody>,
    local: SocketAddr,
    remote: SocketAddr,
}

struct Ctx {
    target: SocketAddr,
    host: String,
    tls: Option<tokio_rustls::TlsConnector>,
    notsent_lowat: u32,
    small: hyper::Uri,
    large: hyper::Uri,
    upload: hyper::Uri,
    bytes: [Arc<AtomicU64>; 2],
    live: Mutex<Vec<Live>>,
    next_id: AtomicU64,
    failed_probes: AtomicU64,
    failed_flows: AtomicU64,
    start_mono_ns: u64,
}

fn dir_index(d: Dir) -> usize {
    match d {
        Dir::Down => 0,
        Dir::Up => 1,
    }
}

impl Ctx {
    async fn connect(&self) -> Result<Conn> {
        let t0 = std::time::Instant::now();
        let tcp = TcpStream::connect(self.target)
            .await
            .with_context(|| format!("connecting to {}", self.target))?;
        let tcp_time = t0.elapsed();
        tcp.set_nodelay(true)?;
        let (local, remote) = (tcp.local_addr()?, tcp.peer_addr()?);
        let tcp = crate::socket::Paced::new(tcp, self.notsent_lowat);
        let (io, tls): (Box<dyn Io>, _) = match &self.tls {
            Some(c) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|_| anyhow!("'{}' is not a valid TLS server name", self.host))?;
                let t1 = std::time::Instant::now();
                let mut s = c.connect(name, tcp).await.context("TLS handshake")?;
                let took = t1.elapsed();
                s.get_mut()
                    .1
                    .set_buffer_limit(Some(crate::TLS_BUFFER_BYTES));
                // Draft section 5.3: the TLS time normalised to the handshake's round trips.
                let rts = match s.get_ref().1.protocol_version() {
                    Some(rustls::ProtocolVersion::TLSv1_2) => 2,
                    _ => 1,
                };
                (Box::new(s), Some(took / rts))
            }
            None => (Box::new(tcp), None),
        };
        let (sender, driver) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
            .initial_stream_window_size(8 << 20)
            .initial_connection_window_size(16 << 20)
            .max_concurrent_reset_streams(1024)
            // HTTP/2 buffers at most this much of the upload ahead of the socket: the bytes
            // counted as sent are then near what TCP took, and a self probe's request does
            // not queue behind seconds of it (draft section 6.1.1: "the different streams
            // should not be stacked one after the other").
            .max_send_buf_size(crate::H2_SEND_BUFFER_BYTES)
            .handshake::<_, ReqBody>(TokioIo::new(io))
            .await
            .context("HTTP/2 handshake")?;
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(Conn {
            sender,
            local,
            remote,
            tcp: tcp_time,
            tls,
        })
    }

    fn get(&self, uri: &hyper::Uri) -> hyper::Request<ReqBody> {
        hyper::Request::get(uri.clone())
            .header("accept-encoding", "identity")
            .header("user-agent", "latencylab-rpm")
            .body(Empty::new().boxed())
            .expect("a fixed request")
    }

    fn elapsed_s(&self, mono_ns: u64) -> f64 {
        mono_ns.saturating_sub(self.start_mono_ns) as f64 / 1e9
    }
}

/// Sends a GET of the small object and reads the whole answer; the time it took, and when
/// the server says it received the request (its [`crate::RECEIVED_HEADER`]).
async fn fetch_small(
    ctx: &Ctx,
    sender: &mut SendRequest<ReqBody>,
) -> Result<(std::time::Duration, Option<u64>)> {
    let t0 = std::time::Instant::now();
    sender.ready().await.context("connection not ready")?;
    let resp = sender.send_request(ctx.get(&ctx.small)).await?;
    if !resp.status().is_success() {
        bail!("the small object answered {}", resp.status());
    }
    let received = resp
        .headers()
        .get(crate::RECEIVED_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let mut body = resp.into_body();
    while let Some(f) = body.frame().await {
        f?;
    }
    Ok((t0.elapsed(), received))
}

/// A probe on a connection of its own: TCP and TLS handshakes, then the GET of the small
/// object.
async fn foreign_record(ctx: &Ctx) -> Result<ProbeRecord> {
    let start = monotonic_ns();
    let mut c = ctx.connect().await?;
    let (http, received) = fetch_small(ctx, &mut c.sender).await?;
    let end = monotonic_ns();
    Ok(ProbeRecord {
        start_mono_ns: start,
        end_mono_ns: end,
        start_s: ctx.elapsed_s(start),
        end_s: ctx.elapsed_s(end),
        tcp_ms: Some(c.tcp.as_secs_f64() * 1e3),
        tls_ms: c.tls.map(|t| t.as_secs_f64() * 1e3),
        http_ms: http.as_secs_f64() * 1e3,
        on: None,
        local: c.local.to_string(),
        remote: c.remote.to_string(),
        interval: 0,
        in_window: false,
        server_received_mono_ns: received,
    })
}

async fn foreign_probe(ctx: Arc<Ctx>, tx: mpsc::UnboundedSender<ProbeRecord>) {
    match foreign_record(&ctx).await {
        Ok(p) => {
            let _ = tx.send(p);
        }
        Err(_) => {
            ctx.failed_probes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Foreign probes before any load, all at once: the path's idle latency.
const IDLE_PROBES: usize = 5;
/// How long the idle probes may take before the test goes on without them.
const IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The idle probes that finished within [`IDLE_TIMEOUT`] (none if any is still running then).
async fn idle_records(ctx: &Ctx) -> Vec<ProbeRecord> {
    let all = async {
        let (a, b, c, d, e) = tokio::join!(
            foreign_record(ctx),
            foreign_record(ctx),
            foreign_record(ctx),
            foreign_record(ctx),
            foreign_record(ctx)
        );
        let all: [_; IDLE_PROBES] = [a, b, c, d, e];
        all
    };
    match tokio::time::timeout(IDLE_TIMEOUT, all).await {
        Ok(rs) => rs.into_iter().filter_map(Result::ok).collect(),
        Err(_) => vec![],
    }
}

async fn self_probe(ctx: Arc<Ctx>, pick: u64, tx: mpsc::UnboundedSender<ProbeRecord>) {
    let chosen = {
        let live = ctx.live.lock().expect("lock");
        if live.is_empty() {
            return;
        }
        let l = &live[(pick % live.len() as u64) as usize];
        (l.sender.clone(), l.dir, l.local, l.remote)
    };
    let (mut sender, dir, local, remote) = chosen;
    let start = monotonic_ns();
    match fetch_small(&ctx, &mut sender).await {
        Ok((http, received)) => {
            let end = monotonic_ns();
            let _ = tx.send(ProbeRecord {
                start_mono_ns: start,
                end_mono_ns: end,
                start_s: ctx.elapsed_s(start),
                end_s: ctx.elapsed_s(end),
                tcp_ms: None,
                tls_ms: None,
                http_ms: http.as_secs_f64() * 1e3,
                on: Some(dir.name().to_string()),
                local: local.to_string(),
                remote: remote.to_string(),
                interval: 0,
                in_window: false,
                server_received_mono_ns: received,
            });
        }
        Err(_) => {
            ctx.failed_probes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// One load-generating connection, until the test ends it or it fails.
async fn load(ctx: Arc<Ctx>, dir: Dir) {
    let id = ctx.next_id.fetch_add(1, Ordering::Relaxed);
    let r = async {
        let c = ctx.connect().await?;
        let mut sender = c.sender.clone();
        ctx.live.lock().expect("lock").push(Live {
            id,
            dir,
            sender: c.sender,
            local: c.local,
            remote: c.remote,
        });
        let counter = ctx.bytes[dir_index(dir)].clone();
        sender.ready().await?;
        match dir {
            Dir::Down => {
                let resp = sender.send_request(ctx.get(&ctx.large)).await?;
                let mut body = resp.into_body();
                while let Some(f) = body.frame().await {
                    if let Some(d) = f?.data_ref() {
                        counter.fetch_add(d.len() as u64, Ordering::Relaxed);
                    }
                }
            }
            Dir::Up => {
                let req = hyper::Request::post(ctx.upload.clone())
                    .header("content-type", "application/octet-stream")
                    .header("user-agent", "latencylab-rpm")
                    .body(
                        Upload {
                            chunk: Bytes::from(vec![0u8; crate::H2_SEND_BUFFER_BYTES]),
                            counter,
                        }
                        .boxed(),
                    )
                    .expect("a fixed request");
                sender.send_request(req).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    ctx.live.lock().expect("lock").retain(|l| l.id != id);
    if r.is_err() {
        ctx.failed_flows.fetch_add(1, Ordering::Relaxed);
    }
}

/// A rustls verifier that accepts any certificate but still checks the handshake's
/// signatures: a responsiveness test measures time, not identity (goresponsiveness and
/// networkQuality skip verification for test servers the same way).
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config(ca: Option<&PathBuf>) -> Result<Arc<rustls::ClientConfig>> {
    if let Some(p) = ca {
        let pem = std::fs::read(p)
            .map_err(|e| UsageError(format!("--ca: cannot read {}: {e}", p.display())))?;
        return web::tls::client_config(&pem, web::tls::ALPN_H2)
            .map_err(|e| UsageError(format!("--ca: {}: {e:#}", p.display())).into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
        .with_no_client_auth();
    c.alpn_protocols = vec![web::tls::ALPN_H2.to_vec()];
    Ok(Arc::new(c))
}

/// The configuration URL for what the user typed: an origin gets `/.well-known/nq`.
pub fn config_url(typed: &str) -> Result<Url, UsageError> {
    let mut u = Url::parse(typed).map_err(|e| {
        UsageError(format!(
            "URL: {e} (try https://server:4043 or https://server:4043/.well-known/nq)"
        ))
    })?;
    if u.path == "/" || u.path.is_empty() {
        u.path = crate::config::WELL_KNOWN_PATH.to_string();
    }
    Ok(u)
}

fn uri(s: &str, what: &str) -> Result<hyper::Uri> {
    s.parse::<hyper::Uri>()
        .map_err(|e| anyhow!("the configuration's {what} '{s}' is not a URI: {e}"))
}

pub fn run(a: &RpmArgs) -> Result<()> {
    let url = config_url(&a.url)?;
    if a.interval * 2 > a.max_duration {
        return Err(UsageError(format!(
            "--max-duration {:?} leaves fewer than two intervals of {:?}",
            a.max_duration, a.interval
        ))
        .into());
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = rt.block_on(test(a, &url))?;
    // The runtime's tasks (load, probes) end with it.
    drop(rt);
    let json = serde_json::to_string_pretty(&report).expect("a report always serialises");
    if let Some(p) = &a.out {
        std::fs::write(p, format!("{json}\n"))
            .with_context(|| format!("--out: writing {}", p.display()))?;
    }
    if a.json {
        println!("{json}");
    } else {
        print!("{}", crate::report::text(&report));
    }
    Ok(())
}

async fn test(a: &RpmArgs, url: &Url) -> Result<RpmReport> {
    let target = tokio::net::lookup_host((url.host.as_str(), url.port))
        .await
        .with_context(|| format!("resolving {}", url.host))?
        .next()
        .ok_or_else(|| anyhow!("{} has no address", url.host))?;
    let tls = if url.tls {
        Some(tokio_rustls::TlsConnector::from(tls_config(a.ca.as_ref())?))
    } else {
        None
    };
    let config_url = format!(
        "{}://{}{}",
        if url.tls { "https" } else { "http" },
        web::join_host_port(&url.host, url.port),
        url.path
    );
    let placeholder: hyper::Uri = config_url.parse().context("the configuration URL")?;
    let mut ctx = Ctx {
        target,
        host: url.host.clone(),
        tls,
        notsent_lowat: a.notsent_lowat,
        small: placeholder.clone(),
        large: placeholder.clone(),
        upload: placeholder.clone(),
        bytes: [Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0))],
        live: Mutex::new(vec![]),
        next_id: AtomicU64::new(0),
        failed_probes: AtomicU64::new(0),
        failed_flows: AtomicU64::new(0),
        start_mono_ns: 0,
    };
    // The configuration (draft section 8.1), on a connection of its own.
    let cfg = {
        let mut c = ctx
            .connect()
            .await
            .with_context(|| format!("fetching {config_url}"))?;
        c.sender.ready().await?;
        let resp = c.sender.send_request(ctx.get(&placeholder)).await?;
        if !resp.status().is_success() {
            bail!("{config_url} answered {}", resp.status());
        }
        let body = resp.into_body().collect().await?.to_bytes();
        NqConfig::parse(&String::from_utf8_lossy(&body))
            .with_context(|| format!("reading {config_url}"))?
    };
    ctx.small = uri(&cfg.small_download_url, "small_download_url")?;
    ctx.large = uri(&cfg.large_download_url, "large_download_url")?;
    ctx.upload = uri(&cfg.upload_url, "upload_url")?;
    // The idle latency first, on an unloaded path (as networkQuality's "Idle Latency"); its
    // probes' times are then given from the test's start, before which they ran.
    let mut idle = idle_records(&ctx).await;
    ctx.start_mono_ns = monotonic_ns();
    for p in &mut idle {
        let since = |ns: u64| (ns as f64 - ctx.start_mono_ns as f64) / 1e9;
        (p.start_s, p.end_s) = (since(p.start_mono_ns), since(p.end_mono_ns));
    }
    let ctx = Arc::new(ctx);

    let params = Params {
        interval: a.interval,
        max_duration: a.max_duration,
        fixed_flows: a.flows.map(usize::from),
        load: a.load,
        ..Params::default()
    };
    let now = |c: &Ctx| Instant::from_nanos(monotonic_ns().saturating_sub(c.start_mono_ns));
    let mut t = RpmTest::new(params.clone(), now(&ctx));
    let (tx, mut rx) = mpsc::unbounded_channel::<ProbeRecord>();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(a.seed);
    let mut tasks = tokio::task::JoinSet::new();
    let mut probes: Vec<ProbeRecord> = vec![];
    let mut arrived: Vec<ProbeRecord> = vec![];
    loop {
        let at = now(&ctx);
        for d in Dir::BOTH {
            let b = ctx.bytes[dir_index(d)].swap(0, Ordering::Relaxed);
            t.on_bytes(at, d, b);
        }
        while let Ok(p) = rx.try_recv() {
            arrived.push(p);
        }
        for mut p in arrived.drain(..) {
            let s = match p.tcp_ms {
                Some(tcp) => Sample::Foreign {
                    tcp: Duration::from_secs_f64(tcp / 1e3),
                    tls: p.tls_ms.map(|x| Duration::from_secs_f64(x / 1e3)),
                    http: Duration::from_secs_f64(p.http_ms / 1e3),
                },
                None => Sample::Loaded {
                    http: Duration::from_secs_f64(p.http_ms / 1e3),
                },
            };
            t.on_probe(at, s);
            p.interval = t.current_interval();
            probes.push(p);
        }
        let mut done = false;
        while let Some(action) = t.poll(at) {
            match action {
                Action::AddFlow(d) => {
                    tasks.spawn(load(ctx.clone(), d));
                }
                Action::Probe => {
                    tasks.spawn(foreign_probe(ctx.clone(), tx.clone()));
                    tasks.spawn(self_probe(ctx.clone(), rng.gen(), tx.clone()));
                }
                Action::Finish => done = true,
            }
        }
        if done {
            break;
        }
        // Finished tasks are reaped so the set does not grow for the whole test.
        while tasks.try_join_next().is_some() {}
        let wake = t.next_wakeup();
        let sleep = std::time::Duration::from_nanos(wake.as_nanos().saturating_sub(at.as_nanos()));
        tokio::select! {
            _ = tokio::time::sleep(sleep) => {}
            Some(p) = rx.recv() => arrived.push(p),
        }
    }
    tasks.abort_all();
    let o = t.outcome().expect("finished").clone();
    let first = t.window_first_interval();
    for p in &mut probes {
        p.in_window = p.interval >= first;
    }
    let (foreign, selfp): (Vec<_>, Vec<_>) = probes.into_iter().partition(|p| p.tcp_ms.is_some());
    let r = o.responsiveness;
    let summary = |probes: Vec<ProbeRecord>, rpm: Option<f64>, tcp, tls, http| ProbeSummary {
        rpm,
        tcp_ms: tcp,
        tls_ms: tls,
        http_ms: http,
        in_window: probes.iter().filter(|p| p.in_window).count(),
        total: probes.len(),
        probes,
    };
    Ok(RpmReport {
        config_url,
        protocol: if url.tls { "h2" } else { "h2c" }.into(),
        load: a.load,
        rpm: r.map(|r| r.rpm),
        rpm_confidence: o.rpm_confidence,
        down_bps: o.down_bps,
        up_bps: o.up_bps,
        goodput_confidence: o.goodput_confidence,
        flows_down: o.flows_down,
        flows_up: o.flows_up,
        duration_s: o.duration_s,
        foreign: summary(
            foreign,
            r.map(|r| r.foreign_rpm),
            r.map(|r| r.tcp_ms),
            r.and_then(|r| r.tls_ms),
            r.map(|r| r.http_ms),
        ),
        self_probes: summary(
            selfp,
            r.map(|r| r.loaded_rpm),
            None,
            None,
            r.map(|r| r.loaded_ms),
        ),
        idle: IdleSummary::of(idle),
        failed_probes: ctx.failed_probes.load(Ordering::Relaxed),
        failed_flows: ctx.failed_flows.load(Ordering::Relaxed),
        start_mono_ns: ctx.start_mono_ns,
        intervals: t.intervals().to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_gets_the_well_known_path_and_a_full_url_is_kept() {
        assert_eq!(
            config_url("https://server:4043").unwrap().path,
            "/.well-known/nq"
        );
        assert_eq!(config_url("https://server/config").unwrap().path, "/config");
        let e = config_url("server:4043").unwrap_err().0;
        assert!(
            e.contains("'server:4043'") && e.contains("try https://"),
            "{e}"
        );
    }

    #[test]
    fn core_defaults_are_the_drafts_but_for_the_interval() {
        let p = crate::algorithm::Params::default();
        assert_eq!((p.mad, p.max_flows), (4, 16));
        assert_eq!(p.interval, Duration::from_secs(1));
    }
}

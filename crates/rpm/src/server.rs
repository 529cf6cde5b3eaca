//! `latencylab rpm-server`: the test server of draft-ietf-ippm-responsiveness-09 section 7,
//! on hyper (HTTP/2 and HTTP/1.1) over rustls with a certificate made at start, or in clear
//! text with `--plain` (HTTP/1.1, or HTTP/2 with prior knowledge).
//!
//! It answers:
//! - `/.well-known/nq` (and `/config`): the configuration document (section 8.1), its URLs
//!   naming the host the client asked for, so the same server works under any name;
//! - `/small`: one byte (section 7, item 1), with the time the request reached the server in
//!   a header of its own ([`crate::RECEIVED_HEADER`]);
//! - `/large`: an endless body of zeros (item 2: "at least 8GB"; the client stops reading);
//! - `/upload` and `/slurp`: a sink that reads a POST body of any length and throws it away
//!   (item 3).
//!
//! Every connection keeps its unsent bytes at 5 ms of its rate (section 6.1.1,
//! [`crate::socket::Paced`]), so that a self probe's answer waits behind little of the bulk
//! data still in the server.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};
use std::time::Duration;

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;

use crate::config::{NqConfig, LARGE_PATH, SLURP_PATH, SMALL_PATH, UPLOAD_PATH, WELL_KNOWN_PATH};
use crate::UsageError;

#[derive(clap::Args, Clone, Debug)]
pub struct RpmServerArgs {
    /// TCP port (0: any free port, printed at start)
    #[arg(long, default_value_t = 4043)]
    pub port: u16,
    /// Address to listen on (all addresses by default)
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Serve clear-text HTTP/1.1 and HTTP/2 (prior knowledge) instead of HTTPS
    #[arg(long)]
    pub plain: bool,
    /// Write the certificate authority's certificate here (PEM), for clients that verify
    #[arg(long, value_name = "FILE", conflicts_with = "plain")]
    pub ca_out: Option<PathBuf>,
    /// More names for the certificate besides `server`, `localhost` and the loopback
    /// addresses (repeat for several)
    #[arg(long, value_name = "NAME")]
    pub name: Vec<String>,
    /// TCP_NOTSENT_LOWAT of accepted connections at first, bytes; a download then keeps it at
    /// 5 ms of its own rate and writes only below it (0: the system's default, and writes whenever
    /// the socket takes data)
    #[arg(long, value_name = "BYTES", default_value_t = crate::NOTSENT_LOWAT_BYTES)]
    pub notsent_lowat: u32,
}

/// A body of zeros that never ends (its connection keeps its own unsent bytes at 5 ms of
/// the rate: [`crate::socket::Paced`]).
struct Endless {
    chunk: Bytes,
}

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut TaskContext<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(self.chunk.clone()))))
    }
    fn is_end_stream(&self) -> bool {
        false
    }
    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

type RespBody = BoxBody<Bytes, Infallible>;

fn octets(status: StatusCode, body: impl Into<Bytes>) -> Response<RespBody> {
    Response::builder()
        .status(status)
        .header("content-type", "application/octet-stream")
        .header("cache-control", "no-store")
        .body(Full::new(body.into()).boxed())
        .expect("constant headers")
}

/// The authority the client asked for: HTTP/2's `:authority`, else the Host header.
fn authority(req: &Request<Incoming>) -> String {
    req.uri()
        .authority()
        .map(|a| a.to_string())
        .or_else(|| {
            req.headers()
                .get(hyper::header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "localhost".to_string())
}

async fn answer(req: Request<Incoming>, scheme: &'static str, zeros: Bytes) -> Response<RespBody> {
    let path = req.uri().path().to_string();
    match (req.method(), path.as_str()) {
        (&Method::GET, WELL_KNOWN_PATH | "/config") => {
            let doc = NqConfig::for_origin(scheme, &authority(&req)).to_json();
            Response::builder()
                .header("content-type", "application/json")
                .header("cache-control", "no-store")
                .body(Full::new(Bytes::from(doc)).boxed())
                .expect("constant headers")
        }
        (&Method::GET, SMALL_PATH) => {
            let mut r = octets(StatusCode::OK, Bytes::from_static(b"x"));
            // When the request reached this handler, on the machine's CLOCK_MONOTONIC: in a
            // lab, where client and server share that clock, it splits a probe's round trip
            // into the request's way and the answer's.
            r.headers_mut().insert(
                crate::RECEIVED_HEADER,
                hyper::header::HeaderValue::from(crate::monotonic_ns()),
            );
            r
        }
        (&Method::GET, LARGE_PATH) => Response::builder()
            .header("content-type", "application/octet-stream")
            .header("cache-control", "no-store")
            .body(Endless { chunk: zeros }.boxed())
            .expect("constant headers"),
        (&Method::POST | &Method::PUT, UPLOAD_PATH | SLURP_PATH) => {
            let mut body = req.into_body();
            let mut n = 0u64;
            while let Some(f) = body.frame().await {
                match f {
                    Ok(f) => n += f.data_ref().map_or(0, |d| d.len() as u64),
                    // The client closed the upload: it is done with this connection.
                    Err(_) => break,
                }
            }
            octets(StatusCode::OK, format!("{n}\n"))
        }
        _ => octets(
            StatusCode::NOT_FOUND,
            Bytes::from_static(b"not a responsiveness test URL\n"),
        ),
    }
}

pub fn run(a: &RpmServerArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(serve(a))
}

async fn serve(a: &RpmServerArgs) -> Result<()> {
    let bind = a.bind.as_deref().unwrap_or("::");
    let addr: SocketAddr = web::join_host_port(bind, a.port).parse().map_err(|_| {
        UsageError(format!(
            "--bind: '{bind}' is not an IP address (try ::, 0.0.0.0, 127.0.0.1)"
        ))
    })?;
    let tls = if a.plain {
        None
    } else {
        let mut names: Vec<String> = ["server", "localhost", "127.0.0.1", "::1"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        names.extend(a.name.iter().cloned());
        let id = web::tls::make_identity(&names)?;
        if let Some(p) = &a.ca_out {
            std::fs::write(p, &id.ca_pem)
                .with_context(|| format!("--ca-out: writing {}", p.display()))?;
        }
        Some(tokio_rustls::TlsAcceptor::from(web::tls::server_config(
            &id,
        )?))
    };
    // Listening comes last: a client started when the port opens finds the CA file written.
    let listener = web::server::bind_dual(addr).with_context(|| format!("listening on {addr}"))?;
    let local = listener.local_addr()?;
    let scheme = if a.plain { "http" } else { "https" };
    eprintln!(
        "rpm-server: listening on {local} ({scheme}); configuration at {scheme}://HOST:{}{WELL_KNOWN_PATH}",
        local.port()
    );
    // A download's body is handed to HTTP/2 in chunks of this size, each held whole in its
    // buffer: a small one keeps what a self probe's answer waits behind small too.
    let zeros = Bytes::from(vec![0u8; crate::H2_SEND_BUFFER_BYTES]);
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
        let tcp = crate::socket::Paced::new(tcp, a.notsent_lowat);
        let tls = tls.clone();
        let zeros = zeros.clone();
        tokio::spawn(async move {
            match tls {
                Some(acc) => {
                    if let Ok(mut s) = acc.accept(tcp).await {
                        s.get_mut()
                            .1
                            .set_buffer_limit(Some(crate::TLS_BUFFER_BYTES));
                        serve_conn(TokioIo::new(s), scheme, zeros).await;
                    }
                }
                None => serve_conn(TokioIo::new(tcp), scheme, zeros).await,
            }
        });
    }
}

async fn serve_conn<I>(io: I, scheme: &'static str, zeros: Bytes)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let mut b = auto::Builder::new(TokioExecutor::new());
    b.http1().keep_alive(true);
    // Windows large enough that an upload is limited by the path, not by flow control
    // (RFC 9113 section 6.9): 8 MiB per stream and 16 MiB per connection.
    b.http2()
        .max_concurrent_streams(1024)
        .initial_stream_window_size(8 << 20)
        .initial_connection_window_size(16 << 20)
        // A self probe's answer waits behind no more than this much of a download's data in
        // HTTP/2's own buffer (draft section 6.1.1).
        .max_send_buf_size(crate::H2_SEND_BUFFER_BYTES);
    let svc = hyper::service::service_fn(move |req| {
        let zeros = zeros.clone();
        async move { Ok::<_, Infallible>(answer(req, scheme, zeros).await) }
    });
    // A client that goes away mid-response is no error of the server's.
    let _ = b.serve_connection(io, svc).await;
}

//! HTTP/3 (RFC 9114) for both programs: the QUIC configurations (quinn, RFC 9000, with rustls
//! for RFC 9001), the server's side beside its TCP one, and the client's page load. h3 does the
//! framing and QPACK; this module maps requests to the page's resources, chooses the order in
//! which the server's streams share the connection, and records what the client saw.
//!
//! Stream scheduling. How a server interleaves the responses that are ready at once decides
//! what a lost packet holds up: when it sends one response after another, a loss stalls only
//! the response being sent; when it sends them round-robin, every response has data in every
//! window. Browsers ask for the first (RFC 9218: Chrome requests most resources non-incremental)
//! but servers differ, so the order is an option and is told to the client in a response header
//! ([`SCHEDULING_HEADER`]), which writes it into its page record.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use bytes::{Buf, Bytes};
use hyper::{Request, Response, StatusCode};
use tokio::sync::OnceCell;

use crate::client::{Ctx, Done, Req, Url};
use crate::server::Site;

/// The ALPN protocol identifier of HTTP/3 (RFC 9114 section 3.1).
pub const ALPN_H3: &[u8] = b"h3";

/// The response header that tells the client the server's stream scheduling.
pub const SCHEDULING_HEADER: &str = "x-latencylab-scheduling";

pub use crate::records::Scheduling;

/// The transport settings both ends share. Streams: a page's worth at once (RFC 9000 section
/// 4.6; browsers allow 100 or more, as HTTP/2's `max_concurrent_streams` here does).
fn transport(scheduling: Scheduling) -> quinn::TransportConfig {
    let mut t = quinn::TransportConfig::default();
    t.max_concurrent_bidi_streams(quinn::VarInt::from_u32(256))
        .send_fairness(scheduling == Scheduling::RoundRobin)
        // The lab's idle connections outlive no run; 30 s is RFC 9308 section 3.2's advice.
        .max_idle_timeout(Some(quinn::VarInt::from_u32(30_000).into()));
    t
}

/// The server's QUIC configuration: TLS 1.3 only (RFC 9001 section 4.2), ALPN `h3`.
pub fn server_config(
    id: &crate::tls::ServerIdentity,
    scheduling: Scheduling,
) -> Result<quinn::ServerConfig> {
    let mut tls = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(id.chain.clone(), id.key.clone_key())
        .context("the server certificate")?;
    tls.alpn_protocols = vec![ALPN_H3.to_vec()];
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls)
        .map_err(|e| anyhow!("QUIC TLS configuration: {e}"))?;
    let mut c = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    c.transport_config(Arc::new(transport(scheduling)));
    Ok(c)
}

/// The client's QUIC configuration, trusting only the CA in `ca_pem`.
pub fn client_config(ca_pem: &[u8]) -> Result<quinn::ClientConfig> {
    let tls = crate::tls::client_config_versions(ca_pem, ALPN_H3, &[&rustls::version::TLS13])?;
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map_err(|e| anyhow!("QUIC TLS configuration: {e}"))?;
    let mut c = quinn::ClientConfig::new(Arc::new(crypto));
    // The client's scheduling only orders its requests, which are one packet each.
    c.transport_config(Arc::new(transport(Scheduling::RoundRobin)));
    Ok(c)
}

/// Serves HTTP/3 on `endpoint` until the process ends; writes a `quic_closed` line to `out`
/// as each connection ends.
pub async fn serve(
    endpoint: quinn::Endpoint,
    site: Arc<Site>,
    out: Arc<std::sync::Mutex<crate::Output>>,
) {
    while let Some(incoming) = endpoint.accept().await {
        let site = site.clone();
        let out = out.clone();
        tokio::spawn(async move {
            // A handshake that fails or a client that goes away is no error of the server's.
            let Ok(conn) = incoming.await else {
                return;
            };
            let Ok(mut h3) =
                h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn.clone()))
                    .await
            else {
                return;
            };
            let started = std::time::Instant::now();
            while let Ok(Some(resolver)) = h3.accept().await {
                let site = site.clone();
                tokio::spawn(async move {
                    let Ok((req, mut stream)) = resolver.resolve_request().await else {
                        return;
                    };
                    let (resp, body) = site.lookup(req.uri().path()).await;
                    if stream.send_response(resp).await.is_err() {
                        return;
                    }
                    if !body.is_empty() && stream.send_data(body).await.is_err() {
                        return;
                    }
                    let _ = stream.finish().await;
                });
            }
            // The server's view of the connection: what its loss detection counted.
            let s = conn.stats();
            let r = crate::records::WebRecord::QuicClosed {
                remote: conn.remote_address().to_string(),
                duration_ms: started.elapsed().as_secs_f64() * 1e3,
                sent_packets: s.path.sent_packets,
                lost_packets: s.path.lost_packets,
                lost_bytes: s.path.lost_bytes,
                congestion_events: s.path.congestion_events,
                rtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            };
            out.lock().expect("output lock").emit(&r);
        });
    }
}

/// The response for a request the site cannot answer, as HTTP/1.1 and HTTP/2 answer it.
pub fn not_found() -> (Response<()>, Bytes) {
    (
        Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(())
            .expect("constant headers"),
        Bytes::from_static(b"not in the page\n"),
    )
}

type H3Sender = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

/// The client's QUIC endpoint: one UDP socket for every connection of the load.
pub fn client_endpoint(cfg: quinn::ClientConfig, ipv6: bool) -> Result<quinn::Endpoint> {
    let bind: SocketAddr = if ipv6 {
        "[::]:0".parse().expect("literal")
    } else {
        "0.0.0.0:0".parse().expect("literal")
    };
    let mut e = quinn::Endpoint::client(bind).context("opening a UDP socket")?;
    e.set_default_client_config(cfg);
    Ok(e)
}

/// Opens a QUIC connection to `url`'s origin and HTTP/3 on it, and records the connection:
/// `start_ms` when the client's first Initial is about to leave (after name resolution),
/// `ready_ms` (= `tcp_ms`) when the handshake completed at the client (RFC 9001 section 4.1.1:
/// it has the server's Finished and sends its own).
async fn connect(ctx: &Ctx, endpoint: &quinn::Endpoint, url: &Url) -> Result<(H3Sender, u64)> {
    let conn_no = ctx.next_conn_no();
    let addr = ctx.resolve(url).await?;
    // `connect` builds the ClientHello (its key share is the costly part) and queues the
    // Initial; the endpoint's task sends it next. The clock starts there, as a capture's does.
    let connecting = endpoint
        .connect(addr, &url.host)
        .with_context(|| format!("QUIC to {} ({addr})", url.authority()))?;
    let start_ms = ctx.ms();
    let conn = connecting
        .await
        .with_context(|| format!("QUIC handshake with {} ({addr})", url.authority()))?;
    let ready_ms = ctx.ms();
    ctx.emit(&crate::records::WebRecord::Connection {
        conn: conn_no,
        host: url.host.clone(),
        start_ms,
        tcp_ms: ready_ms,
        ready_ms,
        protocol: "h3".into(),
    });
    let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(conn))
        .await
        .with_context(|| format!("HTTP/3 with {}", url.authority()))?;
    tokio::spawn(async move {
        let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
    });
    Ok((sender, conn_no))
}

/// One request on its own stream: sends it, reads the response, records it; returns the body
/// when it is the HTML (the only one the load scans).
async fn fetch(
    ctx: &Ctx,
    mut sender: H3Sender,
    conn: u64,
    new_conn: bool,
    req: Req,
) -> Result<Vec<u8>> {
    let r = Request::get(req.url.full())
        .header("user-agent", "latencylab-page-load")
        .body(())
        .context("building a request")?;
    let sent_ms = ctx.ms();
    let mut stream = sender
        .send_request(r)
        .await
        .with_context(|| format!("GET {}", req.url.full()))?;
    stream
        .finish()
        .await
        .with_context(|| format!("GET {}", req.url.full()))?;
    let resp = stream
        .recv_response()
        .await
        .with_context(|| format!("GET {}", req.url.full()))?;
    let first_ms = ctx.ms();
    if let Some(s) = resp.headers().get(SCHEDULING_HEADER) {
        ctx.saw_scheduling(s.to_str().unwrap_or("?"));
    }
    let mut gaps = crate::client::Gaps::new(first_ms);
    let mut bytes = 0u64;
    let mut kept = Vec::new();
    while let Some(mut chunk) = stream
        .recv_data()
        .await
        .with_context(|| format!("reading {}", req.url.full()))?
    {
        gaps.arrived(ctx.ms());
        let n = chunk.remaining();
        bytes += n as u64;
        if req.url.path == "/" {
            kept.extend_from_slice(&chunk.copy_to_bytes(n));
        } else {
            chunk.advance(n);
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
    ctx.finish(&req, conn, new_conn, resp.status().as_u16(), d);
    Ok(kept)
}

/// The page over HTTP/3: one QUIC connection per origin (or one in all with `coalesce`), the
/// HTML first, then every resource it references, each on its own stream at once.
pub(crate) async fn load(
    ctx: &Arc<Ctx>,
    url: &Url,
    cfg: quinn::ClientConfig,
    coalesce: bool,
) -> Result<()> {
    let first_addr = ctx.resolve(url).await?;
    let endpoint = client_endpoint(cfg, first_addr.is_ipv6())?;
    let (sender, conn) = connect(ctx, &endpoint, url).await?;
    let html = fetch(
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
    type Cell = Arc<OnceCell<(H3Sender, u64)>>;
    let mut conns: std::collections::HashMap<(String, u16), Cell> = Default::default();
    let first: Cell = Arc::new(OnceCell::new_with(Some((sender, conn))));
    conns.insert(url.origin(), first.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for r in crate::client::subresources(ctx, &html)? {
        if !r.url.tls {
            anyhow::bail!(
                "HTTP/3 is https only, and the page references {}",
                r.url.full()
            );
        }
        let cell = if coalesce {
            first.clone()
        } else {
            conns.entry(r.url.origin()).or_default().clone()
        };
        let (ctx, endpoint) = (ctx.clone(), endpoint.clone());
        tasks.spawn(async move {
            let mut opened = false;
            let (s, c) = cell
                .get_or_try_init(|| {
                    opened = true;
                    connect(&ctx, &endpoint, &r.url)
                })
                .await?
                .clone();
            fetch(&ctx, s, c, opened, r).await.map(|_| ())
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.context("a stream task")??;
    }
    drop(conns);
    drop(first);
    // Close every connection now and say so to the server (RFC 9000 section 10.2), rather than
    // leave it to the idle timeout; a short wait lets the CONNECTION_CLOSE leave.
    endpoint.close(quinn::VarInt::from_u32(0), b"page loaded");
    let _ = tokio::time::timeout(Duration::from_millis(200), endpoint.wait_idle()).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduling_names_are_the_options_values() {
        use clap::ValueEnum;
        for s in [Scheduling::Sequential, Scheduling::RoundRobin] {
            let v = s.to_possible_value().unwrap();
            assert_eq!(v.get_name(), s.name());
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.name())
            );
        }
    }

    #[test]
    fn only_round_robin_shares_the_connection_fairly() {
        // quinn's Debug output is the only reading of its settings.
        let seq = format!("{:?}", transport(Scheduling::Sequential));
        let rr = format!("{:?}", transport(Scheduling::RoundRobin));
        assert!(seq.contains("send_fairness: false"), "{seq}");
        assert!(rr.contains("send_fairness: true"), "{rr}");
    }
}

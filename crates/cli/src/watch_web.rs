//! `--watch-web`: the live figures of `--watch` as a page in a browser.
//!
//! A small HTTP/1.1 server (hyper on a current-thread tokio runtime, in a thread of its own)
//! listens on 127.0.0.1 of the machine only, on a port the system picks unless one is asked, and
//! is bound before the lab exists, so nothing of it is inside the lab. It serves two things: the
//! page (`/`, self-contained: its script draws the charts as SVG) and the figures (`/live`,
//! JSON). The page asks `/live?after=SEQ` and the server answers as soon as the figures are newer
//! than SEQ (a long poll), so the page moves with the lab, ten times a second, without
//! polling in vain.
//!
//! The figures are the `--live` rows ([`labnet::live::Row`]) and the last 30 s of each
//! direction ([`labnet::live::Window`]), published by the view's thread; the engine never waits
//! for the page. When the lab has ended the server says so, and stays up until a page that was
//! following the run has read that (two seconds at most).

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use lab::live::{Row, Series, Window};
use lab::UsageError;
use serde::Serialize;
use tokio::sync::{oneshot, watch};

/// The page: one self-contained file, no script or style from anywhere else.
const PAGE: &str = include_str!("watch_web.html");

/// How much lab time the charts show: the last 30 s, at ten intervals a second.
const CHART_INTERVALS: usize = 300;
/// How long a long poll waits for newer figures before it answers with the same ones.
const POLL_WAIT: Duration = Duration::from_secs(10);
/// How long the server stays up after the lab, for a following page to read the end.
const LINGER: Duration = Duration::from_secs(2);

/// The figures as the page reads them (`/live`): one definition, serialized once per interval.
#[derive(Serialize)]
struct Published<'a> {
    /// Grows with every publication; the page asks for figures newer than the last it drew.
    seq: u64,
    /// What runs: `shell`, `run`, or a demo's lab.
    title: &'a str,
    /// The watched command has ended: no more figures will come.
    ended: bool,
    /// The last interval's rows, one per link direction.
    rows: &'a [Row],
    /// Each direction's last intervals, in the rows' order.
    series: &'a [Series],
}

/// One publication: its sequence number, whether it is the end, and its JSON.
#[derive(Clone, Default)]
struct Figures {
    seq: u64,
    ended: bool,
    json: Bytes,
}

/// What the view's thread and the server share.
struct Shared {
    figures: watch::Sender<Figures>,
    /// What the publications are made of.
    state: Mutex<State>,
    /// A page has asked for figures, and a page has been told the end.
    polled: AtomicBool,
    told_end: AtomicBool,
}

struct State {
    seq: u64,
    title: String,
    rows: Vec<Row>,
    window: Window,
}

/// The running page server. [`WebView::finish`] says the end and stops it.
pub struct WebView {
    shared: Arc<Shared>,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// The publishing half, for the thread that turns snapshots into rows.
#[derive(Clone)]
pub struct Feed(Arc<Shared>);

impl WebView {
    /// Listens on 127.0.0.1:`port` (0: a port the system picks) and serves the page.
    pub fn start(port: u16) -> Result<WebView> {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let listener = TcpListener::bind(addr).map_err(|e| {
            UsageError(format!(
                "--watch-web: cannot listen on {addr}: {e} (give a free port, or none to \
                 let the system pick one)"
            ))
        })?;
        listener
            .set_nonblocking(true)
            .context("--watch-web: listener")?;
        let url = format!("http://{}/", listener.local_addr()?);
        let (figures, _) = watch::channel(Figures::default());
        let shared = Arc::new(Shared {
            figures,
            state: Mutex::new(State {
                seq: 0,
                title: String::new(),
                rows: Vec::new(),
                window: Window::new(CHART_INTERVALS),
            }),
            polled: AtomicBool::new(false),
            told_end: AtomicBool::new(false),
        });
        let (stop, stopped) = oneshot::channel();
        let server = shared.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .context("--watch-web: runtime")?;
        let thread = std::thread::Builder::new()
            .name("watch-web".into())
            .spawn(move || {
                // Ctrl-C and SIGTERM are the lab's to turn into its end, never this thread's.
                let _ = lab::block_stop_signals();
                runtime.block_on(serve(listener, server, stopped));
            })
            .context("--watch-web: thread")?;
        Ok(WebView {
            shared,
            url,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The page's address, to print.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The publishing half.
    pub fn feed(&self) -> Feed {
        Feed(self.shared.clone())
    }

    /// Publishes the end, waits (two seconds at most) until a page that followed the run has
    /// read it, and stops the server.
    pub fn finish(mut self) {
        self.feed().publish(true);
        let since = Instant::now();
        while self.shared.polled.load(Ordering::Relaxed)
            && !self.shared.told_end.load(Ordering::Relaxed)
            && since.elapsed() < LINGER
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stop_server();
    }

    fn stop_server(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WebView {
    fn drop(&mut self) {
        self.stop_server();
    }
}

impl Feed {
    /// A new lab starts under `title`: the charts start again.
    pub fn new_lab(&self, title: &str) {
        if let Ok(mut s) = self.0.state.lock() {
            s.title = title.to_string();
            s.rows.clear();
            s.window.clear();
        }
        self.publish(false);
    }

    /// One interval's rows.
    pub fn rows(&self, rows: &[Row]) {
        if let Ok(mut s) = self.0.state.lock() {
            s.window.push(rows);
            s.rows = rows.to_vec();
        }
        self.publish(false);
    }

    fn publish(&self, ended: bool) {
        let Ok(mut s) = self.0.state.lock() else {
            return;
        };
        s.seq += 1;
        let p = Published {
            seq: s.seq,
            title: &s.title,
            ended,
            rows: &s.rows,
            series: s.window.series(),
        };
        let json = serde_json::to_vec(&p).map(Bytes::from).unwrap_or_default();
        self.0.figures.send_replace(Figures {
            seq: s.seq,
            ended,
            json,
        });
    }
}

/// Accepts connections until told to stop.
async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: oneshot::Receiver<()>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(answer(req, &shared).await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        }
    }
}

/// The answer to one request.
async fn answer(req: Request<Incoming>, shared: &Shared) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return plain(StatusCode::METHOD_NOT_ALLOWED, "only GET is served here\n");
    }
    // Only pages addressed to this machine by name or loopback address: a page of another
    // site whose name was made to point here (DNS rebinding) gets nothing.
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !loopback_host(host) {
        return plain(
            StatusCode::FORBIDDEN,
            "this page is served to http://127.0.0.1 or http://localhost only\n",
        );
    }
    match req.uri().path() {
        "/" => reply(
            StatusCode::OK,
            "text/html; charset=utf-8",
            Bytes::from(PAGE),
        ),
        "/live" => {
            let after = req
                .uri()
                .query()
                .and_then(|q| q.split('&').find_map(|kv| kv.strip_prefix("after=")))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
            shared.polled.store(true, Ordering::Relaxed);
            let mut rx = shared.figures.subscribe();
            let newer = |f: &Figures| f.seq > after || f.ended;
            let waited = tokio::time::timeout(POLL_WAIT, rx.wait_for(newer))
                .await
                .ok()
                .and_then(|r| r.ok().map(|f| f.clone()));
            let figures = waited.unwrap_or_else(|| rx.borrow().clone());
            if figures.ended {
                shared.told_end.store(true, Ordering::Relaxed);
            }
            reply(StatusCode::OK, "application/json", figures.json)
        }
        _ => plain(
            StatusCode::NOT_FOUND,
            "not here: the page is at / and its figures at /live\n",
        ),
    }
}

/// Whether a Host header names this machine's loopback (`127.0.0.1:PORT`, `localhost:PORT`,
/// `[::1]:PORT`).
fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => host,
    };
    matches!(name, "127.0.0.1" | "localhost" | "[::1]")
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    reply(status, "text/plain; charset=utf-8", Bytes::from(text))
}

fn reply(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    if let Ok(v) = content_type.parse() {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r.headers_mut().insert(
        CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    /// One request over a plain socket, as a browser would send it; the whole response.
    fn get(url: &str, path: &str) -> String {
        let addr = url.trim_start_matches("http://").trim_end_matches('/');
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    fn row(t_s: f64) -> Row {
        Row {
            t_s,
            link: "path".into(),
            dir: "down".into(),
            delivered_bps: 9.5e6,
            ..Row::default()
        }
    }

    #[test]
    fn the_page_and_newer_figures_are_served_on_loopback_and_the_end_is_said() {
        let v = WebView::start(0).unwrap();
        assert!(v.url().starts_with("http://127.0.0.1:"), "{}", v.url());
        let page = get(v.url(), "/");
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(
            page.contains("<svg") || page.contains("svg"),
            "the page draws SVG"
        );
        let feed = v.feed();
        feed.new_lab("shell");
        feed.rows(&[row(0.1)]);
        let first = get(v.url(), "/live?after=0");
        assert!(
            first.contains("\"seq\":2") && first.contains("\"title\":\"shell\""),
            "{first}"
        );
        // A poll for newer figures waits for them.
        let url = v.url().to_string();
        let waiting = std::thread::spawn(move || get(&url, "/live?after=2"));
        std::thread::sleep(Duration::from_millis(100));
        feed.rows(&[row(0.2)]);
        let second = waiting.join().unwrap();
        assert!(
            second.contains("\"seq\":3") && second.contains("\"t_s\":[0.1,0.2]"),
            "{second}"
        );
        assert!(get(v.url(), "/nothing").starts_with("HTTP/1.1 404"));
        // The end: a page that followed is told, then the server goes.
        let url = v.url().to_string();
        let addr = url
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_string();
        let last = std::thread::spawn(move || get(&url, "/live?after=3"));
        v.finish();
        let last = last.join().unwrap();
        assert!(last.contains("\"ended\":true"), "{last}");
        assert!(std::net::TcpStream::connect(addr).is_err());
    }

    #[test]
    fn only_loopback_names_are_served() {
        for h in ["127.0.0.1:8080", "localhost:41207", "[::1]:80", "localhost"] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:8080",
            "127.0.0.1.evil.example",
            "",
            "10.0.0.1:80",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
        let v = WebView::start(0).unwrap();
        let addr = v.url().trim_start_matches("http://").trim_end_matches('/');
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        write!(
            s,
            "GET /live HTTP/1.1\r\nHost: rebound.example\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 403"), "{out}");
    }

    #[test]
    fn a_port_in_use_is_a_usage_error_naming_it() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let e = WebView::start(port).err().unwrap();
        assert!(e.downcast_ref::<UsageError>().is_some());
        assert!(e.to_string().contains(&port.to_string()), "{e}");
    }
}

//! End-to-end tests of `latencylab web-server` and `latencylab page-load` on loopback (no lab,
//! no root): HTTP/1.1 keep-alive with and without pipelining, HTTP/2 over cleartext and over
//! TLS with the server's run-time CA, HTTP/3 over QUIC beside it, checked against curl where
//! curl can speak the protocol, and the clear errors for a bad page file and a refused
//! connection.

mod common;

use common::*;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PAGE: &str = r#"
name = "test"
[html]
host = "server"
bytes = 3000
[[resource]]
kind = "stylesheet"
host = "server"
path = "/s.css"
bytes = 1200
[[resource]]
kind = "image"
host = "server"
path = "/a/{i}.gif"
count = 8
bytes = 20000
think_ms = 5
[[resource]]
kind = "image"
host = "img1"
path = "/b/{i}.gif"
count = 6
bytes = 70000
"#;

/// The page's resources and bytes, HTML included.
const RESOURCES: usize = 1 + 1 + 8 + 6;
const BYTES: u64 = 3000 + 1200 + 8 * 20000 + 6 * 70000;

/// A running `web-server` on a free loopback port, killed when dropped.
struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn server(name: &str, tls: bool) -> Server {
    server_with(name, tls, &[])
}

/// [`server`] with more of `web-server`'s options.
fn server_with(name: &str, tls: bool, extra: &[&str]) -> Server {
    let dir = out_dir(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("page.toml"), PAGE).unwrap();
    let out = dir.join("server.jsonl");
    let mut cmd = Command::new(bin());
    cmd.args(["web-server", "--port", "0", "--bind", "127.0.0.1", "--page"])
        .arg(dir.join("page.toml"))
        .arg("--out")
        .arg(&out)
        .stdin(Stdio::null());
    if tls {
        cmd.arg("--tls").arg("--ca-out").arg(dir.join("ca.pem"));
    }
    cmd.args(extra);
    // Owned by `Server` from here on, whose drop kills and reaps it.
    let mut server = Server {
        child: cmd.spawn().expect("web-server starts"),
        port: 0,
        dir,
    };
    let t0 = Instant::now();
    loop {
        if let Ok(s) = std::fs::read_to_string(&out) {
            // Only a whole line: the server may be halfway through writing it.
            if let Some((l, _)) = s.split_once('\n') {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                assert_eq!(v["type"], "listening");
                let addr = v["addr"].as_str().unwrap();
                server.port = addr.rsplit(':').next().unwrap().parse().unwrap();
                return server;
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "web-server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `page-load` against the server; returns its records.
fn load(s: &Server, scheme: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let out = s.dir.join(format!("load-{}.jsonl", args.join("_")));
    let url = format!("{scheme}://server:{}/", s.port);
    let mut a: Vec<String> = vec![
        "page-load".into(),
        url,
        "--connect-to".into(),
        format!("127.0.0.1:{}", s.port),
        "--out".into(),
        out.display().to_string(),
    ];
    if scheme == "https" {
        a.push("--ca".into());
        a.push(s.dir.join("ca.pem").display().to_string());
    }
    a.extend(args.iter().map(|x| x.to_string()));
    let refs: Vec<&str> = a.iter().map(|x| x.as_str()).collect();
    let o = run(&refs);
    assert!(
        o.status.success(),
        "page-load {args:?}: {}\n{}",
        o.status,
        text(&o.stderr)
    );
    json_lines(&out)
}

fn of_type<'a>(r: &'a [serde_json::Value], t: &str) -> Vec<&'a serde_json::Value> {
    r.iter().filter(|v| v["type"] == t).collect()
}

/// Every resource arrived whole with status 200, and the page line adds up.
fn check_complete(r: &[serde_json::Value]) -> &serde_json::Value {
    let res = of_type(r, "resource");
    assert_eq!(res.len(), RESOURCES, "{r:#?}");
    assert!(res.iter().all(|v| v["status"] == 200), "{res:#?}");
    let bytes: u64 = res.iter().map(|v| v["bytes"].as_u64().unwrap()).sum();
    assert_eq!(bytes, BYTES);
    let page = *of_type(r, "page").last().expect("a page line");
    assert_eq!(page["bytes"], BYTES);
    assert_eq!(page["resources"], RESOURCES);
    let last = res
        .iter()
        .map(|v| v["last_byte_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert_eq!(page["page_load_ms"].as_f64().unwrap(), last);
    for v in &res {
        let (s, f, l) = (
            v["sent_ms"].as_f64().unwrap(),
            v["first_byte_ms"].as_f64().unwrap(),
            v["last_byte_ms"].as_f64().unwrap(),
        );
        assert!(s <= f && f <= l, "{v}");
    }
    page
}

/// Per connection, its resources in the order they were sent.
fn by_conn(r: &[serde_json::Value]) -> Vec<Vec<&serde_json::Value>> {
    let mut m: std::collections::BTreeMap<u64, Vec<&serde_json::Value>> = Default::default();
    for v in of_type(r, "resource") {
        m.entry(v["conn"].as_u64().unwrap()).or_default().push(v);
    }
    m.into_values()
        .map(|mut v| {
            v.sort_by(|a, b| {
                a["sent_ms"]
                    .as_f64()
                    .partial_cmp(&b["sent_ms"].as_f64())
                    .unwrap()
            });
            v
        })
        .collect()
}

#[test]
fn http11_keep_alive_uses_at_most_per_host_connections_and_one_request_at_a_time() {
    let s = server("web-h1", false);
    let r = load(&s, "http", &["--per-host", "2"]);
    let page = check_complete(&r);
    // Two origins (server, img1), two connections each at most.
    let conns = of_type(&r, "connection");
    assert!(conns.len() <= 4 && conns.len() >= 2, "{conns:#?}");
    assert_eq!(page["connections"], conns.len());
    for c in by_conn(&r) {
        assert!(c[0]["new_conn"] == true || c[0]["url"].as_str().unwrap().ends_with("/s.css"));
        assert!(c[1..].iter().all(|v| v["new_conn"] == false));
        // Keep-alive, no pipelining: each request leaves after the previous response ended.
        for w in c.windows(2) {
            assert!(
                w[1]["sent_ms"].as_f64() >= w[0]["last_byte_ms"].as_f64(),
                "{w:#?}"
            );
        }
    }
}

#[test]
fn pipelined_requests_leave_before_the_previous_response_and_come_back_in_order() {
    let s = server("web-pipe", false);
    let r = load(&s, "http", &["--per-host", "1", "--pipeline", "4"]);
    check_complete(&r);
    assert_eq!(of_type(&r, "connection").len(), 2);
    let mut overlapped = 0;
    for c in by_conn(&r) {
        for w in c.windows(2) {
            // In order: a later request's response never ends before an earlier one's.
            assert!(w[1]["last_byte_ms"].as_f64() >= w[0]["last_byte_ms"].as_f64());
            if w[1]["sent_ms"].as_f64() < w[0]["first_byte_ms"].as_f64() {
                overlapped += 1;
            }
        }
    }
    assert!(
        overlapped >= 6,
        "{overlapped} requests sent ahead of a response: {r:#?}"
    );
}

#[test]
fn http2_multiplexes_all_requests_on_one_connection_per_origin_or_one_in_all() {
    let s = server("web-h2c", false);
    let r = load(&s, "http", &["--http", "2"]);
    let page = check_complete(&r);
    assert_eq!(page["protocol"], "h2");
    assert_eq!(of_type(&r, "connection").len(), 2, "one per origin");
    let r = load(&s, "http", &["--http", "2", "--coalesce"]);
    check_complete(&r);
    assert_eq!(of_type(&r, "connection").len(), 1, "coalesced");
    // Multiplexed: the img1 requests are all sent before the first of them is answered.
    let img: Vec<_> = of_type(&r, "resource")
        .into_iter()
        .filter(|v| v["host"] == "img1")
        .collect();
    let last_sent = img
        .iter()
        .map(|v| v["sent_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let first_done = img
        .iter()
        .map(|v| v["last_byte_ms"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(last_sent < first_done, "{img:#?}");
}

#[test]
fn http3_loads_the_page_on_one_quic_connection_and_states_the_servers_scheduling() {
    for order in ["sequential", "round-robin"] {
        let s = server_with(
            &format!("web-h3-{order}"),
            true,
            &["--http3", "--scheduling", order],
        );
        let r = load(&s, "https", &["--http", "3", "--coalesce"]);
        let page = check_complete(&r);
        assert_eq!(page["protocol"], "h3");
        assert_eq!(page["scheduling"], order, "{page}");
        let c = of_type(&r, "connection");
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(c[0]["protocol"], "h3");
        // The handshake is timed: it takes some time, and it is done before the first request.
        let (start, ready) = (
            c[0]["start_ms"].as_f64().unwrap(),
            c[0]["ready_ms"].as_f64().unwrap(),
        );
        assert!(ready > start, "{c:#?}");
        let first_sent = of_type(&r, "resource")
            .iter()
            .map(|v| v["sent_ms"].as_f64().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert!(first_sent >= ready, "{r:#?}");
        // The client closes the connection; the server then writes what it counted over it.
        let t0 = std::time::Instant::now();
        let closed = loop {
            let lines = json_lines(&s.dir.join("server.jsonl"));
            if let Some(c) = lines.iter().find(|v| v["type"] == "quic_closed") {
                break c.clone();
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no quic_closed line");
            std::thread::sleep(Duration::from_millis(20));
        };
        let sent = closed["sent_packets"].as_u64().unwrap();
        assert!(sent > 10, "{closed}");
        // Loopback loses nothing, but QUIC declares a packet lost when its ACK comes late,
        // which a client that the machine schedules late makes happen: counted, not zero.
        assert!(closed["lost_packets"].as_u64().unwrap() < sent, "{closed}");
    }
    // HTTP/3 is https only: a plain URL is a usage error naming the URL.
    let o = run(&["page-load", "http://server:1/", "--http", "3"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("'http://server:1/'"),
        "{}",
        text(&o.stderr)
    );
    // --http3 needs --tls.
    let o = run(&["web-server", "--page", "x.toml", "--http3"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
}

#[test]
fn https_with_the_servers_run_time_ca_speaks_h2_and_http11_by_alpn() {
    let s = server("web-tls", true);
    let r = load(&s, "https", &["--http", "2", "--coalesce"]);
    assert_eq!(check_complete(&r)["protocol"], "h2");
    let c = of_type(&r, "connection");
    assert_eq!(c.len(), 1);
    assert!(c[0]["ready_ms"].as_f64() >= c[0]["tcp_ms"].as_f64());
    let r = load(&s, "https", &["--per-host", "3"]);
    assert_eq!(check_complete(&r)["protocol"], "http/1.1");
    // Without the CA the handshake must fail: the certificate is not trusted by default.
    let other = out_dir("web-tls-other-ca");
    std::fs::create_dir_all(&other).unwrap();
    let t = server("web-tls-2", true);
    let o = run(&[
        "page-load",
        &format!("https://server:{}/", s.port),
        "--connect-to",
        &format!("127.0.0.1:{}", s.port),
        "--ca",
        t.dir.join("ca.pem").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stderr).contains("TLS with server"),
        "{}",
        text(&o.stderr)
    );
    let _ = std::fs::remove_dir_all(&other);
}

#[test]
fn curl_reads_the_same_page_over_http11_and_h2c() {
    if !Path::new("/usr/bin/curl").exists() {
        panic!("curl is needed (apt-get install curl; scripts/test installs it)");
    }
    let s = server("web-curl", false);
    let url = format!("http://127.0.0.1:{}/", s.port);
    for extra in [&["--http1.1"][..], &["--http2-prior-knowledge"][..]] {
        let o = Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version} %{size_download} %{http_code}",
            ])
            .args(extra)
            .arg(&url)
            .output()
            .unwrap();
        let w = text(&o.stdout);
        let want = if extra[0] == "--http1.1" { "1.1" } else { "2" };
        assert_eq!(w, format!("{want} 3000 200"), "{}", text(&o.stderr));
    }
    let o = Command::new("curl")
        .args([
            "-sS",
            "-o",
            "/dev/null",
            "-w",
            "%{size_download} %{http_code}",
        ])
        .arg(format!("http://127.0.0.1:{}/b/6.gif", s.port))
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "70000 200");
    let o = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}"])
        .arg(format!("http://127.0.0.1:{}/none", s.port))
        .output()
        .unwrap();
    assert_eq!(text(&o.stdout), "404");
}

#[test]
fn a_bad_page_file_and_a_refused_connection_get_clear_errors() {
    let dir = out_dir("web-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, PAGE.replace("count = 8", "count = 0")).unwrap();
    let o = run(&["web-server", "--port", "0", "--page", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let e = text(&o.stderr);
    assert!(
        e.contains("bad.toml") && e.contains("resource 2 (/a/{i}.gif)") && e.contains("count = 0"),
        "{e}"
    );
    let o = run(&[
        "web-server",
        "--port",
        "0",
        "--page",
        "/nonexistent/page.toml",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/page.toml"));
    // A port nobody listens on: bind one, note it, close it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let o = run(&["page-load", &format!("http://127.0.0.1:{port}/")]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(
        e.contains(&format!("connecting to 127.0.0.1:{port}")) && e.contains("refused"),
        "{e}"
    );
    let o = run(&["page-load", "ftp://server/"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("'ftp://server/'"));
    let _ = std::fs::remove_dir_all(&dir);
}

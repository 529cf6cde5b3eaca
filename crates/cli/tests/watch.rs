//! `--live FILE` and `--watch` end to end: the JSON lines agree with summary.json, and the
//! full-screen view, read through a pseudo-terminal by a terminal emulator, shows the queue
//! filling and the rate, and leaves the terminal as it found it when Ctrl-C ends the lab (and
//! the lab leaves nothing behind); `--watch-web`'s page, in headless Chromium, moves with the
//! lab and says when it has ended.

mod common;

use common::*;

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use labnet::live::Row;

const LAB: &[&str] = &[
    "shell",
    "--down",
    "10mbit",
    "--queue",
    "fifo",
    "--server",
    "latencylab bulk-server",
];

#[test]
fn live_lines_come_every_interval_and_end_on_summary_json_totals() {
    let _g = lock();
    let dir = out_dir("live");
    let live = dir.with_extension("jsonl");
    let mut args: Vec<&str> = LAB.to_vec();
    let (d, l) = (dir.to_str().unwrap(), live.to_str().unwrap());
    args.extend(["-o", d, "--no-capture", "--live", l, "-q", "--"]);
    args.extend(["latencylab", "bulk-client", "server", "--duration", "3s"]);
    let o = run(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rows: Vec<Row> = std::fs::read_to_string(&live)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let down: Vec<&Row> = rows
        .iter()
        .filter(|r| r.dir == "down" && r.link == "path")
        .collect();
    // About ten a second for a run of three seconds and more.
    assert!(down.len() >= 25, "{} rows", down.len());
    // The download fills the 10 Mbit/s line in the middle of the run, and the FIFO queue with it.
    let busy: Vec<&&Row> = down.iter().filter(|r| r.t_s > 1.0 && r.t_s < 2.5).collect();
    let mean_bps = busy.iter().map(|r| r.delivered_bps).sum::<f64>() / busy.len() as f64;
    assert!((8.5e6..10.5e6).contains(&mean_bps), "{mean_bps}");
    assert!(busy.iter().any(|r| r.backlog_packets > 10), "{busy:?}");
    // The last row of each direction says so and holds summary.json's totals.
    let summary = read_json(&dir.join("summary.json"));
    let links = summary["links"].as_array().unwrap();
    for l in links {
        let (name, side) = (
            l["name"].as_str().unwrap(),
            l["direction"].as_str().unwrap(),
        );
        let last = rows
            .iter()
            .rev()
            .find(|r| r.link == name && r.dir == side)
            .unwrap();
        assert!(last.last, "{last:?}");
        assert_eq!(
            serde_json::json!(last.bytes_total),
            l["bytes_out"],
            "{name} {side}"
        );
        assert_eq!(
            serde_json::json!(last.packets_total),
            l["packets_out"],
            "{name} {side}"
        );
        let drops: u64 = l["drops"]
            .as_object()
            .map_or(0, |m| m.values().map(|v| v.as_u64().unwrap()).sum());
        assert_eq!(last.drops_total, drops, "{name} {side}");
    }
    assert_nothing_left();
}

/// A child process on a fresh pseudo-terminal of 80×24, as its controlling terminal; the
/// master end comes back with it.
fn spawn_on_pty(args: &[&str]) -> (std::process::Child, File) {
    let (mut master, mut slave) = (0, 0);
    let ws = libc::winsize {
        ws_row: 24,
        ws_col: 80,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors; the name and termios are left null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &ws,
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: both descriptors were just made by openpty and are owned here alone.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let fd = slave.as_raw_fd();
    let mut cmd = Command::new(bin());
    cmd.args(args)
        .stdin(Stdio::from(slave.try_clone().unwrap()))
        .stdout(Stdio::from(slave.try_clone().unwrap()))
        .stderr(Stdio::from(slave.try_clone().unwrap()));
    // SAFETY: setsid and ioctl(TIOCSCTTY) between fork and exec, async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::setsid() < 0 || libc::ioctl(fd, libc::TIOCSCTTY, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd.spawn().unwrap();
    drop(slave);
    (child, File::from(master))
}

/// Reads the terminal's output as it comes, into a terminal emulator; returns each screen seen
/// (as text) with when it was seen, and every byte.
fn read_screens(mut master: File) -> mpsc::Receiver<(Instant, String, Vec<u8>)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut parser = vt100::Parser::new(24, 80, 0);
        let mut buf = [0u8; 8192];
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            parser.process(&buf[..n]);
            if tx
                .send((
                    Instant::now(),
                    parser.screen().contents(),
                    buf[..n].to_vec(),
                ))
                .is_err()
            {
                break;
            }
        }
    });
    rx
}

/// The figure after `label` on the screen's `path down` line (e.g. "queue 53 pkts").
fn figure(screen: &str, label: &str) -> Option<f64> {
    let line = screen.lines().find(|l| l.starts_with("path down"))?;
    let rest = &line[line.find(label)? + label.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

fn lab_time(screen: &str) -> Option<f64> {
    screen
        .lines()
        .next()?
        .strip_prefix("latencylab")?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[test]
fn watch_shows_the_queue_filling_and_the_rate_and_ctrl_c_leaves_the_terminal_as_it_was() {
    let _g = lock();
    let mut args: Vec<&str> = LAB.to_vec();
    args.extend(["--watch", "--"]);
    args.extend(["latencylab", "bulk-client", "server", "--duration", "10s"]);
    let (mut child, master) = spawn_on_pty(&args);
    let mut ctrl_c = master.try_clone().unwrap();
    let screens = read_screens(master);
    let start = Instant::now();
    let (mut queue_early, mut rates, mut bytes) = (false, Vec::new(), Vec::new());
    // When the download was first seen moving: the client starts once the server listens,
    // which a loaded machine can delay.
    let mut moving_at: Option<f64> = None;
    let mut last_screen = String::new();
    while start.elapsed() < Duration::from_secs(30) {
        let Ok((_, screen, b)) = screens.recv_timeout(Duration::from_secs(1)) else {
            continue;
        };
        bytes.extend(b);
        if let (Some(t), Some(r)) = (lab_time(&screen), figure(&screen, "path down")) {
            if r > 0.0 && moving_at.is_none() {
                moving_at = Some(t);
            }
        }
        if let (Some(t), Some(q), Some(t0)) =
            (lab_time(&screen), figure(&screen, "queue"), moving_at)
        {
            queue_early |= t <= t0 + 1.05 && q >= 10.0;
        }
        // A screen read while the view redraws can mix two frames' digits (10.08 half
        // overwritten by 9.96 reads 90.08): the median of five screens' rates.
        if lab_time(&screen).is_some_and(|t| t > 3.0) {
            if let Some(r) = figure(&screen, "path down") {
                rates.push(r);
                if rates.len() == 5 {
                    eprintln!(
                        "the screen at {} s:\n{screen}",
                        lab_time(&screen).unwrap_or(0.0)
                    );
                    last_screen = screen.clone();
                    break;
                }
            }
        }
        last_screen = screen;
    }
    // Ctrl-C, typed on the terminal.
    ctrl_c.write_all(b"\x03").unwrap();
    let end = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            end.elapsed() < Duration::from_secs(20),
            "the lab did not end"
        );
        while let Ok((_, _, b)) = screens.try_recv() {
            bytes.extend(b);
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    while let Ok((_, _, b)) = screens.recv_timeout(Duration::from_millis(500)) {
        bytes.extend(b);
    }
    assert!(
        queue_early,
        "no screen showed the queue filling in the download's first second (moving at {moving_at:?} s):\n{last_screen}"
    );
    assert!(!rates.is_empty(), "no rate seen:\n{last_screen}");
    let rate = median(rates.clone());
    assert!(
        (8.5..=10.5).contains(&rate),
        "{rate} Mbit/s of {rates:?}:\n{last_screen}"
    );
    // Ctrl-C went to COMMAND, as in a lab without the view; the lab ended with it, long before
    // the 10 s the download would have taken, and by its own hand (an exit status, not a
    // signal's death).
    assert!(status.code().is_some(), "{status:?}");
    assert!(start.elapsed() < Duration::from_secs(9) || end.elapsed() < Duration::from_secs(5));
    // The alternate screen was entered and left, and the cursor shown again, after the last
    // drawing.
    let s = String::from_utf8_lossy(&bytes);
    let (enter, leave) = (s.find("\x1b[?1049h"), s.rfind("\x1b[?1049l"));
    assert!(enter.is_some() && leave > enter, "{s:?}");
    assert!(s.rfind("\x1b[?25h") > s.rfind("\x1b[?25l"), "{s:?}");
    assert_nothing_left();
}

#[test]
fn watch_without_a_terminal_is_a_usage_error() {
    let _g = lock();
    let mut cmd = Command::new(bin());
    cmd.args(["shell", "--watch", "--", "true"])
        .stdin(Stdio::null());
    // SAFETY: setsid between fork and exec: no controlling terminal.
    unsafe {
        cmd.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("--watch needs a terminal"),
        "{}",
        text(&o.stderr)
    );
    assert_nothing_left();
}

/// The value of attribute `name` on the page's body, from a DOM Chromium dumped.
fn body_attr<'a>(dom: &'a str, name: &str) -> Option<&'a str> {
    let body = &dom[dom.find("<body")?..];
    let body = &body[..body.find('>')?];
    let at = body.find(&format!("{name}=\""))? + name.len() + 2;
    body[at..].split('"').next()
}

/// The path the page drew for chart `id` (its `d`), from a DOM Chromium dumped.
fn chart_path<'a>(dom: &'a str, id: &str) -> Option<&'a str> {
    let svg = &dom[dom.find(&format!("id=\"{id}\""))?..];
    let path = &svg[svg.find("class=\"data\" d=\"")? + 16..];
    path.split('"').next()
}

#[test]
fn watch_web_page_moves_with_the_lab_and_says_when_it_has_ended() {
    let _g = lock();
    let dir = out_dir("watch-web");
    let mut args: Vec<&str> = LAB.to_vec();
    let d = dir.to_str().unwrap();
    args.extend(["-o", d, "--no-capture", "--watch-web", "--"]);
    // Long enough that a Chromium slow to start (seconds, on a loaded machine) still finds
    // the lab running.
    args.extend(["latencylab", "bulk-client", "server", "--duration", "10s"]);
    let mut child = Command::new(bin())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The page's address comes first on standard error; the rest is kept for the messages.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let first = rx.recv_timeout(Duration::from_secs(20)).unwrap();
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address on the first line: {first}"))
        .to_string();
    // Two pages at once. Headless Chromium's virtual time stands still while a request is
    // open, and the page's request is answered only when the lab has newer figures: a short
    // budget is spent within a couple of seconds of the lab's time, a long one outlasts it.
    let (u1, u2) = (url.clone(), url.clone());
    let mid = std::thread::spawn(move || {
        run_chromium_url(
            &u1,
            &["--virtual-time-budget=300".into(), "--dump-dom".into()],
        )
    });
    let end = std::thread::spawn(move || {
        run_chromium_url(
            &u2,
            &["--virtual-time-budget=600000".into(), "--dump-dom".into()],
        )
    });
    let (mid, end) = (mid.join().unwrap(), end.join().unwrap());
    let status = child.wait().unwrap();
    let rest: Vec<String> = rx.try_iter().collect();
    assert!(status.success(), "{}", rest.join("\n"));

    let frames = |dom: &str| -> u32 { body_attr(dom, "data-frames").unwrap().parse().unwrap() };
    assert_eq!(body_attr(&mid, "data-state"), Some("running"), "{mid}");
    assert_eq!(body_attr(&end, "data-state"), Some("ended"), "{end}");
    // Each page redrew as the lab went on; how often depends on when Chromium came up.
    assert!(frames(&mid) >= 2, "{mid}");
    assert!(frames(&end) > frames(&mid), "{end}");
    assert!(end.contains("The lab has ended at"), "{end}");
    // The downlink's charts moved between the two pages, and the last one shows the line full.
    let (a, b) = (
        chart_path(&mid, "path-down-rate").unwrap(),
        chart_path(&end, "path-down-rate").unwrap(),
    );
    assert!(!a.is_empty() && a != b, "{a}\n{b}");
    assert!(b.matches('L').count() > a.matches('L').count(), "{a}\n{b}");
    // Whenever the page opened, its last charts hold the whole run at ten points a second.
    assert!(b.matches('L').count() >= 80, "{b}");
    assert!(end.contains("of 10.00 Mbit/s"), "{end}");
    assert_ne!(
        chart_path(&mid, "path-down-delay"),
        chart_path(&end, "path-down-delay")
    );
    // Nothing listens once the lab is gone.
    let addr = url.trim_start_matches("http://").trim_end_matches('/');
    assert!(std::net::TcpStream::connect(addr).is_err());
    assert_nothing_left();
}

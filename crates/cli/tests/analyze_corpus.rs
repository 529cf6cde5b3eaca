//! `latencylab analyze` on captures made without latencylab: `scripts/corpus/build` runs
//! small traffic programs between network namespaces joined by veth pairs (a `tbf`
//! bottleneck where a case needs one) and captures them with tcpdump at the client, the
//! server and a router in the middle; `scripts/corpus/expected.txt` says which diagnoses each
//! capture must carry and which it may. Everything else reported is a false alarm.
//!
//! Needs root, tcpdump, ethtool and python3 (scripts/test installs them). The corpus is built
//! once into the target directory and rebuilt only when the script changes.

mod common;

use common::*;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds (or reuses) the corpus, once per test process, and returns its directory.
fn corpus() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(build).clone()
}

fn build() -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("analyze-corpus");
    let o = Command::new(repo().join("scripts/corpus/build"))
        .arg(&out)
        .output()
        .expect("scripts/corpus/build runs");
    assert!(
        o.status.success(),
        "scripts/corpus/build failed:\n{}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    let left: Vec<String> = fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| n.starts_with("cor") && n.contains('-'))
                .collect()
        })
        .unwrap_or_default();
    assert!(
        left.is_empty(),
        "the corpus script left namespaces behind: {left:?}"
    );
    out
}

/// One line of expected.txt.
struct Expect {
    case: String,
    point: String,
    required: BTreeSet<String>,
    allowed: BTreeSet<String>,
}

fn expectations() -> Vec<Expect> {
    let path = repo().join("scripts/corpus/expected.txt");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.split_whitespace();
        let case = words.next().unwrap().to_string();
        let point = words.next().expect("a capture point").to_string();
        let (mut required, mut allowed) = (BTreeSet::new(), BTreeSet::new());
        for w in words {
            match w.strip_prefix('?') {
                Some(k) => allowed.insert(k.to_string()),
                None => required.insert(w.to_string()),
            };
        }
        let points: Vec<String> = if point == "*" {
            ["client", "middle", "server"].map(String::from).to_vec()
        } else {
            vec![point]
        };
        for p in points {
            out.push(Expect {
                case: case.clone(),
                point: p,
                required: required.clone(),
                allowed: allowed.clone(),
            });
        }
    }
    out
}

/// Runs `latencylab analyze --json` on one capture; returns each connection's diagnoses as
/// `kind/direction`.
fn diagnoses(pcap: &Path) -> Vec<Vec<String>> {
    let o = run(&["analyze", "--json", pcap.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "{}: {}",
        pcap.display(),
        text(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    v["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .map(|c| {
            c["diagnoses"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| {
                    let dir = d["direction"].as_str().unwrap_or("-");
                    format!("{}/{dir}", d["kind"].as_str().unwrap())
                })
                .collect()
        })
        .collect()
}

#[test]
fn every_expected_diagnosis_is_found_and_no_other_is_reported() {
    let dir = corpus();
    let expects = expectations();
    assert!(expects.len() >= 20, "the corpus lost cases");
    let (mut reported, mut correct, mut required, mut found) = (0usize, 0usize, 0usize, 0usize);
    let mut failures = Vec::new();
    for e in &expects {
        let pcap = dir.join(&e.case).join(format!("{}.pcap", e.point));
        let conns = diagnoses(&pcap);
        assert!(!conns.is_empty(), "{}: no TCP connection", pcap.display());
        for (i, kinds) in conns.iter().enumerate() {
            let got: BTreeSet<&String> = kinds.iter().collect();
            for k in &e.required {
                required += 1;
                if got.contains(k) {
                    found += 1;
                } else {
                    failures.push(format!("{}/{} conn {i}: {k} missing", e.case, e.point));
                }
            }
            for k in got {
                reported += 1;
                if e.required.contains(k) || e.allowed.contains(k) {
                    correct += 1;
                } else {
                    failures.push(format!("{}/{} conn {i}: false {k}", e.case, e.point));
                }
            }
        }
    }
    let precision = correct as f64 / reported.max(1) as f64;
    let recall = found as f64 / required.max(1) as f64;
    eprintln!(
        "corpus: {} captures, precision {precision:.3} ({correct}/{reported} reported diagnoses expected), recall {recall:.3} ({found}/{required} expected diagnoses found)",
        expects.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(precision, 1.0);
    assert_eq!(recall, 1.0);
}

/// The two captures that went wrong before the capture point was decided from TTLs on short
/// paths, checked for the point itself as well as the diagnoses.
#[test]
fn the_capture_point_is_right_per_connection_and_direction_on_a_lan() {
    let dir = corpus();
    let point = |case: &str, at: &str| -> Vec<(String, String)> {
        let p = dir.join(case).join(format!("{at}.pcap"));
        let o = run(&["analyze", "--json", p.to_str().unwrap()]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
        v["connections"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let s = |d: &str| c[d]["vantage"].as_str().unwrap_or("null").to_string();
                (s("a2b"), s("b2a"))
            })
            .collect()
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    // The client sends a2b (requests) and receives b2a.
    assert_eq!(
        point("nagle-v4", "client"),
        vec![pair("sender", "receiver")]
    );
    assert_eq!(
        point("nagle-v4", "server"),
        vec![pair("receiver", "sender")]
    );
    // Both downloads in one file, the second one's handshake delayed by the first one's
    // queue: the same answer for both.
    assert_eq!(
        point("bulk-tbf-v4", "client"),
        vec![pair("sender", "receiver"); 2]
    );
    assert_eq!(
        point("bulk-tbf-v4", "server"),
        vec![pair("receiver", "sender"); 2]
    );
}

/// `-` reads the capture from standard input, and warnings about a damaged capture go to
/// standard error, not into the report on standard output.
#[test]
fn a_capture_on_stdin_is_read_and_damage_is_warned_about_on_stderr() {
    use std::io::Write;
    use std::process::Stdio;
    let pcap = corpus().join("nagle-v4/client.pcap");
    let bytes = fs::read(&pcap).unwrap();
    // Cut inside a record: a partial result and one warning naming the packet.
    let cut = &bytes[..bytes.len() / 2 + 7];
    let mut child = Command::new(bin())
        .args(["analyze", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(cut).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let (out, err) = (text(&o.stdout), text(&o.stderr));
    assert!(out.contains("10.77.2.2:5001"), "{out}");
    assert!(out.contains("nagle_delayed_ack"), "{out}");
    assert!(!out.contains("latencylab: warning"), "{out}");
    assert!(
        err.contains("latencylab: warning: stdin: packet") && err.contains("file ends inside"),
        "{err}"
    );
    // An empty standard input is a usage error naming it.
    let o = Command::new(bin())
        .args(["analyze", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("standard input"),
        "{}",
        text(&o.stderr)
    );
}

/// Every capture of the corpus, one by one and each case's three together: `-j2` (one reader
/// handing packets to two threads) gives byte for byte the JSON and text of `-j1`.
#[test]
fn two_threads_give_the_same_analysis_as_one_on_every_corpus_capture() {
    let dir = corpus();
    let mut cases: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert!(cases.len() >= 5, "{cases:?}");
    let mut runs: Vec<Vec<String>> = Vec::new();
    for case in &cases {
        let points: Vec<String> = ["client", "middle", "server"]
            .iter()
            .map(|p| case.join(format!("{p}.pcap")).display().to_string())
            .filter(|p| Path::new(p).exists())
            .collect();
        for p in &points {
            runs.push(vec![p.clone()]);
        }
        runs.push(points);
    }
    for files in runs {
        for json in [true, false] {
            let out = |jobs: &str| {
                let mut args = vec!["analyze", jobs];
                if json {
                    args.push("--json");
                }
                args.extend(files.iter().map(String::as_str));
                let o = run(&args);
                assert!(o.status.success(), "{files:?}: {}", text(&o.stderr));
                (text(&o.stdout), text(&o.stderr))
            };
            let one = out("-j1");
            assert!(one.0.len() > 100, "{files:?}: {}", one.0);
            assert!(
                out("-j2") == one,
                "{files:?} (json {json}): -j2 differs from -j1"
            );
        }
    }
}

/// Real tcpdump writing to a pipe: the same connections as the file it re-reads.
#[test]
fn tcpdump_writing_to_standard_input_is_analysed_like_the_file() {
    let pcap = corpus().join("bulk-tbf-v6/server.pcap");
    let p = pcap.display();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "tcpdump -r {p} -w - 2>/dev/null | {} analyze --json -",
            bin()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let piped: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = run(&["analyze", "--json", &p.to_string()]);
    let file: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(piped["captures"][0]["name"], "stdin");
    assert!(!file["connections"].as_array().unwrap().is_empty());
    // The same connections, seen at a vantage point named "stdin".
    let conns = |v: &serde_json::Value, name: &str| {
        v["connections"]
            .to_string()
            .replace(&format!("\"capture\":{}", serde_json::json!(name)), "")
    };
    assert_eq!(conns(&piped, "stdin"), conns(&file, &p.to_string()));
    assert_eq!(
        piped["captures"][0]["packets"],
        file["captures"][0]["packets"]
    );
}

/// Mapped files that are empty, not captures, or cut inside a record (as a capture still
/// being written is): a usage error naming the file, or a partial result with a warning on
/// stderr, with one thread or two.
#[test]
fn empty_garbage_and_cut_files_get_a_clear_answer_on_any_number_of_threads() {
    let dir = tempdir("analyze-bad-files");
    let empty = dir.join("empty.pcap");
    fs::write(&empty, b"").unwrap();
    let garbage = dir.join("garbage.pcap");
    fs::write(&garbage, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let whole = fs::read(corpus().join("nagle-v4/client.pcap")).unwrap();
    let cut = dir.join("cut.pcap");
    fs::write(&cut, &whole[..whole.len() * 2 / 3 + 5]).unwrap();
    for jobs in ["-j1", "-j2"] {
        for (file, why) in [(&empty, "empty file"), (&garbage, "not a pcap")] {
            let o = run(&["analyze", jobs, file.to_str().unwrap()]);
            assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
            let err = text(&o.stderr);
            assert!(
                err.contains(file.to_str().unwrap()) && err.contains(why),
                "{err}"
            );
            assert!(o.stdout.is_empty());
        }
        let o = run(&["analyze", jobs, cut.to_str().unwrap()]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert!(out.contains("10.77.2.2:5001"), "{out}");
        assert!(
            err.contains("latencylab: warning:") && err.contains("file ends inside packet"),
            "{err}"
        );
        assert!(!out.contains("latencylab: warning"), "{out}");
    }
    let _ = fs::remove_dir_all(&dir);
}

//! End-to-end tests of the captures at speed: `--snaplen`, files of a bounded size (`-C`, `-W`)
//! and a disk that fills while the lab runs. They need root, /dev/net/tun, tcpdump and
//! unshare(1); each checks that nothing was left behind.

mod common;

use common::*;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use labnet::run_dir::{parse_link_log, RunDir};
use labnet::spec::Side;

/// The files of one capture or log that exist, as (number, path), number 0 being the first.
fn files_of(first: &Path) -> Vec<(u64, PathBuf)> {
    let mut v: Vec<(u64, PathBuf)> = (0..10_000)
        .map(|n| {
            let p = if n == 0 {
                first.to_path_buf()
            } else {
                RunDir::rotated(first, n)
            };
            (n, p)
        })
        .filter(|(_, p)| p.exists())
        .collect();
    v.sort();
    v
}

/// (snaplen from the file header, (incl_len, orig_len) of each record) of a pcap.
fn pcap_lengths(path: &Path) -> (u32, Vec<(u32, u32)>) {
    let b = fs::read(path).unwrap();
    let u = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let mut records = Vec::new();
    let mut off = 24;
    while off + 16 <= b.len() {
        records.push((u(off + 8), u(off + 12)));
        off += 16 + u(off + 8) as usize;
    }
    assert_eq!(off, b.len(), "{} ends inside a record", path.display());
    (u(16), records)
}

#[test]
fn snaplen_cuts_every_packet_and_file_size_keeps_the_newest_files_each_readable_alone() {
    let _g = lock();
    let dir = out_dir("rotate");
    let client_out = scratch_root().join("rotate-client.jsonl");
    let o = bulk_shell(
        &[
            "-o",
            dir.to_str().unwrap(),
            "--snaplen",
            "96",
            "-C",
            "1",
            "-W",
            "3",
        ],
        "latencylab bulk-server -o /dev/null",
        "3s",
        &client_out,
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let run_dir = RunDir::new(&dir);
    for (host, first) in [
        ("client", run_dir.capture("client", "eth0")),
        ("server", run_dir.capture("server", "eth0")),
    ] {
        let files = files_of(&first);
        assert_eq!(
            files.len(),
            3,
            "{host}: at most 3 files, and it wrote more: {files:?}"
        );
        assert!(
            files[0].0 >= 1,
            "{host}: the first file was removed: {files:?}"
        );
        assert_eq!(
            files[2].0 - files[0].0,
            2,
            "{host}: the newest three: {files:?}"
        );
        let mut cut = 0;
        for (_, p) in &files {
            assert!(
                fs::metadata(p).unwrap().len() <= 1_000_000,
                "{}",
                p.display()
            );
            let (snaplen, records) = pcap_lengths(p);
            assert_eq!(snaplen, 96, "{}", p.display());
            assert!(!records.is_empty(), "{}", p.display());
            for (incl, orig) in &records {
                assert!(
                    *incl <= 96 && incl <= orig,
                    "{}: {incl} of {orig}",
                    p.display()
                );
                assert!(
                    *incl == 96 || incl == orig,
                    "{}: {incl} of {orig}",
                    p.display()
                );
            }
            cut += records.iter().filter(|(_, orig)| *orig > 96).count();
            tcpdump_read(p);
        }
        assert!(cut > 1000, "{host}: only {cut} full-size packets were cut");
    }
    for side in [Side::Up, Side::Down] {
        let files = files_of(&run_dir.link_log("path", side));
        assert!(!files.is_empty() && files.len() <= 3, "{side:?}: {files:?}");
        for (_, p) in &files {
            let text = fs::read_to_string(p).unwrap();
            assert!(text.len() <= 1_000_000, "{}", p.display());
            let lines = parse_link_log(&p.display().to_string(), &text).unwrap();
            assert!(!lines.is_empty(), "{}", p.display());
        }
    }
    assert_nothing_left();
}

#[test]
fn a_disk_filled_under_a_running_lab_stops_the_captures_with_a_warning_and_nothing_else() {
    let _g = lock();
    let scratch = out_dir("full-disk");
    let mnt = scratch.join("small");
    let kept = scratch.join("kept");
    fs::create_dir_all(&mnt).unwrap();
    fs::create_dir_all(&kept).unwrap();
    let client_out = kept.join("client.jsonl");
    // A 3 MB tmpfs, mounted in a private mount namespace of its own: it goes away with the
    // namespace whatever happens. The run directory is on it; what the test reads afterwards
    // is copied out before the namespace ends.
    let script = format!(
        "mount -t tmpfs -o size=3m latencylab-test {mnt} || exit 97
         {bin} shell -o {mnt}/run --server 'latencylab bulk-server -o /dev/null' -- \
             latencylab bulk-client server --duration 3s --out {client}
         st=$?
         cp {mnt}/run/summary.json {kept}/ 2>/dev/null
         df -B1 --output=avail {mnt} | tail -1 > {kept}/avail
         exit $st",
        mnt = mnt.display(),
        bin = bin(),
        client = client_out.display(),
        kept = kept.display(),
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let stderr = text(&o.stderr);
    assert_ne!(o.status.code(), Some(97), "mounting the tmpfs: {stderr}");
    assert!(o.status.success(), "the lab ended normally: {stderr}");
    assert!(
        stderr.contains("latencylab: warning:") && stderr.contains("No space left on device"),
        "{stderr}"
    );
    let summary = read_json(&kept.join("summary.json"));
    let warnings = summary["warnings"]
        .as_array()
        .expect("warnings in summary.json");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("No space left on device")),
        "{warnings:?}"
    );
    // The disk was full to the brim, and the programs did their work regardless.
    let avail: u64 = fs::read_to_string(kept.join("avail"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(avail < 300_000, "{avail} bytes left on the 3 MB disk");
    let lines = json_lines(&client_out);
    let total = lines
        .iter()
        .find(|v| v["type"] == "total" && v["role"] == "receiver")
        .unwrap_or_else(|| panic!("no total line in {lines:?}"));
    assert!(total["bytes"].as_f64().unwrap() > 10e6, "{total}");
    assert!(
        !mnt.join("run").exists(),
        "the tmpfs went with its namespace"
    );
    assert_nothing_left();
}

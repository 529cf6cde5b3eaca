//! End to end, in namespaces: a narrow link in the middle of a path. A 1400-byte hop between a
//! router and the client answers the server's 1500-byte segments with ICMP fragmentation
//! needed, and TCP goes on at the smaller size (RFC 1191); with ICMP filtered on the way back
//! the same transfer stalls, the PMTU black hole (RFC 2923 §2.1). Needs root, /dev/net/tun and
//! python3; checks that nothing was left behind.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use labnet::run_dir::RunDir;

/// Serves 2 MB to the first client, then closes.
const SERVER: &str = "import socket
s = socket.create_server(('0.0.0.0', 5201))
c, _ = s.accept()
c.sendall(b'x' * 2_000_000)
c.close()
";

/// Connects to the server over IPv4 (retrying while it starts), reads for at most 4 s and
/// prints `BYTES eof` or `BYTES stalled`.
const CLIENT: &str = "import os, socket, time
addr = os.environ['LATENCYLAB_SERVER']
for _ in range(50):
    try:
        c = socket.create_connection((addr, 5201), timeout=1); break
    except OSError: time.sleep(0.1)
end, got, how = time.monotonic() + 4, 0, 'stalled'
c.settimeout(0.2)
while time.monotonic() < end:
    try:
        b = c.recv(65536)
    except socket.timeout: continue
    if not b: how = 'eof'; break
    got += len(b)
print(got, how, flush=True)
";

/// client ── access (1400 bytes towards the client) ── isp ── wan ── server; with `filtered`,
/// the wan drops ICMP from the isp towards the server.
fn run_file(dir: &Path, filtered: bool) -> String {
    let drop = if filtered {
        "[link.up]\ndrop = \"icmp\"\n"
    } else {
        ""
    };
    format!(
        "seed = 1
duration = \"8s\"
[[host]]
name = \"client\"
[[host]]
name = \"server\"
[[router]]
name = \"isp\"
[[link]]
name = \"access\"
a = \"client\"
b = \"isp\"
delay = \"5ms\"
[link.down]
mtu = 1400
[[link]]
name = \"wan\"
a = \"isp\"
b = \"server\"
delay = \"5ms\"
{drop}
[[program]]
name = \"server\"
host = \"server\"
run = \"python3 {server}\"
[[program]]
name = \"client\"
host = \"client\"
at = \"300ms\"
wait = true
run = \"python3 {client}\"
",
        server = dir.join("server.py").display(),
        client = dir.join("client.py").display(),
    )
}

/// Runs the lab and returns the client's line and `summary.json`.
fn transfer(name: &str, filtered: bool) -> (String, serde_json::Value) {
    let dir = out_dir(name);
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("server.py"), SERVER).unwrap();
    fs::write(dir.join("client.py"), CLIENT).unwrap();
    let file = dir.join("lab.toml");
    fs::write(&file, run_file(&dir, filtered)).unwrap();
    let out = dir.join("run");
    let o = run(&[
        "run",
        file.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--no-capture",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rd = RunDir::new(&out);
    let line = fs::read_to_string(rd.program_out("client")).unwrap();
    (line.trim().to_string(), read_json(&rd.summary_json()))
}

/// Packets the access link's down direction refused as too big (each answered with an ICMP
/// error towards the server), and packets the wan's filters dropped on the way up.
fn counts(summary: &serde_json::Value) -> (u64, u64) {
    let links = summary["links"].as_array().unwrap();
    let got = |link: &str, dir: &str, key: &str| {
        links
            .iter()
            .find(|l| l["name"] == link && l["direction"] == dir)
            .unwrap_or_else(|| panic!("{link} {dir} in {summary}"))["got"][key]
            .as_u64()
            .unwrap()
    };
    (
        got("access", "down", "too_big"),
        got("wan", "up", "filtered"),
    )
}

#[test]
fn a_narrow_link_with_icmp_filtered_stalls_a_bulk_transfer_and_works_without_the_filter() {
    let _g = lock();
    let (line, summary) = transfer("mtu-open", false);
    assert_eq!(line, "2000000 eof", "{summary}");
    let (too_big, filtered) = counts(&summary);
    assert!(too_big >= 1, "{too_big} too big");
    assert_eq!(filtered, 0);

    let (line, summary) = transfer("mtu-blackhole", true);
    let (got, how) = line.split_once(' ').expect("BYTES HOW");
    assert_eq!(how, "stalled", "{line}");
    // Only what fits in 1400 bytes gets through: nothing of a full-size bulk transfer.
    assert!(got.parse::<u64>().unwrap() < 100_000, "{line}");
    let (too_big, filtered) = counts(&summary);
    // Every refused segment's ICMP error was dropped on its way back to the server.
    assert!(too_big >= 2, "{too_big} too big");
    assert_eq!(filtered, too_big, "{summary}");
    assert_nothing_left();
}

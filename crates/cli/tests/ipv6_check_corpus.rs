//! `latencylab ipv6-check` against real client programs (curl, wget, nc, socat, dig, ping,
//! getent, python scripts): the ones that work on an IPv6-only network must get no finding at
//! all, the ones that break must get the right first finding, with the right blame (the app, or
//! the server). They need root, /dev/net/tun, tcpdump, strace and the programs themselves
//! (scripts/test installs them). Each run ends with the check that nothing was left behind.

mod common;

use common::*;

/// An HTTP/1.0 server that listens at once (socat, answering each connection with a script;
/// a Python server can take seconds to start while the lab's forwarding loop holds a core).
const HTTP_SERVER: &str = "exec socat TCP-LISTEN:8080,fork,reuseaddr EXEC:HTTP_SH";

/// The script behind [`HTTP_SERVER`]: reads the request's head, answers 200 with "ok".
fn http_script() -> String {
    // In the tests' scratch directory, which goes when they pass.
    let path = common::scratch_root().join("http.sh");
    std::fs::write(
        &path,
        "#!/bin/sh\nwhile IFS= read -r l; do [ \"$l\" = \"$(printf '\\r')\" ] && break; done\nprintf 'HTTP/1.0 200 OK\\r\\nContent-Length: 2\\r\\n\\r\\nok'\n",
    )
    .unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// The TCP and UDP echo server.
const PROBE_SERVER: &str = "exec latencylab probe-server";

struct Case {
    name: &'static str,
    server: &'static str,
    command: &'static [&'static str],
    /// Text of each numbered finding, in order; empty: the check must pass.
    findings: &'static [&'static str],
}

/// Runs one case and returns what went wrong with it, if anything.
fn check(c: &Case) -> Option<String> {
    let server = c
        .server
        .replace("latencylab", bin())
        .replace("HTTP_SH", &http_script());
    let mut args = vec!["ipv6-check", "-q", "--server", &server, "--"];
    args.extend_from_slice(c.command);
    let o = run(&args);
    let report = text(&o.stderr);
    let found: Vec<&str> = report
        .lines()
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .collect();
    let want_status = if c.findings.is_empty() { 0 } else { 1 };
    let matches = found.len() == c.findings.len()
        && found.iter().zip(c.findings).all(|(f, w)| f.contains(w))
        && o.status.code() == Some(want_status);
    // The report is on stderr; COMMAND's stdout is left to COMMAND.
    let clean_stdout = !text(&o.stdout).contains("ipv6-check:");
    assert_nothing_left();
    (!matches || !clean_stdout).then(|| {
        format!(
            "{}: wanted status {want_status} and findings {:?}, got status {:?}:\n{report}\nstdout: {}",
            c.name,
            c.findings,
            o.status.code(),
            text(&o.stdout)
        )
    })
}

fn check_all(cases: &[Case]) {
    let _g = lock();
    let failures: Vec<String> = cases.iter().filter_map(check).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn programs_that_work_on_an_ipv6_only_network_get_no_finding() {
    check_all(&[
        Case {
            name: "curl by name",
            server: HTTP_SERVER,
            command: &["curl", "-sf", "-o", "/dev/null", "http://server:8080/"],
            findings: &[],
        },
        Case {
            name: "wget by name",
            server: HTTP_SERVER,
            command: &["wget", "-q", "-O", "/dev/null", "http://server:8080/"],
            findings: &[],
        },
        Case {
            name: "nc by name",
            server: PROBE_SERVER,
            command: &["sh", "-c", "echo hello | nc -w 2 server 5202"],
            findings: &[],
        },
        Case {
            name: "socat over TCP6 by name",
            server: PROBE_SERVER,
            command: &["sh", "-c", "echo hello | socat -T 2 - TCP6:server:5202"],
            findings: &[],
        },
        // ping and dig open AF_INET sockets they never use; getaddrinfo probes both families.
        Case {
            name: "ping by name",
            server: PROBE_SERVER,
            command: &["ping", "-c", "2", "-i", "0.2", "-W", "2", "server"],
            findings: &[],
        },
        Case {
            name: "dig AAAA",
            server: PROBE_SERVER,
            command: &["dig", "+short", "server", "AAAA"],
            findings: &[],
        },
        Case {
            name: "dig ipv4only.arpa AAAA",
            server: PROBE_SERVER,
            command: &["dig", "+short", "ipv4only.arpa", "AAAA"],
            findings: &[],
        },
        Case {
            name: "getent ahosts",
            server: PROBE_SERVER,
            command: &["getent", "ahosts", "server"],
            findings: &[],
        },
        Case {
            name: "python create_connection by name",
            server: PROBE_SERVER,
            command: &[
                "/usr/bin/python3",
                "-c",
                "import socket\ns = socket.create_connection(('server', 5202), timeout=2)\ns.sendall(b'x' * 24)\ns.close()",
            ],
            findings: &[],
        },
    ]);
}

#[test]
fn programs_that_break_get_the_right_finding_and_the_right_blame() {
    check_all(&[
        Case {
            name: "curl to an IPv4 literal",
            server: HTTP_SERVER,
            command: &["curl", "-sf", "-o", "/dev/null", "http://10.77.2.1:8080/"],
            findings: &["connect() to the IPv4 literal 10.77.2.1:8080 failed (ENETUNREACH)"],
        },
        Case {
            name: "nc -4 (AF_INET only)",
            server: PROBE_SERVER,
            command: &["sh", "-c", "echo hello | nc -4 -w 2 server 5202"],
            findings: &[
                "from a lookup that asked for A records only (AF_INET-only code)",
                "the lookup of 'server' asked for A records only",
            ],
        },
        Case {
            name: "ping -4",
            server: PROBE_SERVER,
            command: &["ping", "-4", "-c", "1", "-W", "1", "server"],
            findings: &["the IPv4 address of 'server', picked though the lookup also gave"],
        },
        Case {
            name: "socat UDP (prefers IPv4)",
            server: PROBE_SERVER,
            command: &["socat", "-u", "/dev/null", "UDP:server:5202"],
            findings: &["connect() to 10.77.2.1:5202 failed (ENETUNREACH): the IPv4 address of 'server', picked"],
        },
        Case {
            name: "python UDP client that connects the IPv4 answer",
            server: PROBE_SERVER,
            command: &[
                "/usr/bin/python3",
                "-c",
                "import socket\nai = [a for a in socket.getaddrinfo('server', 5202, 0, socket.SOCK_DGRAM) if a[0] == socket.AF_INET][0]\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.connect(ai[4])\ns.send(b'x')",
            ],
            findings: &["connect() to 10.77.2.1:5202 failed (ENETUNREACH): the IPv4 address of 'server', picked"],
        },
        Case {
            name: "preflight that reads /proc/net/route",
            server: PROBE_SERVER,
            command: &[
                "sh",
                "-c",
                "grep -q '^[a-z0-9]*\t00000000' /proc/net/route || exit 3; nc -w 2 server 5202 </dev/null",
            ],
            findings: &["read the IPv4 routing table (/proc/net/route) and then failed (status 3)"],
        },
        Case {
            name: "preflight with ip -4 route",
            server: PROBE_SERVER,
            command: &["sh", "-c", "ip -4 route show default | grep -q . || exit 3"],
            findings: &["asked the kernel for the IPv4 routes"],
        },
        // The port is closed: curl tries IPv6 first and then IPv4; the server is to blame.
        Case {
            name: "curl to a closed port",
            server: HTTP_SERVER,
            command: &["curl", "-sf", "-o", "/dev/null", "http://server:8081/"],
            findings: &["refused (reset): nothing listened on that port"],
        },
        Case {
            name: "a server that never listens",
            server: "exec sleep 30",
            command: &["curl", "-sf", "-o", "/dev/null", "http://server:8080/"],
            findings: &[
                "the server (--server) was not listening when COMMAND started",
                "refused (reset)",
            ],
        },
    ]);
}

#[test]
fn a_failure_with_no_visible_cause_is_said_to_be_unseen_not_nothing() {
    let _g = lock();
    let dir = out_dir("ipv6-check-unseen");
    let o = run(&[
        "ipv6-check",
        "-q",
        "-o",
        dir.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "echo app-output; exit 3",
    ]);
    let report = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{report}");
    assert_eq!(text(&o.stdout), "app-output\n");
    assert!(report.contains("COMMAND exited with status 3"), "{report}");
    assert!(report.contains("the cause was not seen"), "{report}");
    assert!(report.contains("cannot see"), "{report}");
    assert!(!report.contains("nothing broke"), "{report}");
    assert!(report.contains("the evidence is kept in"), "{report}");
    assert!(dir.join("strace.txt").is_file());
    let _ = std::fs::remove_dir_all(&dir);
    assert_nothing_left();
}

/// With `--clat` (464XLAT) the IPv4 literal and AF_INET-only code work: the check passes and
/// says in notes what would fail on an IPv6-only network without a CLAT.
#[test]
fn through_a_clat_literals_and_af_inet_only_code_pass_with_notes() {
    let _g = lock();
    for (name, command, note) in [
        (
            "curl to an IPv4 literal",
            "curl -sf -o /dev/null http://10.77.2.1:8080/",
            "the IPv4 literal 10.77.2.1:8080 went through the CLAT",
        ),
        (
            "nc -4 (AF_INET only)",
            "echo hello | nc -4 -w 2 server 8080",
            "the lookup of 'server' asked for A records only",
        ),
    ] {
        let server = HTTP_SERVER.replace("HTTP_SH", &http_script());
        let o = run(&[
            "ipv6-check",
            "-q",
            "--clat",
            "--server",
            &server,
            "--",
            "sh",
            "-c",
            command,
        ]);
        let report = text(&o.stderr);
        assert_eq!(o.status.code(), Some(0), "{name}:\n{report}");
        assert!(report.contains(note), "{name}:\n{report}");
        assert!(
            report.contains("with a CLAT (464XLAT)"),
            "{name}:\n{report}"
        );
        assert_nothing_left();
    }
}

/// The check's lab is followed like any other (`--live`), and what would change its evidence
/// (`--rpm`, capture limits) is refused before any lab exists.
#[test]
fn the_check_can_be_followed_live_and_options_that_do_not_apply_are_refused() {
    let _g = lock();
    let live = out_dir("ipv6-check-live").with_extension("jsonl");
    let o = run(&[
        "ipv6-check",
        "-q",
        "--live",
        live.to_str().unwrap(),
        "--",
        "sleep",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines = std::fs::read_to_string(&live).unwrap();
    let rows: Vec<labnet::live::Row> = lines
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(rows.len() >= 10, "{lines}");
    assert_eq!(rows.iter().filter(|r| r.last).count(), 2, "{lines}");
    for (args, culprit) in [
        (&["--rpm"][..], "--rpm does not apply"),
        (&["--no-capture", "--", "true"][..], "--no-capture"),
    ] {
        let mut a = vec!["ipv6-check"];
        a.extend(args);
        let o = run(&a);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(text(&o.stderr).contains(culprit), "{}", text(&o.stderr));
    }
    assert_nothing_left();
}

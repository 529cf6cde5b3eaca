//! The rules of `latencylab ipv6-check`: what in a client broke on an IPv6-only network
//! (DNS64 + NAT64 to an IPv4-only server), each finding with a hint and the evidence it rests
//! on. Pure functions of the evidence; the CLI gathers it:
//!
//! - the client's system calls ([`strace`]): an attempt to reach an IPv4 address cannot even
//!   leave an IPv6-only host (it fails with ENETUNREACH), so only a trace sees it, with its
//!   address and whether the address came from a lookup; and the places a program looks at to
//!   decide whether IPv4 is up;
//! - the DNS64's log of queries: names asked with type A and never AAAA;
//! - the client's capture ([`flows`]): TCP connections whose SYN got no answer or a reset, UDP
//!   flows that got no answer;
//! - the lab's counters: packets the NAT64 dropped, packets to addresses outside the lab;
//! - whether `--server` listened before COMMAND started, and COMMAND's exit status.
//!
//! Who is blamed matters more than what is listed: glibc's address-sorting probes and ping's or
//! dig's spare sockets are not the app's fault; an app that tried IPv6 first and then fell back
//! to IPv4 is not to blame for the fallback failing, the IPv6 attempt's failure is the cause;
//! and a server that did not listen is the server's fault.

pub mod flows;
pub mod strace;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

pub use flows::{Flows, TcpOpen};
pub use strace::{parse_strace, Call};

/// Everything a check rests on.
#[derive(Debug, Default)]
pub struct Evidence {
    /// `None` when strace was not available.
    pub calls: Option<Vec<Call>>,
    /// (name, type) → times asked, from the DNS64.
    pub queries: BTreeMap<(String, String), u64>,
    /// The lab's IPv4 addresses and the names they have.
    pub names_of_v4: BTreeMap<Ipv4Addr, Vec<String>>,
    /// The NAT64's Pref64::/n, to read synthesised addresses back (RFC 6052 §2.2).
    pub prefix: nat64::Prefix,
    /// TCP connections the client opened: (destination, outcome).
    pub tcp: Vec<(SocketAddr, TcpOpen)>,
    /// UDP flows that got no datagram back: (destination, datagrams sent).
    pub udp_unanswered: Vec<(SocketAddr, u64)>,
    /// NAT64 drops by reason.
    pub nat64_drops: BTreeMap<String, u64>,
    /// Packets for addresses outside the lab.
    pub no_route: u64,
    /// `Some(true)` when `--server` listened before COMMAND started, `Some(false)` when it did
    /// not (COMMAND started after the wait ran out, or the server had exited), `None` without
    /// a server.
    pub server_listening: Option<bool>,
    /// COMMAND's exit status.
    pub exit_code: i32,
    /// The client had a CLAT (464XLAT, RFC 6877): an IPv4 address and route into a local
    /// translator, so IPv4 literals and A-only lookups work. What would break without one is
    /// then a note, not a finding.
    pub clat: bool,
}

/// What kind of problem a finding is, for programs that read the check's result (the nat64
/// demo compares it with what each sample should get).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// `--server` did not listen before COMMAND started.
    ServerNotListening,
    /// A connect/sendto to an IPv4 address that no lookup gave.
    Ipv4Literal,
    /// A connect/sendto to an IPv4 address from a lookup that asked for A records only.
    AOnly,
    /// A connect/sendto to the IPv4 address of a name whose lookup also gave an IPv6 one, with
    /// no IPv6 attempt to that port.
    PickedIpv4,
    /// COMMAND looked at IPv4's routes or addresses and then failed.
    Ipv4Preflight,
    /// A lookup asked for A records only.
    AOnlyLookup,
    TcpRefused,
    TcpUnanswered,
    UdpUnanswered,
    Nat64Drop,
    NoRoute,
}

impl Class {
    /// Short stable names (in `results.json` of the nat64 demo).
    pub fn name(self) -> &'static str {
        match self {
            Class::ServerNotListening => "server-not-listening",
            Class::Ipv4Literal => "ipv4-literal",
            Class::AOnly => "af-inet-only",
            Class::PickedIpv4 => "picked-ipv4",
            Class::Ipv4Preflight => "ipv4-preflight",
            Class::AOnlyLookup => "a-only-lookup",
            Class::TcpRefused => "tcp-refused",
            Class::TcpUnanswered => "tcp-unanswered",
            Class::UdpUnanswered => "udp-unanswered",
            Class::Nat64Drop => "nat64-drop",
            Class::NoRoute => "no-route",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub class: Class,
    pub what: String,
    pub hint: String,
    pub evidence: &'static str,
}

/// The result of a check: the findings (what broke, most fundamental first) and notes (what
/// was seen and is not a fault, said so that the reader need not wonder).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    pub findings: Vec<Finding>,
    pub notes: Vec<String>,
}

/// The IPv4 address a destination really is: an IPv4 one, or an IPv4-mapped IPv6 one.
fn as_v4(a: IpAddr) -> Option<Ipv4Addr> {
    match a {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// The indices (into `calls`) of glibc's address-sorting probes. `getaddrinfo` sorts its
/// answers (RFC 6724) by connecting a UDP socket to each, with the port asked for, one after
/// another: a run of datagram `connect()`s of one process to distinct addresses at one port,
/// with both families in it. A program's own connect to one of those addresses repeats an
/// address and so starts a new run.
fn sorting_probes(calls: &[Call]) -> BTreeSet<usize> {
    let mut stream_of: HashMap<(u32, i32), bool> = HashMap::new();
    // pid → (port, [(index, address)])
    let mut runs: HashMap<u32, (u16, Vec<(usize, IpAddr)>)> = HashMap::new();
    let mut probes = BTreeSet::new();
    let close = |run: (u16, Vec<(usize, IpAddr)>), probes: &mut BTreeSet<usize>| {
        let v4 = run.1.iter().any(|(_, a)| as_v4(*a).is_some());
        let v6 = run.1.iter().any(|(_, a)| as_v4(*a).is_none());
        if v4 && v6 {
            probes.extend(run.1.iter().map(|(i, _)| *i));
        }
    };
    for (i, c) in calls.iter().enumerate() {
        match c {
            Call::Socket {
                pid,
                stream,
                fd: Some(fd),
                ..
            } => {
                stream_of.insert((*pid, *fd), *stream);
            }
            Call::Reach {
                pid,
                syscall,
                fd,
                addr,
                ..
            } => {
                let dgram_connect =
                    *syscall == "connect" && stream_of.get(&(*pid, *fd)) == Some(&false);
                let joins = dgram_connect
                    && runs.get(pid).is_some_and(|(port, members)| {
                        *port == addr.port() && members.iter().all(|(_, a)| *a != addr.ip())
                    });
                if joins {
                    runs.get_mut(pid).unwrap().1.push((i, addr.ip()));
                    continue;
                }
                if let Some(run) = runs.remove(pid) {
                    close(run, &mut probes);
                }
                if dgram_connect {
                    runs.insert(*pid, (addr.port(), vec![(i, addr.ip())]));
                }
            }
            _ => {}
        }
    }
    for (_, run) in runs {
        close(run, &mut probes);
    }
    probes
}

/// What broke, the most fundamental first, and what was seen and is harmless.
pub fn analyze(e: &Evidence) -> Verdict {
    let mut v = Verdict::default();
    let asked = |name: &str, ty: &str| e.queries.contains_key(&(name.to_string(), ty.to_string()));
    let a_only: BTreeSet<&str> = e
        .queries
        .keys()
        .filter(|(n, t)| t == "A" && !asked(n, "AAAA"))
        .map(|(n, _)| n.as_str())
        .collect();
    let server_down = e.server_listening == Some(false);
    // The IPv4 addresses the program tried to reach (glibc's sorting probes aside).
    let mut reached_v4: BTreeSet<Ipv4Addr> = BTreeSet::new();

    if let Some(calls) = &e.calls {
        let probes = sorting_probes(calls);
        reached_v4.extend(
            calls
                .iter()
                .enumerate()
                .filter(|(i, _)| !probes.contains(i))
                .filter_map(|(_, c)| match c {
                    Call::Reach { addr, .. } => as_v4(addr.ip()),
                    _ => None,
                }),
        );
        // Ports the program tried over IPv6 (not counting the sorting probes): an IPv4 attempt
        // to such a port is a fallback after IPv6, not the cause.
        let v6_ports: BTreeSet<u16> = calls
            .iter()
            .enumerate()
            .filter(|(i, _)| !probes.contains(i))
            .filter_map(|(_, c)| match c {
                Call::Reach { addr, .. } if as_v4(addr.ip()).is_none() => Some(addr.port()),
                _ => None,
            })
            .collect();
        let mut seen = BTreeSet::new();
        for (i, c) in calls.iter().enumerate() {
            let Call::Reach {
                syscall,
                addr,
                error,
                ..
            } = c
            else {
                continue;
            };
            let Some(v4) = as_v4(addr.ip()) else { continue };
            if v4.is_loopback() || probes.contains(&i) {
                continue;
            }
            let Some(err) = error else {
                // Only a CLAT carries IPv4 from an IPv6-only host: worth saying what that
                // hides, once per destination.
                if e.clat && seen.insert((v4, addr.port(), *syscall)) {
                    v.notes
                        .extend(clat_note(e, syscall, v4, addr.port(), &a_only, &asked));
                }
                continue;
            };
            if !seen.insert((v4, addr.port(), *syscall)) {
                continue;
            }
            let names: Vec<&String> = e.names_of_v4.get(&v4).into_iter().flatten().collect();
            let port = addr.port();
            if v6_ports.contains(&port) {
                v.notes.push(format!(
                    "{syscall}() to {v4}:{port} failed ({err}) after the program had tried IPv6 to port {port}: a fallback to IPv4, which cannot work on an IPv6-only network, not the cause"
                ));
                continue;
            }
            let (class, what, hint) = if let Some(n) =
                names.iter().find(|n| a_only.contains(n.as_str()))
            {
                (
                    Class::AOnly,
                    format!("{syscall}() to {v4}:{port} failed ({err}): the IPv4 address of '{n}', from a lookup that asked for A records only (AF_INET-only code)"),
                    "resolve with getaddrinfo(AF_UNSPEC) (or AF_INET6) and use what it returns with AF_INET6 sockets: the DNS64 answers AAAA with an address the NAT64 translates".to_string(),
                )
            } else if let Some(n) = names.iter().find(|n| asked(n, "A") && asked(n, "AAAA")) {
                (
                    Class::PickedIpv4,
                    format!("{syscall}() to {v4}:{port} failed ({err}): the IPv4 address of '{n}', picked though the lookup also gave an IPv6 one, and IPv6 was never tried"),
                    "try every address getaddrinfo returns, in its order (or Happy Eyeballs, RFC 8305), not only the IPv4 ones".to_string(),
                )
            } else {
                (
                    Class::Ipv4Literal,
                    format!("{syscall}() to the IPv4 literal {v4}:{port} failed ({err})"),
                    "an IPv6-only network has no IPv4 route: connect by host name, or synthesise an IPv6 address from the NAT64 prefix (RFC 7050: the AAAA of ipv4only.arpa; RFC 6052)".to_string(),
                )
            };
            v.findings.push(Finding {
                class,
                what,
                hint,
                evidence: "strace of the client",
            });
        }
        if e.exit_code != 0 {
            let looked: BTreeSet<&str> = calls
                .iter()
                .filter_map(|c| match c {
                    Call::Ipv4State { what, .. } => Some(what.as_str()),
                    _ => None,
                })
                .collect();
            if !looked.is_empty() {
                let tried_v6 = !v6_ports.is_empty();
                v.findings.push(Finding {
                    class: Class::Ipv4Preflight,
                    what: format!(
                        "COMMAND {} and then failed (status {}){}: an \"is IPv4 up?\" check that takes the missing IPv4 route for no network",
                        looked.into_iter().collect::<Vec<_>>().join(", and "),
                        e.exit_code,
                        if tried_v6 { "" } else { " without trying to connect over IPv6" }
                    ),
                    hint: "do not decide from IPv4's routes or addresses whether the network works: connect by name (getaddrinfo AF_UNSPEC) and report the error if that fails; on an IPv6-only network IPv4 servers are reached through the NAT64".into(),
                    evidence: "strace of the client",
                });
            }
        }
    }

    // An A-only lookup breaks a program that uses its answer. One whose answer the program
    // never tried to reach, in a program that worked (`dig +short server A`), is not a
    // failure on an IPv6-only network.
    let depends_on = |n: &str| {
        e.exit_code != 0
            || e.names_of_v4
                .iter()
                .any(|(v4, names)| reached_v4.contains(v4) && names.iter().any(|m| m == n))
    };
    for n in &a_only {
        if !e.clat && !depends_on(n) {
            v.notes.push(format!("the lookup of '{n}' asked for A records only, and COMMAND worked without reaching its answer: not a failure here, though a program that used the answer would fail on an IPv6-only network"));
            continue;
        }
        if e.clat {
            v.notes.push(format!("the lookup of '{n}' asked for A records only: its IPv4 answer is reached through the CLAT here, and cannot be reached on an IPv6-only network without one"));
            continue;
        }
        v.findings.push(Finding {
            class: Class::AOnlyLookup,
            what: format!("the lookup of '{n}' asked for A records only"),
            hint: "an IPv6-only client must ask for AAAA (getaddrinfo with AF_UNSPEC or AF_INET6); A answers are IPv4 addresses it cannot reach".into(),
            evidence: "the DNS64's query log",
        });
    }

    let server_hint = |proto: &str| {
        if server_down {
            format!("the server was not listening when COMMAND started (above): the server's fault, not the app's; check that it listens on that port over {proto}")
        } else {
            "the app reached the server over IPv6 and the NAT64; the server side did not take it: check that the server listens on that port over IPv4 (the NAT64 counters say whether the translator dropped anything)".to_string()
        }
    };
    let describe = |dst: &SocketAddr| match dst.ip() {
        IpAddr::V6(a) => match e.prefix.extract(a) {
            Some(v4) => format!("{dst} (the NAT64's translation of {v4}:{})", dst.port()),
            None => dst.to_string(),
        },
        IpAddr::V4(_) => dst.to_string(),
    };
    let mut tcp: BTreeMap<(SocketAddr, bool), u32> = BTreeMap::new();
    for (dst, how) in &e.tcp {
        match how {
            TcpOpen::Completed => continue,
            TcpOpen::Refused => *tcp.entry((*dst, true)).or_default() += 1,
            TcpOpen::Unanswered => *tcp.entry((*dst, false)).or_default() += 1,
        }
    }
    for ((dst, refused), n) in tcp {
        let (class, label) = if refused {
            (
                Class::TcpRefused,
                "refused (reset): nothing listened on that port",
            )
        } else {
            (Class::TcpUnanswered, "never answered")
        };
        v.findings.push(Finding {
            class,
            what: format!("{n} TCP connection(s) to {} {label}", describe(&dst)),
            hint: server_hint("TCP"),
            evidence: "the client's capture",
        });
    }

    let mut udp: BTreeMap<SocketAddr, u64> = BTreeMap::new();
    for (dst, n) in &e.udp_unanswered {
        *udp.entry(*dst).or_default() += n;
    }
    for (dst, n) in udp {
        v.findings.push(Finding {
            class: Class::UdpUnanswered,
            what: format!("{n} UDP datagram(s) to {} got no answer", describe(&dst)),
            hint: server_hint("UDP"),
            evidence: "the client's capture",
        });
    }

    for (reason, n) in &e.nat64_drops {
        v.findings.push(Finding {
            class: Class::Nat64Drop,
            what: format!("the NAT64 dropped {n} packet(s): {reason}"),
            hint: nat64_hint(reason).into(),
            evidence: "the NAT64's counters",
        });
    }
    if e.no_route > 0 {
        v.findings.push(Finding {
            class: Class::NoRoute,
            what: format!("{} packet(s) to addresses outside the lab were dropped", e.no_route),
            hint: "the lab is a closed world: only the lab's hosts and the NAT64 prefix are reachable; a hard-coded global address (a public DNS server, a connectivity check) cannot work here".into(),
            evidence: "the lab's no_route counter",
        });
    }
    // A server that was late is the first thing to know when something failed, and harmless
    // when nothing did.
    if server_down {
        if v.findings.is_empty() && e.exit_code == 0 {
            v.notes.push("the server was not listening when COMMAND started, and COMMAND worked all the same".into());
        } else {
            v.findings.insert(0, Finding {
                class: Class::ServerNotListening,
                what: "the server (--server) was not listening when COMMAND started".into(),
                hint: "the failures below are then the server's, not the app's: check that --server starts, stays up and listens on the port COMMAND uses".into(),
                evidence: "the server's sockets before COMMAND started",
            });
        }
    }
    v
}

/// What a `connect()`/`sendto()` to an IPv4 address that worked through the CLAT would do
/// without it; `None` for the address of a name whose lookup also gave an IPv6 one (the
/// resolver's order put IPv4 first because the CLAT gave it a route; without one it sorts
/// IPv6 first).
fn clat_note(
    e: &Evidence,
    syscall: &str,
    v4: Ipv4Addr,
    port: u16,
    a_only: &BTreeSet<&str>,
    asked: &dyn Fn(&str, &str) -> bool,
) -> Option<String> {
    let names: Vec<&String> = e.names_of_v4.get(&v4).into_iter().flatten().collect();
    let what = match names.iter().find(|n| a_only.contains(n.as_str())) {
        Some(n) => format!("the IPv4 address of '{n}', from an A-only lookup,"),
        None if names.iter().any(|n| asked(n, "AAAA")) => return None,
        None => "the IPv4 literal".to_string(),
    };
    Some(format!("{syscall}() to {what} {v4}:{port} went through the CLAT (464XLAT): it works on networks with one, and fails on IPv6-only networks without one"))
}

fn nat64_hint(reason: &str) -> &'static str {
    match reason {
        "no-session" => "an IPv4 host sent to the client without the client talking first: behind a NAT64 an IPv6-only client cannot accept IPv4-initiated connections",
        "unsupported-extension" | "unsupported-protocol" => "only TCP, UDP and ICMP cross a NAT64: other protocols (ESP, SCTP, GRE) need IPv6 end to end",
        "fragment" | "too-big" => "fragmented or oversized datagrams: keep UDP payloads within the path MTU (1232 bytes is safe)",
        "hop-limit" => "a hop limit ran out at the translator",
        "hairpin" => "the client reached the NAT64's own IPv4 address through the prefix, which is not supported",
        _ => "malformed or unexpected packets reached the translator",
    }
}

/// What the check cannot see, said when COMMAND failed and nothing explains it.
pub const BLIND_SPOTS: &str = "decisions made from the interface list (getifaddrs, /sys/class/net) or from routes read some other way than /proc/net/route or netlink, sendmsg() destinations, IPv4 addresses the app never tried to reach, and failures in the app's own logic";

/// The report as the user reads it: COMMAND's status, the server, the findings with hint and
/// evidence, notes, and the conclusion (never "nothing broke" when COMMAND failed).
pub fn render(e: &Evidence, v: &Verdict) -> String {
    let mut s = format!("ipv6-check: COMMAND exited with status {}\n", e.exit_code);
    match e.server_listening {
        Some(true) => s.push_str("ipv6-check: the server was listening before COMMAND started\n"),
        Some(false) => s.push_str(
            "ipv6-check: the server was NOT listening when COMMAND started (it had exited, or the wait ran out)\n",
        ),
        None => {}
    }
    if e.calls.is_none() {
        s.push_str("ipv6-check: strace is not installed: IPv4 literals, AF_INET sockets and IPv4 preflight checks cannot be seen (apt install strace); the findings rest on the capture, the DNS64 and the counters only\n");
    }
    for (i, f) in v.findings.iter().enumerate() {
        s.push_str(&format!(
            "{}. {}\n   hint: {}\n   evidence: {}\n",
            i + 1,
            f.what,
            f.hint,
            f.evidence
        ));
    }
    for n in &v.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    if v.findings.is_empty() {
        if e.exit_code == 0 {
            s.push_str(if e.clat {
                "ipv6-check: no findings: COMMAND worked on the IPv6-only network with a CLAT (464XLAT)\n"
            } else {
                "ipv6-check: no findings: COMMAND worked on the IPv6-only network\n"
            });
        } else {
            s.push_str(&format!(
                "ipv6-check: COMMAND failed, and the cause was not seen: no IPv6-only problem shows in the trace, the capture or the counters. The check cannot see {BLIND_SPOTS}.\n"
            ));
        }
    }
    s
}

/// True when the check passes: no finding and COMMAND succeeded.
pub fn passed(e: &Evidence, v: &Verdict) -> bool {
    v.findings.is_empty() && e.exit_code == 0
}

/// The entry point of the fuzz target `ipv6check_trace` and its proptest twin: `data` as a
/// strace log and as a captured packet, through the whole check.
#[doc(hidden)]
pub fn fuzz_one(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut flows = Flows::default();
    flows.packet(data);
    let e = Evidence {
        calls: Some(parse_strace(&text)),
        tcp: flows.tcp(),
        udp_unanswered: flows.udp_unanswered(),
        exit_code: data.first().map_or(0, |b| i32::from(*b & 1)),
        server_listening: data.get(1).map(|b| b & 1 == 1),
        ..Evidence::default()
    };
    let v = analyze(&e);
    let _ = render(&e, &v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_trace_or_packet_goes_through_the_check_without_a_panic(
            data in proptest::collection::vec(any::<u8>(), 0..400),
            lines in proptest::collection::vec("[0-9]{1,3} (socket|connect|sendto|openat)\\([ -~]{0,120}\\) = -?[0-9] ?[A-Z]{0,8}", 0..8),
        ) {
            fuzz_one(&data);
            fuzz_one(lines.join("\n").as_bytes());
        }
    }

    /// A strace line of a connect.
    fn connect(pid: u32, fd: i32, addr: &str, err: Option<&str>) -> String {
        let a: SocketAddr = addr.parse().unwrap();
        let sa = match a.ip() {
            IpAddr::V4(ip) => format!("{{sa_family=AF_INET, sin_port=htons({}), sin_addr=inet_addr(\"{ip}\")}}, 16", a.port()),
            IpAddr::V6(ip) => format!("{{sa_family=AF_INET6, sin6_port=htons({}), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, \"{ip}\", &sin6_addr), sin6_scope_id=0}}, 28", a.port()),
        };
        let ret = match err {
            None => "0".to_string(),
            Some(e) => format!("-1 {e} (whatever)"),
        };
        format!("{pid} connect({fd}, {sa}) = {ret}\n")
    }

    fn socket(pid: u32, fd: i32, family: &str, ty: &str) -> String {
        format!("{pid} socket({family}, {ty}|SOCK_CLOEXEC, IPPROTO_IP) = {fd}\n")
    }

    const SERVER4: &str = "10.77.2.1";
    const SERVER6: &str = "64:ff9b::a4d:201";

    /// glibc's sorting probes of `server` (both families, port 5202), as strace shows them.
    fn probes(pid: u32, port: u16) -> String {
        socket(pid, 3, "AF_INET", "SOCK_DGRAM")
            + &connect(pid, 3, &format!("{SERVER4}:{port}"), Some("ENETUNREACH"))
            + &socket(pid, 3, "AF_INET6", "SOCK_DGRAM")
            + &connect(pid, 3, &format!("[{SERVER6}]:{port}"), None)
    }

    fn evidence(trace: &str, queries: &[(&str, &str)]) -> Evidence {
        Evidence {
            calls: Some(parse_strace(trace)),
            queries: queries
                .iter()
                .map(|(n, t)| ((n.to_string(), t.to_string()), 1))
                .collect(),
            names_of_v4: BTreeMap::from([(
                SERVER4.parse().unwrap(),
                vec!["server".to_string(), "server-eth0".to_string()],
            )]),
            ..Evidence::default()
        }
    }

    fn classes(v: &Verdict) -> Vec<Class> {
        v.findings.iter().map(|f| f.class).collect()
    }

    const DUAL: &[(&str, &str)] = &[("server", "A"), ("server", "AAAA")];

    #[test]
    fn an_ipv4_literal_is_named_with_its_address() {
        let t = socket(9, 3, "AF_INET", "SOCK_STREAM")
            + &connect(9, 3, "10.77.2.1:80", Some("ENETUNREACH"));
        let e = Evidence {
            exit_code: 1,
            ..evidence(&t, &[])
        };
        let v = analyze(&e);
        assert_eq!(classes(&v), vec![Class::Ipv4Literal]);
        assert!(
            v.findings[0].what.contains("IPv4 literal 10.77.2.1:80"),
            "{v:?}"
        );
        assert!(v.findings[0].what.contains("ENETUNREACH"), "{v:?}");
        assert!(!passed(&e, &v));
    }

    #[test]
    fn glibcs_sorting_probes_and_spare_af_inet_sockets_are_no_finding() {
        // ping and dig open AF_INET sockets they never use; getaddrinfo probes both families.
        let t = socket(9, 4, "AF_INET", "SOCK_DGRAM")
            + &probes(9, 5202)
            + &socket(9, 3, "AF_INET6", "SOCK_STREAM")
            + &connect(9, 3, &format!("[{SERVER6}]:5202"), Some("EINPROGRESS"));
        let mut e = evidence(&t, DUAL);
        e.tcp = vec![(
            format!("[{SERVER6}]:5202").parse().unwrap(),
            TcpOpen::Completed,
        )];
        let v = analyze(&e);
        assert_eq!(v, Verdict::default());
        assert!(passed(&e, &v));
        assert!(render(&e, &v).contains("no findings: COMMAND worked"));
    }

    #[test]
    fn a_udp_client_that_connects_the_ipv4_answer_after_the_probes_is_named() {
        let t = probes(9, 5300)
            + &socket(9, 5, "AF_INET", "SOCK_DGRAM")
            + &connect(9, 5, &format!("{SERVER4}:5300"), Some("ENETUNREACH"));
        let v = analyze(&Evidence {
            exit_code: 1,
            ..evidence(&t, DUAL)
        });
        assert_eq!(classes(&v), vec![Class::PickedIpv4], "{v:?}");
        assert!(v.findings[0].what.contains("IPv6 was never tried"), "{v:?}");
    }

    #[test]
    fn an_a_only_lookup_is_named_and_the_failed_connect_traced_back_to_it() {
        let t = socket(9, 3, "AF_INET", "SOCK_STREAM")
            + &connect(9, 3, &format!("{SERVER4}:5202"), Some("ENETUNREACH"));
        let v = analyze(&evidence(&t, &[("server", "A")]));
        assert_eq!(classes(&v), vec![Class::AOnly, Class::AOnlyLookup]);
        assert!(v.findings[0].what.contains("asked for A records only"));
        assert_eq!(v.findings[1].evidence, "the DNS64's query log");
    }

    #[test]
    fn a_fallback_to_ipv4_after_ipv6_was_refused_blames_the_server_not_the_app() {
        // curl: IPv6 first (reset: the port is closed), then the IPv4 answer.
        let t = probes(9, 81)
            + &socket(9, 5, "AF_INET6", "SOCK_STREAM")
            + &connect(9, 5, &format!("[{SERVER6}]:81"), Some("EINPROGRESS"))
            + &socket(9, 6, "AF_INET", "SOCK_STREAM")
            + &connect(9, 6, &format!("{SERVER4}:81"), Some("ENETUNREACH"));
        let mut e = Evidence {
            exit_code: 7,
            server_listening: Some(true),
            ..evidence(&t, DUAL)
        };
        e.tcp = vec![(format!("[{SERVER6}]:81").parse().unwrap(), TcpOpen::Refused)];
        let v = analyze(&e);
        assert_eq!(classes(&v), vec![Class::TcpRefused], "{v:?}");
        assert!(
            v.findings[0]
                .what
                .contains("the NAT64's translation of 10.77.2.1:81"),
            "{v:?}"
        );
        assert!(v.findings[0].hint.contains("server side"), "{v:?}");
        assert_eq!(v.notes.len(), 1);
        assert!(v.notes[0].contains("fallback to IPv4"), "{v:?}");
    }

    #[test]
    fn a_server_that_never_listened_is_named_first_and_blamed() {
        let mut e = Evidence {
            exit_code: 1,
            server_listening: Some(false),
            ..evidence("", DUAL)
        };
        e.tcp = vec![(
            format!("[{SERVER6}]:5202").parse().unwrap(),
            TcpOpen::Refused,
        )];
        let v = analyze(&e);
        assert_eq!(
            classes(&v),
            vec![Class::ServerNotListening, Class::TcpRefused]
        );
        assert!(v.findings[1].hint.contains("server's fault"), "{v:?}");
        assert!(render(&e, &v).contains("NOT listening"));
        // Late but in time for COMMAND: not a finding.
        let late = Evidence {
            exit_code: 0,
            server_listening: Some(false),
            ..evidence("", DUAL)
        };
        let v = analyze(&late);
        assert!(v.findings.is_empty() && v.notes.len() == 1, "{v:?}");
    }

    #[test]
    fn an_ipv4_preflight_check_that_gives_up_is_named() {
        let t = "9 openat(AT_FDCWD, \"/proc/net/route\", O_RDONLY|O_CLOEXEC) = 3\n";
        let e = Evidence {
            exit_code: 3,
            ..evidence(t, &[])
        };
        let v = analyze(&e);
        assert_eq!(classes(&v), vec![Class::Ipv4Preflight]);
        assert!(v.findings[0].what.contains("/proc/net/route"), "{v:?}");
        assert!(v.findings[0].what.contains("status 3"), "{v:?}");
        // The same look at the routes in a program that then works is fine.
        let ok = Evidence {
            exit_code: 0,
            ..evidence(t, &[])
        };
        assert_eq!(analyze(&ok), Verdict::default());
    }

    #[test]
    fn a_failure_without_a_seen_cause_says_so_and_never_that_nothing_broke() {
        let e = Evidence {
            exit_code: 3,
            ..evidence("", &[])
        };
        let v = analyze(&e);
        assert!(v.findings.is_empty());
        assert!(!passed(&e, &v));
        let r = render(&e, &v);
        assert!(r.contains("the cause was not seen"), "{r}");
        assert!(r.contains("cannot see"), "{r}");
        assert!(!r.contains("no findings"), "{r}");
    }

    #[test]
    fn through_a_clat_ipv4_literals_and_a_only_lookups_work_and_are_notes_not_findings() {
        // AF_INET-only code on a 464XLAT network: A only, then an AF_INET connect that the
        // CLAT carries (EINPROGRESS, then connected).
        let t = socket(9, 3, "AF_INET", "SOCK_STREAM")
            + &connect(9, 3, &format!("{SERVER4}:5202"), Some("EINPROGRESS"))
            + &socket(9, 4, "AF_INET", "SOCK_STREAM")
            + &connect(9, 4, "10.77.9.9:80", None);
        let mut e = Evidence {
            clat: true,
            server_listening: Some(true),
            ..evidence(&t, &[("server", "A")])
        };
        let v = analyze(&e);
        assert!(v.findings.is_empty(), "{v:?}");
        assert_eq!(v.notes.len(), 3, "{v:?}");
        assert!(
            v.notes[0].contains("'server', from an A-only lookup"),
            "{v:?}"
        );
        assert!(
            v.notes[1].contains("the IPv4 literal 10.77.9.9:80"),
            "{v:?}"
        );
        assert!(v.notes[2].contains("asked for A records only"), "{v:?}");
        // getaddrinfo's order put the CLAT's IPv4 first: nothing to say.
        let both = probes(9, 5202)
            + &socket(9, 5, "AF_INET", "SOCK_STREAM")
            + &connect(9, 5, &format!("{SERVER4}:5202"), Some("EINPROGRESS"));
        let dual = Evidence {
            clat: true,
            ..evidence(&both, DUAL)
        };
        assert_eq!(analyze(&dual), Verdict::default());
        assert!(passed(&e, &v));
        assert!(render(&e, &v).contains("with a CLAT (464XLAT)"));
        // The same program without the CLAT: the A-only lookup is a finding.
        e.clat = false;
        assert_eq!(classes(&analyze(&e)), vec![Class::AOnlyLookup]);
    }

    #[test]
    fn unanswered_flows_and_counters_are_findings() {
        let mut e = evidence("", &[]);
        e.tcp = vec![(
            format!("[{SERVER6}]:81").parse().unwrap(),
            TcpOpen::Unanswered,
        )];
        e.udp_unanswered = vec![(format!("[{SERVER6}]:9").parse().unwrap(), 4)];
        e.nat64_drops = BTreeMap::from([("no-session".to_string(), 2)]);
        e.no_route = 3;
        let v = analyze(&e);
        assert_eq!(
            classes(&v),
            vec![
                Class::TcpUnanswered,
                Class::UdpUnanswered,
                Class::Nat64Drop,
                Class::NoRoute
            ]
        );
        assert!(v.findings[1].what.starts_with("4 UDP datagram(s)"), "{v:?}");
    }

    #[test]
    fn an_a_only_lookup_whose_answer_is_never_used_by_a_working_program_is_a_note() {
        // `dig +short server A`: asks for A records only, prints them, exits 0.
        let t = socket(9, 20, "AF_INET6", "SOCK_DGRAM") + &connect(9, 20, "[fd00::53]:53", None);
        let e = evidence(&t, &[("server", "A")]);
        let v = analyze(&e);
        assert!(v.findings.is_empty(), "{v:?}");
        assert!(passed(&e, &v));
        assert_eq!(v.notes.len(), 1, "{v:?}");
        assert!(
            v.notes[0].contains("'server' asked for A records only"),
            "{v:?}"
        );
        // The same lookup in a program that then failed is a finding.
        let failed = Evidence {
            exit_code: 1,
            ..evidence(&t, &[("server", "A")])
        };
        assert_eq!(classes(&analyze(&failed)), vec![Class::AOnlyLookup]);
        // And so is one whose answer the program tried to reach, even though it exited 0.
        let used = t
            + &socket(9, 3, "AF_INET", "SOCK_STREAM")
            + &connect(9, 3, &format!("{SERVER4}:80"), Some("ENETUNREACH"));
        let v = analyze(&evidence(&used, &[("server", "A")]));
        assert_eq!(classes(&v), vec![Class::AOnly, Class::AOnlyLookup]);
    }
}

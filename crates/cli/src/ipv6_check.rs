//! `latencylab ipv6-check`: runs COMMAND as the IPv6-only client of a `--nat64` lab and says
//! what broke, each finding with a hint and the evidence it rests on:
//!
//! - `strace` (when installed): the client's `socket()`, `connect()` and `sendto()` calls, so
//!   that an attempt to reach an IPv4 address (which cannot even leave an IPv6-only host: it
//!   fails with ENETUNREACH) is seen with its address and whether the address came from a
//!   lookup;
//! - the DNS64's log of queries: names asked with type A and never AAAA;
//! - the client's capture: TCP connections whose SYN got no answer or a reset, UDP flows that
//!   got no answer;
//! - the lab's counters: packets the NAT64 dropped, packets to addresses outside the lab.
//!
//! The analysis ([`analyze`]) is a pure function of that evidence; [`run`] gathers it.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use lab::config::LabConfig;
use lab::{run_lab, RunOptions};
use labnet::run_dir::RunDir;
use labnet::shell::shell_config;

use crate::shell::{shell_options, ShellArgs};

/// Run COMMAND on an IPv6-only network (DNS64 + NAT64 to an IPv4-only server) and report what
/// broke: IPv4 literals, AF_INET-only sockets, A-only lookups, connections that never completed.
#[derive(Args, Debug)]
#[command(
    after_help = "Example:\n  sudo latencylab ipv6-check --server 'latencylab probe-server' -- ./my-app server\n\nExit status: 0 when nothing broke, 1 when something did (a finding, or COMMAND failed), 2 for a bad option.\nIPv4 literals and AF_INET sockets are seen with strace (install it: apt install strace)."
)]
pub struct CheckArgs {
    #[command(flatten)]
    lab: ShellArgs,
}

/// One system call of the client, as strace printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Socket {
        pid: u32,
        family: String,
        stream: bool,
        fd: Option<i32>,
    },
    /// `connect` or `sendto` with a destination address.
    Reach {
        pid: u32,
        syscall: &'static str,
        fd: i32,
        addr: SocketAddr,
        /// The errno name when it failed (EINPROGRESS is not a failure).
        error: Option<String>,
    },
}

/// Joins strace's `<unfinished ...>` / `<... resumed>` halves (several processes under `-f`)
/// and parses the calls it knows; other lines are skipped.
pub fn parse_strace(text: &str) -> Vec<Call> {
    let mut pending: HashMap<u32, String> = HashMap::new();
    let mut calls = Vec::new();
    for line in text.lines() {
        let Some((pid, rest)) = line.split_once(' ') else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        let rest = rest.trim_start();
        let full = if let Some(head) = rest.strip_suffix(" <unfinished ...>") {
            pending.insert(pid, head.to_string());
            continue;
        } else if rest.starts_with("<... ") {
            let Some(head) = pending.remove(&pid) else {
                continue;
            };
            let Some((_, tail)) = rest.split_once("resumed>") else {
                continue;
            };
            format!("{head}{tail}")
        } else {
            rest.to_string()
        };
        if let Some(c) = parse_call(pid, &full) {
            calls.push(c);
        }
    }
    calls
}

fn parse_call(pid: u32, line: &str) -> Option<Call> {
    let (name, args) = line.split_once('(')?;
    let (args, result) = args.rsplit_once(") = ")?;
    let ret: i64 = result.split_whitespace().next()?.parse().ok()?;
    let error = (ret < 0)
        .then(|| result.split_whitespace().nth(1).map(String::from))
        .flatten();
    match name {
        "socket" => {
            let mut parts = args.split(", ");
            let family = parts.next()?.to_string();
            let stream = parts.next()?.starts_with("SOCK_STREAM");
            Some(Call::Socket {
                pid,
                family,
                stream,
                fd: (ret >= 0).then_some(ret as i32),
            })
        }
        "connect" | "sendto" => {
            let fd: i32 = args.split(',').next()?.trim().parse().ok()?;
            let addr = sockaddr(args)?;
            Some(Call::Reach {
                pid,
                syscall: if name == "connect" {
                    "connect"
                } else {
                    "sendto"
                },
                fd,
                addr,
                error: error.filter(|e| e != "EINPROGRESS"),
            })
        }
        _ => None,
    }
}

/// The IP address and port of strace's rendering of a `struct sockaddr_in` / `sockaddr_in6`.
fn sockaddr(args: &str) -> Option<SocketAddr> {
    let port: u16 = between(args, "port=htons(", ")")?.parse().ok()?;
    if args.contains("sa_family=AF_INET6") {
        let a: Ipv6Addr = between(args, "inet_pton(AF_INET6, \"", "\"")?
            .parse()
            .ok()?;
        Some(SocketAddr::new(IpAddr::V6(a), port))
    } else if args.contains("sa_family=AF_INET,") {
        let a: Ipv4Addr = between(args, "inet_addr(\"", "\"")?.parse().ok()?;
        Some(SocketAddr::new(IpAddr::V4(a), port))
    } else {
        None
    }
}

fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let from = s.find(start)? + start.len();
    let len = s[from..].find(end)?;
    Some(&s[from..from + len])
}

/// How a TCP connection the client opened ended, from its capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpOpen {
    Completed,
    Refused,
    Unanswered,
}

/// Everything a check rests on.
#[derive(Debug, Default)]
pub struct Evidence {
    /// `None` when strace was not available.
    pub calls: Option<Vec<Call>>,
    /// (name, type) → times asked, from the DNS64.
    pub queries: BTreeMap<(String, String), u64>,
    /// The lab's IPv4 addresses and the names they have.
    pub names_of_v4: BTreeMap<Ipv4Addr, Vec<String>>,
    /// TCP connections the client opened: (destination, outcome).
    pub tcp: Vec<(SocketAddr, TcpOpen)>,
    /// UDP flows (client port, destination) that got no datagram back: (destination,
    /// datagrams sent).
    pub udp_unanswered: Vec<(SocketAddr, u64)>,
    /// NAT64 drops by reason.
    pub nat64_drops: BTreeMap<String, u64>,
    /// Packets for addresses outside the lab.
    pub no_route: u64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    pub hint: String,
    pub evidence: &'static str,
}

/// The IPv4 address a destination really is: an IPv4 one, or an IPv4-mapped IPv6 one.
fn as_v4(a: IpAddr) -> Option<Ipv4Addr> {
    match a {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// What broke, in the order the evidence was looked at.
pub fn analyze(e: &Evidence) -> Vec<Finding> {
    let mut out = Vec::new();
    let asked = |name: &str, ty: &str| e.queries.contains_key(&(name.to_string(), ty.to_string()));
    let a_only: BTreeSet<&str> = e
        .queries
        .keys()
        .filter(|(n, t)| t == "A" && !asked(n, "AAAA"))
        .map(|(n, _)| n.as_str())
        .collect();

    if let Some(calls) = &e.calls {
        // (pid, fd) → (family, stream, reached): sockets and whether they were used to reach
        // an address.
        let mut sockets: HashMap<(u32, i32), (String, bool, bool)> = HashMap::new();
        let mut seen = BTreeSet::new();
        let mut unused_inet = 0;
        let flush = |s: &(String, bool, bool), unused: &mut u32| {
            if s.0 == "AF_INET" && !s.2 {
                *unused += 1;
            }
        };
        for c in calls {
            match c {
                Call::Socket {
                    pid,
                    family,
                    stream,
                    fd: Some(fd),
                } => {
                    if let Some(old) = sockets.insert((*pid, *fd), (family.clone(), *stream, false))
                    {
                        flush(&old, &mut unused_inet);
                    }
                }
                Call::Socket { .. } => {}
                Call::Reach {
                    pid,
                    syscall,
                    fd,
                    addr,
                    error,
                } => {
                    let sock = sockets.get_mut(&(*pid, *fd));
                    let stream = sock.as_ref().is_some_and(|s| s.1);
                    if let Some(s) = sock {
                        s.2 = true;
                    }
                    let Some(v4) = as_v4(addr.ip()) else { continue };
                    let Some(err) = error else { continue };
                    if v4.is_loopback() {
                        continue;
                    }
                    let names: Vec<&String> =
                        e.names_of_v4.get(&v4).into_iter().flatten().collect();
                    let dual = names.iter().any(|n| asked(n, "A") && asked(n, "AAAA"));
                    // glibc sorts getaddrinfo's answers (RFC 6724) by connecting a UDP socket
                    // to each: a failed probe of the A answer of a name that was also asked
                    // for AAAA is that, and harmless.
                    if dual && !stream && *syscall == "connect" {
                        continue;
                    }
                    if !seen.insert((v4, addr.port(), *syscall)) {
                        continue;
                    }
                    let (what, hint) = if let Some(n) =
                        names.iter().find(|n| a_only.contains(n.as_str()))
                    {
                        (
                            format!("{syscall}() to {v4}:{} failed ({err}): the IPv4 address of '{n}', from a lookup that asked for A records only", addr.port()),
                            "resolve with getaddrinfo(AF_UNSPEC) (or AF_INET6) and use what it returns: the DNS64 answers AAAA with an address the NAT64 translates".to_string(),
                        )
                    } else if let Some(n) = names.iter().find(|n| asked(n, "A") && asked(n, "AAAA"))
                    {
                        (
                            format!("{syscall}() to {v4}:{} failed ({err}): the IPv4 address of '{n}', picked though the lookup also gave an IPv6 one", addr.port()),
                            "try every address getaddrinfo returns, in its order (or Happy Eyeballs, RFC 8305), not only the IPv4 ones".to_string(),
                        )
                    } else {
                        (
                            format!("{syscall}() to the IPv4 literal {v4}:{} failed ({err})", addr.port()),
                            "an IPv6-only network has no IPv4 route: connect by host name, or synthesise an IPv6 address from the NAT64 prefix (RFC 7050: the AAAA of ipv4only.arpa; RFC 6052)".to_string(),
                        )
                    };
                    out.push(Finding {
                        what,
                        hint,
                        evidence: "strace of the client",
                    });
                }
            }
        }
        for s in sockets.values() {
            flush(s, &mut unused_inet);
        }
        if unused_inet > 0 {
            out.push(Finding {
                what: format!("{unused_inet} AF_INET socket(s) opened and never connected to anything"),
                hint: "AF_INET sockets reach only 127.0.0.1 on an IPv6-only host; open AF_INET6 ones (they carry IPv4 too where there is IPv4)".into(),
                evidence: "strace of the client",
            });
        }
    }

    for n in &a_only {
        out.push(Finding {
            what: format!("the lookup of '{n}' asked for A records only"),
            hint: "an IPv6-only client must ask for AAAA (getaddrinfo with AF_UNSPEC or AF_INET6); A answers are IPv4 addresses it cannot reach".into(),
            evidence: "the DNS64's query log",
        });
    }

    let mut tcp: BTreeMap<(SocketAddr, &str), u32> = BTreeMap::new();
    for (dst, how) in &e.tcp {
        let label = match how {
            TcpOpen::Completed => continue,
            TcpOpen::Refused => "refused (reset)",
            TcpOpen::Unanswered => "never answered",
        };
        *tcp.entry((*dst, label)).or_default() += 1;
    }
    for ((dst, label), n) in tcp {
        out.push(Finding {
            what: format!("{n} TCP connection(s) to {dst} {label}"),
            hint: "check that the server listens on that port over IPv4; the NAT64 counters below say whether the translator dropped anything".into(),
            evidence: "the client's capture",
        });
    }

    let mut udp: BTreeMap<SocketAddr, u64> = BTreeMap::new();
    for (dst, n) in &e.udp_unanswered {
        *udp.entry(*dst).or_default() += n;
    }
    for (dst, n) in udp {
        out.push(Finding {
            what: format!("{n} UDP datagram(s) to {dst} got no answer"),
            hint: "check that the server answers over IPv4 from the address it was reached at; the NAT64 counters below say whether the translator dropped anything".into(),
            evidence: "the client's capture",
        });
    }

    for (reason, n) in &e.nat64_drops {
        out.push(Finding {
            what: format!("the NAT64 dropped {n} packet(s): {reason}"),
            hint: nat64_hint(reason).into(),
            evidence: "the NAT64's counters",
        });
    }
    if e.no_route > 0 {
        out.push(Finding {
            what: format!("{} packet(s) to addresses outside the lab were dropped", e.no_route),
            hint: "the lab is a closed world: only the lab's hosts and the NAT64 prefix are reachable; a hard-coded global address (a public DNS server, a connectivity check) cannot work here".into(),
            evidence: "the lab's no_route counter",
        });
    }
    out
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

/// `strace`'s path, if it is installed.
fn find_strace() -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join("strace"))
        .find(|p| p.is_file())
}

/// What a capture says about the client's flows.
type Flows = (Vec<(SocketAddr, TcpOpen)>, Vec<(SocketAddr, u64)>);

/// The client's TCP opens (SYNs it sent, and whether the peer answered) and UDP flows without
/// an answer, from its capture.
fn flows(pcap: &Path) -> Result<Flows> {
    let f = fs::File::open(pcap).with_context(|| format!("reading {}", pcap.display()))?;
    let mut r = analyze::capture::CaptureReader::new(std::io::BufReader::new(f))
        .with_context(|| format!("reading {}", pcap.display()))?;
    // (client port, destination) → outcome so far
    let mut opens: BTreeMap<(u16, SocketAddr), TcpOpen> = BTreeMap::new();
    // (client port, destination) → (datagrams sent, answered)
    let mut udp: BTreeMap<(u16, SocketAddr), (u64, bool)> = BTreeMap::new();
    while let Some(p) = r.next_packet()? {
        let Ok(Some(ip)) = analyze::link::ip_payload(p.linktype, p.data) else {
            continue;
        };
        let Ok(h) = wire::packet::parse(ip) else {
            continue;
        };
        let t = match h.transport {
            wire::packet::Transport::Tcp(t) => t,
            wire::packet::Transport::Udp {
                src_port, dst_port, ..
            } => {
                // The capture is the client's: what it sent has its address as source.
                let reply = (dst_port, SocketAddr::new(h.ip.src, src_port));
                if let Some(f) = udp.get_mut(&reply) {
                    f.1 = true;
                } else {
                    udp.entry((src_port, SocketAddr::new(h.ip.dst, dst_port)))
                        .or_default()
                        .0 += 1;
                }
                continue;
            }
            _ => continue,
        };
        use wire::packet::TcpHeader as F;
        if t.has(F::SYN) && !t.has(F::ACK) {
            opens
                .entry((t.src_port, SocketAddr::new(h.ip.dst, t.dst_port)))
                .or_insert(TcpOpen::Unanswered);
        } else if let Some(o) = opens.get_mut(&(t.dst_port, SocketAddr::new(h.ip.src, t.src_port)))
        {
            if *o == TcpOpen::Unanswered {
                if t.has(F::SYN) && t.has(F::ACK) {
                    *o = TcpOpen::Completed;
                } else if t.has(F::RST) {
                    *o = TcpOpen::Refused;
                }
            }
        }
    }
    Ok((
        opens.into_iter().map(|((_, d), o)| (d, o)).collect(),
        udp.into_iter()
            .filter(|(_, (_, answered))| !answered)
            .map(|((_, d), (n, _))| (d, n))
            .collect(),
    ))
}

fn names_of_v4(cfg: &LabConfig) -> BTreeMap<Ipv4Addr, Vec<String>> {
    let mut m: BTreeMap<Ipv4Addr, Vec<String>> = BTreeMap::new();
    for h in cfg.hosts.iter().filter(|h| h.has_ipv4()) {
        for (k, i) in h.interfaces.iter().enumerate() {
            let e = m.entry(i.ipv4).or_default();
            if k == 0 {
                e.push(h.name.clone());
            }
            e.push(format!("{}-{}", h.name, i.name));
        }
    }
    m
}

pub fn run(a: CheckArgs) -> Result<ExitCode> {
    let mut opts = shell_options(&a.lab);
    opts.nat64 = true;
    let cfg = shell_config(&opts, &lab::files::read)?;
    if a.lab.command.is_empty() {
        return Err(lab::UsageError(
            "ipv6-check needs a COMMAND to check (try: latencylab ipv6-check -- curl -s http://server/)".into(),
        )
        .into());
    }
    // The evidence needs captures: in the user's -o directory, or a scratch one.
    let (dir, scratch) = match &a.lab.out {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("latencylab-ipv6-check-{}", std::process::id())),
            true,
        ),
    };
    lab::owner::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = check(&a, &cfg, &dir);
    if scratch {
        let _ = fs::remove_dir_all(&dir);
    }
    result
}

fn check(a: &CheckArgs, cfg: &LabConfig, dir: &Path) -> Result<ExitCode> {
    let strace = find_strace();
    let trace_file = dir.join("strace.txt");
    let mut command = a.lab.command.clone();
    if let Some(s) = &strace {
        // COMMAND (and strace) run as the user who invoked sudo: the file must be theirs.
        lab::owner::write(&trace_file, "")
            .with_context(|| format!("creating {}", trace_file.display()))?;
        let mut wrapped = vec![
            s.display().to_string(),
            "-f".into(),
            "-qq".into(),
            "-e".into(),
            "trace=socket,connect,sendto".into(),
            "-e".into(),
            "signal=none".into(),
            "-o".into(),
            trace_file.display().to_string(),
            "--".into(),
        ];
        wrapped.append(&mut command);
        command = wrapped;
    }
    let run = RunOptions {
        out_dir: Some(dir.to_path_buf()),
        command: Some(("client".into(), command)),
        server: a.lab.server.clone().map(|s| ("server".into(), s)),
        quiet: a.lab.quiet,
        // The client's capture is evidence: --no-capture does not apply here.
        no_capture: false,
    };
    let result = run_lab(cfg, &run)?;
    let nat = result.summary.nat64.clone().unwrap_or_default();
    let (tcp, udp_unanswered) = flows(&RunDir::new(dir).capture("client", "eth0"))?;
    let evidence = Evidence {
        calls: match &strace {
            Some(_) => Some(parse_strace(
                &fs::read_to_string(&trace_file)
                    .with_context(|| format!("reading {}", trace_file.display()))?,
            )),
            None => None,
        },
        queries: nat
            .dns
            .queries
            .iter()
            .map(|q| ((q.name.clone(), q.qtype.clone()), q.count))
            .collect(),
        names_of_v4: names_of_v4(cfg),
        tcp,
        udp_unanswered,
        nat64_drops: nat.drops.clone(),
        no_route: result.summary.no_route,
    };
    let findings = analyze(&evidence);
    println!(
        "ipv6-check: COMMAND exited with status {}",
        result.exit_code
    );
    if strace.is_none() {
        println!("ipv6-check: strace is not installed: IPv4 literals and AF_INET sockets cannot be seen (apt install strace); the findings rest on the capture, the DNS64 and the counters only");
    }
    if findings.is_empty() {
        println!("ipv6-check: no findings: nothing broke on the IPv6-only network");
    }
    for (i, f) in findings.iter().enumerate() {
        println!(
            "{}. {}\n   hint: {}\n   evidence: {}",
            i + 1,
            f.what,
            f.hint,
            f.evidence
        );
    }
    Ok(if findings.is_empty() && result.exit_code == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LITERAL: &str = r#"26435 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 3
26435 connect(3, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("10.77.2.1")}, 16) = -1 ENETUNREACH (Network is unreachable)
26435 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, 0) = 3
26435 connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory)
"#;

    /// glibc's address-selection probes and a TCP connect by name, as strace shows them.
    const BY_NAME: &str = r#"26435 socket(AF_INET6, SOCK_DGRAM|SOCK_CLOEXEC|SOCK_NONBLOCK, IPPROTO_IP) = 3
26435 connect(3, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "fd4c:6c61:6200:ffff::53", &sin6_addr), sin6_scope_id=0}, 28) = 0
26435 socket(AF_INET, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = 3
26435 connect(3, {sa_family=AF_INET, sin_port=htons(5202), sin_addr=inet_addr("10.77.2.1")}, 16) = -1 ENETUNREACH (Network is unreachable)
26435 socket(AF_INET6, SOCK_DGRAM|SOCK_CLOEXEC, IPPROTO_IP) = 3
26435 connect(3, {sa_family=AF_INET6, sin6_port=htons(5202), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "64:ff9b::a4d:201", &sin6_addr), sin6_scope_id=0}, 28) = 0
26435 socket(AF_INET6, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 3
26435 connect(3, {sa_family=AF_INET6, sin6_port=htons(5202), sin6_flowinfo=htonl(0), inet_pton(AF_INET6, "64:ff9b::a4d:201", &sin6_addr), sin6_scope_id=0}, 28) = -1 EINPROGRESS (Operation now in progress)
"#;

    fn server_names() -> BTreeMap<Ipv4Addr, Vec<String>> {
        BTreeMap::from([(
            Ipv4Addr::new(10, 77, 2, 1),
            vec!["server".to_string(), "server-eth0".to_string()],
        )])
    }

    fn queries(q: &[(&str, &str)]) -> BTreeMap<(String, String), u64> {
        q.iter()
            .map(|(n, t)| ((n.to_string(), t.to_string()), 1))
            .collect()
    }

    #[test]
    fn strace_lines_become_calls_with_addresses_and_errors() {
        let calls = parse_strace(LITERAL);
        assert_eq!(calls.len(), 3, "{calls:?}");
        assert_eq!(
            calls[1],
            Call::Reach {
                pid: 26435,
                syscall: "connect",
                fd: 3,
                addr: "10.77.2.1:80".parse().unwrap(),
                error: Some("ENETUNREACH".into()),
            }
        );
        let v6 = parse_strace(BY_NAME);
        assert!(
            matches!(&v6[7], Call::Reach { addr, error: None, .. } if addr.to_string() == "[64:ff9b::a4d:201]:5202")
        );
    }

    #[test]
    fn unfinished_and_resumed_halves_are_joined() {
        let t = "7 connect(3, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr(\"192.0.2.1\")}, 16 <unfinished ...>\n8 socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP) = 4\n7 <... connect resumed>) = -1 ENETUNREACH (Network is unreachable)\n";
        let calls = parse_strace(t);
        assert_eq!(calls.len(), 2);
        assert!(matches!(&calls[1], Call::Reach { pid: 7, addr, .. } if addr.port() == 443));
    }

    #[test]
    fn an_ipv4_literal_is_named_with_its_address() {
        let e = Evidence {
            calls: Some(parse_strace(LITERAL)),
            names_of_v4: server_names(),
            ..Default::default()
        };
        let f = analyze(&e);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].what.contains("IPv4 literal 10.77.2.1:80"), "{f:?}");
        assert!(f[0].what.contains("ENETUNREACH"), "{f:?}");
        assert_eq!(f[0].evidence, "strace of the client");
    }

    #[test]
    fn a_lookup_by_name_with_glibcs_address_probes_is_no_finding() {
        let e = Evidence {
            calls: Some(parse_strace(BY_NAME)),
            queries: queries(&[("server", "A"), ("server", "AAAA")]),
            names_of_v4: server_names(),
            tcp: vec![(
                "[64:ff9b::a4d:201]:5202".parse().unwrap(),
                TcpOpen::Completed,
            )],
            ..Default::default()
        };
        assert_eq!(analyze(&e), vec![]);
    }

    #[test]
    fn an_a_only_lookup_is_named_and_the_failed_connect_traced_back_to_it() {
        let strace = "9 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 3\n9 connect(3, {sa_family=AF_INET, sin_port=htons(5202), sin_addr=inet_addr(\"10.77.2.1\")}, 16) = -1 ENETUNREACH (Network is unreachable)\n";
        let e = Evidence {
            calls: Some(parse_strace(strace)),
            queries: queries(&[("server", "A")]),
            names_of_v4: server_names(),
            ..Default::default()
        };
        let f = analyze(&e);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].what
                .contains("'server', from a lookup that asked for A records only"),
            "{f:?}"
        );
        assert!(
            f[1].what
                .contains("lookup of 'server' asked for A records only"),
            "{f:?}"
        );
        assert_eq!(f[1].evidence, "the DNS64's query log");
    }

    #[test]
    fn unused_af_inet_sockets_unanswered_syns_and_counters_are_findings() {
        let e = Evidence {
            calls: Some(parse_strace(
                "5 socket(AF_INET, SOCK_DGRAM, IPPROTO_IP) = 3\n",
            )),
            tcp: vec![
                ("[64:ff9b::a4d:201]:80".parse().unwrap(), TcpOpen::Refused),
                (
                    "[64:ff9b::a4d:201]:81".parse().unwrap(),
                    TcpOpen::Unanswered,
                ),
            ],
            udp_unanswered: vec![("[64:ff9b::a4d:201]:9".parse().unwrap(), 4)],
            nat64_drops: BTreeMap::from([("no-session".to_string(), 2)]),
            no_route: 3,
            ..Default::default()
        };
        let f: Vec<String> = analyze(&e).into_iter().map(|f| f.what).collect();
        assert_eq!(
            f,
            vec![
                "1 AF_INET socket(s) opened and never connected to anything",
                "1 TCP connection(s) to [64:ff9b::a4d:201]:80 refused (reset)",
                "1 TCP connection(s) to [64:ff9b::a4d:201]:81 never answered",
                "4 UDP datagram(s) to [64:ff9b::a4d:201]:9 got no answer",
                "the NAT64 dropped 2 packet(s): no-session",
                "3 packet(s) to addresses outside the lab were dropped",
            ]
        );
    }
}

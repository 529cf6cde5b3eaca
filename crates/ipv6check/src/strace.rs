//! The client's system calls, as `strace -f -e trace=socket,connect,sendto,sendmsg,openat`
//! prints them: the sockets it opened, the addresses it tried to reach (and how that ended),
//! and the places it looked at to decide whether IPv4 works (the IPv4 routing table, an IPv4
//! address dump over netlink).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The system calls `ipv6-check` traces, for `strace -e trace=`.
pub const TRACED: &str = "socket,connect,sendto,sendmsg,openat";

/// One system call of the client, as strace printed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    Socket {
        pid: u32,
        family: String,
        stream: bool,
        fd: Option<i32>,
    },
    /// `connect` or `sendto` with an IP destination.
    Reach {
        pid: u32,
        syscall: &'static str,
        fd: i32,
        addr: SocketAddr,
        /// The errno name when it failed (EINPROGRESS is not a failure).
        error: Option<String>,
    },
    /// The process looked at IPv4's state: it opened `/proc/net/route`, or asked the kernel
    /// over netlink for the IPv4 routes or addresses (what `ip -4 route` and `ip -4 addr` do).
    /// `what` says which, for the finding.
    Ipv4State { pid: u32, what: String },
}

impl Call {
    pub fn pid(&self) -> u32 {
        match self {
            Call::Socket { pid, .. } | Call::Reach { pid, .. } | Call::Ipv4State { pid, .. } => {
                *pid
            }
        }
    }
}

/// Joins strace's `<unfinished ...>` / `<... resumed>` halves (several processes under `-f`)
/// and parses the calls it knows; other lines are skipped (strace also prints signals, exits
/// and calls this module does not need).
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
        if let Some(c) = parse_call(pid, &unpad(&full)) {
            calls.push(c);
        }
    }
    calls
}

/// strace pads a short call, and a resumed call's end, with spaces to line its result up
/// (`close(3)          = 0`, `<... sendto resumed>)     = 156`): one space before the `=`,
/// as every other line has it. The result is after the last ` = ` (no result holds one).
fn unpad(line: &str) -> String {
    match line.rfind(" = ") {
        Some(i) => format!("{} = {}", line[..i].trim_end(), &line[i + 3..]),
        None => line.to_string(),
    }
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
        "openat" => {
            let path = between(args, "\"", "\"")?;
            (path == "/proc/net/route" && ret >= 0).then(|| Call::Ipv4State {
                pid,
                what: "read the IPv4 routing table (/proc/net/route)".into(),
            })
        }
        "sendto" | "sendmsg" if args.contains("nlmsg_type=RTM_GET") => {
            // A netlink dump request whose payload names AF_INET (strace decodes rtmsg and
            // ifaddrmsg as `rtm_family=AF_INET` / `ifa_family=AF_INET`).
            let v4 = ["rtm_family=AF_INET,", "ifa_family=AF_INET,"]
                .iter()
                .any(|k| args.contains(k));
            let what = if args.contains("RTM_GETROUTE") {
                "asked the kernel for the IPv4 routes (netlink RTM_GETROUTE, as `ip -4 route`)"
            } else if args.contains("RTM_GETADDR") {
                "asked the kernel for the IPv4 addresses (netlink RTM_GETADDR, as `ip -4 addr`)"
            } else {
                return None;
            };
            v4.then(|| Call::Ipv4State {
                pid,
                what: what.into(),
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const LITERAL: &str = r#"26435 socket(AF_INET, SOCK_STREAM|SOCK_CLOEXEC, IPPROTO_TCP) = 3
26435 connect(3, {sa_family=AF_INET, sin_port=htons(80), sin_addr=inet_addr("10.77.2.1")}, 16) = -1 ENETUNREACH (Network is unreachable)
26435 socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC|SOCK_NONBLOCK, 0) = 3
26435 connect(3, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT (No such file or directory)
"#;

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
    }

    #[test]
    fn unfinished_and_resumed_halves_are_joined() {
        let t = "7 connect(3, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr(\"192.0.2.1\")}, 16 <unfinished ...>\n8 socket(AF_INET6, SOCK_STREAM, IPPROTO_TCP) = 4\n7 <... connect resumed>) = -1 ENETUNREACH (Network is unreachable)\n";
        let calls = parse_strace(t);
        assert_eq!(calls.len(), 2);
        assert!(matches!(&calls[1], Call::Reach { pid: 7, addr, .. } if addr.port() == 443));
    }

    #[test]
    fn a_resumed_call_padded_to_its_result_column_is_read() {
        // `ip -4 route | grep`: two processes, so strace splits ip's netlink request and pads
        // the resumed half's result.
        let t = "26135 sendto(3, [[{nlmsg_len=36, nlmsg_type=RTM_GETROUTE, nlmsg_flags=NLM_F_REQUEST|NLM_F_DUMP, nlmsg_seq=1, nlmsg_pid=0}, {rtm_family=AF_INET, rtm_dst_len=0}]], 156, 0, NULL, 0 <unfinished ...>\n26136 socket(AF_INET, SOCK_DGRAM, 0)       = 4\n26135 <... sendto resumed>)             = 156\n";
        let calls = parse_strace(t);
        assert_eq!(calls.len(), 2, "{calls:?}");
        assert!(calls.iter().any(|c| c.pid() == 26135), "{calls:?}");
        assert!(calls.iter().any(|c| c.pid() == 26136), "{calls:?}");
    }

    #[test]
    fn looking_at_ipv4_routes_or_addresses_is_seen_and_the_ipv6_or_any_family_is_not() {
        let t = concat!(
            "5 openat(AT_FDCWD, \"/proc/net/route\", O_RDONLY|O_CLOEXEC) = 3\n",
            "5 openat(AT_FDCWD, \"/proc/net/ipv6_route\", O_RDONLY|O_CLOEXEC) = 3\n",
            "6 sendmsg(3, {msg_name={sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, msg_namelen=12, msg_iov=[{iov_base=[{nlmsg_len=24, nlmsg_type=RTM_GETADDR, nlmsg_flags=NLM_F_REQUEST|NLM_F_DUMP, nlmsg_seq=1, nlmsg_pid=0}, {ifa_family=AF_INET, ifa_prefixlen=0, ifa_flags=0, ifa_scope=RT_SCOPE_UNIVERSE, ifa_index=0}], iov_len=24}], msg_iovlen=1, msg_controllen=0, msg_flags=0}, 0) = 24\n",
            "7 sendto(3, [{nlmsg_len=20, nlmsg_type=RTM_GETADDR, nlmsg_flags=NLM_F_REQUEST|NLM_F_DUMP, nlmsg_seq=1, nlmsg_pid=0}, {ifa_family=AF_UNSPEC, ...}], 20, 0, {sa_family=AF_NETLINK, nl_pid=0, nl_groups=00000000}, 12) = 20\n",
            "8 sendto(3, [{nlmsg_len=28, nlmsg_type=RTM_GETROUTE, nlmsg_flags=NLM_F_REQUEST|NLM_F_DUMP, nlmsg_seq=1, nlmsg_pid=0}, {rtm_family=AF_INET, rtm_dst_len=0}], 28, 0, NULL, 0) = 28\n",
        );
        let calls = parse_strace(t);
        let pids: Vec<u32> = calls.iter().map(Call::pid).collect();
        assert_eq!(pids, vec![5, 6, 8], "{calls:?}");
        assert!(
            matches!(&calls[0], Call::Ipv4State { what, .. } if what.contains("/proc/net/route"))
        );
        assert!(matches!(&calls[2], Call::Ipv4State { what, .. } if what.contains("RTM_GETROUTE")));
    }
}

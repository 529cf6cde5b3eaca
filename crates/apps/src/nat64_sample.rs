//! `nat64-sample`: small clients that each reach a server the way one family of real apps does,
//! one per class of failure the 2015 talk names for IPv6-only networks (DNS64 + NAT64). Each
//! resolves and connects with the libc calls such apps make, writes a short request, waits for
//! the first byte of an answer, prints one line saying what it did, and exits 1 when it did not
//! get through (2 for a bad option).
//!
//! - `getaddrinfo`: `getaddrinfo(AF_UNSPEC)` on the host name, every answer tried in order
//!   (works: the DNS64 answers AAAA with an address the NAT64 translates).
//! - `v4-literal`: an `AF_INET` socket to an IPv4 literal (breaks: no IPv4 route).
//! - `af-inet-only`: `gethostbyname` (A records only) and `AF_INET` sockets (breaks).
//! - `preflight`: looks for an IPv4 default route in `/proc/net/route` before connecting, and
//!   reports "no connection" when there is none although the network works (breaks).
//! - `local-synthesis`: for an IPv4 literal, discovers the NAT64 prefix from the AAAA records
//!   of `ipv4only.arpa` (RFC 7050 §3) and synthesises the literal's IPv6 address (RFC 6052
//!   §2.3), as the talk's higher-level APIs do (works); the literal itself where no prefix is
//!   found (a network with IPv4).
//!
//! The request is `HEAD / HTTP/1.0` with a `Host` line: an echo server (`probe-server`) sends
//! it back and an HTTP server answers it, so either gives a first byte. What the check of the
//! network's effect is (which finding `ipv6-check` names) is not this module's: it only does
//! what the app would do.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use crate::common::{positive_time_arg, start_record, Clock, JsonLines, UsageError};
use crate::records::Record;

/// The name whose AAAA records reveal a NAT64's prefix (RFC 7050 §2.2).
pub const IPV4ONLY_ARPA: &str = "ipv4only.arpa";

/// The classes of app, by how they reach a server.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleClass {
    /// Host name through getaddrinfo(AF_UNSPEC), every answer tried in order.
    Getaddrinfo,
    /// An AF_INET socket to an IPv4 literal.
    V4Literal,
    /// gethostbyname (A records only) and AF_INET sockets.
    AfInetOnly,
    /// "Is IPv4 up?": an IPv4 default route in /proc/net/route, or give up; then getaddrinfo.
    Preflight,
    /// RFC 7050 discovery of the NAT64 prefix and RFC 6052 synthesis of an IPv4 literal.
    LocalSynthesis,
}

impl SampleClass {
    pub const ALL: [SampleClass; 5] = [
        SampleClass::Getaddrinfo,
        SampleClass::V4Literal,
        SampleClass::AfInetOnly,
        SampleClass::Preflight,
        SampleClass::LocalSynthesis,
    ];

    /// The name on the command line and in the records.
    pub fn name(self) -> &'static str {
        match self {
            SampleClass::Getaddrinfo => "getaddrinfo",
            SampleClass::V4Literal => "v4-literal",
            SampleClass::AfInetOnly => "af-inet-only",
            SampleClass::Preflight => "preflight",
            SampleClass::LocalSynthesis => "local-synthesis",
        }
    }

    /// Whether this class takes an IPv4 literal (the others take a host name).
    pub fn wants_literal(self) -> bool {
        matches!(self, SampleClass::V4Literal | SampleClass::LocalSynthesis)
    }
}

/// Options of `nat64-sample`.
#[derive(clap::Args, Clone, Debug)]
pub struct Nat64SampleArgs {
    /// How to reach the server (the class of app to behave like).
    #[arg(long, value_enum, value_name = "CLASS")]
    pub class: SampleClass,
    /// The server: a host name, or an IPv4 literal for v4-literal (and local-synthesis).
    #[arg(value_name = "HOST-OR-ADDR")]
    pub host: String,
    /// The server's TCP port.
    #[arg(value_name = "PORT")]
    pub port: u16,
    /// How long each connection attempt, and then the wait for the first byte, may take.
    #[arg(long, value_parser = positive_time_arg, value_name = "TIME", default_value = "5s")]
    pub timeout: Duration,
    /// Write JSON lines (`start`, `nat64_sample`) to FILE instead of the line on stdout.
    #[arg(short, long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// What a sample did: the line it prints, and for the record whether it got through, to
/// which address, and when the first byte came.
#[derive(Clone, Debug, PartialEq)]
struct Outcome {
    ok: bool,
    addr: Option<SocketAddr>,
    ttfb_ms: Option<f64>,
    line: String,
}

/// `nat64-sample`.
pub fn run(args: &Nat64SampleArgs) -> anyhow::Result<()> {
    let literal = args.host.parse::<Ipv4Addr>().ok();
    if args.class == SampleClass::V4Literal && literal.is_none() {
        return Err(UsageError(format!(
            "--class v4-literal: '{}' is not an IPv4 address (try $LATENCYLAB_SERVER or 10.77.2.1)",
            args.host
        ))
        .into());
    }
    let clock = Clock::start();
    let out = match &args.out {
        Some(_) => Some(JsonLines::open(args.out.as_ref())?),
        None => None,
    };
    if let Some(o) = &out {
        o.emit(&start_record("nat64-sample", &clock));
    }
    let o = sample(args, literal, &clock);
    let line = format!("nat64-sample {}: {}", args.class.name(), o.line);
    match &out {
        Some(w) => {
            w.emit(&Record::Nat64Sample {
                t_s: clock.t_s(),
                class: args.class.name().into(),
                target: format!("{}:{}", args.host, args.port),
                ok: o.ok,
                addr: o.addr.map(|a| a.to_string()),
                ttfb_ms: o.ttfb_ms,
                line: line.clone(),
            });
            w.flush();
        }
        None => println!("{line}"),
    }
    if o.ok {
        Ok(())
    } else {
        Err(NotThrough.into())
    }
}

/// The sample did not get through: its line says why; [`crate::run`] exits with status 1
/// without printing more.
#[derive(Debug)]
pub struct NotThrough;

impl std::fmt::Display for NotThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the sample did not get through")
    }
}

impl std::error::Error for NotThrough {}

fn sample(args: &Nat64SampleArgs, literal: Option<Ipv4Addr>, clock: &Clock) -> Outcome {
    let (host, port) = (args.host.as_str(), args.port);
    match args.class {
        SampleClass::Getaddrinfo => by_getaddrinfo(args, clock, ""),
        SampleClass::V4Literal => {
            let a = SocketAddr::from((literal.expect("checked in run"), port));
            attempt(args, clock, &[a], "the IPv4 literal, AF_INET socket")
        }
        SampleClass::AfInetOnly => match crate::sys::gethostbyname_v4(host) {
            Ok(v4s) if !v4s.is_empty() => {
                let addrs: Vec<SocketAddr> = v4s
                    .into_iter()
                    .map(|v| SocketAddr::from((v, port)))
                    .collect();
                attempt(
                    args,
                    clock,
                    &addrs,
                    "gethostbyname (A only), AF_INET socket",
                )
            }
            Ok(_) | Err(_) => failed(format!(
                "gethostbyname('{host}') gave no IPv4 address: the app has nothing to connect to"
            )),
        },
        SampleClass::Preflight => {
            let routes = std::fs::read_to_string("/proc/net/route").unwrap_or_default();
            if has_ipv4_default_route(&routes) {
                by_getaddrinfo(
                    args,
                    clock,
                    "IPv4 default route found in /proc/net/route; then ",
                )
            } else {
                failed(
                    "no connection: no IPv4 default route in /proc/net/route, so the app says the \
                     network is down and does not try"
                        .into(),
                )
            }
        }
        SampleClass::LocalSynthesis => match literal {
            None => by_getaddrinfo(args, clock, ""),
            Some(v4) => {
                let answers = crate::sys::getaddrinfo(IPV4ONLY_ARPA, 0, libc::AF_INET6)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|a| match a.ip() {
                        IpAddr::V6(v6) => Some(v6),
                        IpAddr::V4(_) => None,
                    })
                    .collect::<Vec<_>>();
                match discover_prefix(&answers) {
                    Some(p) => {
                        let a = SocketAddr::from((p.embed(v4), port));
                        let how = format!(
                            "{v4} synthesised under {p} (prefix from the AAAA of {IPV4ONLY_ARPA}, RFC 7050; RFC 6052), AF_INET6 socket"
                        );
                        attempt(args, clock, &[a], &how)
                    }
                    None => {
                        let a = SocketAddr::from((v4, port));
                        let how = format!(
                            "no NAT64 prefix ({IPV4ONLY_ARPA} has no AAAA): the literal as it is, AF_INET socket"
                        );
                        attempt(args, clock, &[a], &how)
                    }
                }
            }
        },
    }
}

/// Resolves with `getaddrinfo(AF_UNSPEC)` and tries every answer in order.
fn by_getaddrinfo(args: &Nat64SampleArgs, clock: &Clock, before: &str) -> Outcome {
    match crate::sys::getaddrinfo(&args.host, args.port, libc::AF_UNSPEC) {
        Ok(addrs) if !addrs.is_empty() => {
            let list: Vec<String> = addrs.iter().map(|a| a.ip().to_string()).collect();
            let how = format!(
                "{before}getaddrinfo(AF_UNSPEC) gave {}, tried in order",
                list.join(", ")
            );
            attempt(args, clock, &addrs, &how)
        }
        Ok(_) => failed(format!(
            "{before}getaddrinfo('{}') gave no address",
            args.host
        )),
        Err(e) => failed(format!("{before}getaddrinfo('{}') failed: {e}", args.host)),
    }
}

fn failed(line: String) -> Outcome {
    Outcome {
        ok: false,
        addr: None,
        ttfb_ms: None,
        line,
    }
}

/// Connects to each address in turn until one takes, then writes the request and waits for
/// the first byte of the answer.
fn attempt(args: &Nat64SampleArgs, clock: &Clock, addrs: &[SocketAddr], how: &str) -> Outcome {
    let mut errors = Vec::new();
    for a in addrs {
        match TcpStream::connect_timeout(a, args.timeout) {
            Ok(s) => return first_byte(args, clock, s, *a, how),
            Err(e) => errors.push(format!("{a}: {e}")),
        }
    }
    failed(format!("{how}: connect failed ({})", errors.join("; ")))
}

fn first_byte(
    args: &Nat64SampleArgs,
    clock: &Clock,
    mut s: TcpStream,
    a: SocketAddr,
    how: &str,
) -> Outcome {
    let request = format!("HEAD / HTTP/1.0\r\nHost: {}\r\n\r\n", args.host);
    let mut b = [0u8; 1];
    let got = s
        .set_read_timeout(Some(args.timeout))
        .and_then(|()| s.write_all(request.as_bytes()))
        .and_then(|()| s.read(&mut b));
    match got {
        Ok(1) => {
            let ttfb_ms = clock.t_s() * 1e3;
            Outcome {
                ok: true,
                addr: Some(a),
                ttfb_ms: Some(ttfb_ms),
                line: format!("{how}: connected to {a}, first byte after {ttfb_ms:.1} ms"),
            }
        }
        Ok(_) => failed(format!("{how}: connected to {a}, closed with no answer")),
        Err(e) => failed(format!("{how}: connected to {a}, no answer: {e}")),
    }
}

/// Whether `/proc/net/route` (its text) has an IPv4 default route that is up: destination
/// 00000000 with RTF_UP (0x1) in its flags.
pub fn has_ipv4_default_route(proc_net_route: &str) -> bool {
    proc_net_route.lines().skip(1).any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() > 3
            && f[1] == "00000000"
            && u32::from_str_radix(f[3], 16).is_ok_and(|flags| flags & 0x1 != 0)
    })
}

/// RFC 7050 §3: the NAT64 prefix, from the IPv6 addresses the AAAA query for `ipv4only.arpa`
/// returned (each read by `nat64::clat::prefix_of`, the rule the lab's CLAT uses). When the
/// answers disagree, the first answer's prefix is kept only if every answer that shows a
/// prefix shows the same one; `None` when there is none.
pub fn discover_prefix(answers: &[Ipv6Addr]) -> Option<nat64::Prefix> {
    let mut found = answers.iter().filter_map(|a| nat64::clat::prefix_of(*a));
    let first = found.next()?;
    found.all(|p| p == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nat64::clat::WELL_KNOWN_IPV4;

    #[test]
    fn the_default_route_is_found_only_when_it_is_up_and_ipv4() {
        let header =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n";
        let default = "eth0\t00000000\t01024D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0\n";
        let subnet = "eth0\t00024D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        let down = "eth0\t00000000\t01024D0A\t0002\t0\t0\t0\t00000000\t0\t0\t0\n";
        assert!(has_ipv4_default_route(&format!(
            "{header}{subnet}{default}"
        )));
        assert!(!has_ipv4_default_route(&format!("{header}{subnet}")));
        assert!(!has_ipv4_default_route(&format!("{header}{down}")));
        // An IPv6-only host's table is the header alone.
        assert!(!has_ipv4_default_route(header));
        assert!(!has_ipv4_default_route(""));
    }

    #[test]
    fn the_well_known_prefix_is_discovered_from_ipv4only_arpa() {
        let answers: Vec<Ipv6Addr> = ["64:ff9b::c000:aa", "64:ff9b::c000:ab"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let p = discover_prefix(&answers).unwrap();
        assert_eq!(p, nat64::prefix::WELL_KNOWN);
        // RFC 6052 §2.4's example: 192.0.2.33 under the Well-Known Prefix.
        assert_eq!(
            p.embed(Ipv4Addr::new(192, 0, 2, 33)),
            "64:ff9b::c000:221".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn a_network_specific_prefix_is_found_at_its_length() {
        // RFC 6052 §2.4's table: 2001:db8:100::/40 with 192.0.0.170 embedded around the u octet.
        let p = nat64::Prefix::new("2001:db8:100::".parse().unwrap(), 40).unwrap();
        let answers = [p.embed(WELL_KNOWN_IPV4[0]), p.embed(WELL_KNOWN_IPV4[1])];
        assert_eq!(discover_prefix(&answers), Some(p));
        let p64 = nat64::Prefix::new("2001:db8:122:344::".parse().unwrap(), 64).unwrap();
        assert_eq!(discover_prefix(&[p64.embed(WELL_KNOWN_IPV4[0])]), Some(p64));
    }

    #[test]
    fn no_prefix_without_the_well_known_addresses() {
        assert_eq!(discover_prefix(&[]), None);
        assert_eq!(
            discover_prefix(&[
                "2001:db8::1".parse().unwrap(),
                "64:ff9b::a4d:201".parse().unwrap()
            ]),
            None
        );
    }

    #[test]
    fn only_the_literal_classes_want_an_address() {
        let want: Vec<&str> = SampleClass::ALL
            .iter()
            .filter(|c| c.wants_literal())
            .map(|c| c.name())
            .collect();
        assert_eq!(want, ["v4-literal", "local-synthesis"]);
    }
}

//! The rules of `latencylab fallback-check` as pure functions: the scenarios (each a lab that
//! breaks one thing apps assume about the network), what the client's captures say about how
//! it got through ([`Timeline`]), and the verdict against RFC 8305's expectations.
//!
//! The expectation: a client that does what RFC 8305 (Happy Eyeballs v2) specifies starts its
//! next attempt at most a Resolution Delay (§3, 50 ms) plus a Connection Attempt Delay (§5,
//! 250 ms recommended in §8) after its first, so its first byte arrives within about 300 ms of
//! the first attempt plus the working path's two round trips (the handshake, then the
//! request and its answer). [`Scenario::budget_ms`] is that sum.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use labnet::setting::{Direction, LinkState, Setting};
use labnet::spec::{
    iface_addrs, Family, Host, HostSettings, Interface, LabConfig, LinkSpec, UsageError,
};

/// RFC 8305 §3: how long a client waits for the AAAA answer once the A answer is in.
pub const RESOLUTION_DELAY_MS: f64 = 50.0;
/// RFC 8305 §5 and §8: the recommended delay between one connection attempt and the next.
pub const CONNECTION_ATTEMPT_DELAY_MS: f64 = 250.0;
/// The round trip of the dual-stack and IPv6-only scenarios' path.
pub const PATH_RTT_MS: u64 = 20;
/// How much slower IPv6 is in [`Scenario::Ipv6Slow`], per round trip.
pub const IPV6_SLOWER_BY_MS: u64 = 300;

/// A lab that breaks one assumption.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scenario {
    /// Dual stack, and IPv6 passes nothing: "IPv6 works if I have an address".
    Ipv6Blackhole,
    /// Dual stack, and IPv6 is 300 ms slower per round trip: "IPv6 is as good as IPv4".
    Ipv6Slow,
    /// IPv6 only, with DNS64 and NAT64 to the IPv4 server: "there is always IPv4".
    Ipv6OnlyNat64,
    /// Two interfaces and the preferred one passes nothing: "the default route works".
    FirstInterfaceDead,
}

impl Scenario {
    pub const ALL: [Scenario; 4] = [
        Scenario::Ipv6Blackhole,
        Scenario::Ipv6Slow,
        Scenario::Ipv6OnlyNat64,
        Scenario::FirstInterfaceDead,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Ipv6Blackhole => "ipv6-blackhole",
            Scenario::Ipv6Slow => "ipv6-slow",
            Scenario::Ipv6OnlyNat64 => "ipv6-only-nat64",
            Scenario::FirstInterfaceDead => "first-interface-dead",
        }
    }

    pub fn parse(s: &str) -> Result<Scenario, UsageError> {
        Scenario::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Scenario::ALL.iter().map(|x| x.name()).collect();
                UsageError(format!(
                    "--scenario: no scenario '{s}' (try {})",
                    names.join(", ")
                ))
            })
    }

    /// What the lab is, in a line.
    pub fn describe(self) -> String {
        match self {
            Scenario::Ipv6Blackhole => format!(
                "dual stack, {PATH_RTT_MS} ms RTT; IPv6 packets are dropped both ways (a broken IPv6 path)"
            ),
            Scenario::Ipv6Slow => format!(
                "dual stack, {PATH_RTT_MS} ms RTT; IPv6 takes {IPV6_SLOWER_BY_MS} ms longer per round trip (a tunnel)"
            ),
            Scenario::Ipv6OnlyNat64 => format!(
                "IPv6-only client, DNS64 + NAT64 to an IPv4-only server, {PATH_RTT_MS} ms RTT (a mobile carrier)"
            ),
            Scenario::FirstInterfaceDead => format!(
                "two interfaces: eth0 (the default route, {} ms RTT) passes nothing, eth1 works ({} ms RTT) (Wi-Fi associated to a dead access point, cellular up)",
                2 * (FIRST_IFACE_DELAY_MS + CORE_DELAY_MS),
                self.working_rtt_ms()
            ),
        }
    }

    /// The client's interfaces, whose captures are read.
    pub fn client_interfaces(self) -> &'static [&'static str] {
        match self {
            Scenario::FirstInterfaceDead => &["eth0", "eth1"],
            _ => &["eth0"],
        }
    }

    /// The round trip of the path that works.
    pub fn working_rtt_ms(self) -> u64 {
        match self {
            Scenario::FirstInterfaceDead => 2 * (SECOND_IFACE_DELAY_MS + CORE_DELAY_MS),
            _ => PATH_RTT_MS,
        }
    }

    /// The longest time from the first connection attempt to the first data byte that RFC
    /// 8305 allows a client on this lab: about 300 ms (a Resolution Delay and a Connection
    /// Attempt Delay) plus two round trips of the working path.
    pub fn budget_ms(self) -> f64 {
        RESOLUTION_DELAY_MS + CONNECTION_ATTEMPT_DELAY_MS + 2.0 * self.working_rtt_ms() as f64
    }

    /// The lab: hosts `client` and `server`, stopped after `duration_s`.
    pub fn lab_config(self, duration_s: f64, seed: u64) -> Result<LabConfig, UsageError> {
        let half_rtt = format!("{}ms", PATH_RTT_MS / 2);
        let slower = format!("ipv6 {}ms", IPV6_SLOWER_BY_MS / 2);
        let path = |extra: &[(&str, &str)]| -> Result<Direction, UsageError> {
            let mut pairs = vec![("delay", half_rtt.as_str())];
            pairs.extend_from_slice(extra);
            Direction::parse(&pairs).map_err(UsageError)
        };
        let one_way = match self {
            Scenario::Ipv6Blackhole => path(&[("drop", "ipv6")])?,
            Scenario::Ipv6Slow => path(&[("slow", slower.as_str())])?,
            Scenario::Ipv6OnlyNat64 => path(&[])?,
            Scenario::FirstInterfaceDead => return two_interfaces(duration_s, seed),
        };
        let nat64 = self == Scenario::Ipv6OnlyNat64;
        let family = |i: usize| match (nat64, i) {
            (false, _) => Family::Dual,
            (true, 1) => Family::Ipv6Only,
            (true, _) => Family::Ipv4Only,
        };
        let cfg = LabConfig {
            seed,
            duration_s: Some(duration_s),
            hosts: vec![
                host("client", family(1), &[("eth0", 1)]),
                host("server", family(2), &[("eth0", 2)]),
            ],
            routers: vec![],
            links: vec![link("path", "client", "server", one_way)],
            changes: vec![],
            programs: vec![],
            nat64: nat64.then(|| labnet::spec::Nat64Spec::at("server")),
            precision: Default::default(),
        };
        cfg.validate()?;
        Ok(cfg)
    }
}

/// [`Scenario::FirstInterfaceDead`]'s one-way delays: eth0 to the router (Wi-Fi), eth1 to
/// the router (cellular), the router to the server.
const FIRST_IFACE_DELAY_MS: u64 = 2;
const SECOND_IFACE_DELAY_MS: u64 = 25;
const CORE_DELAY_MS: u64 = 5;

fn host(name: &str, family: Family, ifaces: &[(&str, usize)]) -> Host {
    Host {
        name: name.into(),
        settings: HostSettings::default(),
        family,
        interfaces: ifaces
            .iter()
            .map(|&(n, i)| {
                let (ipv4, ipv6) = iface_addrs(i);
                Interface {
                    name: n.into(),
                    ipv4,
                    ipv6,
                }
            })
            .collect(),
        aliases: vec![],
    }
}

fn link(name: &str, a: &str, b: &str, d: Direction) -> LinkSpec {
    LinkSpec {
        name: name.into(),
        a: a.into(),
        b: b.into(),
        up: d.clone(),
        down: d,
    }
}

fn two_interfaces(duration_s: f64, seed: u64) -> Result<LabConfig, UsageError> {
    let delay = |ms: u64, extra: &[Setting]| -> Result<Direction, UsageError> {
        let mut d = Direction::parse(&[("delay", &format!("{ms}ms"))]).map_err(UsageError)?;
        for s in extra {
            s.apply(&mut d);
        }
        Ok(d)
    };
    let dead = [Setting::State(LinkState::Blackhole)];
    let cfg = LabConfig {
        seed,
        duration_s: Some(duration_s),
        hosts: vec![
            host("client", Family::Dual, &[("eth0", 1), ("eth1", 2)]),
            host("server", Family::Dual, &[("eth0", 3)]),
        ],
        routers: vec!["net".into()],
        links: vec![
            link(
                "first",
                "client.eth0",
                "net",
                delay(FIRST_IFACE_DELAY_MS, &dead)?,
            ),
            link(
                "second",
                "client.eth1",
                "net",
                delay(SECOND_IFACE_DELAY_MS, &[])?,
            ),
            link("core", "net", "server", delay(CORE_DELAY_MS, &[])?),
        ],
        changes: vec![],
        programs: vec![],
        nat64: None,
        precision: Default::default(),
    };
    cfg.validate()?;
    Ok(cfg)
}

// ---------------------------------------------------------------------------------------------
// What the captures say

/// One TCP connection attempt of the client: its first SYN and what came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Attempt {
    /// Capture time of the first SYN, ns.
    pub start_ns: u64,
    pub iface: String,
    pub to: SocketAddr,
    /// The SYN-ACK, ns.
    pub answered_ns: Option<u64>,
    pub refused: bool,
    /// The first data byte from the server, ns.
    pub first_byte_ns: Option<u64>,
}

/// A connection as the client sees it: its address, its port, the server.
type Key = (IpAddr, u16, SocketAddr);

/// The client's TCP attempts, fed with every packet of its captures ([`Timeline::packet`]),
/// in any order of interfaces.
#[derive(Debug, Default)]
pub struct Timeline {
    /// (client address, client port, server) → attempt.
    attempts: BTreeMap<Key, Attempt>,
    /// Packets of the server side that may precede their SYN in feeding order (another
    /// interface's capture read first): (key, time, flags, payload).
    later: Vec<(Key, u64, u8, usize)>,
}

impl Timeline {
    /// One IP packet captured on the client's `iface` at `t_ns`; anything but TCP over IP is
    /// ignored.
    pub fn packet(&mut self, t_ns: u64, iface: &str, ip: &[u8]) {
        let Ok(h) = wire::packet::parse(ip) else {
            return;
        };
        let wire::packet::Transport::Tcp(t) = h.transport else {
            return;
        };
        use wire::packet::TcpHeader as F;
        if t.has(F::SYN) && !t.has(F::ACK) {
            let key = (h.ip.src, t.src_port, SocketAddr::new(h.ip.dst, t.dst_port));
            let a = self.attempts.entry(key).or_insert_with(|| Attempt {
                start_ns: t_ns,
                iface: iface.to_string(),
                to: key.2,
                answered_ns: None,
                refused: false,
                first_byte_ns: None,
            });
            a.start_ns = a.start_ns.min(t_ns);
        } else {
            let key = (h.ip.dst, t.dst_port, SocketAddr::new(h.ip.src, t.src_port));
            self.later.push((key, t_ns, t.flags, t.payload_len));
        }
    }

    /// The attempts, in the order they started, with their answers.
    pub fn attempts(&self) -> Vec<Attempt> {
        use wire::packet::TcpHeader as F;
        let mut attempts = self.attempts.clone();
        for (key, t_ns, flags, payload) in &self.later {
            let Some(a) = attempts.get_mut(key) else {
                continue;
            };
            if *t_ns < a.start_ns {
                continue;
            }
            let earliest = |x: &mut Option<u64>| *x = Some(x.map_or(*t_ns, |v| v.min(*t_ns)));
            if flags & F::SYN != 0 && flags & F::ACK != 0 {
                earliest(&mut a.answered_ns);
            } else if flags & F::RST != 0 && a.answered_ns.is_none() {
                a.refused = true;
            }
            if *payload > 0 {
                earliest(&mut a.first_byte_ns);
            }
        }
        let mut v: Vec<Attempt> = attempts.into_values().collect();
        v.sort_by_key(|a| a.start_ns);
        v
    }
}

// ---------------------------------------------------------------------------------------------
// Verdicts

/// How a scenario went for the client.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// The first byte came within the budget.
    Ok { ttfb_ms: f64 },
    /// It came, later than RFC 8305 would have it.
    Slow { ttfb_ms: f64 },
    /// Attempts, and no data byte before the lab ended.
    Failed,
    /// No TCP connection attempt at all.
    NoAttempt,
    /// The server never listened: nothing to say about the client.
    NoServer,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        matches!(self, Verdict::Ok { .. })
    }
}

/// The verdict of one scenario from its attempts.
pub fn judge(scenario: Scenario, attempts: &[Attempt], server_listened: bool) -> Verdict {
    let Some(first) = attempts.iter().map(|a| a.start_ns).min() else {
        return if server_listened {
            Verdict::NoAttempt
        } else {
            Verdict::NoServer
        };
    };
    match attempts.iter().filter_map(|a| a.first_byte_ns).min() {
        Some(b) => {
            let ttfb_ms = b.saturating_sub(first) as f64 / 1e6;
            if ttfb_ms <= scenario.budget_ms() {
                Verdict::Ok { ttfb_ms }
            } else {
                Verdict::Slow { ttfb_ms }
            }
        }
        None if !server_listened => Verdict::NoServer,
        None => Verdict::Failed,
    }
}

/// One scenario's result, as the table shows it.
#[derive(Clone, Debug)]
pub struct Row {
    pub scenario: Scenario,
    pub attempts: Vec<Attempt>,
    pub verdict: Verdict,
    pub exit_code: i32,
    /// How long the lab gave the client, s.
    pub timeout_s: f64,
}

fn family(a: &SocketAddr) -> &'static str {
    match a.ip() {
        IpAddr::V4(_) => "IPv4",
        IpAddr::V6(v) if v.segments()[..2] == [0x64, 0xff9b] => "IPv6 (NAT64)",
        IpAddr::V6(_) => "IPv6",
    }
}

/// What the attempts were, in a few words each: `IPv6 eth0 at +0 ms: no answer; IPv4 eth0 at
/// +201 ms: got data`.
pub fn describe_attempts(attempts: &[Attempt]) -> String {
    let Some(first) = attempts.first().map(|a| a.start_ns) else {
        return "no TCP connection attempt".into();
    };
    let shown = 4;
    let mut parts: Vec<String> = attempts
        .iter()
        .take(shown)
        .map(|a| {
            let at = (a.start_ns - first) as f64 / 1e6;
            let what = if a.first_byte_ns.is_some() {
                "got data"
            } else if a.answered_ns.is_some() {
                "connected, no data"
            } else if a.refused {
                "refused"
            } else {
                // Or answered after the lab ended with COMMAND.
                "no answer"
            };
            format!("{} {} at +{at:.0} ms: {what}", family(&a.to), a.iface)
        })
        .collect();
    if attempts.len() > shown {
        parts.push(format!("{} more", attempts.len() - shown));
    }
    parts.join("; ")
}

/// The verdict in words, with the reason.
pub fn explain(row: &Row) -> String {
    let s = row.scenario;
    let budget = s.budget_ms();
    match &row.verdict {
        Verdict::Ok { .. } => format!("ok: within {budget:.0} ms"),
        Verdict::Slow { .. } => format!(
            "NOT: later than {budget:.0} ms (RFC 8305: the next attempt within ~300 ms of the first, then {} round trips of {} ms)",
            2,
            s.working_rtt_ms()
        ),
        Verdict::Failed => {
            let first = &row.attempts[0];
            let unanswered = row.attempts.iter().all(|a| a.answered_ns.is_none());
            let one_iface = row.attempts.iter().all(|a| a.iface == first.iface);
            let one_path = one_iface && row.attempts.iter().all(|a| a.to.ip() == first.to.ip());
            let other_iface = s.client_interfaces().iter().find(|i| **i != first.iface);
            let why = match other_iface {
                _ if !unanswered => "connected, but no data came back".to_string(),
                _ if one_path => format!(
                    "it kept trying {} over {} only and never tried another address or interface",
                    family(&first.to),
                    first.iface
                ),
                Some(other) if one_iface => format!(
                    "every attempt went over {}; it never tried {other}",
                    first.iface
                ),
                _ => "no attempt was answered".to_string(),
            };
            format!("NOT: no first byte in {:.0} s: {why}", row.timeout_s)
        }
        Verdict::NoAttempt => format!(
            "NOT: no TCP connection attempt (COMMAND exited with status {}; an IPv4 literal or IPv4-only code gets no route here)",
            row.exit_code
        ),
        Verdict::NoServer => "the server did not listen: nothing to judge (check --server)".into(),
    }
}

/// The table: scenario, time to first byte, verdict, then the attempts.
pub fn render(rows: &[Row]) -> String {
    let mut s = String::new();
    let w = Scenario::ALL
        .iter()
        .map(|x| x.name().len())
        .max()
        .unwrap_or(0);
    let _ = writeln!(s, "{:<w$}  {:>15}  verdict", "scenario", "first byte");
    for r in rows {
        let ttfb = match &r.verdict {
            Verdict::Ok { ttfb_ms } | Verdict::Slow { ttfb_ms } => format!("{ttfb_ms:.0} ms"),
            Verdict::Failed | Verdict::NoAttempt => "failed".into(),
            Verdict::NoServer => "-".into(),
        };
        let _ = writeln!(s, "{:<w$}  {ttfb:>15}  {}", r.scenario.name(), explain(r));
        let _ = writeln!(
            s,
            "{:<w$}  {:>15}  attempts: {}",
            "",
            "",
            describe_attempts(&r.attempts)
        );
    }
    let _ = writeln!(
        s,
        "\nfirst byte: from the client's first SYN to the first data byte it received, read from its captures.\n\
         expectation: RFC 8305 (Happy Eyeballs v2) starts the next attempt at most {RESOLUTION_DELAY_MS:.0} ms (Resolution Delay, §3) + \
         {CONNECTION_ATTEMPT_DELAY_MS:.0} ms (Connection Attempt Delay, §5/§8) after the first: \
         the first byte within ~300 ms plus two round trips of the working path."
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP segment over IPv4 or IPv6 with the given flags and payload length.
    fn tcp(src: &str, dst: &str, sport: u16, dport: u16, flags: u8, payload: usize) -> Vec<u8> {
        let ip = wire::build::Ip::between(src.parse().unwrap(), dst.parse().unwrap()).unwrap();
        let mut seg = wire::build::Tcp::new(sport, dport, 1).flags(flags & !ACK);
        if flags & ACK != 0 {
            seg = seg.ack(1);
        }
        ip.tcp(&seg, &vec![b'x'; payload])
    }

    const C6: &str = "fd4c:6c61:6200:1::1";
    const S6: &str = "fd4c:6c61:6200:2::1";
    const C4: &str = "10.77.1.1";
    const S4: &str = "10.77.2.1";
    const SYN: u8 = 0x02;
    const SYNACK: u8 = 0x12;
    const ACK: u8 = 0x10;
    const MS: u64 = 1_000_000;

    /// curl in the IPv6 blackhole: IPv6 first, IPv4 200 ms later, which answers.
    fn happy_eyeballs() -> Timeline {
        let mut t = Timeline::default();
        t.packet(1000 * MS, "eth0", &tcp(C6, S6, 40000, 80, SYN, 0));
        t.packet(1200 * MS, "eth0", &tcp(C4, S4, 40001, 80, SYN, 0));
        t.packet(1220 * MS, "eth0", &tcp(S4, C4, 80, 40001, SYNACK, 0));
        t.packet(1221 * MS, "eth0", &tcp(C4, S4, 40001, 80, ACK, 70));
        t.packet(1240 * MS, "eth0", &tcp(S4, C4, 80, 40001, ACK, 500));
        t.packet(2000 * MS, "eth0", &tcp(C6, S6, 40000, 80, SYN, 0));
        t
    }

    #[test]
    fn the_first_byte_is_timed_from_the_first_syn_and_judged_against_the_budget() {
        let a = happy_eyeballs().attempts();
        assert_eq!(
            a.len(),
            2,
            "a retransmitted SYN is not a new attempt: {a:?}"
        );
        assert_eq!(a[0].start_ns, 1000 * MS);
        assert_eq!(a[0].answered_ns, None);
        assert_eq!(a[1].answered_ns, Some(1220 * MS));
        assert_eq!(
            a[1].first_byte_ns,
            Some(1240 * MS),
            "the client's own data is not it"
        );
        let v = judge(Scenario::Ipv6Blackhole, &a, true);
        assert_eq!(v, Verdict::Ok { ttfb_ms: 240.0 });
        assert!(v.passed());
        let d = describe_attempts(&a);
        assert!(
            d.starts_with("IPv6 eth0 at +0 ms: no answer; IPv4 eth0 at +200 ms: got data"),
            "{d}"
        );
    }

    #[test]
    fn waiting_out_a_slow_ipv6_is_slow_and_never_trying_ipv4_fails() {
        let mut t = Timeline::default();
        t.packet(0, "eth0", &tcp(C6, S6, 40000, 80, SYN, 0));
        t.packet(320 * MS, "eth0", &tcp(S6, C6, 80, 40000, SYNACK, 0));
        t.packet(640 * MS, "eth0", &tcp(S6, C6, 80, 40000, ACK, 16));
        let a = t.attempts();
        assert_eq!(
            judge(Scenario::Ipv6Slow, &a, true),
            Verdict::Slow { ttfb_ms: 640.0 }
        );
        // The budget is ~300 ms plus two of the working path's round trips.
        assert_eq!(Scenario::Ipv6Slow.budget_ms(), 340.0);
        assert_eq!(Scenario::FirstInterfaceDead.budget_ms(), 300.0 + 2.0 * 60.0);

        let mut t = Timeline::default();
        for k in 0..4 {
            t.packet(k * 1000 * MS, "eth0", &tcp(C6, S6, 40000, 5208, SYN, 0));
        }
        let a = t.attempts();
        let row = Row {
            scenario: Scenario::Ipv6Blackhole,
            verdict: judge(Scenario::Ipv6Blackhole, &a, true),
            attempts: a,
            exit_code: 143,
            timeout_s: 10.0,
        };
        assert_eq!(row.verdict, Verdict::Failed);
        let e = explain(&row);
        assert!(e.contains("kept trying IPv6 over eth0 only"), "{e}");
        let table = render(&[row]);
        assert!(
            table.contains("ipv6-blackhole") && table.contains("failed"),
            "{table}"
        );
        assert!(table.contains("RFC 8305"), "{table}");

        // Both families over the dead default route, never the other interface.
        let mut t = Timeline::default();
        t.packet(0, "eth0", &tcp(C6, S6, 40000, 80, SYN, 0));
        t.packet(200 * MS, "eth0", &tcp(C4, S4, 40001, 80, SYN, 0));
        let a = t.attempts();
        let row = Row {
            scenario: Scenario::FirstInterfaceDead,
            verdict: judge(Scenario::FirstInterfaceDead, &a, true),
            attempts: a,
            exit_code: 143,
            timeout_s: 10.0,
        };
        let e = explain(&row);
        assert!(
            e.contains("every attempt went over eth0; it never tried eth1"),
            "{e}"
        );
    }

    #[test]
    fn no_attempt_and_no_server_are_told_apart() {
        assert_eq!(
            judge(Scenario::Ipv6OnlyNat64, &[], true),
            Verdict::NoAttempt
        );
        assert_eq!(
            judge(Scenario::Ipv6OnlyNat64, &[], false),
            Verdict::NoServer
        );
        let mut t = Timeline::default();
        t.packet(0, "eth0", &tcp(C6, S6, 40000, 80, SYN, 0));
        t.packet(MS, "eth0", &tcp(S6, C6, 80, 40000, 0x14, 0));
        let a = t.attempts();
        assert!(a[0].refused);
        assert_eq!(judge(Scenario::Ipv6Blackhole, &a, false), Verdict::NoServer);
    }

    #[test]
    fn answers_read_before_their_syn_still_count() {
        // The second interface's capture read before the first's.
        let mut t = Timeline::default();
        t.packet(
            260 * MS,
            "eth1",
            &tcp(S4, "10.77.2.9", 80, 40001, SYNACK, 0),
        );
        t.packet(300 * MS, "eth1", &tcp(S4, "10.77.2.9", 80, 40001, ACK, 100));
        t.packet(250 * MS, "eth1", &tcp("10.77.2.9", S4, 40001, 80, SYN, 0));
        t.packet(0, "eth0", &tcp(C4, S4, 40000, 80, SYN, 0));
        let a = t.attempts();
        assert_eq!(a[0].iface, "eth0");
        assert_eq!(a[1].iface, "eth1");
        assert_eq!(
            judge(Scenario::FirstInterfaceDead, &a, true),
            Verdict::Ok { ttfb_ms: 300.0 }
        );
        t.packet(1, "eth0", b"\x45 not a packet");
        assert_eq!(t.attempts().len(), 2);
    }

    #[test]
    fn every_scenario_is_a_valid_lab_that_breaks_what_it_says() {
        for s in Scenario::ALL {
            let c = s.lab_config(12.0, 1).unwrap();
            assert_eq!(c.duration_s, Some(12.0));
            assert!(c.host("client").is_some() && c.host("server").is_some());
            assert_eq!(
                c.host("client").unwrap().interfaces.len(),
                s.client_interfaces().len()
            );
            assert_eq!(Scenario::parse(s.name()).unwrap(), s);
        }
        let j = |s: Scenario| serde_json::to_string(&s.lab_config(5.0, 1).unwrap()).unwrap();
        assert!(j(Scenario::Ipv6Blackhole).contains("\"drop\":\"ipv6\""));
        assert!(j(Scenario::Ipv6Slow).contains("\"slow\":\"ipv6 150ms\""));
        assert!(j(Scenario::Ipv6OnlyNat64).contains("ipv6-only"));
        assert!(j(Scenario::FirstInterfaceDead).contains("\"state\":\"blackhole\""));
        let e = Scenario::parse("ipv6-dead").unwrap_err().0;
        assert!(
            e.contains("'ipv6-dead'") && e.contains("ipv6-blackhole"),
            "{e}"
        );
    }
}

//! What a lab is: hosts with interfaces, routers, links between them, and a schedule of link
//! changes and programs. Built by [`crate::shell`] or [`crate::run_file`], validated here
//! completely before anything is created, and written to `lab.json` in resolved form (every
//! default filled in), so a run says exactly what network it had. Link settings are typed
//! values ([`crate::setting`]); this module knows the tree they form, not what they mean.
//!
//! Addresses are the lab's own: interface number *i* (counting from 1 over all hosts) has
//! 10.77.*i*.1 and fd4c:6c61:6200:*i*::1, and from the 251st on 10.78.*j*.*k* (see
//! [`iface_addrs`]). Nothing outside these ranges is ever routed.

use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use link::LinkParams;
use serde::{Deserialize, Serialize};
use wire::Duration;

use crate::lifecycle::Precision;
pub use crate::setting::Direction;
use crate::setting::Setting;

/// A bad option, field or file: the CLI prints it and exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

pub(crate) fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
    Err(UsageError(msg.into()))
}

/// How a host's TCP uses ECN (`net.ipv4.tcp_ecn`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EcnMode {
    /// 0: never.
    Off,
    /// 1: request ECN on outgoing connections and accept it on incoming ones.
    On,
    /// 2: accept ECN when the peer asks (Linux's default).
    Passive,
}

impl EcnMode {
    pub fn sysctl_value(self) -> &'static str {
        match self {
            EcnMode::Off => "0",
            EcnMode::On => "1",
            EcnMode::Passive => "2",
        }
    }
    pub fn parse(what: &str, s: &str) -> Result<EcnMode, UsageError> {
        match s {
            "off" => Ok(EcnMode::Off),
            "on" => Ok(EcnMode::On),
            "passive" => Ok(EcnMode::Passive),
            _ => usage(format!("{what}: cannot read '{s}' (try on, off, passive)")),
        }
    }
}

/// Congestion controls a lab host may use (those this kernel offers are checked at start).
pub const DEFAULT_CC: &str = "cubic";
pub const DEFAULT_MTU: u32 = 1500;

/// Host TCP/IP settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostSettings {
    pub cc: String,
    pub ecn: EcnMode,
    pub mtu: u32,
    /// `net.ipv4.tcp_slow_start_after_idle`: after an idle spell longer than the RTO, restart
    /// from the initial window (RFC 5681 section 4.1). On by default, as Linux; many web
    /// servers turn it off so that a persistent connection keeps its congestion window.
    #[serde(default = "slow_start_after_idle_default")]
    pub slow_start_after_idle: bool,
}

fn slow_start_after_idle_default() -> bool {
    true
}

impl Default for HostSettings {
    fn default() -> Self {
        HostSettings {
            cc: DEFAULT_CC.into(),
            ecn: EcnMode::Passive,
            mtu: DEFAULT_MTU,
            slow_start_after_idle: slow_start_after_idle_default(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    pub name: String,
    #[serde(flatten)]
    pub settings: HostSettings,
    /// Which address families the host has; `dual` unless a NAT64 lab says otherwise.
    #[serde(default)]
    pub family: Family,
    pub interfaces: Vec<Interface>,
    /// More names for the host's first interface, in `/etc/hosts` and the DNS64 (a sharded
    /// site's `img1`, `img2`, ... naming one server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
}

impl Host {
    pub fn has_ipv4(&self) -> bool {
        self.family != Family::Ipv6Only
    }
    pub fn has_ipv6(&self) -> bool {
        self.family != Family::Ipv4Only
    }
}

/// The address families of a host. An IPv6-only host has no IPv4 address or route at all;
/// an IPv4-only host has IPv6 disabled on its interfaces (loopback keeps `::1`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Family {
    #[default]
    Dual,
    Ipv6Only,
    Ipv4Only,
}

/// The NAT64 and DNS64 of a lab (`shell --nat64`, or `[nat64]` in a run file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nat64Spec {
    /// Where the translator and the DNS64 sit: a router, `HOST` or `HOST.IFACE` (a node of the
    /// tree of links). Packets reach them over the links like any other.
    pub at: String,
    /// Pref64::/n (RFC 6052), parsed once where the lab is specified; `lab.json` has it as
    /// text (`64:ff9b::/96`).
    #[serde(with = "prefix_text")]
    pub prefix: nat64::Prefix,
    /// The translator's IPv4 address (its whole pool), from the lab's own range.
    pub pool4: Ipv4Addr,
    /// The DNS64's address, which IPv6-only hosts have as their resolver.
    pub dns: Ipv6Addr,
    /// IPv6-only hosts with a CLAT (464XLAT, RFC 6877; see [`crate::clat`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clat: Vec<String>,
    /// The prefix the CLATs translate to; unset, it is discovered per RFC 7050.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "prefix_text_opt"
    )]
    pub clat_prefix: Option<nat64::Prefix>,
}

/// The translator's IPv4 address. RFC 6052 §3.1 says the Well-Known Prefix should not embed
/// private addresses; the lab is a closed world whose every address is private, so it does.
pub const NAT64_POOL4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 64);
/// The DNS64's address: outside every interface's fd4c:6c61:6200:i::/64 (i is at most
/// [`MAX_INTERFACES`]).
pub const DNS64_ADDR: Ipv6Addr = Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, 0xffff, 0, 0, 0, 0x53);
/// The Well-Known Prefix `64:ff9b::/96` (RFC 6052 §2.1).
pub const NAT64_PREFIX: nat64::Prefix = nat64::prefix::WELL_KNOWN;

/// A [`nat64::Prefix`] in `lab.json`: its text, parsed back with the RFC 6052 checks.
mod prefix_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &nat64::Prefix, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(p)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<nat64::Prefix, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// An optional [`nat64::Prefix`] in `lab.json`.
mod prefix_text_opt {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &Option<nat64::Prefix>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.collect_str(p),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<nat64::Prefix>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(t) => t.parse().map(Some).map_err(serde::de::Error::custom),
            None => Ok(None),
        }
    }
}

impl Nat64Spec {
    pub fn at(at: &str) -> Nat64Spec {
        Nat64Spec {
            at: at.into(),
            prefix: NAT64_PREFIX,
            pool4: NAT64_POOL4,
            dns: DNS64_ADDR,
            clat: Vec::new(),
            clat_prefix: None,
        }
    }
}

/// A link between two attachment points: `HOST.IFACE` (or just `HOST` for its first interface)
/// or a router name. `up` is a→b, `down` is b→a.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkSpec {
    pub name: String,
    pub a: String,
    pub b: String,
    pub up: Direction,
    pub down: Direction,
}

/// One direction of a link: `up` is a→b, `down` is b→a.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Up,
    Down,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Up => "up",
            Side::Down => "down",
        }
    }
}

/// A scheduled change of a link: new values for some of its settings (never its queue).
#[derive(Clone, Debug, PartialEq)]
pub struct Change {
    pub at_s: f64,
    pub link: String,
    /// One direction, or both when absent.
    pub direction: Option<Side>,
    pub settings: Vec<Setting>,
}

impl Change {
    /// A link direction's parameters after this change.
    pub fn apply(&self, params: &LinkParams) -> LinkParams {
        let mut d = Direction {
            params: params.clone(),
            ..Direction::default()
        };
        for s in &self.settings {
            s.apply(&mut d);
        }
        d.params
    }
}

impl Serialize for Change {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = serde_json::Map::new();
        m.insert("at_s".into(), self.at_s.into());
        m.insert("link".into(), self.link.clone().into());
        m.insert("direction".into(), self.direction.map(|d| d.name()).into());
        for x in &self.settings {
            m.insert(x.field().into(), x.json_value());
        }
        m.serialize(s)
    }
}

/// A program started in a host at a given time (`sh -c COMMAND`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Program {
    pub name: String,
    pub host: String,
    pub at_s: f64,
    pub run: String,
    /// The lab ends when every waited-for program has ended.
    pub wait: bool,
}

/// A whole lab, resolved.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LabConfig {
    pub seed: u64,
    /// Stop the lab after this long, if set.
    pub duration_s: Option<f64>,
    pub hosts: Vec<Host>,
    pub routers: Vec<String>,
    pub links: Vec<LinkSpec>,
    pub changes: Vec<Change>,
    pub programs: Vec<Program>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat64: Option<Nat64Spec>,
    /// How far ahead of its time the engine may deliver a packet (`--precision`).
    #[serde(
        rename = "precision_ms",
        serialize_with = "precision_ms",
        skip_serializing_if = "is_exact"
    )]
    pub precision: Precision,
}

fn precision_ms<S: serde::Serializer>(p: &Precision, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(p.as_millis_f64())
}

fn is_exact(p: &Precision) -> bool {
    *p == Precision::EXACT
}

/// The most interfaces a lab may have: what the address plan of [`iface_addrs`] numbers.
pub const MAX_INTERFACES: usize = SMALL_LAB_INTERFACES + 250 * 256;
/// Labs of at most this many interfaces number them 10.77.*i*.1, as they always have.
const SMALL_LAB_INTERFACES: usize = 250;

/// The lab's address of interface number `i` (1-based, at most [`MAX_INTERFACES`]).
///
/// - IPv4: 10.77.*i*.1 for the first 250; from the 251st on, 10.78.*j*.*k* with
///   *i* − 251 = 250 *j* + (*k* − 1), so *k* runs 1..=250 (10.78.0.1 is the 251st, 10.78.3.250
///   the 1250th). A lab of 250 interfaces or fewer keeps the addresses it always had, and a
///   bigger one adds a range of its own rather than renumbering the first 250, so scripts that
///   know 10.77.2.1 keep working; the last octet never is 0 or 255, which tools read as a
///   network or broadcast address.
/// - IPv6: fd4c:6c61:6200:*i*::1 for every *i* (the fourth group holds up to 65535; the
///   lab's own fd4c:6c61:6200:fffe:: and :ffff:: stay clear of 64250).
pub fn iface_addrs(i: usize) -> (Ipv4Addr, Ipv6Addr) {
    assert!(
        (1..=MAX_INTERFACES).contains(&i),
        "validated: at most {MAX_INTERFACES} interfaces"
    );
    let ipv4 = if i <= SMALL_LAB_INTERFACES {
        Ipv4Addr::new(10, 77, i as u8, 1)
    } else {
        let n = i - SMALL_LAB_INTERFACES - 1;
        Ipv4Addr::new(10, 78, (n / 250) as u8, (n % 250 + 1) as u8)
    };
    (
        ipv4,
        Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, i as u16, 0, 0, 0, 1),
    )
}

/// The address the router in front of link `li` (0-based) answers from when the link is too
/// narrow for a packet (ICMP fragmentation needed, Packet Too Big): in the lab's own ranges,
/// where no interface is (interfaces use 10.77.i.1 with i ≥ 1, the translator 10.77.0.64).
/// It needs no route: nothing is ever sent to it.
pub fn link_router_addrs(li: usize) -> (Ipv4Addr, Ipv6Addr) {
    let i = (128 + li % 100) as u8;
    (
        Ipv4Addr::new(10, 77, 0, i),
        Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, 0xfffe, 0, 0, 0, u16::from(i)),
    )
}

/// Host and interface names become namespace, device and file names: keep them plain.
fn check_name(what: &str, name: &str, max: usize) -> Result<(), UsageError> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic());
    if ok {
        Ok(())
    } else {
        usage(format!(
            "{what}: '{name}' is not a usable name (a letter, then letters, digits, '-' or '_', at most {max} characters)"
        ))
    }
}
pub(crate) fn host_settings(
    prefix: &str,
    base: Option<&HostSettings>,
    cc: Option<&str>,
    ecn: Option<&str>,
    mtu: Option<u32>,
    slow_start_after_idle: Option<bool>,
) -> Result<HostSettings, UsageError> {
    let mut s = base.cloned().unwrap_or_default();
    if let Some(cc) = cc {
        if cc.is_empty() || !cc.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return usage(format!(
                "{prefix}cc: cannot read '{cc}' (try cubic, reno, bbr)"
            ));
        }
        s.cc = cc.to_string();
    }
    if let Some(e) = ecn {
        s.ecn = EcnMode::parse(&format!("{prefix}ecn"), e)?;
    }
    if let Some(m) = mtu {
        if !(1280..=65535).contains(&m) {
            return usage(format!(
                "{prefix}mtu: cannot use {m} (try 1500, 9000; IPv6 needs at least 1280)"
            ));
        }
        s.mtu = m;
    }
    if let Some(v) = slow_start_after_idle {
        s.slow_start_after_idle = v;
    }
    Ok(s)
}
// ---------------------------------------------------------------------------------------------
// Validation and the graph

/// A point a link attaches to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum Attach {
    /// (host index, interface index)
    Iface(usize, usize),
    Router(usize),
}

/// Resolves `HOST.IFACE`, `HOST` (its first interface) or a router name among `hosts` and
/// `routers`.
fn attach_in(hosts: &[Host], routers: &[String], s: &str) -> Result<Attach, UsageError> {
    let (host, iface) = match s.split_once('.') {
        Some((h, i)) => (h, Some(i)),
        None => (s, None),
    };
    if let Some(hi) = hosts.iter().position(|h| h.name == host) {
        let h = &hosts[hi];
        let ii = match iface {
            None => 0,
            Some(i) => h
                .interfaces
                .iter()
                .position(|x| x.name == i)
                .ok_or_else(|| {
                    let names: Vec<_> = h
                        .interfaces
                        .iter()
                        .map(|x| format!("{host}.{}", x.name))
                        .collect();
                    UsageError(format!(
                        "no interface '{s}' (host {host} has {})",
                        names.join(", ")
                    ))
                })?,
        };
        return Ok(Attach::Iface(hi, ii));
    }
    if iface.is_none() {
        if let Some(ri) = routers.iter().position(|r| r == s) {
            return Ok(Attach::Router(ri));
        }
    }
    let mut known: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    known.extend(routers.iter().cloned());
    usage(format!(
        "'{s}' is neither a host, HOST.IFACE, nor a router (known: {})",
        known.join(", ")
    ))
}

/// A lab's tree of links as `lab.json` has it: the hosts with their interfaces' addresses, the
/// routers, and the two points each link joins. Enough to say which link directions a packet
/// crosses ([`Topology::path`]); nothing of what they do to it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Topology {
    pub hosts: Vec<Host>,
    pub routers: Vec<String>,
    pub links: Vec<LinkEnds>,
}

/// A link's name and the two points it joins, as [`LinkSpec`] names them (`up` is a→b).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct LinkEnds {
    pub name: String,
    pub a: String,
    pub b: String,
}

impl Topology {
    /// The interface that has address `addr`.
    fn iface(&self, addr: IpAddr) -> Option<Attach> {
        self.hosts.iter().enumerate().find_map(|(hi, h)| {
            (h.interfaces.iter())
                .position(|i| IpAddr::V4(i.ipv4) == addr || IpAddr::V6(i.ipv6) == addr)
                .map(|ii| Attach::Iface(hi, ii))
        })
    }

    /// The link directions a packet crosses from the interface that has address `from` to the
    /// one that has `to`, in order, as (link name, side). The links form a forest, so there is
    /// at most one way; the forwarder's routes follow it. `None` when an address is no
    /// interface's (a translator's, a CLAT's) or no links join the two; empty from an
    /// interface to itself.
    pub fn path(&self, from: IpAddr, to: IpAddr) -> Option<Vec<(&str, Side)>> {
        let (start, goal) = (self.iface(from)?, self.iface(to)?);
        let mut next: HashMap<Attach, Vec<(Attach, usize, Side)>> = HashMap::new();
        for (li, l) in self.links.iter().enumerate() {
            let a = attach_in(&self.hosts, &self.routers, &l.a).ok()?;
            let b = attach_in(&self.hosts, &self.routers, &l.b).ok()?;
            next.entry(a).or_default().push((b, li, Side::Up));
            next.entry(b).or_default().push((a, li, Side::Down));
        }
        // Breadth first from `start`: each point with the one it was reached from, and how.
        let mut came: HashMap<Attach, Option<(Attach, usize, Side)>> =
            HashMap::from([(start, None)]);
        let mut todo = VecDeque::from([start]);
        while let Some(at) = todo.pop_front() {
            for &(to, li, side) in next.get(&at).into_iter().flatten() {
                if let Entry::Vacant(e) = came.entry(to) {
                    e.insert(Some((at, li, side)));
                    todo.push_back(to);
                }
            }
        }
        let mut hops = Vec::new();
        let mut at = goal;
        while let Some((from, li, side)) = *came.get(&at)? {
            hops.push((self.links[li].name.as_str(), side));
            at = from;
        }
        hops.reverse();
        Some(hops)
    }
}

impl LabConfig {
    /// Resolves `HOST.IFACE`, `HOST` (its first interface) or a router name.
    pub fn attach(&self, s: &str) -> Result<Attach, UsageError> {
        attach_in(&self.hosts, &self.routers, s)
    }

    /// Checks names, references, that every interface is on exactly one link and that the links
    /// form a forest (so that routes are unique).
    pub fn validate(&self) -> Result<(), UsageError> {
        let mut names = HashSet::new();
        for h in &self.hosts {
            check_name("host", &h.name, 10)?;
            if !names.insert(h.name.clone()) {
                return usage(format!("host '{}' is defined twice", h.name));
            }
            for a in &h.aliases {
                check_name(&format!("host '{}' alias", h.name), a, 32)?;
            }
            let mut ifs = HashSet::new();
            for i in &h.interfaces {
                check_name(&format!("host '{}' interface", h.name), &i.name, 15)?;
                if !ifs.insert(i.name.clone()) {
                    return usage(format!(
                        "host '{}' has interface '{}' twice",
                        h.name, i.name
                    ));
                }
            }
        }
        for r in &self.routers {
            check_name("router", r, 32)?;
            if !names.insert(r.clone()) {
                return usage(format!(
                    "'{r}' is defined twice (host and router names share one space)"
                ));
            }
        }
        for a in self.hosts.iter().flat_map(|h| &h.aliases) {
            if !names.insert(a.clone()) {
                return usage(format!(
                    "alias '{a}' is taken (host names, router names and aliases share one space)"
                ));
            }
        }
        let n_ifaces: usize = self.hosts.iter().map(|h| h.interfaces.len()).sum();
        if n_ifaces > MAX_INTERFACES {
            return usage(format!(
                "{n_ifaces} interfaces: a lab has at most {MAX_INTERFACES} (its address plan, docs/run-files.md)"
            ));
        }
        let mut link_names = HashSet::new();
        let mut used: HashMap<Attach, String> = HashMap::new();
        // Union-find over attachment points: a link that joins two already-joined points would
        // close a loop.
        let mut parent: HashMap<Attach, Attach> = HashMap::new();
        fn find(p: &mut HashMap<Attach, Attach>, a: Attach) -> Attach {
            let up = *p.entry(a).or_insert(a);
            if up == a {
                a
            } else {
                let r = find(p, up);
                p.insert(a, r);
                r
            }
        }
        for l in &self.links {
            check_name("link", &l.name, 32)?;
            if !link_names.insert(l.name.clone()) {
                return usage(format!("link '{}' is defined twice", l.name));
            }
            let a = self
                .attach(&l.a)
                .map_err(|e| UsageError(format!("link '{}': a: {e}", l.name)))?;
            let b = self
                .attach(&l.b)
                .map_err(|e| UsageError(format!("link '{}': b: {e}", l.name)))?;
            for (end, at) in [(&l.a, a), (&l.b, b)] {
                if let Attach::Iface(..) = at {
                    if let Some(other) = used.insert(at, l.name.clone()) {
                        return usage(format!(
                            "link '{}': interface '{end}' is already on link '{other}' (one link per interface; add an interface)",
                            l.name
                        ));
                    }
                }
            }
            if let (Attach::Iface(h1, _), Attach::Iface(h2, _)) = (a, b) {
                if h1 == h2 {
                    return usage(format!(
                        "link '{}' joins host '{}' to itself",
                        l.name, self.hosts[h1].name
                    ));
                }
            }
            // A host's interfaces are one node for loop detection: two paths between the same
            // two hosts (Wi-Fi and cellular to the same router) are fine because each interface
            // has its own address, so we only look for loops among links' attachment points.
            let (ra, rb) = (find(&mut parent, a), find(&mut parent, b));
            if ra == rb {
                return usage(format!(
                    "link '{}' closes a loop (a lab is a tree of links)",
                    l.name
                ));
            }
            parent.insert(ra, rb);
        }
        for h in &self.hosts {
            for (ii, i) in h.interfaces.iter().enumerate() {
                let hi = self
                    .hosts
                    .iter()
                    .position(|x| x.name == h.name)
                    .expect("listed");
                if !used.contains_key(&Attach::Iface(hi, ii)) {
                    return usage(format!(
                        "interface '{}.{}' is on no link (add a [[link]] with a = \"{}.{}\")",
                        h.name, i.name, h.name, i.name
                    ));
                }
            }
        }
        for c in &self.changes {
            if !self.links.iter().any(|l| l.name == c.link) {
                return usage(format!("change at {}s: no link '{}'", c.at_s, c.link));
            }
            if c.settings.is_empty() {
                return usage(format!(
                    "change at {}s of link '{}' changes nothing (give rate, trace, delay, loss or state)",
                    c.at_s, c.link
                ));
            }
            if let Some(q) = c.settings.iter().find(|x| !x.changeable()) {
                return usage(format!(
                    "change at {}s of link '{}': {} cannot change while the lab runs",
                    c.at_s,
                    c.link,
                    q.field()
                ));
            }
        }
        for p in &self.programs {
            if !self.hosts.iter().any(|h| h.name == p.host) {
                return usage(format!("program '{}': no host '{}'", p.name, p.host));
            }
        }
        if let Some(n) = &self.nat64 {
            self.attach(&n.at)
                .map_err(|e| UsageError(format!("nat64: at: {e}")))?;
            for c in &n.clat {
                match self.host(c) {
                    None => return usage(format!("nat64: clat: no host '{c}'")),
                    Some(h) if h.family != Family::Ipv6Only => {
                        return usage(format!(
                            "nat64: clat: host '{c}' is not IPv6-only (a CLAT gives an IPv6-only host its IPv4; name it in ipv6_only)"
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
        Ok(())
    }

    /// The host a name refers to.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.hosts.iter().find(|h| h.name == name)
    }

    /// `/etc/hosts` for the lab: every host by name (first interface) and `HOST-IFACE`.
    pub fn hosts_file(&self) -> String {
        self.hosts_file_for(None)
    }

    /// `/etc/hosts` as host `viewer` sees it: only the addresses of a family both it and the
    /// named host have. So an IPv6-only host finds an IPv4-only one through the DNS64 alone,
    /// as it would on a carrier's network.
    pub fn hosts_file_for(&self, viewer: Option<&Host>) -> String {
        let mut s = String::from("# latencylab: the lab's own names\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
        let (v4, v6) = viewer.map_or((true, true), |v| (v.has_ipv4(), v.has_ipv6()));
        for h in &self.hosts {
            for (k, i) in h.interfaces.iter().enumerate() {
                let mut names = format!("{}-{}", h.name, i.name);
                if k == 0 {
                    names = format!("{} {names}", h.name);
                    for a in &h.aliases {
                        names = format!("{names} {a}");
                    }
                }
                if v4 && h.has_ipv4() {
                    s.push_str(&format!("{}\t{names}\n", i.ipv4));
                }
                if v6 && h.has_ipv6() {
                    s.push_str(&format!("{}\t{names}\n", i.ipv6));
                }
            }
        }
        s
    }

    /// The DNS64's zone: every host by name (first interface) and `HOST-IFACE`, with the
    /// addresses it has (A, AAAA).
    pub fn dns_zone(&self) -> nat64::dns64::Zone {
        const TTL_SECS: u32 = 300;
        let mut z = nat64::dns64::Zone::new();
        for h in &self.hosts {
            for (k, i) in h.interfaces.iter().enumerate() {
                let own = format!("{}-{}", h.name, i.name);
                let names: Vec<&str> = if k == 0 {
                    let aliases = h.aliases.iter().map(|a| a.as_str());
                    [h.name.as_str(), own.as_str()]
                        .into_iter()
                        .chain(aliases)
                        .collect()
                } else {
                    vec![&own]
                };
                for n in names {
                    // Names were checked to be plain (letters, digits, '-', '_').
                    if h.has_ipv4() {
                        let _ = z.add_a(n, i.ipv4, TTL_SECS);
                    }
                    if h.has_ipv6() {
                        let _ = z.add_aaaa(n, i.ipv6, TTL_SECS);
                    }
                }
            }
        }
        z
    }

    /// Link names with their index, for schedule lookups.
    pub fn link_index(&self) -> BTreeMap<String, usize> {
        self.links
            .iter()
            .enumerate()
            .map(|(i, l)| (l.name.clone(), i))
            .collect()
    }
}

/// A zero duration when unset.
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};
    use std::path::Path;

    fn shell(f: impl FnOnce(&mut ShellOptions)) -> Result<LabConfig, UsageError> {
        let mut o = ShellOptions::default();
        f(&mut o);
        shell_config(&o, &no_files)
    }

    #[test]
    fn aliases_name_a_hosts_first_address_in_etc_hosts_and_the_dns64() {
        let mut c = shell(|_| {}).unwrap();
        c.hosts[1].aliases = vec!["img1".into(), "img2".into()];
        c.validate().unwrap();
        assert!(c
            .hosts_file()
            .contains("10.77.2.1\tserver server-eth0 img1 img2\n"));
        let dns = nat64::dns64::Dns64::new(Default::default(), c.dns_zone());
        let answer = dns.answer(&dns_query("img2.", 1)).unwrap();
        assert_eq!(answer[7], 1, "one A record for the alias");
        assert!(answer.ends_with(&[10, 77, 2, 1]));
        c.hosts[0].aliases = vec!["img1".into()];
        assert!(c
            .validate()
            .unwrap_err()
            .0
            .contains("alias 'img1' is taken"));
        c.hosts[0].aliases = vec!["server".into()];
        assert!(c.validate().is_err());
    }

    #[test]
    fn an_ipv6_only_host_finds_no_ipv4_only_host_in_etc_hosts_but_the_dns64_does() {
        let c = shell(|o| o.nat64 = true).unwrap();
        let client = c.hosts_file_for(Some(&c.hosts[0]));
        assert!(
            client.contains("fd4c:6c61:6200:1::1\tclient client-eth0\n"),
            "{client}"
        );
        assert!(!client.contains("server"), "{client}");
        assert!(!client.contains("10.77."), "{client}");
        let server = c.hosts_file_for(Some(&c.hosts[1]));
        assert!(
            server.contains("10.77.2.1\tserver server-eth0\n"),
            "{server}"
        );
        assert!(!server.contains("fd4c:"), "{server}");
        // Through the DNS64, the server's A record becomes a synthesised AAAA.
        let dns = nat64::dns64::Dns64::new(Default::default(), c.dns_zone());
        let mut m = dns_query("server.", 28);
        let answer = dns.answer(&m).unwrap();
        assert!(answer.ends_with(&"64:ff9b::a4d:201".parse::<Ipv6Addr>().unwrap().octets()));
        m = dns_query("client.", 1);
        let answer = dns.answer(&m).unwrap();
        assert_eq!(answer[7], 0, "no A record for the IPv6-only client");
    }

    /// A query for `name` of type `qtype`, written out by hand (RFC 1035 §4.1).
    fn dns_query(name: &str, qtype: u16) -> Vec<u8> {
        let mut q = vec![0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0];
        for label in name.trim_end_matches('.').split('.') {
            q.push(label.len() as u8);
            q.extend_from_slice(label.as_bytes());
        }
        q.push(0);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&[0, 1]);
        q
    }

    #[test]
    fn a_path_from_lab_json_names_each_link_direction_in_the_order_a_packet_crosses_them() {
        let text = r#"
            [[host]]
            name = "laptop"
            interfaces = ["wlan0", "rmnet0"]
            [[host]]
            name = "cdn"
            [[host]]
            name = "x"
            [[host]]
            name = "y"
            [[router]]
            name = "home"
            [[router]]
            name = "isp"
            [[link]]
            name = "wifi"
            a = "laptop.wlan0"
            b = "home"
            [[link]]
            name = "cell"
            a = "laptop.rmnet0"
            b = "isp"
            [[link]]
            name = "dsl"
            a = "home"
            b = "isp"
            [[link]]
            name = "core"
            a = "cdn"
            b = "isp"
            [[link]]
            name = "apart"
            a = "x"
            b = "y"
        "#;
        let c = crate::run_file::parse_run_file("t.toml", text, Path::new("."), None, &no_files)
            .unwrap();
        // Read back from what lab.json holds, as a finished run's reader does.
        let t: Topology = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        let v4 = |h: usize, i: usize| IpAddr::V4(c.hosts[h].interfaces[i].ipv4);
        let v6 = |h: usize, i: usize| IpAddr::V6(c.hosts[h].interfaces[i].ipv6);
        use Side::{Down, Up};
        assert_eq!(
            t.path(v4(0, 0), v4(1, 0)).unwrap(),
            [("wifi", Up), ("dsl", Up), ("core", Down)]
        );
        assert_eq!(
            t.path(v6(1, 0), v6(0, 0)).unwrap(),
            [("core", Up), ("dsl", Down), ("wifi", Down)]
        );
        // The other interface has its own way to the same host.
        assert_eq!(
            t.path(v4(0, 1), v6(1, 0)).unwrap(),
            [("cell", Up), ("core", Down)]
        );
        assert_eq!(t.path(v4(2, 0), v4(3, 0)).unwrap(), [("apart", Up)]);
        assert!(t.path(v4(0, 0), v4(0, 0)).unwrap().is_empty());
        // No link joins them; an address no interface has.
        assert_eq!(t.path(v4(0, 0), v4(2, 0)), None);
        assert_eq!(t.path(v4(0, 0), IpAddr::V4(NAT64_POOL4)), None);
    }

    #[test]
    fn the_first_250_interfaces_keep_10_77_and_the_rest_number_on_in_10_78() {
        let v4 = |i| iface_addrs(i).0;
        assert_eq!(v4(1), Ipv4Addr::new(10, 77, 1, 1));
        assert_eq!(v4(250), Ipv4Addr::new(10, 77, 250, 1));
        assert_eq!(v4(251), Ipv4Addr::new(10, 78, 0, 1));
        assert_eq!(v4(500), Ipv4Addr::new(10, 78, 0, 250));
        assert_eq!(v4(501), Ipv4Addr::new(10, 78, 1, 1));
        assert_eq!(v4(1250), Ipv4Addr::new(10, 78, 3, 250));
        assert_eq!(v4(MAX_INTERFACES), Ipv4Addr::new(10, 78, 255, 250));
        assert_eq!(
            iface_addrs(1000).1,
            "fd4c:6c61:6200:3e8::1".parse::<Ipv6Addr>().unwrap()
        );
        // Every interface of the largest lab has its own addresses, apart from the lab's own.
        let all: HashSet<Ipv4Addr> = (1..=MAX_INTERFACES).map(v4).collect();
        assert_eq!(all.len(), MAX_INTERFACES);
        assert!(!all.contains(&NAT64_POOL4));
        let v6: HashSet<Ipv6Addr> = (1..=MAX_INTERFACES).map(|i| iface_addrs(i).1).collect();
        assert_eq!(v6.len(), MAX_INTERFACES);
        assert!(v6.iter().all(|a| a.segments()[3] < 0xfffe));
    }
}

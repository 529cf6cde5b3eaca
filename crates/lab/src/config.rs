//! What a lab is: hosts with interfaces, routers, links between them, and a schedule of link
//! changes and programs. Built from `latencylab shell` options or a TOML run file, validated
//! completely before anything is created, and written to `lab.json` in resolved form (every
//! default filled in), so a run says exactly what network it had.
//!
//! Addresses are the lab's own: interface number *i* (counting from 1 over all hosts) has
//! 10.77.*i*.1 and fd4c:6c61:6200:*i*::1. Nothing outside these ranges is ever routed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use link::{Capacity, LinkParams, LossModel, Trace};
use serde::{Deserialize, Serialize};
use wire::units::{format_duration, parse_rate, parse_time};
use wire::{Duration, Rate};

/// A bad option, field or file: the CLI prints it and exits with status 2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn usage<T>(msg: impl Into<String>) -> Result<T, UsageError> {
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
}

impl Default for HostSettings {
    fn default() -> Self {
        HostSettings {
            cc: DEFAULT_CC.into(),
            ecn: EcnMode::Passive,
            mtu: DEFAULT_MTU,
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
    /// Pref64::/n (RFC 6052).
    pub prefix: String,
    /// The translator's IPv4 address (its whole pool), from the lab's own range.
    pub pool4: Ipv4Addr,
    /// The DNS64's address, which IPv6-only hosts have as their resolver.
    pub dns: Ipv6Addr,
}

/// The translator's IPv4 address. RFC 6052 §3.1 says the Well-Known Prefix should not embed
/// private addresses; the lab is a closed world whose every address is private, so it does.
pub const NAT64_POOL4: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 64);
/// The DNS64's address: outside every interface's fd4c:6c61:6200:i::/64 (i is at most 250).
pub const DNS64_ADDR: Ipv6Addr = Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, 0xffff, 0, 0, 0, 0x53);
pub const NAT64_PREFIX: &str = "64:ff9b::/96";

impl Nat64Spec {
    pub fn at(at: &str) -> Nat64Spec {
        Nat64Spec {
            at: at.into(),
            prefix: NAT64_PREFIX.into(),
            pool4: NAT64_POOL4,
            dns: DNS64_ADDR,
        }
    }
}

/// One direction of a link, with every value resolved and written as a user would write it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    /// `unlimited`, a tc rate, or `trace:PATH`.
    pub capacity: String,
    pub delay: String,
    pub loss: String,
    pub queue: String,
    pub overhead_bytes: u32,
    /// Clear the ECN field of packets leaving this direction.
    #[serde(default)]
    pub bleach_ecn: bool,
}

impl Default for Direction {
    fn default() -> Self {
        Direction {
            capacity: "unlimited".into(),
            delay: "0ms".into(),
            loss: "0%".into(),
            queue: qdisc::Spec::default().to_string(),
            overhead_bytes: 0,
            bleach_ecn: false,
        }
    }
}

/// A link between two attachment points: `HOST.IFACE` (or just `HOST` for its first interface)
/// or a router name. `up` is a→b, `down` is b→a.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub name: String,
    pub a: String,
    pub b: String,
    pub up: Direction,
    pub down: Direction,
}

/// A scheduled change of a link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub at_s: f64,
    pub link: String,
    /// `up`, `down` or both when absent.
    pub direction: Option<String>,
    pub capacity: Option<String>,
    pub delay: Option<String>,
    pub loss: Option<String>,
    /// `on` or `off`: an off link drops everything (a Wi-Fi that went dark).
    pub state: Option<String>,
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

/// The lab's address of interface number `i` (1-based).
pub fn iface_addrs(i: usize) -> (Ipv4Addr, Ipv6Addr) {
    let i = u8::try_from(i).expect("validated: at most 250 interfaces");
    (
        Ipv4Addr::new(10, 77, i, 1),
        Ipv6Addr::new(0xfd4c, 0x6c61, 0x6200, u16::from(i), 0, 0, 0, 1),
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

/// Checks one direction's values and returns the link model parameters and queue spec.
pub fn resolve_direction(
    what: &str,
    d: &Direction,
) -> Result<(LinkParams, qdisc::Spec), UsageError> {
    let capacity = parse_capacity(&format!("{what} rate"), &d.capacity)?;
    let delay = parse_time(&d.delay).map_err(|e| UsageError(format!("{what} delay: {e}")))?;
    let loss = LossModel::parse(&d.loss).map_err(|e| UsageError(format!("{what} loss: {e}")))?;
    let queue =
        qdisc::parse_spec(&d.queue).map_err(|e| UsageError(format!("{what} queue: {e}")))?;
    Ok((
        LinkParams {
            capacity,
            delay,
            loss,
            overhead_bytes: d.overhead_bytes,
            up: true,
            bleach_ecn: d.bleach_ecn,
        },
        queue,
    ))
}

/// `unlimited`, a tc rate, or `trace:PATH` (a Mahimahi trace file, read now).
pub fn parse_capacity(what: &str, s: &str) -> Result<Capacity, UsageError> {
    if s == "unlimited" {
        return Ok(Capacity::Unlimited);
    }
    if let Some(path) = s.strip_prefix("trace:") {
        return Ok(Capacity::Trace(Arc::new(load_trace(
            what,
            Path::new(path),
        )?)));
    }
    parse_rate(s)
        .map(Capacity::Rate)
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

pub fn load_trace(what: &str, path: &Path) -> Result<Trace, UsageError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "{what}: cannot read trace file '{}': {e}",
            path.display()
        ))
    })?;
    Trace::parse(&path.display().to_string(), &text).map_err(|e| UsageError(format!("{what}: {e}")))
}

fn norm_rate(what: &str, s: &str) -> Result<String, UsageError> {
    parse_rate(s)
        .map(|r: Rate| r.to_string())
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

fn norm_time(what: &str, s: &str) -> Result<String, UsageError> {
    parse_time(s)
        .map(format_duration)
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

fn norm_loss(what: &str, s: &str) -> Result<String, UsageError> {
    LossModel::parse(s)
        .map(|m| m.to_string())
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

fn norm_queue(what: &str, s: &str) -> Result<String, UsageError> {
    qdisc::parse_spec(s)
        .map(|q| q.to_string())
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

fn norm_trace(what: &str, path: &str) -> Result<String, UsageError> {
    let p = Path::new(path);
    load_trace(what, p)?;
    let abs = std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(path));
    Ok(format!("trace:{}", abs.display()))
}

fn seconds(what: &str, s: &str) -> Result<f64, UsageError> {
    parse_time(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

// ---------------------------------------------------------------------------------------------
// `latencylab shell` options

/// The link options of `latencylab shell`, as typed (validated by [`shell_config`]).
#[derive(Clone, Debug, Default)]
pub struct ShellOptions {
    pub rate: Option<String>,
    pub down: Option<String>,
    pub up: Option<String>,
    pub delay: Option<String>,
    pub rtt: Option<String>,
    pub down_delay: Option<String>,
    pub up_delay: Option<String>,
    pub queue: Option<String>,
    pub down_queue: Option<String>,
    pub up_queue: Option<String>,
    pub loss: Option<String>,
    pub down_loss: Option<String>,
    pub up_loss: Option<String>,
    pub down_trace: Option<String>,
    pub up_trace: Option<String>,
    pub overhead: Option<u32>,
    /// Clear ECN on the path, both ways.
    pub bleach_ecn: bool,
    pub cc: Option<String>,
    pub ecn: Option<String>,
    pub mtu: Option<u32>,
    pub seed: Option<u64>,
    /// `client` IPv6-only behind DNS64 + NAT64, `server` IPv4-only.
    pub nat64: bool,
}

/// Builds the two-host lab of `latencylab shell`: `client` and `server` joined by the link
/// `path`, whose `up` direction is client→server and `down` server→client.
pub fn shell_config(o: &ShellOptions) -> Result<LabConfig, UsageError> {
    let mut up = Direction::default();
    let mut down = Direction::default();
    if let Some(r) = &o.rate {
        let r = norm_rate("--rate", r)?;
        up.capacity = r.clone();
        down.capacity = r;
    }
    if let Some(r) = &o.down {
        down.capacity = norm_rate("--down", r)?;
    }
    if let Some(r) = &o.up {
        up.capacity = norm_rate("--up", r)?;
    }
    if let Some(t) = &o.down_trace {
        down.capacity = norm_trace("--down-trace", t)?;
    }
    if let Some(t) = &o.up_trace {
        up.capacity = norm_trace("--up-trace", t)?;
    }
    if o.delay.is_some() && o.rtt.is_some() {
        return usage("--delay and --rtt both set the one-way delay: give one of them");
    }
    if let Some(d) = &o.delay {
        let d = norm_time("--delay", d)?;
        up.delay = d.clone();
        down.delay = d;
    }
    if let Some(r) = &o.rtt {
        let rtt = parse_time(r).map_err(|e| UsageError(format!("--rtt: {e}")))?;
        let half = format_duration(rtt / 2);
        up.delay = half.clone();
        down.delay = half;
    }
    if let Some(d) = &o.down_delay {
        down.delay = norm_time("--down-delay", d)?;
    }
    if let Some(d) = &o.up_delay {
        up.delay = norm_time("--up-delay", d)?;
    }
    if let Some(q) = &o.queue {
        let q = norm_queue("--queue", q)?;
        up.queue = q.clone();
        down.queue = q;
    }
    if let Some(q) = &o.down_queue {
        down.queue = norm_queue("--down-queue", q)?;
    }
    if let Some(q) = &o.up_queue {
        up.queue = norm_queue("--up-queue", q)?;
    }
    if let Some(l) = &o.loss {
        let l = norm_loss("--loss", l)?;
        up.loss = l.clone();
        down.loss = l;
    }
    if let Some(l) = &o.down_loss {
        down.loss = norm_loss("--down-loss", l)?;
    }
    if let Some(l) = &o.up_loss {
        up.loss = norm_loss("--up-loss", l)?;
    }
    if let Some(b) = o.overhead {
        up.overhead_bytes = b;
        down.overhead_bytes = b;
    }
    up.bleach_ecn = o.bleach_ecn;
    down.bleach_ecn = o.bleach_ecn;
    let settings = host_settings("--", None, o.cc.as_deref(), o.ecn.as_deref(), o.mtu)?;
    let mut hosts = Vec::new();
    for (i, name) in ["client", "server"].into_iter().enumerate() {
        let (ipv4, ipv6) = iface_addrs(i + 1);
        let family = match (o.nat64, i) {
            (false, _) => Family::Dual,
            (true, 0) => Family::Ipv6Only,
            (true, _) => Family::Ipv4Only,
        };
        hosts.push(Host {
            name: name.into(),
            settings: settings.clone(),
            family,
            interfaces: vec![Interface {
                name: "eth0".into(),
                ipv4,
                ipv6,
            }],
            aliases: vec![],
        });
    }
    let cfg = LabConfig {
        seed: o.seed.unwrap_or(1),
        duration_s: None,
        hosts,
        routers: vec![],
        links: vec![LinkSpec {
            name: "path".into(),
            a: "client".into(),
            b: "server".into(),
            up,
            down,
        }],
        changes: vec![],
        programs: vec![],
        // At the server's end of the path, as a carrier's translator sits past the access
        // link: the path carries the client's IPv6, and the server meets it as IPv4.
        nat64: o.nat64.then(|| Nat64Spec::at("server")),
    };
    cfg.validate()?;
    Ok(cfg)
}

fn host_settings(
    prefix: &str,
    base: Option<&HostSettings>,
    cc: Option<&str>,
    ecn: Option<&str>,
    mtu: Option<u32>,
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
    Ok(s)
}

// ---------------------------------------------------------------------------------------------
// Run files

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawDirection {
    rate: Option<String>,
    trace: Option<String>,
    delay: Option<String>,
    loss: Option<String>,
    queue: Option<String>,
    overhead: Option<u32>,
    bleach_ecn: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    name: String,
    a: String,
    b: String,
    rate: Option<String>,
    trace: Option<String>,
    delay: Option<String>,
    rtt: Option<String>,
    loss: Option<String>,
    queue: Option<String>,
    overhead: Option<u32>,
    bleach_ecn: Option<bool>,
    up: Option<RawDirection>,
    down: Option<RawDirection>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: String,
    interfaces: Option<Vec<String>>,
    cc: Option<String>,
    ecn: Option<String>,
    mtu: Option<u32>,
    #[serde(default)]
    aliases: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    name: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChange {
    at: String,
    link: String,
    direction: Option<String>,
    rate: Option<String>,
    trace: Option<String>,
    delay: Option<String>,
    loss: Option<String>,
    state: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProgram {
    host: String,
    run: String,
    at: Option<String>,
    name: Option<String>,
    wait: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNat64 {
    at: String,
    ipv6_only: Vec<String>,
    #[serde(default)]
    ipv4_only: Vec<String>,
    prefix: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunFile {
    seed: Option<u64>,
    duration: Option<String>,
    cc: Option<String>,
    ecn: Option<String>,
    mtu: Option<u32>,
    #[serde(default)]
    host: Vec<RawHost>,
    #[serde(default)]
    router: Vec<RawRouter>,
    #[serde(default)]
    link: Vec<RawLink>,
    #[serde(default)]
    change: Vec<RawChange>,
    #[serde(default)]
    program: Vec<RawProgram>,
    nat64: Option<RawNat64>,
}

/// Reads and validates a run file. Relative trace paths are relative to the file.
pub fn run_file_config(path: &Path, seed_override: Option<u64>) -> Result<LabConfig, UsageError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read run file '{}': {e}", path.display())))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    parse_run_file(&path.display().to_string(), &text, dir, seed_override)
}

/// Parses run-file text; `name` is used in messages, `dir` resolves relative trace paths.
pub fn parse_run_file(
    name: &str,
    text: &str,
    dir: &Path,
    seed_override: Option<u64>,
) -> Result<LabConfig, UsageError> {
    let raw: RawRunFile = toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        match line {
            Some(l) => UsageError(format!("{name}:{l}: {msg}")),
            None => UsageError(format!("{name}: {msg}")),
        }
    })?;
    let defaults = host_settings("", None, raw.cc.as_deref(), raw.ecn.as_deref(), raw.mtu)?;
    if raw.host.is_empty() {
        return usage(format!(
            "{name}: no [[host]] (a lab needs at least two hosts and a [[link]])"
        ));
    }
    let mut hosts = Vec::new();
    let mut n = 0;
    for h in &raw.host {
        let what = format!("{name}: host '{}'", h.name);
        let settings = host_settings(
            &format!("{what}: "),
            Some(&defaults),
            h.cc.as_deref(),
            h.ecn.as_deref(),
            h.mtu,
        )?;
        let names = h.interfaces.clone().unwrap_or_else(|| vec!["eth0".into()]);
        if names.is_empty() {
            return usage(format!(
                "{what}: interfaces is empty (try interfaces = [\"eth0\"])"
            ));
        }
        let mut interfaces = Vec::new();
        for i in names {
            n += 1;
            let (ipv4, ipv6) = iface_addrs(n.min(250));
            interfaces.push(Interface {
                name: i,
                ipv4,
                ipv6,
            });
        }
        let family = match &raw.nat64 {
            Some(n) if n.ipv6_only.contains(&h.name) => Family::Ipv6Only,
            Some(n) if n.ipv4_only.contains(&h.name) => Family::Ipv4Only,
            _ => Family::Dual,
        };
        hosts.push(Host {
            name: h.name.clone(),
            settings,
            family,
            interfaces,
            aliases: h.aliases.clone(),
        });
    }
    let trace = |what: &str, t: &str| {
        let p = dir.join(t);
        norm_trace(what, &p.display().to_string())
    };
    let mut links = Vec::new();
    for l in &raw.link {
        let what = format!("{name}: link '{}'", l.name);
        let mut both = Direction::default();
        if let Some(r) = &l.rate {
            both.capacity = norm_rate(&format!("{what}: rate"), r)?;
        }
        if let Some(t) = &l.trace {
            both.capacity = trace(&format!("{what}: trace"), t)?;
        }
        if l.delay.is_some() && l.rtt.is_some() {
            return usage(format!("{what}: give delay or rtt, not both"));
        }
        if let Some(d) = &l.delay {
            both.delay = norm_time(&format!("{what}: delay"), d)?;
        }
        if let Some(r) = &l.rtt {
            let rtt = parse_time(r).map_err(|e| UsageError(format!("{what}: rtt: {e}")))?;
            both.delay = format_duration(rtt / 2);
        }
        if let Some(x) = &l.loss {
            both.loss = norm_loss(&format!("{what}: loss"), x)?;
        }
        if let Some(q) = &l.queue {
            both.queue = norm_queue(&format!("{what}: queue"), q)?;
        }
        if let Some(o) = l.overhead {
            both.overhead_bytes = o;
        }
        if let Some(b) = l.bleach_ecn {
            both.bleach_ecn = b;
        }
        let dir_of = |side: &str, raw: &Option<RawDirection>| -> Result<Direction, UsageError> {
            let mut d = both.clone();
            let Some(r) = raw else { return Ok(d) };
            let w = format!("{what}: {side}");
            if let Some(x) = &r.rate {
                d.capacity = norm_rate(&format!("{w}.rate"), x)?;
            }
            if let Some(x) = &r.trace {
                d.capacity = trace(&format!("{w}.trace"), x)?;
            }
            if let Some(x) = &r.delay {
                d.delay = norm_time(&format!("{w}.delay"), x)?;
            }
            if let Some(x) = &r.loss {
                d.loss = norm_loss(&format!("{w}.loss"), x)?;
            }
            if let Some(x) = &r.queue {
                d.queue = norm_queue(&format!("{w}.queue"), x)?;
            }
            if let Some(x) = r.overhead {
                d.overhead_bytes = x;
            }
            if let Some(x) = r.bleach_ecn {
                d.bleach_ecn = x;
            }
            Ok(d)
        };
        links.push(LinkSpec {
            name: l.name.clone(),
            a: l.a.clone(),
            b: l.b.clone(),
            up: dir_of("up", &l.up)?,
            down: dir_of("down", &l.down)?,
        });
    }
    let mut changes = Vec::new();
    for c in &raw.change {
        let what = format!("{name}: change at {} of link '{}'", c.at, c.link);
        let capacity = match (&c.rate, &c.trace) {
            (Some(_), Some(_)) => return usage(format!("{what}: give rate or trace, not both")),
            (Some(r), None) => Some(norm_rate(&format!("{what}: rate"), r)?),
            (None, Some(t)) => Some(trace(&format!("{what}: trace"), t)?),
            (None, None) => None,
        };
        changes.push(Change {
            at_s: seconds(&format!("{what}: at"), &c.at)?,
            link: c.link.clone(),
            direction: c.direction.clone(),
            capacity,
            delay: c
                .delay
                .as_deref()
                .map(|d| norm_time(&format!("{what}: delay"), d))
                .transpose()?,
            loss: c
                .loss
                .as_deref()
                .map(|d| norm_loss(&format!("{what}: loss"), d))
                .transpose()?,
            state: c.state.clone(),
        });
    }
    let mut programs = Vec::new();
    for (i, p) in raw.program.iter().enumerate() {
        let pname = p
            .name
            .clone()
            .unwrap_or_else(|| format!("{}-{}", p.host, i + 1));
        let what = format!("{name}: program '{pname}'");
        programs.push(Program {
            name: pname,
            host: p.host.clone(),
            at_s: p
                .at
                .as_deref()
                .map(|a| seconds(&format!("{what}: at"), a))
                .transpose()?
                .unwrap_or(0.0),
            run: p.run.clone(),
            wait: p.wait.unwrap_or(false),
        });
    }
    let cfg = LabConfig {
        seed: seed_override.or(raw.seed).unwrap_or(1),
        duration_s: raw
            .duration
            .as_deref()
            .map(|d| seconds(&format!("{name}: duration"), d))
            .transpose()?,
        hosts,
        routers: raw.router.iter().map(|r| r.name.clone()).collect(),
        links,
        changes,
        programs,
        nat64: raw.nat64.as_ref().map(|n| Nat64Spec {
            prefix: n.prefix.clone().unwrap_or_else(|| NAT64_PREFIX.into()),
            ..Nat64Spec::at(&n.at)
        }),
    };
    if let Some(n) = &raw.nat64 {
        if n.ipv6_only.is_empty() {
            return usage(format!(
                "{name}: [nat64] ipv6_only is empty (name the hosts behind the NAT64, e.g. ipv6_only = [\"phone\"])"
            ));
        }
        for h in n.ipv6_only.iter().chain(&n.ipv4_only) {
            if !cfg.hosts.iter().any(|x| &x.name == h) {
                return usage(format!("{name}: [nat64]: no host '{h}'"));
            }
            if n.ipv6_only.contains(h) && n.ipv4_only.contains(h) {
                return usage(format!(
                    "{name}: [nat64]: host '{h}' is in both ipv6_only and ipv4_only"
                ));
            }
        }
    }
    cfg.validate()
        .map_err(|e| UsageError(format!("{name}: {e}")))?;
    Ok(cfg)
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

impl LabConfig {
    /// Resolves `HOST.IFACE`, `HOST` (its first interface) or a router name.
    pub fn attach(&self, s: &str) -> Result<Attach, UsageError> {
        let (host, iface) = match s.split_once('.') {
            Some((h, i)) => (h, Some(i)),
            None => (s, None),
        };
        if let Some(hi) = self.hosts.iter().position(|h| h.name == host) {
            let h = &self.hosts[hi];
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
            if let Some(ri) = self.routers.iter().position(|r| r == s) {
                return Ok(Attach::Router(ri));
            }
        }
        let mut known: Vec<String> = self.hosts.iter().map(|h| h.name.clone()).collect();
        known.extend(self.routers.iter().cloned());
        usage(format!(
            "'{s}' is neither a host, HOST.IFACE, nor a router (known: {})",
            known.join(", ")
        ))
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
        if n_ifaces > 250 {
            return usage(format!("{n_ifaces} interfaces: a lab has at most 250"));
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
            for (side, d) in [("up", &l.up), ("down", &l.down)] {
                resolve_direction(&format!("link '{}' {side}", l.name), d)?;
            }
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
            if let Some(d) = &c.direction {
                if d != "up" && d != "down" {
                    return usage(format!(
                        "change at {}s: direction '{d}' (try up, down)",
                        c.at_s
                    ));
                }
            }
            if let Some(s) = &c.state {
                if s != "on" && s != "off" {
                    return usage(format!("change at {}s: state '{s}' (try on, off)", c.at_s));
                }
            }
            if c.capacity.is_none() && c.delay.is_none() && c.loss.is_none() && c.state.is_none() {
                return usage(format!("change at {}s of link '{}' changes nothing (give rate, trace, delay, loss or state)", c.at_s, c.link));
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
            n.prefix
                .parse::<nat64::Prefix>()
                .map_err(|e| UsageError(format!("nat64: prefix: {e} (try 64:ff9b::/96)")))?;
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

/// Changes a direction by a scheduled change.
pub fn apply_change(params: &LinkParams, c: &Change) -> Result<LinkParams, UsageError> {
    let mut p = params.clone();
    if let Some(cap) = &c.capacity {
        p.capacity = parse_capacity("change", cap)?;
    }
    if let Some(d) = &c.delay {
        p.delay = parse_time(d).map_err(|e| UsageError(e.to_string()))?;
    }
    if let Some(l) = &c.loss {
        p.loss = LossModel::parse(l).map_err(UsageError)?;
    }
    if let Some(s) = &c.state {
        p.up = s == "on";
    }
    Ok(p)
}

/// A zero duration when unset.
pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(f: impl FnOnce(&mut ShellOptions)) -> Result<LabConfig, UsageError> {
        let mut o = ShellOptions::default();
        f(&mut o);
        shell_config(&o)
    }

    #[test]
    fn shell_defaults_are_a_typical_linux_host_on_an_unlimited_path() {
        let c = shell(|_| {}).unwrap();
        assert_eq!(
            c.hosts[0].settings,
            HostSettings {
                cc: "cubic".into(),
                ecn: EcnMode::Passive,
                mtu: 1500
            }
        );
        assert_eq!(c.links[0].up.capacity, "unlimited");
        assert_eq!(c.hosts[0].interfaces[0].ipv4, Ipv4Addr::new(10, 77, 1, 1));
        assert_eq!(
            c.hosts[1].interfaces[0].ipv6,
            "fd4c:6c61:6200:2::1".parse::<Ipv6Addr>().unwrap()
        );
    }

    #[test]
    fn shell_options_set_each_direction() {
        let c = shell(|o| {
            o.down = Some("8mbit".into());
            o.up = Some("1mbit".into());
            o.rtt = Some("40ms".into());
            o.up_delay = Some("30ms".into());
            o.queue = Some("fifo limit 50".into());
            o.down_loss = Some("1%".into());
        })
        .unwrap();
        let l = &c.links[0];
        assert_eq!(
            (l.down.capacity.as_str(), l.up.capacity.as_str()),
            ("8mbit", "1mbit")
        );
        assert_eq!(
            (l.down.delay.as_str(), l.up.delay.as_str()),
            ("20ms", "30ms")
        );
        assert_eq!(l.up.queue, "fifo limit 50");
        assert_eq!((l.down.loss.as_str(), l.up.loss.as_str()), ("1%", "0%"));
    }

    #[test]
    fn bad_shell_options_name_the_option_and_the_value() {
        let e = |f: fn(&mut ShellOptions)| shell(f).unwrap_err().0;
        assert_eq!(
            e(|o| o.rate = Some("10mbits".into())),
            "--rate: cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)"
        );
        assert_eq!(
            e(|o| o.rtt = Some("40".into())),
            "--rtt: cannot read '40' (try 20ms, 500us, 1.5s)"
        );
        assert!(e(|o| o.queue = Some("fifo lim 5".into()))
            .starts_with("--queue: fifo: unknown keyword 'lim'"));
        assert!(e(|o| o.loss = Some("5".into())).starts_with("--loss: cannot read '5'"));
        assert_eq!(
            e(|o| o.ecn = Some("maybe".into())),
            "--ecn: cannot read 'maybe' (try on, off, passive)"
        );
        assert!(e(|o| o.mtu = Some(500)).starts_with("--mtu: cannot use 500"));
        assert!(e(|o| o.down_trace = Some("/nonexistent.trace".into()))
            .starts_with("--down-trace: cannot read trace file"));
    }

    #[test]
    fn shell_nat64_makes_an_ipv6_only_client_and_an_ipv4_only_server_behind_a_translator() {
        let c = shell(|o| o.nat64 = true).unwrap();
        assert_eq!(c.hosts[0].family, Family::Ipv6Only);
        assert_eq!(c.hosts[1].family, Family::Ipv4Only);
        let n = c.nat64.as_ref().unwrap();
        assert_eq!(n.at, "server");
        assert_eq!(n.pool4, Ipv4Addr::new(10, 77, 0, 64));
        assert!(shell(|_| {}).unwrap().nat64.is_none());
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
    fn run_file_nat64_table_sets_families_and_the_translators_place() {
        let text = format!(
            "{WIFI}\n[nat64]\nat = \"isp\"\nipv6_only = [\"phone\"]\nipv4_only = [\"server\"]\n"
        );
        let c = parse_run_file("n.toml", &text, Path::new("."), None).unwrap();
        assert_eq!(c.hosts[0].family, Family::Ipv6Only);
        assert_eq!(c.hosts[1].family, Family::Ipv4Only);
        assert_eq!(c.nat64.as_ref().unwrap().at, "isp");
        let e = |t: &str| {
            parse_run_file(
                "n.toml",
                &format!("{WIFI}\n[nat64]\n{t}"),
                Path::new("."),
                None,
            )
            .unwrap_err()
            .0
        };
        assert!(e("at = \"isp\"\nipv6_only = []").contains("ipv6_only is empty"));
        assert!(e("at = \"isp\"\nipv6_only = [\"tablet\"]").contains("no host 'tablet'"));
        assert!(e("at = \"nowhere\"\nipv6_only = [\"phone\"]").contains("nat64: at: 'nowhere'"));
        assert!(
            e("at = \"isp\"\nipv6_only = [\"phone\"]\nprefix = \"2001:db8::/33\"")
                .contains("nat64: prefix:")
        );
    }

    const WIFI: &str = r#"
        seed = 3
        duration = "30s"
        [[host]]
        name = "phone"
        interfaces = ["wlan0", "rmnet0"]
        [[host]]
        name = "server"
        [[router]]
        name = "isp"
        [[link]]
        name = "wifi"
        a = "phone.wlan0"
        b = "isp"
        rate = "50mbit"
        delay = "2ms"
        [link.down]
        queue = "fifo limit 100"
        [[link]]
        name = "cell"
        a = "phone.rmnet0"
        b = "isp"
        rate = "10mbit"
        rtt = "60ms"
        [[link]]
        name = "core"
        a = "isp"
        b = "server"
        [[change]]
        at = "5s"
        link = "wifi"
        state = "off"
        [[program]]
        host = "server"
        run = "sleep 1"
    "#;

    #[test]
    fn run_file_resolves_hosts_links_and_schedule() {
        let c = parse_run_file("wifi.toml", WIFI, Path::new("."), None).unwrap();
        assert_eq!(c.seed, 3);
        assert_eq!(c.duration_s, Some(30.0));
        assert_eq!(c.hosts[0].interfaces.len(), 2);
        assert_eq!(c.hosts[1].interfaces[0].ipv4, Ipv4Addr::new(10, 77, 3, 1));
        assert_eq!(c.links[0].down.queue, "fifo limit 100");
        assert_eq!(c.links[0].up.queue, "fifo limit 1000");
        assert_eq!(c.links[1].up.delay, "30ms");
        assert_eq!(c.attach("phone.rmnet0").unwrap(), Attach::Iface(0, 1));
        assert_eq!(c.attach("isp").unwrap(), Attach::Router(0));
        assert_eq!(c.changes[0].at_s, 5.0);
        assert_eq!(c.programs[0].name, "server-1");
        assert!(c.hosts_file().contains("10.77.3.1\tserver server-eth0\n"));
        assert!(c.hosts_file().contains("10.77.2.1\tphone-rmnet0\n"));
    }

    #[test]
    fn aliases_name_a_hosts_first_address_in_etc_hosts_and_the_dns64() {
        let mut c = shell_config(&ShellOptions::default()).unwrap();
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
    fn run_file_errors_name_the_line_or_the_thing() {
        let e = |t: &str| {
            parse_run_file("x.toml", t, Path::new("."), None)
                .unwrap_err()
                .0
        };
        assert!(
            e("sed = 1\n[[host]]\nname=\"a\"").starts_with("x.toml:1: unknown field `sed`"),
            "{}",
            e("sed = 1")
        );
        let loop_file = WIFI.replace(
            "b = \"server\"",
            "b = \"server\"\n[[link]]\nname = \"again\"\na = \"isp\"\nb = \"isp\"",
        );
        assert!(e(&loop_file).contains("link 'again'"), "{}", e(&loop_file));
        assert!(e(&WIFI.replace("b = \"server\"", "b = \"sever\""))
            .contains("'sever' is neither a host"));
        assert!(
            e(&WIFI.replace("a = \"phone.rmnet0\"", "a = \"phone.wlan0\""))
                .contains("already on link 'wifi'")
        );
        assert!(e(&WIFI.replace("rate = \"10mbit\"", "rate = \"fast\""))
            .contains("link 'cell': rate: cannot read 'fast'"));
        assert!(e(&WIFI.replace("state = \"off\"", "state = \"dark\""))
            .contains("state 'dark' (try on, off)"));
    }
}

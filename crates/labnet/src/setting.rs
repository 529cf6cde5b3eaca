//! The settings of one link direction, as one table: each has a key (what `latencylab shell`
//! options, run-file fields and scheduled changes name it by), a parser from the text a user
//! writes, the field of [`LinkParams`] it sets, and how `lab.json` prints it back.
//!
//! Every reader of link settings goes through [`Setting::parse`] and every writer through
//! [`Direction::settings`], so a new link setting is one variant here (with its arms in
//! `parse`, `apply` and `settings`, which the compiler asks for), the field in
//! `link::LinkParams` and, for `latencylab shell`, one row of [`crate::options`] (from which
//! its flags, the sweep's axes and the docs' table follow; a test fails while a setting has no
//! row). Run files, changes and `lab.json` follow by themselves.
//!
//! Files named by a setting (a capacity trace) are read by the caller through [`Files`]: this
//! crate does no I/O.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use link::impair::{parse_corrupt, Impairments, NarrowLink};
use link::{
    Capacity, Duplicate, Filter, Jitter, LinkParams, LossModel, PacketRate, Reorder, Slot, Slow,
    Trace,
};
use wire::units::{format_duration, parse_rate, parse_time};
use wire::Duration;

/// Reads a file that a setting names. The shell implements it on the file system; tests
/// implement it on a map. The answer is the file's text and the name to record it under (an
/// absolute path, so that `lab.json` says which file it was wherever the lab ran from).
pub trait Files {
    fn read(&self, path: &Path) -> Result<(String, String), String>;
}

impl<F: Fn(&Path) -> Result<(String, String), String>> Files for F {
    fn read(&self, path: &Path) -> Result<(String, String), String> {
        self(path)
    }
}

/// A [`Files`] that has no files: for specs built without any (demos, tests).
pub fn no_files(path: &Path) -> Result<(String, String), String> {
    Err(format!("no file '{}' here", path.display()))
}

/// One direction of a link: the link model's parameters and its queue discipline, every value
/// resolved (Linux's default where nothing was said).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Direction {
    pub params: LinkParams,
    pub queue: qdisc::Spec,
}

/// One value of a link direction.
#[derive(Clone, Debug, PartialEq)]
pub enum Setting {
    /// `rate` (a tc rate or `unlimited`) or `trace` (a Mahimahi trace file, loaded).
    Capacity(Capacity),
    /// `delay` (one way) or `rtt` (each way gets half).
    Delay(Duration),
    /// `loss`, netem syntax.
    Loss(LossModel),
    /// `queue`, tc syntax. Fixed for the life of a lab.
    Queue(qdisc::Spec),
    /// `overhead`: bytes of link-layer framing charged per packet.
    Overhead(u32),
    /// `bleach_ecn`: clear the ECN field of packets leaving the direction.
    BleachEcn(bool),
    /// `state`: `on`, `off` (the link drops everything, a Wi-Fi gone dark) or `blackhole` (up,
    /// but nothing gets through: a Wi-Fi associated to a dead access point).
    State(LinkState),
    /// `jitter`: `TIME [DIST] [CORR%] [reorder]`, or `none`.
    Jitter(Option<Jitter>),
    /// `duplicate`: `PCT [TIME]` (a late copy), `0%` for none.
    Duplicate(Option<Duplicate>),
    /// `reorder`: `PCT [CORR%]`, netem's, `0%` for none.
    Reorder(Option<Reorder>),
    /// `corrupt`: the probability that one bit of a packet flips.
    Corrupt(f64),
    /// `pps`: a packets-per-second ceiling, or `unlimited`.
    Pps(Option<PacketRate>),
    /// `slot`: `MIN [MAX] [packets N] [bytes B]`, or `none`.
    Slot(Option<Slot>),
    /// `drop`: filters joined by `or` (`tcp syn or udp port 443`), or `none`.
    Drop(Vec<Filter>),
    /// `mtu`: the largest packet the link carries (a narrow link), or `none`.
    Mtu(Option<u32>),
    /// `slow`: `FILTER TIME`, packets matching the filter take TIME longer, or `none`.
    Slow(Option<Slow>),
}

/// What a link direction does with what it is offered.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    On,
    Off,
    Blackhole,
}

impl LinkState {
    pub const ALL: [LinkState; 3] = [LinkState::On, LinkState::Off, LinkState::Blackhole];

    pub const fn name(self) -> &'static str {
        match self {
            LinkState::On => "on",
            LinkState::Off => "off",
            LinkState::Blackhole => "blackhole",
        }
    }
}

/// The smallest link MTU the lab accepts (IPv4's minimum, RFC 791); an IPv6 packet needs 1280.
const MIN_MTU: u32 = 68;

/// Reads an option whose absence is written `none` (or a zero the parser maps to `None`).
fn optional<T, E: fmt::Display>(
    value: &str,
    off: &[&str],
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Option<T>, String> {
    if off.contains(&value.trim()) {
        Ok(None)
    } else {
        parse(value).map(Some).map_err(|e| e.to_string())
    }
}

/// The keys [`Setting::parse`] reads, for messages.
pub const KEYS: &str = "rate, trace, delay, rtt, loss, queue, overhead, bleach_ecn, state, \
     jitter, duplicate, reorder, corrupt, pps, slot, drop, mtu, slow";

/// The tc and netem words of the settings that have them, for messages.
const BOOL_EXAMPLES: &str = "true, false";

impl Setting {
    /// Reads `value` as the setting `key`. Relative file names are taken from `dir`. The error
    /// quotes the value and says what would have been accepted; the caller adds which option
    /// or field it was.
    pub fn parse(key: &str, value: &str, dir: &Path, files: &dyn Files) -> Result<Setting, String> {
        let e = |e: &dyn fmt::Display| e.to_string();
        Ok(match key {
            "rate" if value == "unlimited" => Setting::Capacity(Capacity::Unlimited),
            "rate" => Setting::Capacity(Capacity::Rate(parse_rate(value).map_err(|x| e(&x))?)),
            "trace" => {
                let path = dir.join(value);
                let (name, text) = files
                    .read(&path)
                    .map_err(|x| format!("cannot read trace file '{}': {x}", path.display()))?;
                Setting::Capacity(Capacity::Trace(Arc::new(
                    Trace::parse(&name, &text).map_err(|x| e(&x))?,
                )))
            }
            "delay" => Setting::Delay(parse_time(value).map_err(|x| e(&x))?),
            "rtt" => Setting::Delay(parse_time(value).map_err(|x| e(&x))? / 2),
            "loss" => Setting::Loss(LossModel::parse(value)?),
            "queue" => Setting::Queue(qdisc::parse_spec(value).map_err(|x| e(&x))?),
            "overhead" => Setting::Overhead(
                value
                    .parse()
                    .map_err(|_| format!("cannot read '{value}' (try a byte count: 0, 14, 38)"))?,
            ),
            "bleach_ecn" => Setting::BleachEcn(match value {
                "true" => true,
                "false" => false,
                _ => return Err(format!("cannot read '{value}' (try {BOOL_EXAMPLES})")),
            }),
            "state" => Setting::State(match value {
                "on" => LinkState::On,
                "off" => LinkState::Off,
                "blackhole" => LinkState::Blackhole,
                _ => return Err(format!("cannot read '{value}' (try on, off, blackhole)")),
            }),
            "jitter" => Setting::Jitter(optional(value, &["none", "0ms", "0"], Jitter::parse)?),
            "duplicate" => Setting::Duplicate(optional(value, &["none", "0%"], Duplicate::parse)?),
            "reorder" => Setting::Reorder(optional(value, &["none", "0%"], Reorder::parse)?),
            "corrupt" => Setting::Corrupt(parse_corrupt(value).map_err(|x| e(&x))?),
            "pps" => Setting::Pps(optional(value, &["unlimited"], PacketRate::parse)?),
            "slot" => Setting::Slot(optional(value, &["none"], Slot::parse)?),
            "drop" => Setting::Drop(if value.trim() == "none" {
                Vec::new()
            } else {
                value
                    .split(" or ")
                    .map(Filter::parse)
                    .collect::<Result<_, _>>()
                    .map_err(|x| e(&x))?
            }),
            "mtu" => Setting::Mtu(optional(value, &["none"], |v: &str| {
                match v.trim().parse::<u32>() {
                    Ok(n) if (MIN_MTU..=65535).contains(&n) => Ok(n),
                    _ => Err(format!(
                        "cannot read '{v}' (try a byte count 68..65535, e.g. 1400, or none)"
                    )),
                }
            })?),
            "slow" => Setting::Slow(optional(value, &["none"], Slow::parse)?),
            _ => return Err(format!("unknown setting '{key}' (known: {KEYS})")),
        })
    }

    /// The field this setting sets: two keys that set one field (`rate` and `trace`, `delay`
    /// and `rtt`) cannot be given together.
    pub fn field(&self) -> &'static str {
        match self {
            Setting::Capacity(_) => "capacity",
            Setting::Delay(_) => "delay",
            Setting::Loss(_) => "loss",
            Setting::Queue(_) => "queue",
            Setting::Overhead(_) => "overhead_bytes",
            Setting::BleachEcn(_) => "bleach_ecn",
            Setting::State(_) => "state",
            Setting::Jitter(_) => "jitter",
            Setting::Duplicate(_) => "duplicate",
            Setting::Reorder(_) => "reorder",
            Setting::Corrupt(_) => "corrupt",
            Setting::Pps(_) => "pps",
            Setting::Slot(_) => "slot",
            Setting::Drop(_) => "drop",
            Setting::Mtu(_) => "mtu",
            Setting::Slow(_) => "slow",
        }
    }

    /// Whether a running link can take this setting (a queue discipline cannot be swapped
    /// under the packets it holds).
    pub fn changeable(&self) -> bool {
        !matches!(self, Setting::Queue(_))
    }

    /// Sets this value on a direction.
    pub fn apply(&self, d: &mut Direction) {
        let p = &mut d.params;
        match self {
            Setting::Capacity(c) => p.capacity = c.clone(),
            Setting::Delay(t) => p.delay = *t,
            Setting::Loss(l) => p.loss = *l,
            Setting::Queue(q) => d.queue = q.clone(),
            Setting::Overhead(b) => p.overhead_bytes = *b,
            Setting::BleachEcn(b) => p.bleach_ecn = *b,
            Setting::State(st) => {
                p.up = *st != LinkState::Off;
                p.blackhole = *st == LinkState::Blackhole;
            }
            Setting::Jitter(j) => p.impair.jitter = j.clone(),
            Setting::Duplicate(x) => p.impair.duplicate = x.clone(),
            Setting::Reorder(x) => p.impair.reorder = x.clone(),
            Setting::Corrupt(x) => p.impair.corrupt = *x,
            Setting::Pps(x) => p.impair.pps = *x,
            Setting::Slot(x) => p.impair.slot = x.clone(),
            Setting::Drop(x) => p.impair.drop = x.clone(),
            Setting::Slow(x) => p.impair.slow = x.clone(),
            // The router's addresses are the lab's to give (the engine fills them in); a
            // narrow link that already has them keeps them.
            Setting::Mtu(m) => {
                p.impair.narrow = m.map(|mtu_bytes| NarrowLink {
                    mtu_bytes,
                    ..p.impair.narrow.clone().unwrap_or(NarrowLink {
                        mtu_bytes,
                        router_v4: std::net::Ipv4Addr::UNSPECIFIED,
                        router_v6: std::net::Ipv6Addr::UNSPECIFIED,
                    })
                })
            }
        }
    }

    /// The value as `lab.json` records it: the text a user would write (a trace as
    /// `trace:PATH`), numbers and booleans as JSON's own.
    pub fn json_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match self {
            Setting::Capacity(Capacity::Unlimited) => "unlimited".into(),
            Setting::Capacity(Capacity::Rate(r)) => r.to_string().into(),
            Setting::Capacity(Capacity::Trace(t)) => format!("trace:{}", t.name).into(),
            Setting::Delay(t) => format_duration(*t).into(),
            Setting::Loss(l) => l.to_string().into(),
            Setting::Queue(q) => q.to_string().into(),
            Setting::Overhead(b) => Value::from(*b),
            Setting::BleachEcn(b) => Value::from(*b),
            Setting::State(st) => st.name().into(),
            Setting::Jitter(j) => j.as_ref().map_or("none".into(), |j| j.to_string()).into(),
            Setting::Duplicate(x) => x.as_ref().map_or("0%".into(), |x| x.to_string()).into(),
            Setting::Reorder(x) => x.as_ref().map_or("0%".into(), |x| x.to_string()).into(),
            Setting::Corrupt(x) => link::impair::fmt_pct(*x).into(),
            Setting::Pps(x) => {
                x.map_or(Value::from("unlimited"), |x| Value::from(x.packets_per_sec))
            }
            Setting::Slot(x) => x.as_ref().map_or("none".into(), |x| x.to_string()).into(),
            Setting::Drop(x) if x.is_empty() => "none".into(),
            Setting::Drop(x) => x
                .iter()
                .map(|f| f.to_string())
                .collect::<Vec<_>>()
                .join(" or ")
                .into(),
            Setting::Mtu(m) => m.map_or(Value::from("none"), Value::from),
            Setting::Slow(x) => x.as_ref().map_or("none".into(), |x| x.to_string()).into(),
        }
    }
}

impl fmt::Display for Setting {
    /// The value as a user writes it (`10mbit`, `20ms`, `gemodel 1% 10% 100% 0%`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.json_value() {
            serde_json::Value::String(s) => f.write_str(&s),
            v => write!(f, "{v}"),
        }
    }
}

impl Direction {
    /// Every value of the direction, in `lab.json`'s order. The destructuring lists every
    /// field of [`LinkParams`], so a new field does not compile until it is printed here.
    pub fn settings(&self) -> Vec<Setting> {
        let LinkParams {
            capacity,
            delay,
            loss,
            overhead_bytes,
            up,
            bleach_ecn,
            blackhole,
            impair,
        } = &self.params;
        let Impairments {
            jitter,
            duplicate,
            reorder,
            corrupt,
            pps,
            slot,
            drop,
            slow,
            narrow,
        } = impair;
        let state = match (*up, *blackhole) {
            (false, _) => LinkState::Off,
            (true, true) => LinkState::Blackhole,
            (true, false) => LinkState::On,
        };
        vec![
            Setting::Capacity(capacity.clone()),
            Setting::Delay(*delay),
            Setting::Jitter(jitter.clone()),
            Setting::Loss(*loss),
            Setting::Duplicate(duplicate.clone()),
            Setting::Reorder(reorder.clone()),
            Setting::Corrupt(*corrupt),
            Setting::Pps(*pps),
            Setting::Slot(slot.clone()),
            Setting::Drop(drop.clone()),
            Setting::Slow(slow.clone()),
            Setting::Mtu(narrow.as_ref().map(|n| n.mtu_bytes)),
            Setting::Queue(self.queue.clone()),
            Setting::Overhead(*overhead_bytes),
            Setting::BleachEcn(*bleach_ecn),
            Setting::State(state),
        ]
    }

    /// A direction from settings as a user writes them (`[("rate", "10mbit"), ("queue",
    /// "dualpi2")]`), the rest default. Names no files.
    pub fn parse(pairs: &[(&str, &str)]) -> Result<Direction, String> {
        let mut d = Direction::default();
        for s in parse_all("", pairs.iter().copied(), Path::new(""), &no_files)? {
            s.apply(&mut d);
        }
        Ok(d)
    }

    /// The direction as a JSON object, one key per field.
    pub fn to_json(&self) -> serde_json::Map<String, serde_json::Value> {
        self.settings()
            .iter()
            .map(|s| (s.field().to_string(), s.json_value()))
            .collect()
    }
}

impl serde::Serialize for Direction {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.to_json().serialize(s)
    }
}

/// Reads a table of settings (`(key, value)` in the order given) into one list, refusing two
/// keys for one field. `what` names the table in messages (`--`-options or a run-file link).
pub fn parse_all<'a>(
    what: &str,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    dir: &Path,
    files: &dyn Files,
) -> Result<Vec<Setting>, String> {
    let mut out: Vec<(&str, Setting)> = Vec::new();
    for (key, value) in pairs {
        let s = Setting::parse(key, value, dir, files).map_err(|e| format!("{what}{key}: {e}"))?;
        if let Some((other, _)) = out.iter().find(|(_, o)| o.field() == s.field()) {
            return Err(format!("{what}give {other} or {key}, not both"));
        }
        out.push((key, s));
    }
    Ok(out.into_iter().map(|(_, s)| s).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(key: &str, value: &str) -> Result<Setting, String> {
        let files = |p: &Path| -> Result<(String, String), String> {
            match p.to_str() {
                Some("runs/up.trace") => Ok(("/lab/runs/up.trace".into(), "1\n1\n3\n".into())),
                _ => Err("No such file or directory".into()),
            }
        };
        Setting::parse(key, value, Path::new("runs"), &files)
    }

    #[test]
    fn each_key_sets_its_field_and_prints_back_as_written() {
        let mut d = Direction::default();
        for (k, v) in [
            ("rate", "8mbit"),
            ("rtt", "40ms"),
            ("loss", "1%"),
            ("queue", "fifo limit 50"),
            ("overhead", "14"),
            ("bleach_ecn", "true"),
            ("state", "off"),
            ("jitter", "5ms normal 25%"),
            ("duplicate", "10% 200ms"),
            ("reorder", "25%"),
            ("corrupt", "0.1%"),
            ("pps", "1000"),
            ("slot", "10ms 20ms packets 8"),
            ("drop", "tcp syn or udp port 443"),
            ("mtu", "1400"),
            ("slow", "ipv6 150ms"),
        ] {
            parse(k, v).unwrap().apply(&mut d);
        }
        let j = serde_json::to_value(&d).unwrap();
        assert_eq!(
            j,
            serde_json::json!({
                "capacity": "8mbit", "delay": "20ms", "loss": "1%", "queue": "fifo limit 50",
                "overhead_bytes": 14, "bleach_ecn": true, "state": "off",
                "jitter": "5ms normal 25%", "duplicate": "10% 200ms", "reorder": "25%",
                "corrupt": "0.1%", "pps": 1000, "slot": "10ms 20ms packets 8",
                "drop": "tcp syn or udp port 443", "mtu": 1400, "slow": "ipv6 150ms"
            })
        );
        assert!(!d.params.up);
        assert_eq!(d.params.impair.drop.len(), 2);
        parse("state", "blackhole").unwrap().apply(&mut d);
        assert!(d.params.up && d.params.blackhole);
        assert_eq!(d.to_json()["state"], "blackhole");
        parse("state", "on").unwrap().apply(&mut d);
        assert!(d.params.up && !d.params.blackhole);
    }

    #[test]
    fn a_trace_is_read_through_files_relative_to_the_dir_and_recorded_by_its_full_name() {
        let s = parse("trace", "up.trace").unwrap();
        let Setting::Capacity(Capacity::Trace(t)) = &s else {
            panic!("{s:?}")
        };
        assert_eq!(t.opportunities_ms, [1, 1, 3]);
        assert_eq!(s.json_value(), "trace:/lab/runs/up.trace");
        assert_eq!(
            parse("trace", "gone.trace").unwrap_err(),
            "cannot read trace file 'runs/gone.trace': No such file or directory"
        );
    }

    #[test]
    fn bad_values_are_quoted_with_what_would_do() {
        assert_eq!(
            parse("rate", "10mbits").unwrap_err(),
            "cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)"
        );
        assert_eq!(
            parse("state", "dark").unwrap_err(),
            "cannot read 'dark' (try on, off, blackhole)"
        );
        assert_eq!(
            parse("drop", "tcp syn or sctp").unwrap_err(),
            "cannot read filter 'sctp': 'sctp' where one of tcp, udp, icmp, icmpv6, ipv4, ipv6, \
             ecn, not was expected"
        );
        assert!(parse("jitter", "5ms gaussian")
            .unwrap_err()
            .contains("'5ms gaussian'"));
        assert!(parse("duplicate", "10").unwrap_err().contains("'10'"));
        assert!(parse("pps", "-3").unwrap_err().contains("'-3'"));
        assert!(parse("mtu", "40").unwrap_err().contains("'40'"));
        assert!(parse("slot", "20ms 10ms")
            .unwrap_err()
            .contains("'20ms 10ms'"));
        assert!(parse("corrupt", "2").unwrap_err().contains("'2'"));
        assert!(parse("wobble", "1ms")
            .unwrap_err()
            .starts_with("unknown setting 'wobble' (known: rate, trace"));
        assert!(parse("overhead", "-1").unwrap_err().contains("'-1'"));
    }

    #[test]
    fn every_printed_setting_reads_back_as_itself() {
        let mut d = Direction::default();
        for (k, v) in [
            ("rate", "1.5mbit"),
            ("rtt", "41ms"),
            ("loss", "gemodel 1% 10% 70% 0.1%"),
            ("queue", "codel ecn"),
            ("overhead", "38"),
            ("bleach_ecn", "true"),
            ("jitter", "2ms pareto reorder"),
            ("duplicate", "5%"),
            ("reorder", "10% 50%"),
            ("corrupt", "1%"),
            ("pps", "250"),
            ("slot", "1ms"),
            ("drop", "not ipv4 and ecn ect1 or icmp"),
            ("mtu", "9000"),
            ("state", "blackhole"),
        ] {
            parse(k, v).unwrap().apply(&mut d);
        }
        for s in d.settings() {
            let key = match s.field() {
                "capacity" => "rate",
                "overhead_bytes" => "overhead",
                f => f,
            };
            assert_eq!(parse(key, &s.to_string()).unwrap(), s, "{key}");
        }
    }

    #[test]
    fn two_keys_for_one_field_are_refused() {
        let e = parse_all(
            "link 'x': ",
            [("delay", "1ms"), ("rtt", "2ms")],
            Path::new(""),
            &no_files,
        )
        .unwrap_err();
        assert_eq!(e, "link 'x': give delay or rtt, not both");
    }
}

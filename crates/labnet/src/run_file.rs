//! The TOML run file of `latencylab run` (docs/run-files.md): text in, a validated
//! [`LabConfig`] out. The file and the traces it names are read by the caller; link settings
//! are read by [`crate::setting`], so every setting a link has is a field here too.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use wire::units::parse_time;

use crate::lifecycle::Precision;
use crate::rpm_lab::{Load, RpmInLab, RPM_PROGRAM, RPM_SERVER_PROGRAM};
use crate::setting::{parse_all, Direction, Files, Setting};
use crate::spec::{
    host_settings, iface_addrs, usage, Change, Family, Host, Interface, LabConfig, LinkSpec,
    Nat64Spec, Program, Side, UsageError, MAX_INTERFACES, NAT64_PREFIX,
};

fn seconds(what: &str, s: &str) -> Result<f64, UsageError> {
    parse_time(s)
        .map(|d| d.as_secs_f64())
        .map_err(|e| UsageError(format!("{what}: {e}")))
}

/// A table of link settings: keys and values as [`Setting::parse`] reads them.
type RawSettings = BTreeMap<String, toml::Value>;

#[derive(Deserialize)]
struct RawLink {
    name: String,
    a: String,
    b: String,
    up: Option<RawSettings>,
    down: Option<RawSettings>,
    /// A named network ([`crate::profiles`]); the link's own settings override it.
    profile: Option<String>,
    #[serde(flatten)]
    both: RawSettings,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHost {
    name: String,
    interfaces: Option<Vec<String>>,
    cc: Option<String>,
    ecn: Option<String>,
    mtu: Option<u32>,
    slow_start_after_idle: Option<bool>,
    #[serde(default)]
    aliases: Vec<String>,
    /// A CLAT (464XLAT) on this IPv6-only host.
    clat: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRouter {
    name: String,
}

#[derive(Deserialize)]
struct RawChange {
    at: String,
    link: String,
    direction: Option<String>,
    #[serde(flatten)]
    settings: RawSettings,
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
    /// A CLAT (464XLAT) on every IPv6-only host.
    clat: Option<bool>,
    /// The CLATs' prefix; unset, discovered per RFC 7050.
    clat_prefix: Option<String>,
}

/// `[rpm]`: the responsiveness test between two of the lab's hosts.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRpm {
    client: Option<String>,
    server: Option<String>,
    at: Option<String>,
    flows: Option<u16>,
    load: Option<String>,
    max_duration: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRunFile {
    seed: Option<u64>,
    duration: Option<String>,
    cc: Option<String>,
    ecn: Option<String>,
    mtu: Option<u32>,
    slow_start_after_idle: Option<bool>,
    /// How far ahead of its time the engine may deliver a packet (`--precision`).
    precision: Option<String>,
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
    rpm: Option<RawRpm>,
}

/// Parses run-file text; `name` is used in messages, `dir` resolves relative trace paths,
/// which are read through `files`.
pub fn parse_run_file(
    name: &str,
    text: &str,
    dir: &Path,
    seed_override: Option<u64>,
    files: &dyn Files,
) -> Result<LabConfig, UsageError> {
    parse_run_file_set(name, text, dir, seed_override, &[], files)
}

/// The two programs of `[rpm]`: the server from the start, the client (which the lab waits
/// for) half a second later unless `at` says otherwise, writing its report into the run
/// directory when there is one.
fn rpm_programs(name: &str, r: &RawRpm, others: &[Program]) -> Result<Vec<Program>, UsageError> {
    let what = format!("{name}: rpm");
    for p in others {
        if p.name == RPM_PROGRAM || p.name == RPM_SERVER_PROGRAM {
            return usage(format!(
                "{what}: a [[program]] is already named '{}', which [rpm] names its own (rename it)",
                p.name
            ));
        }
    }
    let mut test = RpmInLab::default();
    if let Some(h) = &r.server {
        test.server = h.clone();
    }
    if let Some(h) = &r.client {
        test.client = h.clone();
    }
    if let Some(n) = r.flows {
        if !(1..=64).contains(&n) {
            return usage(format!("{what}: flows = {n} (try 1 to 64)"));
        }
        test.flows = Some(n);
    }
    if let Some(l) = &r.load {
        let Some(load) = Load::from_word(l) else {
            return usage(format!("{what}: load = '{l}' (try {})", Load::words()));
        };
        test.load = Some(load);
    }
    if let Some(d) = &r.max_duration {
        let max = parse_time(d).map_err(|e| UsageError(format!("{what}: max_duration: {e}")))?;
        if max < wire::Duration::from_millis(100) {
            return usage(format!("{what}: max_duration = '{d}' (at least 100ms)"));
        }
        test.max_duration = Some(max);
    }
    let at_s = match &r.at {
        Some(a) => seconds(&format!("{what}: at"), a)?,
        None => 0.5,
    };
    Ok(vec![
        Program {
            name: RPM_SERVER_PROGRAM.into(),
            host: test.server.clone(),
            at_s: 0.0,
            run: test.server_line("latencylab"),
            wait: false,
        },
        Program {
            name: RPM_PROGRAM.into(),
            host: test.client.clone(),
            at_s,
            run: test.client_line("latencylab"),
            wait: true,
        },
    ])
}

/// One value set over a run file's own (`latencylab run --set`, a sweep's axis over a run
/// file): `KEY` names where, `VALUE` is what a user would write there.
///
/// | key | sets |
/// |---|---|
/// | `seed`, `duration`, `cc`, … | a top-level key |
/// | `link.NAME.KEY` | a setting of link NAME, both ways |
/// | `link.NAME.up.KEY`, `link.NAME.down.KEY` | one direction's (`[link.up]`, `[link.down]`) |
/// | `host.NAME.KEY` | a key of `[[host]]` NAME |
/// | `program.NAME.KEY` | a key of the `[[program]]` NAME (by `name`, or `HOST-N` as runs name it) |
/// | `nat64.KEY` | a key of `[nat64]` |
/// | `rpm.KEY` | a key of `[rpm]` |
#[derive(Clone, Debug, PartialEq)]
pub struct SetValue {
    pub key: String,
    pub value: toml::Value,
}

/// The forms of [`SetValue`]'s key, for messages.
pub const SET_KEYS: &str = "link.NAME.KEY, link.NAME.up.KEY, link.NAME.down.KEY, host.NAME.KEY, \
     program.NAME.KEY, nat64.KEY, rpm.KEY or a top-level key such as seed";

impl SetValue {
    /// Reads `KEY=VALUE`. A value that reads as a whole number or `true`/`false` is one (a
    /// host's `mtu`, `slow_start_after_idle`); any other is text (`10mbit`, `codel ecn`).
    pub fn parse(s: &str) -> Result<SetValue, UsageError> {
        let Some((key, value)) = s.split_once('=') else {
            return usage(format!(
                "cannot read '{s}' (try KEY=VALUE, e.g. link.path.down.queue=fq_codel)"
            ));
        };
        let value = match value {
            "true" => toml::Value::Boolean(true),
            "false" => toml::Value::Boolean(false),
            v => v
                .parse::<i64>()
                .map(toml::Value::Integer)
                .unwrap_or_else(|_| toml::Value::String(v.to_string())),
        };
        Ok(SetValue {
            key: key.trim().to_string(),
            value,
        })
    }

    /// Sets the value in a run file's table; the run file's own checks read it afterwards.
    pub fn apply(&self, doc: &mut toml::Table) -> Result<(), String> {
        let parts: Vec<&str> = self.key.split('.').collect();
        let v = self.value.clone();
        let bad = || format!("cannot read key '{}' (try {SET_KEYS})", self.key);
        match parts[..] {
            [key]
                if ![
                    "host", "link", "router", "change", "program", "nat64", "rpm",
                ]
                .contains(&key) =>
            {
                doc.insert(key.into(), v);
            }
            ["link", name, key] => {
                entry(doc, "link", name)?.insert(key.into(), v);
            }
            ["link", name, side @ ("up" | "down"), key] => {
                let l = entry(doc, "link", name)?;
                let t = l
                    .entry(side)
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                t.as_table_mut()
                    .ok_or_else(|| format!("link '{name}': {side} is not a table"))?
                    .insert(key.into(), v);
            }
            ["host", name, key] => {
                entry(doc, "host", name)?.insert(key.into(), v);
            }
            ["program", name, key] => {
                entry(doc, "program", name)?.insert(key.into(), v);
            }
            ["rpm", key] => {
                doc.get_mut("rpm")
                    .and_then(toml::Value::as_table_mut)
                    .ok_or("the run file has no [rpm]")?
                    .insert(key.into(), v);
            }
            ["nat64", key] => {
                doc.get_mut("nat64")
                    .and_then(toml::Value::as_table_mut)
                    .ok_or("the run file has no [nat64]")?
                    .insert(key.into(), v);
            }
            _ => return Err(bad()),
        }
        Ok(())
    }
}

/// The `[[kind]]` entry named `name` (a program also by the `HOST-N` name a run gives it).
fn entry<'a>(
    doc: &'a mut toml::Table,
    kind: &str,
    name: &str,
) -> Result<&'a mut toml::Table, String> {
    let list = doc.get_mut(kind).and_then(toml::Value::as_array_mut);
    let mut names = Vec::new();
    let mut found = None;
    for (i, e) in list.into_iter().flatten().enumerate() {
        let Some(t) = e.as_table_mut() else { continue };
        let own = t
            .get("name")
            .and_then(toml::Value::as_str)
            .map(str::to_string);
        let given = match (&own, t.get("host").and_then(toml::Value::as_str)) {
            (Some(n), _) => n.clone(),
            (None, Some(h)) if kind == "program" => format!("{h}-{}", i + 1),
            _ => continue,
        };
        if given == name && found.is_none() {
            found = Some(t);
        } else {
            names.push(given);
        }
    }
    found.ok_or_else(|| {
        format!(
            "no [[{kind}]] named '{name}' (the file has {})",
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )
    })
}

/// As [`parse_run_file`], with `sets` over the file's own values.
pub fn parse_run_file_set(
    name: &str,
    text: &str,
    dir: &Path,
    seed_override: Option<u64>,
    sets: &[SetValue],
    files: &dyn Files,
) -> Result<LabConfig, UsageError> {
    let syntax = |e: toml::de::Error| {
        let msg = e.message().to_string();
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        match line {
            Some(l) => UsageError(format!("{name}:{l}: {msg}")),
            None => UsageError(format!("{name}: {msg}")),
        }
    };
    let raw: RawRunFile = if sets.is_empty() {
        toml::from_str(text).map_err(syntax)?
    } else {
        let mut doc: toml::Table = toml::from_str(text).map_err(syntax)?;
        for s in sets {
            s.apply(&mut doc)
                .map_err(|e| UsageError(format!("{name}: {}: {e}", s.key)))?;
        }
        let keys: Vec<&str> = sets.iter().map(|s| s.key.as_str()).collect();
        toml::Value::Table(doc)
            .try_into()
            .map_err(|e: toml::de::Error| {
                UsageError(format!("{name} with {}: {}", keys.join(", "), e.message()))
            })?
    };
    let defaults = host_settings(
        "",
        None,
        raw.cc.as_deref(),
        raw.ecn.as_deref(),
        raw.mtu,
        raw.slow_start_after_idle,
    )?;
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
            h.slow_start_after_idle,
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
            let (ipv4, ipv6) = iface_addrs(n.min(MAX_INTERFACES));
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
    let settings = |what: &str, t: &RawSettings| -> Result<Vec<Setting>, UsageError> {
        let mut pairs = Vec::new();
        for (k, v) in t {
            let v = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Integer(_) | toml::Value::Float(_) | toml::Value::Boolean(_) => {
                    v.to_string()
                }
                _ => {
                    return usage(format!(
                        "{what}{k}: cannot read {v} (try a string such as \"10mbit\")"
                    ))
                }
            };
            pairs.push((k.as_str(), v));
        }
        parse_all(
            what,
            pairs.iter().map(|(k, v)| (*k, v.as_str())),
            dir,
            files,
        )
        .map_err(UsageError)
    };
    let mut links = Vec::new();
    for l in &raw.link {
        let what = format!("{name}: link '{}': ", l.name);
        // A profile's rates and round trip come first; the link's own settings win over them.
        let profile = match &l.profile {
            Some(p) => Some(
                crate::profiles::find(p)
                    .map_err(|e| UsageError(format!("{what}profile: {e}")))?
                    .settings(),
            ),
            None => None,
        };
        let own = settings(&what, &l.both)?;
        let side = |side: &str, raw: &Option<RawSettings>| -> Result<Direction, UsageError> {
            let mut d = Direction::default();
            for (to, key, value) in profile.iter().flatten() {
                if to.is_none_or(|x| x.name() == side) {
                    Setting::parse(key, value, dir, files)
                        .map_err(|e| UsageError(format!("{what}profile: {e}")))?
                        .apply(&mut d);
                }
            }
            for s in &own {
                s.apply(&mut d);
            }
            if let Some(t) = raw {
                for s in settings(&format!("{what}{side}."), t)? {
                    s.apply(&mut d);
                }
            }
            Ok(d)
        };
        links.push(LinkSpec {
            name: l.name.clone(),
            a: l.a.clone(),
            b: l.b.clone(),
            up: side("up", &l.up)?,
            down: side("down", &l.down)?,
        });
    }
    let mut changes = Vec::new();
    for c in &raw.change {
        let what = format!("{name}: change at {} of link '{}': ", c.at, c.link);
        let direction = match c.direction.as_deref() {
            None => None,
            Some("up") => Some(Side::Up),
            Some("down") => Some(Side::Down),
            Some(d) => return usage(format!("{what}direction '{d}' (try up, down)")),
        };
        changes.push(Change {
            at_s: seconds(&format!("{what}at"), &c.at)?,
            link: c.link.clone(),
            direction,
            settings: settings(&what, &c.settings)?,
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
    if let Some(r) = &raw.rpm {
        programs.extend(rpm_programs(name, r, &programs)?);
    }
    let nat64 = match &raw.nat64 {
        None => None,
        Some(n) => Some(Nat64Spec {
            prefix: match &n.prefix {
                None => NAT64_PREFIX,
                Some(p) => p.parse().map_err(|e| {
                    UsageError(format!("{name}: nat64: prefix: {e} (try 64:ff9b::/96)"))
                })?,
            },
            clat: raw
                .host
                .iter()
                .filter(|h| {
                    h.clat
                        .unwrap_or(n.clat == Some(true) && n.ipv6_only.contains(&h.name))
                })
                .map(|h| h.name.clone())
                .collect(),
            clat_prefix: n
                .clat_prefix
                .as_deref()
                .map(|p| {
                    p.parse().map_err(|e| {
                        UsageError(format!(
                            "{name}: nat64: clat_prefix: {e} (try 64:ff9b::/96)"
                        ))
                    })
                })
                .transpose()?,
            ..Nat64Spec::at(&n.at)
        }),
    };
    if raw.nat64.is_none() {
        if let Some(h) = raw.host.iter().find(|h| h.clat == Some(true)) {
            return usage(format!(
                "{name}: host '{}': clat = true needs a [nat64] table (a CLAT translates for an IPv6-only host)",
                h.name
            ));
        }
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
        nat64,
        precision: raw
            .precision
            .as_deref()
            .map(|p| Precision::parse(p).map_err(|e| UsageError(format!("{name}: precision: {e}"))))
            .transpose()?
            .unwrap_or_default(),
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::spec::Attach;
    use link::Capacity;
    use std::net::Ipv4Addr;
    use wire::{Duration, Rate};

    #[test]
    fn run_file_clat_is_set_for_every_ipv6_only_host_or_per_host() {
        let parse = |t: &str| {
            parse_run_file(
                "lab.toml",
                t,
                Path::new(""),
                None,
                &crate::setting::no_files,
            )
        };
        let nat = "[nat64]\nat = \"isp\"\nipv6_only = [\"phone\"]\nipv4_only = [\"server\"]\n";
        let c = parse(&format!("{WIFI}\n{nat}clat = true\n")).unwrap();
        assert_eq!(c.nat64.as_ref().unwrap().clat, vec!["phone".to_string()]);
        assert_eq!(c.nat64.as_ref().unwrap().clat_prefix, None);
        let per_host = WIFI.replacen("name = \"phone\"", "name = \"phone\"\nclat = true", 1);
        let c = parse(&format!(
            "{per_host}\n{nat}clat_prefix = \"2001:db8::/32\"\n"
        ))
        .unwrap();
        let n = c.nat64.as_ref().unwrap();
        assert_eq!(n.clat, vec!["phone".to_string()]);
        assert_eq!(n.clat_prefix.unwrap().to_string(), "2001:db8::/32");
        let e = parse(&per_host).unwrap_err();
        assert!(e.0.contains("clat = true needs a [nat64] table"), "{e}");
        let on_server = WIFI.replacen("name = \"server\"", "name = \"server\"\nclat = true", 1);
        let e = parse(&format!("{on_server}\n{nat}")).unwrap_err();
        assert!(e.0.contains("host 'server' is not IPv6-only"), "{e}");
        let e = parse(&format!("{WIFI}\n{nat}clat_prefix = \"64:ff9b::/95\"\n")).unwrap_err();
        assert!(e.0.contains("nat64: clat_prefix:"), "{e}");
    }

    #[test]
    fn run_file_nat64_table_sets_families_and_the_translators_place() {
        let text = format!(
            "{WIFI}\n[nat64]\nat = \"isp\"\nipv6_only = [\"phone\"]\nipv4_only = [\"server\"]\n"
        );
        let c = parse_run_file("n.toml", &text, Path::new("."), None, &no_files).unwrap();
        assert_eq!(c.hosts[0].family, Family::Ipv6Only);
        assert_eq!(c.hosts[1].family, Family::Ipv4Only);
        assert_eq!(c.nat64.as_ref().unwrap().at, "isp");
        let e = |t: &str| {
            parse_run_file(
                "n.toml",
                &format!("{WIFI}\n[nat64]\n{t}"),
                Path::new("."),
                None,
                &no_files,
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

    #[test]
    fn a_change_carries_its_trace_loaded_and_never_a_queue() {
        let files = |p: &Path| -> Result<(String, String), String> {
            match p.to_str() {
                Some("labs/cell.trace") => Ok(("/abs/labs/cell.trace".into(), "5\n10\n".into())),
                _ => Err("No such file or directory".into()),
            }
        };
        let with = |extra: &str| {
            let text = WIFI.replace("state = \"off\"", extra);
            parse_run_file("w.toml", &text, Path::new("labs"), None, &files)
        };
        let c = with("trace = \"cell.trace\"\ndirection = \"down\"").unwrap();
        let Setting::Capacity(link::Capacity::Trace(t)) = &c.changes[0].settings[0] else {
            panic!("{:?}", c.changes[0])
        };
        assert_eq!(t.opportunities_ms, [5, 10]);
        assert_eq!(c.changes[0].direction, Some(Side::Down));
        let json = serde_json::to_value(&c.changes[0]).unwrap();
        assert_eq!(json["capacity"], "trace:/abs/labs/cell.trace");
        assert!(with("queue = \"codel\"")
            .unwrap_err()
            .0
            .contains("queue cannot change while the lab runs"));
        assert!(with("rate = \"1mbit\"\ntrace = \"cell.trace\"")
            .unwrap_err()
            .0
            .contains("give rate or trace, not both"));
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
    fn a_links_profile_sets_its_rates_and_rtt_and_its_own_settings_win() {
        let text = "[[host]]\nname = \"a\"\n[[host]]\nname = \"b\"\n[[link]]\nname = \"l\"\na = \"a\"\nb = \"b\"\nprofile = \"cable\"\nqueue = \"fq_codel\"\n[link.up]\nrate = \"2mbit\"\n";
        let c = parse_run_file("p.toml", text, Path::new(""), None, &no_files).unwrap();
        let l = &c.links[0];
        assert_eq!(l.down.params.capacity, Capacity::Rate(Rate::from_mbit(5)));
        assert_eq!(l.up.params.capacity, Capacity::Rate(Rate::from_mbit(2)));
        assert_eq!(l.down.params.delay, Duration::from_millis(14));
        assert!(l.down.queue.to_string().starts_with("fq_codel"));
        let bad = text.replace("cable", "cabel");
        let e = parse_run_file("p.toml", &bad, Path::new(""), None, &no_files)
            .unwrap_err()
            .0;
        assert!(
            e.contains("link 'l': profile: unknown profile 'cabel'"),
            "{e}"
        );
    }

    #[test]
    fn a_run_files_precision_reaches_the_lab_and_a_bad_one_is_named() {
        let c = parse_run_file("wifi.toml", WIFI, Path::new("."), None, &no_files).unwrap();
        assert_eq!(c.precision, Precision::EXACT);
        let text = format!("precision = \"1ms\"\n{WIFI}");
        let c = parse_run_file("wifi.toml", &text, Path::new("."), None, &no_files).unwrap();
        assert_eq!(c.precision.early, Duration::from_millis(1));
        assert_eq!(serde_json::to_value(&c).unwrap()["precision_ms"], 1.0);
        let bad = format!("precision = \"soon\"\n{WIFI}");
        let e = parse_run_file("wifi.toml", &bad, Path::new("."), None, &no_files)
            .unwrap_err()
            .0;
        assert_eq!(
            e,
            "wifi.toml: precision: cannot read 'soon' (try 10us, 100us, 1ms, or 0)"
        );
    }

    #[test]
    fn run_file_resolves_hosts_links_and_schedule() {
        let c = parse_run_file("wifi.toml", WIFI, Path::new("."), None, &no_files).unwrap();
        assert_eq!(c.seed, 3);
        assert_eq!(c.duration_s, Some(30.0));
        assert_eq!(c.hosts[0].interfaces.len(), 2);
        assert_eq!(c.hosts[1].interfaces[0].ipv4, Ipv4Addr::new(10, 77, 3, 1));
        assert_eq!(c.links[0].down.queue.to_string(), "fifo limit 100");
        assert_eq!(c.links[0].up.queue.to_string(), "fifo limit 1000");
        assert_eq!(c.links[1].up.params.delay, wire::Duration::from_millis(30));
        assert_eq!(c.attach("phone.rmnet0").unwrap(), Attach::Iface(0, 1));
        assert_eq!(c.attach("isp").unwrap(), Attach::Router(0));
        assert_eq!(c.changes[0].at_s, 5.0);
        assert_eq!(c.programs[0].name, "server-1");
        assert!(c.hosts_file().contains("10.77.3.1\tserver server-eth0\n"));
        assert!(c.hosts_file().contains("10.77.2.1\tphone-rmnet0\n"));
    }

    #[test]
    fn slow_start_after_idle_is_on_unless_the_file_or_the_host_turns_it_off() {
        let parse = |t: &str| parse_run_file("s.toml", t, Path::new("."), None, &no_files);
        let c = parse(WIFI).unwrap();
        assert!(c.hosts.iter().all(|h| h.settings.slow_start_after_idle));
        let server = "name = \"server\"\n";
        let c = parse(&WIFI.replacen(
            server,
            &format!("{server}slow_start_after_idle = false\n"),
            1,
        ))
        .unwrap();
        assert!(c.hosts[0].settings.slow_start_after_idle);
        assert!(!c.hosts[1].settings.slow_start_after_idle);
        let c = parse(&format!("slow_start_after_idle = false\n{WIFI}")).unwrap();
        assert!(c.hosts.iter().all(|h| !h.settings.slow_start_after_idle));
        let e = parse(&format!("slow_start_after_idle = \"maybe\"\n{WIFI}"))
            .unwrap_err()
            .0;
        assert!(e.starts_with("s.toml:1:") && e.contains("bool"), "{e}");
    }

    #[test]
    fn set_values_reach_links_directions_hosts_programs_and_the_top_level() {
        let set = |pairs: &[&str]| {
            let sets: Vec<SetValue> = pairs.iter().map(|p| SetValue::parse(p).unwrap()).collect();
            parse_run_file_set("wifi.toml", WIFI, Path::new("."), None, &sets, &no_files)
        };
        let c = set(&[
            "link.cell.rate=20mbit",
            "link.wifi.down.queue=fq_codel",
            "link.core.up.delay=7ms",
            "host.phone.mtu=1400",
            "host.server.slow_start_after_idle=false",
            "program.server-1.run=sleep 2",
            "duration=10s",
        ])
        .unwrap();
        let cell = &c.links[1];
        let mbit20 = link::Capacity::Rate(wire::Rate::from_mbit(20));
        assert_eq!(
            (&cell.up.params.capacity, &cell.down.params.capacity),
            (&mbit20, &mbit20)
        );
        assert_eq!(
            c.links[0].down.queue.to_string().split(' ').next(),
            Some("fq_codel")
        );
        assert_eq!(c.links[0].up.queue.to_string(), "fifo limit 1000");
        assert_eq!(c.links[2].up.params.delay, wire::Duration::from_millis(7));
        assert_eq!(c.links[2].down.params.delay, wire::Duration::from_millis(0));
        assert_eq!(
            (c.hosts[0].settings.mtu, c.hosts[1].settings.mtu),
            (1400, 1500)
        );
        assert!(!c.hosts[1].settings.slow_start_after_idle);
        assert_eq!(c.programs[0].run, "sleep 2");
        assert_eq!(c.duration_s, Some(10.0));
        let e = |p: &str| set(&[p]).unwrap_err().0;
        assert_eq!(
            e("link.wlan.rate=1mbit"),
            "wifi.toml: link.wlan.rate: no [[link]] named 'wlan' (the file has wifi, cell, core)"
        );
        assert!(e("link.cell.rate=fast").contains("link 'cell': rate: cannot read 'fast'"));
        assert!(e("link.cell.wobble=1").contains("unknown setting 'wobble'"));
        assert!(e("host.phone.colour=red").contains("unknown field `colour`"));
        assert!(e("links.cell.rate=1mbit")
            .contains("cannot read key 'links.cell.rate' (try link.NAME.KEY"));
        assert!(e("nat64.at=home").contains("no [nat64]"));
        assert!(SetValue::parse("link.cell.rate").is_err());
        assert_eq!(
            SetValue::parse("host.a.mtu=1400").unwrap().value,
            toml::Value::Integer(1400)
        );
    }

    /// Two hosts and a link, for `[rpm]`.
    const TWO: &str = r#"
        [[host]]
        name = "laptop"
        [[host]]
        name = "cdn"
        [[link]]
        name = "path"
        a = "laptop"
        b = "cdn"
        rate = "20mbit"
    "#;

    #[test]
    fn an_rpm_table_adds_the_server_and_the_client_the_lab_waits_for() {
        let text = format!(
            "{TWO}\n[rpm]\nclient = \"laptop\"\nserver = \"cdn\"\nflows = 4\nload = \"down\"\n"
        );
        let c = parse_run_file("r.toml", &text, Path::new("."), None, &no_files).unwrap();
        c.validate().unwrap();
        let [server, client] = &c.programs[..] else {
            panic!("{:?}", c.programs)
        };
        assert_eq!(
            (server.name.as_str(), server.host.as_str()),
            ("rpm-server", "cdn")
        );
        assert!(!server.wait && server.run.contains("rpm-server --port 4043"));
        assert_eq!(
            (client.name.as_str(), client.host.as_str()),
            ("rpm", "laptop")
        );
        assert!(client.wait && client.at_s > server.at_s);
        assert!(
            client
                .run
                .contains("rpm https://cdn:4043 --flows 4 --load down"),
            "{}",
            client.run
        );
        // The report goes into the run directory when there is one, and the shell reads the
        // line: the expansion is empty without a run directory.
        for (out, want) in [
            ("/tmp/x y", "|down|--out|/tmp/x y/rpm.json|"),
            ("", "|down|"),
        ] {
            let line = client.run.replace("exec latencylab rpm", "printf '|%s'");
            let o = std::process::Command::new("sh")
                .args(["-c", &format!("{line}; echo '|'")])
                .env("LATENCYLAB_OUT", out)
                .output()
                .unwrap();
            let printed = String::from_utf8_lossy(&o.stdout);
            assert!(printed.trim_end().ends_with(want), "{printed}");
        }
        // A sweep or `run --set` reaches its keys.
        let sets = [SetValue::parse("rpm.flows=8").unwrap()];
        let c =
            parse_run_file_set("r.toml", &text, Path::new("."), None, &sets, &no_files).unwrap();
        assert!(
            c.programs[1].run.contains("--flows 8"),
            "{}",
            c.programs[1].run
        );
    }

    #[test]
    fn a_bad_rpm_table_says_what_would_be_accepted() {
        let e = |extra: &str| {
            let text = format!("{TWO}\n[rpm]\n{extra}\n");
            parse_run_file("r.toml", &text, Path::new("."), None, &no_files)
                .unwrap_err()
                .0
        };
        assert!(e("load = \"sideways\"").contains("load = 'sideways' (try both, down or up)"));
        assert!(e("flows = 0").contains("flows = 0 (try 1 to 64)"));
        assert!(e("max_duration = \"10ms\"").contains("at least 100ms"));
        assert!(e("colour = 1").contains("unknown field `colour`"));
        let clash =
            format!("{TWO}\n[[program]]\nname = \"rpm\"\nhost = \"cdn\"\nrun = \"true\"\n[rpm]\n");
        let msg = parse_run_file("r.toml", &clash, Path::new("."), None, &no_files)
            .unwrap_err()
            .0;
        assert!(msg.contains("already named 'rpm'"), "{msg}");
        let sets = [SetValue::parse("rpm.flows=8").unwrap()];
        let msg = parse_run_file_set("r.toml", TWO, Path::new("."), None, &sets, &no_files)
            .unwrap_err()
            .0;
        assert!(msg.contains("no [rpm]"), "{msg}");
    }

    #[test]
    fn run_file_errors_name_the_line_or_the_thing() {
        let e = |t: &str| {
            parse_run_file("x.toml", t, Path::new("."), None, &no_files)
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
            .contains("state: cannot read 'dark' (try on, off, blackhole)"));
    }
}

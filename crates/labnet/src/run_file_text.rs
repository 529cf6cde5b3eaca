//! A [`LabConfig`] written back as the TOML of a run file (docs/run-files.md): what
//! `latencylab demo NAME --export DIR` leaves, so that a user can open a demo's lab, change it
//! and run it with `latencylab run`. The text reads back, through [`crate::run_file`], as the
//! same lab; [`to_run_file`] checks that itself and refuses a lab the format cannot say.
//!
//! Only what differs from the run file's defaults is written (a link direction's settings as
//! [`Direction::settings`] lists them, a host's TCP settings), so a reader sees what the lab is
//! about rather than every default. Not here: reading files or deciding what a lab is.

use std::fmt::Write as _;
use std::path::Path;

use wire::units::format_duration_exact;
use wire::Duration;

use crate::run_file::parse_run_file;
use crate::setting::{Direction, Files, Setting};
use crate::spec::{EcnMode, Family, HostSettings, LabConfig, UsageError};

/// Comments for the text: a header (the lab's purpose, one line each) and a note for some
/// programs, by name, written above its `[[program]]`.
#[derive(Clone, Debug, Default)]
pub struct Notes {
    pub header: Vec<String>,
    pub programs: Vec<(String, String)>,
}

/// `cfg` as a run file. Trace files are named by the paths the lab recorded them under, read
/// back through `files`. Fails when the text would not read back as `cfg` (a lab the run-file
/// format cannot say, such as interface addresses out of the file's order).
pub fn to_run_file(
    cfg: &LabConfig,
    notes: &Notes,
    files: &dyn Files,
) -> Result<String, UsageError> {
    let text = render(cfg, notes);
    let back = parse_run_file("the written run file", &text, Path::new(""), None, files)?;
    let same = |c: &LabConfig| serde_json::to_value(c).expect("plain data serializes");
    if same(&back) != same(cfg) {
        return Err(UsageError(format!(
            "this lab cannot be written as a run file (it reads back differently):\n{text}"
        )));
    }
    Ok(text)
}

/// A TOML string: quoted and escaped.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

/// A time as the run file writes it, exactly (`500ms`, `2s`).
fn time(s: f64) -> String {
    format_duration_exact(Duration::from_nanos((s * 1e9).round() as u64))
}

/// The run-file key of a setting, and its value as TOML.
fn key_value(s: &Setting) -> (&'static str, String) {
    use link::Capacity;
    let value = match s.json_value() {
        serde_json::Value::String(v) => quoted(&v),
        v => v.to_string(),
    };
    match s {
        Setting::Capacity(Capacity::Trace(t)) => ("trace", quoted(&t.name)),
        Setting::Capacity(_) => ("rate", value),
        Setting::Overhead(_) => ("overhead", value),
        _ => (s.field(), value),
    }
}

fn ecn_name(e: EcnMode) -> &'static str {
    match e {
        EcnMode::Off => "off",
        EcnMode::On => "on",
        EcnMode::Passive => "passive",
    }
}

fn render(cfg: &LabConfig, notes: &Notes) -> String {
    let mut t = String::new();
    for l in &notes.header {
        let _ = writeln!(t, "{}", format!("# {l}").trim_end());
    }
    if !notes.header.is_empty() {
        t.push('\n');
    }
    let _ = writeln!(t, "seed = {}", cfg.seed);
    if let Some(d) = cfg.duration_s {
        let _ = writeln!(t, "duration = {}", quoted(&time(d)));
    }
    let default = HostSettings::default();
    for h in &cfg.hosts {
        let _ = writeln!(t, "\n[[host]]\nname = {}", quoted(&h.name));
        let names: Vec<&str> = h.interfaces.iter().map(|i| i.name.as_str()).collect();
        if names != ["eth0"] {
            let list: Vec<String> = names.iter().map(|n| quoted(n)).collect();
            let _ = writeln!(t, "interfaces = [{}]", list.join(", "));
        }
        let s = &h.settings;
        if s.cc != default.cc {
            let _ = writeln!(t, "cc = {}", quoted(&s.cc));
        }
        if s.ecn != default.ecn {
            let _ = writeln!(t, "ecn = {}", quoted(ecn_name(s.ecn)));
        }
        if s.mtu != default.mtu {
            let _ = writeln!(t, "mtu = {}", s.mtu);
        }
        if s.slow_start_after_idle != default.slow_start_after_idle {
            let _ = writeln!(t, "slow_start_after_idle = {}", s.slow_start_after_idle);
        }
        if !h.aliases.is_empty() {
            let list: Vec<String> = h.aliases.iter().map(|n| quoted(n)).collect();
            let _ = writeln!(t, "aliases = [{}]", list.join(", "));
        }
        if cfg.nat64.as_ref().is_some_and(|n| n.clat.contains(&h.name)) {
            let _ = writeln!(t, "clat = true");
        }
    }
    for r in &cfg.routers {
        let _ = writeln!(t, "\n[[router]]\nname = {}", quoted(r));
    }
    let plain = Direction::default().settings();
    for l in &cfg.links {
        let _ = writeln!(
            t,
            "\n[[link]]\nname = {}\na = {}\nb = {}",
            quoted(&l.name),
            quoted(&l.a),
            quoted(&l.b)
        );
        let (up, down) = (l.up.settings(), l.down.settings());
        let (mut only_up, mut only_down) = (String::new(), String::new());
        for ((u, d), p) in up.iter().zip(&down).zip(&plain) {
            if u == d {
                if u != p {
                    let (k, v) = key_value(u);
                    let _ = writeln!(t, "{k} = {v}");
                }
            } else {
                for (s, out) in [(u, &mut only_up), (d, &mut only_down)] {
                    if s != p {
                        let (k, v) = key_value(s);
                        let _ = writeln!(out, "{k} = {v}");
                    }
                }
            }
        }
        for (side, body) in [("up", only_up), ("down", only_down)] {
            if !body.is_empty() {
                let _ = write!(t, "[link.{side}]\n{body}");
            }
        }
    }
    for c in &cfg.changes {
        let _ = writeln!(
            t,
            "\n[[change]]\nat = {}\nlink = {}",
            quoted(&time(c.at_s)),
            quoted(&c.link)
        );
        if let Some(d) = c.direction {
            let _ = writeln!(t, "direction = {}", quoted(d.name()));
        }
        for s in &c.settings {
            let (k, v) = key_value(s);
            let _ = writeln!(t, "{k} = {v}");
        }
    }
    for p in &cfg.programs {
        t.push('\n');
        if let Some((_, note)) = notes.programs.iter().find(|(n, _)| *n == p.name) {
            for l in note.lines() {
                let _ = writeln!(t, "{}", format!("# {l}").trim_end());
            }
        }
        let _ = writeln!(
            t,
            "[[program]]\nname = {}\nhost = {}",
            quoted(&p.name),
            quoted(&p.host)
        );
        if p.at_s != 0.0 {
            let _ = writeln!(t, "at = {}", quoted(&time(p.at_s)));
        }
        let _ = writeln!(t, "run = {}", quoted(&p.run));
        if p.wait {
            let _ = writeln!(t, "wait = true");
        }
    }
    if let Some(n) = &cfg.nat64 {
        let names = |f: Family| -> String {
            let v: Vec<String> = cfg
                .hosts
                .iter()
                .filter(|h| h.family == f)
                .map(|h| quoted(&h.name))
                .collect();
            format!("[{}]", v.join(", "))
        };
        let _ = writeln!(
            t,
            "\n[nat64]\nat = {}\nipv6_only = {}\nipv4_only = {}",
            quoted(&n.at),
            names(Family::Ipv6Only),
            names(Family::Ipv4Only)
        );
        if n.prefix != crate::spec::NAT64_PREFIX {
            let _ = writeln!(t, "prefix = {}", quoted(&n.prefix.to_string()));
        }
        if let Some(p) = &n.clat_prefix {
            let _ = writeln!(t, "clat_prefix = {}", quoted(&p.to_string()));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;

    const LAB: &str = r#"
        seed = 7
        duration = "12500ms"
        [[host]]
        name = "phone"
        interfaces = ["wlan0", "rmnet0"]
        ecn = "on"
        clat = true
        [[host]]
        name = "web"
        aliases = ["img1", "img2"]
        slow_start_after_idle = false
        mtu = 9000
        [[router]]
        name = "isp"
        [[link]]
        name = "wifi"
        a = "phone.wlan0"
        b = "isp"
        rate = "50mbit"
        delay = "2ms"
        jitter = "1ms normal"
        [link.down]
        queue = "dualpi2"
        bleach_ecn = true
        [[link]]
        name = "cell"
        a = "phone.rmnet0"
        b = "isp"
        rate = "10mbit"
        rtt = "61ms"
        pps = 800
        [[link]]
        name = "core"
        a = "isp"
        b = "web"
        [[change]]
        at = "2s"
        link = "wifi"
        state = "blackhole"
        [[change]]
        at = "2500ms"
        link = "cell"
        direction = "up"
        rate = "unlimited"
        [[program]]
        name = "server"
        host = "web"
        run = "exec latencylab probe-server"
        [[program]]
        name = "client"
        host = "phone"
        at = "500ms"
        run = "printf '%s\n' \"a b\" && exec latencylab probe-client web"
        wait = true
        [nat64]
        at = "isp"
        ipv6_only = ["phone"]
        ipv4_only = ["web"]
    "#;

    #[test]
    fn a_written_run_file_reads_back_as_the_same_lab() {
        let cfg = parse_run_file("lab.toml", LAB, Path::new(""), None, &no_files).unwrap();
        let notes = Notes {
            header: vec!["A phone on two paths.".into()],
            programs: vec![("client".into(), "The probe: replace it with yours.".into())],
        };
        let text = to_run_file(&cfg, &notes, &no_files).unwrap();
        assert!(
            text.starts_with("# A phone on two paths.\n\nseed = 7\n"),
            "{text}"
        );
        assert!(
            text.contains("# The probe: replace it with yours.\n[[program]]\nname = \"client\""),
            "{text}"
        );
        // Only what differs from the defaults, and one direction's own values under it.
        assert!(
            text.contains("[link.down]\nqueue = \"dualpi2 ")
                && text.contains("\nbleach_ecn = true\n\n[[link]]\nname = \"cell\""),
            "{text}"
        );
        assert!(!text.contains("corrupt"), "{text}");
        let back = parse_run_file("x.toml", &text, Path::new(""), None, &no_files).unwrap();
        assert_eq!(back, cfg);
    }

    #[test]
    fn a_lab_the_format_cannot_say_is_refused_not_written_wrong() {
        let mut cfg = parse_run_file("lab.toml", LAB, Path::new(""), None, &no_files).unwrap();
        // Addresses come from the order of the hosts in a run file.
        let (a, b) = (
            cfg.hosts[0].interfaces[0].ipv4,
            cfg.hosts[1].interfaces[0].ipv4,
        );
        cfg.hosts[0].interfaces[0].ipv4 = b;
        cfg.hosts[1].interfaces[0].ipv4 = a;
        let e = to_run_file(&cfg, &Notes::default(), &no_files).unwrap_err();
        assert!(
            e.0.starts_with("this lab cannot be written as a run file"),
            "{e}"
        );
    }
}

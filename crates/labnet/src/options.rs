//! The one table of `latencylab shell`'s lab options: every link, host and lab setting the
//! shell takes, declared once with its flag, the words it takes, its unit, its default, its
//! help and where a run file says the same. `shell`'s flags are built from it, the sweep's
//! `[shell]` axes are its entries, and the docs' option table is printed from it
//! ([`markdown_table`]); a test holds each of those to it.
//!
//! Each entry sets one thing ([`Sets`]): a link setting read by [`Setting::parse`] (both ways
//! or one direction), a setting of both hosts, or one of the lab. A value is read once, by
//! [`LabOption::apply`], into [`ShellOptions`]; [`check_value`] reads one value exactly as
//! `shell` would, for checking a sweep before anything runs.
//!
//! Not here: how a run writes its output (`-o`, `--snaplen`, …: options of the run, not of the
//! lab), or parsing the command line (the CLI builds its parser from [`table`]).

use std::path::Path;
use std::sync::OnceLock;

use crate::setting::Files;
use crate::shell::{shell_config, ShellOptions};
use crate::spec::{Side, UsageError};

/// What an option sets.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Sets {
    /// A link setting (a key of [`crate::Setting::parse`]) of the path, both ways (`None`) or
    /// one direction.
    Link {
        key: &'static str,
        side: Option<Side>,
    },
    /// A TCP/IP setting of both hosts.
    Host(HostKey),
    /// A setting of the lab as a whole.
    Lab(LabKey),
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HostKey {
    Cc,
    Ecn,
    Mtu,
    SlowStartAfterIdle,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LabKey {
    Seed,
    Nat64,
    Clat,
    ClatPrefix,
    Server,
    Profile,
    Precision,
}

/// The words an option takes on the command line, and how repeats combine.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Form {
    /// No value: given or not (`--nat64`). A sweep writes `true` or `false`.
    Flag,
    /// One word (`--rate 10mbit`, `--queue 'fifo limit 50'`).
    Text,
    /// One to N words joined by spaces, as netem writes them (`--jitter 5ms normal`).
    Words(usize),
    /// Filters, one per use, joined by `or` (`--drop 'tcp syn' --drop ipv6`).
    Filters,
    /// An unsigned 32-bit count.
    U32,
    /// An unsigned 64-bit number.
    U64,
    /// `0` or `1` (also `true`/`false`), as a sysctl.
    ZeroOne,
}

impl Form {
    /// The values of one option, as given (several for a repeated or many-word option), as
    /// the one text its setting reads.
    pub fn join(self, values: &[String]) -> String {
        match self {
            Form::Filters => values.join(" or "),
            _ => values.join(" "),
        }
    }
}

/// One option of `latencylab shell`.
#[derive(Clone, Debug, PartialEq)]
pub struct LabOption {
    /// The long flag without its dashes (`down-delay`); also its key in a sweep's `[shell]`.
    pub flag: &'static str,
    pub sets: Sets,
    pub form: Form,
    /// What the value is, as help shows it (`RATE`, `TIME [DIST]`).
    pub value_name: &'static str,
    /// The value's unit or kind, for the docs (`bit/s`, `one-way time`).
    pub unit: &'static str,
    /// What holds when the option is not given.
    pub default: &'static str,
    /// A value it accepts (tests and the docs use it).
    pub example: &'static str,
    /// One paragraph of help, as `--help` prints it.
    pub help: String,
    /// Where a run file says the same (docs/run-files.md).
    pub run_file: String,
}

impl LabOption {
    /// `--flag`, for messages.
    pub fn name(&self) -> String {
        format!("--{}", self.flag)
    }

    /// Reads `value` (the option's words joined by [`Form::join`]; `true`/`false` for a
    /// flag) into `o`. Link values are read later, with the others, by [`shell_config`].
    pub fn apply(&self, o: &mut ShellOptions, value: &str) -> Result<(), UsageError> {
        let name = self.name();
        let bad = |try_: &str| UsageError(format!("{name}: cannot read '{value}' (try {try_})"));
        let flag = || match value {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(bad("true, false")),
        };
        let text = || {
            if value.trim().is_empty() {
                Err(bad(self.example))
            } else {
                Ok(value.to_string())
            }
        };
        match self.sets {
            Sets::Link { key, side } => {
                if self.form == Form::Flag {
                    if flag()? {
                        o.link_option(&name, side, key, Some("true"));
                    }
                } else {
                    o.link_option(&name, side, key, Some(text()?));
                }
            }
            Sets::Host(HostKey::Cc) => o.cc = Some(text()?),
            Sets::Host(HostKey::Ecn) => o.ecn = Some(text()?),
            Sets::Host(HostKey::Mtu) => {
                o.mtu = Some(value.parse().map_err(|_| bad("1500, 9000"))?);
            }
            Sets::Host(HostKey::SlowStartAfterIdle) => {
                o.slow_start_after_idle = Some(match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(bad("0, 1")),
                });
            }
            Sets::Lab(LabKey::Seed) => o.seed = Some(value.parse().map_err(|_| bad("0, 1, 2"))?),
            Sets::Lab(LabKey::Nat64) => o.nat64 = flag()?,
            Sets::Lab(LabKey::Clat) => o.clat = flag()?,
            Sets::Lab(LabKey::ClatPrefix) => o.clat_prefix = Some(text()?),
            Sets::Lab(LabKey::Server) => o.server = Some(text()?),
            Sets::Lab(LabKey::Profile) => o.profile = Some(text()?),
            Sets::Lab(LabKey::Precision) => {
                o.precision = crate::lifecycle::Precision::parse(value)
                    .map_err(|e| UsageError(format!("{name}: {e}")))?;
            }
        }
        Ok(())
    }
}

/// A link setting of the path and its options: both ways, server→client, client→server.
struct LinkEntry {
    key: &'static str,
    flags: [Option<&'static str>; 3],
    form: Form,
    value_name: &'static str,
    unit: &'static str,
    default: &'static str,
    example: &'static str,
    /// The both-ways option's help; a setting with per-direction options only writes `{way}`
    /// where its options' help names their direction.
    help: &'static str,
    /// What the per-direction options' help calls the setting.
    noun: &'static str,
}

// A row of the table, every column named at the call: a struct literal would say no more.
#[allow(clippy::too_many_arguments)]
const fn link(
    key: &'static str,
    flags: [Option<&'static str>; 3],
    form: Form,
    value_name: &'static str,
    unit: &'static str,
    default: &'static str,
    example: &'static str,
    help: &'static str,
    noun: &'static str,
) -> LinkEntry {
    LinkEntry {
        key,
        flags,
        form,
        value_name,
        unit,
        default,
        example,
        help,
        noun,
    }
}

/// Every link setting `shell` takes, in `--help`'s order.
const LINKS: &[LinkEntry] = &[
    link(
        "rate",
        [Some("rate"), Some("down"), Some("up")],
        Form::Text,
        "RATE",
        "bit/s, tc units",
        "unlimited",
        "10mbit",
        "Capacity both ways (tc units: 10mbit, 500kbit, 1gbit, 125kbps). Default: unlimited.",
        "Capacity",
    ),
    link(
        "delay",
        [Some("delay"), Some("down-delay"), Some("up-delay")],
        Form::Text,
        "TIME",
        "one-way time",
        "0ms",
        "20ms",
        "One-way propagation delay each way (20ms, 250us, 1.5s).",
        "One-way delay",
    ),
    link(
        "rtt",
        [Some("rtt"), None, None],
        Form::Text,
        "TIME",
        "round-trip time",
        "0ms",
        "40ms",
        "Round-trip propagation delay: each way gets half.",
        "",
    ),
    link(
        "queue",
        [Some("queue"), Some("down-queue"), Some("up-queue")],
        Form::Text,
        "SPEC",
        "tc syntax",
        "fifo limit 1000",
        "codel ecn",
        "Bottleneck queue both ways, tc syntax ('fifo limit 1000', 'bfifo limit 150kb').",
        "Bottleneck queue",
    ),
    link(
        "loss",
        [Some("loss"), Some("down-loss"), Some("up-loss")],
        Form::Text,
        "SPEC",
        "netem syntax",
        "0%",
        "1%",
        "Random loss both ways, netem syntax ('1%', 'gemodel 1% 10% 70% 0.1%').",
        "Random loss",
    ),
    link(
        "trace",
        [None, Some("down-trace"), Some("up-trace")],
        Form::Text,
        "FILE",
        "Mahimahi trace file",
        "none",
        "cell.trace",
        "Capacity {way} from a Mahimahi packet-delivery trace.",
        "Capacity",
    ),
    link(
        "overhead",
        [Some("overhead"), None, None],
        Form::U32,
        "BYTES",
        "bytes per packet",
        "0",
        "38",
        "Bytes of link-layer overhead charged per packet (as netem's rate packetoverhead).",
        "",
    ),
    link(
        "bleach_ecn",
        [Some("bleach-ecn"), None, None],
        Form::Flag,
        "",
        "flag",
        "off",
        "true",
        "Clear the ECN field of every packet on the path, both ways (a middlebox that bleaches \
         ECN).",
        "",
    ),
    link(
        "jitter",
        [Some("jitter"), Some("down-jitter"), Some("up-jitter")],
        Form::Words(4),
        "TIME [DIST]",
        "time, netem syntax",
        "none",
        "5ms normal",
        "Delay variation around the delay, both ways: TIME [uniform|normal|pareto|paretonormal] \
         [CORR%] [reorder]. Keeps packet order unless `reorder` is given (netem reorders).",
        "Delay variation",
    ),
    link(
        "duplicate",
        [
            Some("duplicate"),
            Some("down-duplicate"),
            Some("up-duplicate"),
        ],
        Form::Words(2),
        "PCT [TIME]",
        "percent, time",
        "0%",
        "10%",
        "Duplicate PCT of packets both ways, the copy TIME after the original ('10%', '5% \
         200ms').",
        "Duplicates",
    ),
    link(
        "reorder",
        [Some("reorder"), Some("down-reorder"), Some("up-reorder")],
        Form::Words(2),
        "PCT [CORR]",
        "percent",
        "0%",
        "25% 50%",
        "Send PCT of packets at once, skipping the delay (netem's reorder; needs --delay).",
        "Reordering",
    ),
    link(
        "corrupt",
        [Some("corrupt"), Some("down-corrupt"), Some("up-corrupt")],
        Form::Text,
        "PCT",
        "percent",
        "0%",
        "0.1%",
        "Flip one random bit in PCT of packets both ways ('0.1%').",
        "Bit flips",
    ),
    link(
        "pps",
        [Some("pps"), Some("down-pps"), Some("up-pps")],
        Form::Text,
        "N",
        "packets/s",
        "unlimited",
        "1000",
        "At most N packets per second each way, whatever their size (a router whose CPU is the \
         limit); combines with --rate.",
        "Packet-rate ceiling",
    ),
    link(
        "slot",
        [Some("slot"), Some("down-slot"), Some("up-slot")],
        Form::Words(6),
        "MIN [MAX]",
        "time, netem syntax",
        "none",
        "2ms 6ms packets 16",
        "Deliver in bursts at slot boundaries, netem's slots: MIN [MAX] [packets N] [bytes B].",
        "Slotted delivery",
    ),
    link(
        "drop",
        [Some("drop"), Some("down-drop"), Some("up-drop")],
        Form::Filters,
        "FILTER",
        "filter",
        "none",
        "tcp syn",
        "Drop packets matching FILTER both ways ('tcp syn', 'udp port 443', 'ipv6', 'icmp', \
         'ecn ect1', combined with and/not); repeat for several.",
        "Drop matching packets",
    ),
    link(
        "mtu",
        [Some("link-mtu"), Some("down-link-mtu"), Some("up-link-mtu")],
        Form::Text,
        "BYTES",
        "bytes",
        "none",
        "1400",
        "A narrow path: packets larger than BYTES get ICMP fragmentation needed / Packet Too Big \
         back from the path's entry ('--link-mtu 1400'; IPv4 without DF is fragmented).",
        "A narrow path",
    ),
    link(
        "slow",
        [Some("slow"), None, None],
        Form::Text,
        "FILTER TIME",
        "filter, time",
        "none",
        "ipv6 150ms",
        "Packets matching FILTER take TIME longer each way, without holding back the rest (a \
         slower path for part of the traffic: --slow 'ipv6 150ms').",
        "",
    ),
];

/// The options that are not link settings, in `--help`'s order: (flag, sets, form,
/// value name, unit, default, example, help, run-file key).
type Other = (
    &'static str,
    Sets,
    Form,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static str,
);

const OTHERS: &[Other] = &[
    (
        "server",
        Sets::Lab(LabKey::Server),
        Form::Text,
        "CMD",
        "shell command line",
        "none",
        "latencylab probe-server",
        "A shell command line run in `server` for the life of the lab, started before COMMAND \
         (which starts once it listens, at most 3 s).",
        "a `[[program]]` on the server's host",
    ),
    (
        "profile",
        Sets::Lab(LabKey::Profile),
        Form::Text,
        "NAME",
        "profile name",
        "none",
        "3g",
        "A named network (`latencylab profiles` lists them: 3g, slow-4g, cable, dsl, ...): its \
         rates and round trip, which the link options given override.",
        "`profile` in a `[[link]]`",
    ),
    (
        "nat64",
        Sets::Lab(LabKey::Nat64),
        Form::Flag,
        "",
        "flag",
        "off",
        "true",
        "An IPv6-only client: no IPv4 at all, the lab's DNS64 as resolver, and a NAT64 in front \
         of the IPv4-only server (a carrier's IPv6-only network; see docs/nat64.md).",
        "`[nat64]`",
    ),
    (
        "clat",
        Sets::Lab(LabKey::Clat),
        Form::Flag,
        "",
        "flag",
        "off",
        "true",
        "464XLAT on the IPv6-only network, as mobile carriers deploy it. The client also gets \
         192.0.0.2/29 and an IPv4 default route into a CLAT (a stateless translator on its side \
         of the lab), so IPv4 literals and AF_INET-only programs work through the NAT64. The \
         CLAT's prefix is discovered per RFC 7050 from ipv4only.arpa (see docs/nat64.md).",
        "`clat` in `[nat64]` or `[[host]]`",
    ),
    (
        "clat-prefix",
        Sets::Lab(LabKey::ClatPrefix),
        Form::Text,
        "PREFIX",
        "IPv6 prefix",
        "discovered",
        "64:ff9b::/96",
        "With --clat: the NAT64 prefix the CLAT translates to, instead of discovering it (e.g. \
         64:ff9b::/96).",
        "`clat_prefix` in `[nat64]`",
    ),
    (
        "cc",
        Sets::Host(HostKey::Cc),
        Form::Text,
        "NAME",
        "kernel name",
        "cubic",
        "bbr",
        "TCP congestion control of both hosts (default cubic, whatever this machine uses).",
        "`cc` (top level or `[[host]]`)",
    ),
    (
        "ecn",
        Sets::Host(HostKey::Ecn),
        Form::Text,
        "MODE",
        "on, off, passive",
        "passive",
        "on",
        "TCP ECN of both hosts: on, off, passive (default passive, as Linux).",
        "`ecn` (top level or `[[host]]`)",
    ),
    (
        "mtu",
        Sets::Host(HostKey::Mtu),
        Form::U32,
        "BYTES",
        "bytes",
        "1500",
        "9000",
        "Interface MTU of both hosts (default 1500).",
        "`mtu` (top level or `[[host]]`)",
    ),
    (
        "slow-start-after-idle",
        Sets::Host(HostKey::SlowStartAfterIdle),
        Form::ZeroOne,
        "0|1",
        "sysctl",
        "1",
        "0",
        "TCP slow start after idle of both hosts (net.ipv4.tcp_slow_start_after_idle): 1 (as \
         Linux: an idle connection restarts from the initial window) or 0 (it keeps its window, \
         as many web servers are set: '--slow-start-after-idle 0').",
        "`slow_start_after_idle` (top level or `[[host]]`)",
    ),
    (
        "seed",
        Sets::Lab(LabKey::Seed),
        Form::U64,
        "N",
        "integer",
        "1",
        "7",
        "Seed for every random choice (loss, AQM), so that a run can be repeated.",
        "`seed`",
    ),
    (
        "precision",
        Sets::Lab(LabKey::Precision),
        Form::Text,
        "TIME",
        "time",
        "0",
        "1ms",
        "How far ahead of its time the engine may deliver a packet, so that it wakes less \
         often (default 0: every packet at its own time, to the microsecond). '--precision 1ms' \
         delivers, at each wake-up, every packet due within the next millisecond, trading \
         timing for wake-ups; the delivery error summary.json reports counts the early ones.",
        "`precision` (top level)",
    ),
];

/// Every lab option of `latencylab shell`, in `--help`'s order.
pub fn table() -> &'static [LabOption] {
    static TABLE: OnceLock<Vec<LabOption>> = OnceLock::new();
    TABLE.get_or_init(build)
}

fn build() -> Vec<LabOption> {
    let mut out = Vec::new();
    for l in LINKS {
        let [both, down, up] = l.flags;
        let sides = [
            (both, None, ""),
            (down, Some(Side::Down), "server→client"),
            (up, Some(Side::Up), "client→server"),
        ];
        for (flag, side, way) in sides {
            let Some(flag) = flag else { continue };
            let help = match (side, both) {
                (None, _) => l.help.to_string(),
                _ if l.help.contains("{way}") => l.help.replace("{way}", way),
                // The capacity's and the delay's per-direction options are not "only" a
                // narrowing of the both-ways one: `--down` reads as a setting of its own.
                (Some(_), _) if matches!(l.key, "rate" | "delay") => format!("{} {way}.", l.noun),
                (Some(_), Some(b)) => format!("{} {way} only (as --{b}).", l.noun),
                (Some(_), None) => format!("{} {way}.", l.noun),
            };
            let run_file = match side {
                None => format!("`{}` in `[[link]]`", l.key),
                Some(s) => format!("`{}` in `[link.{}]`", l.key, s.name()),
            };
            out.push(LabOption {
                flag,
                sets: Sets::Link { key: l.key, side },
                form: l.form,
                value_name: l.value_name,
                unit: l.unit,
                default: l.default,
                example: l.example,
                help,
                run_file,
            });
        }
    }
    for &(flag, sets, form, value_name, unit, default, example, help, run_file) in OTHERS {
        out.push(LabOption {
            flag,
            sets,
            form,
            value_name,
            unit,
            default,
            example,
            help: help.to_string(),
            run_file: run_file.to_string(),
        });
    }
    out
}

/// The option `--flag` (given without its dashes).
pub fn find(flag: &str) -> Option<&'static LabOption> {
    table().iter().find(|o| o.flag == flag)
}

/// Every flag, for messages.
pub fn flags() -> String {
    table()
        .iter()
        .map(|o| o.flag)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The options as given, each with its value: the lab `shell` builds from them.
pub fn shell_options<'a, 'b>(
    given: impl IntoIterator<Item = (&'a LabOption, &'b str)>,
) -> Result<ShellOptions, UsageError> {
    let mut o = ShellOptions::default();
    for (opt, value) in given {
        opt.apply(&mut o, value)?;
    }
    Ok(o)
}

/// Reads `value` as the option `flag` exactly as `shell` would, alone in a lab (with the
/// `--nat64` a CLAT option needs); trace files are read through `files` from `dir`. The error
/// says what was wrong with the value and what would do, without the option's name (the
/// caller names where the value was).
pub fn check_value(flag: &str, value: &str, dir: &Path, files: &dyn Files) -> Result<(), String> {
    let opt =
        find(flag).ok_or_else(|| format!("unknown shell option '{flag}' (known: {})", flags()))?;
    let strip = |e: UsageError| {
        let prefix = format!("{}: ", opt.name());
        e.0.strip_prefix(&prefix).map(str::to_string).unwrap_or(e.0)
    };
    let mut o = ShellOptions::default();
    opt.apply(&mut o, value).map_err(strip)?;
    if matches!(opt.sets, Sets::Lab(LabKey::Clat | LabKey::ClatPrefix)) {
        o.nat64 = true;
    }
    // Trace files are named relative to `dir`, as the sweep file's other paths.
    let rooted = |p: &Path| files.read(&dir.join(p));
    shell_config(&o, &rooted).map(|_| ()).map_err(strip)
}

/// The docs' table of the shell's lab options (docs/guide.md holds it between
/// `<!-- shell-options -->` markers; a test compares them): one row per setting, its
/// per-direction options beside it.
pub fn markdown_table() -> String {
    let mut s =
        String::from("| option | value | default | meaning | run file |\n|---|---|---|---|---|\n");
    let t = table();
    let mut i = 0;
    while i < t.len() {
        let first = &t[i];
        let mut group = vec![first];
        if let Sets::Link { key, .. } = first.sets {
            while let Some(n) = t.get(i + group.len()) {
                match n.sets {
                    Sets::Link { key: k, .. } if k == key => group.push(n),
                    _ => break,
                }
            }
        }
        i += group.len();
        let names: Vec<String> = group
            .iter()
            .enumerate()
            .map(|(j, o)| match (j, o.value_name) {
                (0, "") => format!("`--{}`", o.flag),
                (0, v) => format!("`--{} {v}`", o.flag),
                _ => format!("`--{}`", o.flag),
            })
            .collect();
        // A row says what the setting does, then which option takes which direction.
        let (help, sides) = match first.sets {
            Sets::Link { key, side } if group.len() > 1 => {
                let per: Vec<String> = group
                    .iter()
                    .filter_map(|o| match o.sets {
                        Sets::Link { side: Some(s), .. } => Some(format!(
                            "`--{}` {}",
                            o.flag,
                            if s == Side::Down {
                                "server→client"
                            } else {
                                "client→server"
                            }
                        )),
                        _ => None,
                    })
                    .collect();
                let help = match (side, LINKS.iter().find(|l| l.key == key)) {
                    (Some(_), Some(l)) => l.help.replace("{way}", "of one direction"),
                    _ => first.help.clone(),
                };
                (help, format!(" Per direction: {}.", per.join(", ")))
            }
            _ => (first.help.clone(), String::new()),
        };
        let run_file = match first.sets {
            Sets::Link { key, .. } if group.len() > 1 => {
                format!("`{key}` in `[[link]]`, or per direction in `[link.down]`/`[link.up]`")
            }
            _ => first.run_file.clone(),
        };
        let cell = |x: &str| x.replace('|', "\\|");
        s.push_str(&format!(
            "| {} | {} | {} | {}{} | {} |\n",
            cell(&names.join(", ")),
            cell(first.unit),
            cell(first.default),
            cell(&help),
            sides,
            cell(&run_file),
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use std::collections::BTreeSet;

    #[test]
    fn every_flag_is_declared_once_with_help_a_unit_and_an_example_it_accepts() {
        let mut seen = BTreeSet::new();
        let files = |p: &Path| -> Result<(String, String), String> {
            match p.to_str() {
                Some("cell.trace") => Ok(("/lab/cell.trace".into(), "1\n2\n".into())),
                _ => Err("No such file or directory".into()),
            }
        };
        for o in table() {
            assert!(seen.insert(o.flag), "--{} twice", o.flag);
            assert!(!o.help.is_empty() && !o.unit.is_empty() && !o.default.is_empty());
            assert!(!o.run_file.is_empty(), "--{}", o.flag);
            check_value(o.flag, o.example, Path::new(""), &files)
                .unwrap_or_else(|e| panic!("--{} {}: {e}", o.flag, o.example));
        }
        // Every link setting of a run file that a path can have from the start is an option.
        for key in crate::setting::KEYS.split(", ") {
            assert!(
                key == "state"
                    || table()
                        .iter()
                        .any(|o| matches!(o.sets, Sets::Link { key: k, .. } if k == key)),
                "link setting '{key}' has no shell option"
            );
        }
    }

    #[test]
    fn a_bad_value_is_refused_with_what_would_do_and_without_the_flag() {
        let e = |f: &str, v: &str| check_value(f, v, Path::new(""), &no_files).unwrap_err();
        assert_eq!(
            e("down", "10mbits"),
            "cannot read '10mbits' (try 10mbit, 500kbit, 1gbit)"
        );
        assert!(e("down-jitter", "5ms gaussian").contains("'5ms gaussian'"));
        assert_eq!(e("seed", "-1"), "cannot read '-1' (try 0, 1, 2)");
        assert_eq!(
            e("precision", "soon"),
            "cannot read 'soon' (try 10us, 100us, 1ms, or 0)"
        );
        assert!(e("mtu", "500").starts_with("cannot use 500"));
        assert_eq!(e("nat64", "yes"), "cannot read 'yes' (try true, false)");
        assert!(e("clat-prefix", "64:ff9b::/95").contains("64:ff9b::/96"));
        assert!(e("sede", "1").starts_with("unknown shell option 'sede' (known: rate, down"));
        assert!(e("up-trace", "gone.trace").contains("cannot read trace file"));
    }

    #[test]
    fn options_read_into_the_shells_lab_per_direction_over_both_ways() {
        let given = [
            (find("down-delay").unwrap(), "30ms"),
            (find("delay").unwrap(), "10ms"),
            (find("drop").unwrap(), "tcp syn or ipv6"),
            (find("bleach-ecn").unwrap(), "true"),
            (find("slow-start-after-idle").unwrap(), "0"),
            (find("nat64").unwrap(), "false"),
        ];
        let o = shell_options(given).unwrap();
        assert!(!o.nat64);
        assert_eq!(o.slow_start_after_idle, Some(false));
        let c = shell_config(&o, &no_files).unwrap();
        let l = &c.links[0];
        assert_eq!(l.down.params.delay, wire::Duration::from_millis(30));
        assert_eq!(l.up.params.delay, wire::Duration::from_millis(10));
        assert_eq!(l.up.params.impair.drop.len(), 2);
        assert!(l.down.params.bleach_ecn);
        assert_eq!(
            Form::Filters.join(&["tcp syn".into(), "ipv6".into()]),
            "tcp syn or ipv6"
        );
    }

    #[test]
    fn the_guides_table_of_shell_options_is_this_tables() {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/guide.md");
        let guide = std::fs::read_to_string(&p).unwrap();
        let block = guide
            .split_once("<!-- shell-options -->\n")
            .and_then(|(_, rest)| rest.split_once("<!-- /shell-options -->"))
            .map(|(block, _)| block);
        if block != Some(markdown_table().as_str()) {
            let fresh = std::env::temp_dir().join("shell-options.md");
            std::fs::write(&fresh, markdown_table()).unwrap();
            panic!(
                "docs/guide.md's <!-- shell-options --> block is not markdown_table(): it is in {}",
                fresh.display()
            );
        }
    }

    #[test]
    fn the_docs_table_has_a_row_per_setting_naming_every_flag() {
        let md = markdown_table();
        for o in table() {
            assert!(md.contains(&format!("`--{}", o.flag)), "--{}", o.flag);
        }
        assert!(md.contains(
            "| `--jitter TIME [DIST]`, `--down-jitter`, `--up-jitter` | time, netem syntax | none |"
        ));
        // A header, a rule, and one row per link setting or other option.
        assert_eq!(md.lines().count(), 2 + LINKS.len() + OTHERS.len());
    }
}

//! Every demo, declared once ([`DEMOS`]): its help, its parameters (name, the `--option` of
//! `latencylab demo NAME` and the key of a sweep's `[demo]` table and axes; what values it
//! takes and why its bounds are what they are; its default), and the two functions of its
//! module that run it. The CLI builds each demo's command from its declaration and reads the
//! options here, and a sweep checks its values here, so a parameter a demo gains is an option
//! and a sweep axis at once; a test of the CLI fails when a demo's options and its declaration
//! differ.
//!
//! Not here: what a demo does with a value, or how it runs (each demo's module).

use std::fmt;
use std::path::PathBuf;

use anyhow::Result;

use crate::common::{Outcome, Run};

/// What values a parameter takes.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// A time with its unit (`30s`, `250ms`), from `min_s` to `max_s`. A bare number is
    /// refused: its unit would be a guess.
    Time { min_s: f64, max_s: f64 },
    /// A whole number from `min` to `max`.
    Count { min: u64, max: u64 },
    /// A number from `min` to `max`, its unit in the parameter's name (`down-mbit`).
    Number { min: f64, max: f64 },
    /// One of these words.
    Word(&'static [&'static str]),
    /// `bdp` or a number of packets from 2 to 100000 (a FIFO's size).
    Packets,
    /// On or off: `--NAME` given or not; a sweep writes `true` or `false`.
    Flag,
    /// A file's path.
    File,
}

/// One parameter of a demo: what `latencylab demo NAME --help` shows and what a sweep sets.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    /// Why the bounds are what they are, for the error message ("the Wi-Fi comes back at 20 s").
    pub why: &'static str,
    /// The option's help line.
    pub help: &'static str,
    /// Its value when not given (`None`: the demo decides; a flag is off).
    pub default: Option<&'static str>,
    /// What `--help` calls its value (`TIME`, `N`).
    pub value_name: &'static str,
}

/// A parameter's value, read.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Seconds(f64),
    Count(u64),
    Number(f64),
    Text(String),
    Flag(bool),
}

impl Value {
    pub fn seconds(&self) -> f64 {
        match self {
            Value::Seconds(s) | Value::Number(s) => *s,
            Value::Count(n) => *n as f64,
            _ => f64::NAN,
        }
    }
}

/// A value a parameter does not take: the message names the value and what would be
/// accepted; the caller adds which option or key it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError(pub String);

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParamError {}

impl Param {
    /// Reads `text` as this parameter's value.
    pub fn read(&self, text: &str) -> Result<Value, ParamError> {
        let why = if self.why.is_empty() {
            String::new()
        } else {
            format!("; {}", self.why)
        };
        let bad =
            |accepted: String| Err(ParamError(format!("cannot use '{text}' ({accepted}{why})")));
        match self.kind {
            Kind::Time { min_s, max_s } => {
                let range = format!("a time from {} to {}", fmt_s(min_s), fmt_s(max_s));
                match wire::units::parse_time(text) {
                    Ok(d) if (min_s..=max_s).contains(&d.as_secs_f64()) => {
                        Ok(Value::Seconds(d.as_secs_f64()))
                    }
                    Ok(_) => bad(range),
                    Err(_) => {
                        // A bare number: suggest the unit that puts it in range, if one
                        // does; else the range's own ends say what to write.
                        let hint = match text.parse::<f64>() {
                            Ok(x) if (min_s..=max_s).contains(&x) => format!(", e.g. {text}s"),
                            Ok(x) if (min_s..=max_s).contains(&(x / 1e3)) => {
                                format!(", e.g. {text}ms")
                            }
                            Ok(_) => format!(", e.g. {}", fmt_s(min_s)),
                            Err(_) => String::new(),
                        };
                        bad(format!("{range}, with its unit{hint}"))
                    }
                }
            }
            Kind::Count { min, max } => match text.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(Value::Count(n)),
                _ => bad(format!("from {min} to {max}")),
            },
            Kind::Number { min, max } => match text.parse::<f64>() {
                Ok(x) if (min..=max).contains(&x) => Ok(Value::Number(x)),
                _ => bad(format!("a number from {min} to {max}")),
            },
            Kind::Word(words) => {
                if words.contains(&text) {
                    Ok(Value::Text(text.into()))
                } else {
                    bad(format!("one of {}", words.join(", ")))
                }
            }
            Kind::Packets => {
                if text == "bdp"
                    || text
                        .parse::<u32>()
                        .is_ok_and(|n| (2..=100_000).contains(&n))
                {
                    Ok(Value::Text(text.into()))
                } else {
                    bad("bdp or a number of packets from 2 to 100000".into())
                }
            }
            Kind::Flag => match text {
                "true" => Ok(Value::Flag(true)),
                "false" => Ok(Value::Flag(false)),
                _ => bad("true or false".into()),
            },
            Kind::File => {
                if text.is_empty() {
                    bad("a file's path".into())
                } else {
                    Ok(Value::Text(text.into()))
                }
            }
        }
    }
}

/// `30s`, `250ms`: a bound as a user writes it.
fn fmt_s(s: f64) -> String {
    if s < 1.0 {
        format!("{}ms", (s * 1e3).round())
    } else {
        format!("{s}s")
    }
}

/// One demo, declared: what `latencylab demo --help` says of it, its parameters (besides
/// `seed`, which every demo has), its runs as run files and the whole experiment. The CLI
/// builds each demo's command from this, a sweep checks its values here and `--export`
/// writes the runs, so a demo is added by declaring it in [`DEMOS`].
#[derive(Clone, Copy, Debug)]
pub struct Declaration {
    pub name: &'static str,
    /// What it compares and how long its defaults take.
    pub about: &'static str,
    /// The options of its `--help` example, after `latencylab demo NAME -o out/NAME`.
    pub example: &'static str,
    /// What it leaves in its directory DIR, after "Leaves ".
    pub leaves: &'static str,
    pub params: &'static [Param],
    /// Its runs as `latencylab run` would run them: what `--export` writes.
    pub runs: fn(&Args) -> Result<Vec<Run>>,
    /// The whole experiment: its runs, their analysis, the table, the checks and the report.
    pub run: fn(&Args) -> Result<Outcome<()>>,
}

/// Every demo's seed: the seed of every random choice in its labs.
pub const SEED: Param = Param {
    name: "seed",
    kind: Kind::Count {
        min: 0,
        max: u64::MAX,
    },
    why: "",
    help: "Seed for every random choice in the labs",
    default: Some("1"),
    value_name: "N",
};

impl Declaration {
    /// The parameter `name`, `seed` included.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        if name == "seed" {
            return Some(&SEED);
        }
        self.params.iter().find(|p| p.name == name)
    }

    /// Reads `text` as the parameter `name`; the message names both and, for an unknown
    /// name, the parameters there are.
    pub fn read(&self, name: &str, text: &str) -> Result<Value, ParamError> {
        match self.param(name) {
            Some(p) => p.read(text),
            None => {
                let known: Vec<&str> = self.params.iter().map(|p| p.name).chain(["seed"]).collect();
                Err(ParamError(format!(
                    "demo {} has no parameter '{name}' (known: {})",
                    self.name,
                    known.join(", ")
                )))
            }
        }
    }
}

/// What a demo is run with: where it writes, its seed, and each declared parameter's value
/// (read by [`Declaration::read`], or its default).
#[derive(Clone, Debug)]
pub struct Args {
    pub out_dir: PathBuf,
    pub seed: u64,
    /// No progress bar.
    pub quiet: bool,
    demo: &'static Declaration,
    values: Vec<(&'static str, Value)>,
}

impl Args {
    /// The demo `d` with every parameter at its default, writing into `out_dir`.
    pub fn new(d: &'static Declaration, out_dir: PathBuf) -> Args {
        let values = d
            .params
            .iter()
            .filter_map(|p| match (p.kind, p.default) {
                (Kind::Flag, _) => Some((p.name, Value::Flag(false))),
                (_, Some(text)) => Some((
                    p.name,
                    p.read(text)
                        .unwrap_or_else(|e| panic!("demo {}: --{}'s default: {e}", d.name, p.name)),
                )),
                (_, None) => None,
            })
            .collect();
        Args {
            out_dir,
            seed: 1,
            quiet: false,
            demo: d,
            values,
        }
    }

    /// The demo `demo` with `values` set over its defaults (names as its options have them).
    pub fn of(demo: &str, out_dir: PathBuf, values: &[(&str, &str)]) -> Result<Args, ParamError> {
        let d = find(demo).ok_or_else(|| {
            ParamError(format!("no demo '{demo}' (known: {})", names().join(", ")))
        })?;
        let mut a = Args::new(d, out_dir);
        for (name, text) in values {
            a.set(name, text)?;
        }
        Ok(a)
    }

    /// Sets the parameter `name` (or the seed) from `text`.
    pub fn set(&mut self, name: &str, text: &str) -> Result<(), ParamError> {
        let d = self.demo;
        let v = d.read(name, text)?;
        if name == "seed" {
            self.seed = match v {
                Value::Count(n) => n,
                _ => unreachable!("the seed is a count"),
            };
            return Ok(());
        }
        let p = d.param(name).expect("read found it").name;
        self.values.retain(|(n, _)| *n != p);
        self.values.push((p, v));
        Ok(())
    }

    /// The value of `name`; `None` when it has no default and was not given. A name the
    /// demo does not declare is a bug in the demo.
    fn value(&self, name: &str) -> Option<&Value> {
        assert!(
            self.demo.param(name).is_some(),
            "demo {} reads its undeclared parameter '{name}'",
            self.demo.name
        );
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// A time parameter, s.
    pub fn seconds(&self, name: &str) -> f64 {
        self.value(name).map_or(f64::NAN, Value::seconds)
    }

    /// A time parameter, ms.
    pub fn ms(&self, name: &str) -> f64 {
        self.seconds(name) * 1e3
    }

    /// A count parameter.
    pub fn count(&self, name: &str) -> u64 {
        match self.value(name) {
            Some(Value::Count(n)) => *n,
            v => panic!("demo {}: '{name}' is not a count: {v:?}", self.demo.name),
        }
    }

    /// A number parameter, if given or defaulted.
    pub fn number(&self, name: &str) -> Option<f64> {
        match self.value(name) {
            Some(Value::Number(x)) => Some(*x),
            None => None,
            v => panic!("demo {}: '{name}' is not a number: {v:?}", self.demo.name),
        }
    }

    /// A word, packets or file parameter, if given or defaulted.
    pub fn text(&self, name: &str) -> Option<&str> {
        match self.value(name) {
            Some(Value::Text(t)) => Some(t),
            None => None,
            v => panic!("demo {}: '{name}' is not text: {v:?}", self.demo.name),
        }
    }

    /// A flag parameter.
    pub fn flag(&self, name: &str) -> bool {
        matches!(self.value(name), Some(Value::Flag(true)))
    }

    /// Whether the demo has the parameter `name`: for code several demos share, where only
    /// some of them have it.
    pub fn declares(&self, name: &str) -> bool {
        self.demo.param(name).is_some()
    }
}

/// A demo's runs without the keys it reads them back by.
fn keyless<K>(runs: Result<Vec<(K, Run)>>) -> Result<Vec<Run>> {
    Ok(runs?.into_iter().map(|(_, r)| r).collect())
}

/// A demo's outcome without its typed results (`results.json` has them).
fn erased<R>(o: Result<Outcome<R>>) -> Result<Outcome<()>> {
    o.map(Outcome::erase)
}

const fn time(
    name: &'static str,
    min_s: f64,
    max_s: f64,
    default: &'static str,
    why: &'static str,
    help: &'static str,
) -> Param {
    Param {
        name,
        kind: Kind::Time { min_s, max_s },
        why,
        help,
        default: Some(default),
        value_name: "TIME",
    }
}

const fn count(
    name: &'static str,
    min: u64,
    max: u64,
    default: &'static str,
    why: &'static str,
    help: &'static str,
) -> Param {
    Param {
        name,
        kind: Kind::Count { min, max },
        why,
        help,
        default: Some(default),
        value_name: "N",
    }
}

const fn flag(name: &'static str, help: &'static str) -> Param {
    Param {
        name,
        kind: Kind::Flag,
        why: "",
        help,
        default: None,
        value_name: "",
    }
}

/// A run's length, 5 s to 10 min.
const fn duration(default: &'static str, why: &'static str, help: &'static str) -> Param {
    time("duration", 5.0, 600.0, default, why, help)
}

/// An RTT of a web demo, 1 ms to 2 s.
const fn rtt(name: &'static str, default: &'static str, help: &'static str) -> Param {
    time(name, 0.001, 2.0, default, "", help)
}

const NO_CHROMIUM: Param = flag(
    "no-chromium",
    "Do not load the page in headless Chromium even where it is installed",
);

/// Every demo, in the order `latencylab demo --help` lists them.
pub const DEMOS: &[Declaration] = &[
    Declaration {
        name: "bufferbloat",
        about: "A home line (10 Mbit/s down, 1 up, 20 ms) with a streaming download and a \
                latency probe, once with a FIFO queue and once with CoDel + ECN (about 75 s \
                with the default duration)",
        example: "--duration 30s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/fifo and DIR/codel",
        params: &[duration(
            "30s",
            "the FIFO needs several seconds to fill",
            "Length of each run: a time (30s, 1m)",
        )],
        runs: |a| keyless(Ok(crate::bufferbloat::runs(a))),
        run: |a| erased(crate::bufferbloat::run(a)),
    },
    Declaration {
        name: "l4s",
        about: "A video call on a 10 Mbit/s, 20 ms line shared with three downloads: FIFO with \
                a classic call, DualPI2 with an L4S call, and DualPI2 behind a hop that bleaches \
                ECN (about 110 s with the default duration)",
        example: "--duration 20s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/classic, DIR/l4s and DIR/bleached",
        params: &[duration(
            "30s",
            "the call needs a few seconds to settle",
            "Length of the call in each run: a time (30s, 1m)",
        )],
        runs: |a| keyless(Ok(crate::l4s::runs(a))),
        run: |a| erased(crate::l4s::run(a)),
    },
    Declaration {
        name: "notsent-lowat",
        about: "Screen sharing over a 400 kbit/s DSL uplink with a 120 KB send buffer: frames \
                written while the socket takes them, then with TCP_NOTSENT_LOWAT 16 KB (about \
                70 s with the default duration)",
        example: "--duration 20s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/unbounded and DIR/lowat",
        params: &[duration(
            "30s",
            "the send buffer needs seconds to fill",
            "Length of each run: a time (30s, 1m)",
        )],
        runs: |a| keyless(Ok(crate::notsent_lowat::runs(a))),
        run: |a| erased(crate::notsent_lowat::run(a)),
    },
    Declaration {
        name: "tfo",
        about: "Many short connections with one request each over a 100 ms RTT, without and \
                with TCP Fast Open, then both again with late duplicates of the client's packets \
                (about 50 s with the default number of requests)",
        example: "--requests 20",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/plain, DIR/tfo, DIR/duplicate-plain and DIR/duplicate-tfo",
        params: &[count(
            "requests",
            3,
            1000,
            "30",
            "the first one fetches the cookie",
            "Requests per run, each on a connection of its own (from 3 to 1000)",
        )],
        runs: |a| keyless(Ok(crate::tfo::runs(a))),
        run: |a| erased(crate::tfo::run(a)),
    },
    Declaration {
        name: "handshake-cdf",
        about: "Short connections from a home line to servers at a measured spread of RTTs, and \
                the CDF of their handshake times (about 5 s)",
        example: "--servers 20 --per-server 5",
        leaves: "DIR/report.html, DIR/handshake-cdf.png, DIR/results.json, and the lab's \
                 captures and logs in DIR/browsing",
        params: &[
            count(
                "servers",
                2,
                60,
                "20",
                "",
                "Servers, each at its own round trip (from 2 to 60)",
            ),
            count(
                "per-server",
                1,
                50,
                "5",
                "",
                "Connections to each server (from 1 to 50)",
            ),
        ],
        runs: |a| keyless(Ok(crate::handshake_cdf::runs(a).into())),
        run: |a| erased(crate::handshake_cdf::run(a)),
    },
    Declaration {
        name: "pipelining",
        about: "The seed's 159-resource newsletter page over 6 HTTP/1.1 connections, with and \
                without pipelining, at 100 ms and 300 ms RTT (about 20 s)",
        example: "",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/no-pipelining, DIR/pipelining, DIR/no-pipelining-300ms and \
                 DIR/pipelining-300ms",
        params: &[
            rtt("rtt", "100ms", "The first RTT: a time (100ms)"),
            rtt("rtt2", "300ms", "The second, larger RTT: a time (300ms)"),
        ],
        runs: |a| keyless(crate::pipelining::runs(a)),
        run: |a| erased(crate::pipelining::run(a)),
    },
    Declaration {
        name: "conn-reuse",
        about: "A news front page over HTTP/1.1 at 250 ms RTT, its requests placed by two \
                connection managers: `bound` (wait for the connection opened for you) and `pool` \
                (take whichever frees up first) (about 30 s)",
        example: "",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/bound, DIR/pool, DIR/bound-consolidated and DIR/pool-consolidated",
        params: &[
            rtt("rtt", "250ms", "The RTT: a time (250ms)"),
            Param {
                name: "down-mbit",
                kind: Kind::Number {
                    min: 0.1,
                    max: 1000.0,
                },
                why: "",
                help: "The line's rate down, Mbit/s (e.g. 25)",
                default: Some("10"),
                value_name: "MBIT",
            },
            Param {
                name: "up-mbit",
                kind: Kind::Number {
                    min: 0.1,
                    max: 1000.0,
                },
                why: "",
                help: "The line's rate up, Mbit/s (a fifth of --down-mbit unless given)",
                default: None,
                value_name: "MBIT",
            },
            Param {
                name: "buffer",
                kind: Kind::Packets,
                why: "",
                help: "The line's FIFO each way: bdp (rate × RTT) or a number of packets (e.g. \
                       1000)",
                default: Some("bdp"),
                value_name: "PACKETS|bdp",
            },
            Param {
                name: "html-scan",
                kind: Kind::Word(&["stream", "whole"]),
                why: "",
                help: "When page-load finds the HTML's references: stream (as it arrives) or \
                       whole",
                default: Some("stream"),
                value_name: "WHEN",
            },
            Param {
                name: "page",
                kind: Kind::File,
                why: "",
                help: "Load this page file instead of the news page (its host names must be the \
                       lab's)",
                default: None,
                value_name: "FILE",
            },
        ],
        runs: |a| keyless(crate::conn_reuse::runs(a)),
        run: |a| erased(crate::conn_reuse::run(a)),
    },
    Declaration {
        name: "cwnd-reuse",
        about: "A photo page over HTTP/1.1 at 250 ms RTT, then clicks on 25 kB photos over the \
                idle connection idle longest or the one that moved the largest burst, with the \
                server keeping its window after idle and (control) not (about 90 s)",
        example: "",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/oldest, DIR/largest-burst, DIR/oldest-ssai1 and DIR/largest-burst-ssai1",
        params: &[
            rtt("rtt", "250ms", "The RTT: a time (250ms)"),
            time(
                "idle",
                0.1,
                60.0,
                "3s",
                "",
                "How long the connections sit idle before each click: a time (3s)",
            ),
            count("clicks", 1, 3, "3", "", "Clicks per run, 1 to 3"),
            flag(
                "no-control",
                "Skip the control runs with the server's tcp_slow_start_after_idle=1",
            ),
        ],
        runs: |a| keyless(crate::cwnd_reuse::runs(a)),
        run: |a| erased(crate::cwnd_reuse::run(a)),
    },
    Declaration {
        name: "http-parallel",
        about: "A sharded portal page (6 host names, one server) on a 40 ms line over 36, 6 and \
                1 HTTP/1.1 connections and over HTTP/2, and in headless Chromium where installed \
                (about 40 s)",
        example: "",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/36-conns, DIR/6-conns, DIR/1-conn, DIR/h2, DIR/h2-coalesced and \
                 DIR/chromium",
        params: &[NO_CHROMIUM],
        runs: |a| keyless(crate::http_parallel::runs(a)),
        run: |a| erased(crate::http_parallel::run(a)),
    },
    Declaration {
        name: "hol-blocking",
        about: "One page over HTTP/1.1 (6 connections), HTTP/2 and HTTP/3 (sequential and \
                round-robin scheduling) at 40 ms RTT under 0, 1, 2, 5 % and bursty loss, and in \
                headless Chromium over each where installed (about 2 minutes)",
        example: "--runs 2",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/PROTOCOL-lossL-sS (PROTOCOL: h1, h2, h3-seq, h3-rr; L: 0, 1, 2, 5, \
                 bursty) and DIR/chromium-h1, DIR/chromium-h2, DIR/chromium-h3",
        params: &[
            count(
                "runs",
                1,
                20,
                "3",
                "runs per protocol and loss setting, each its own seed",
                "Runs per protocol and loss setting, each with the next seed from the first one",
            ),
            NO_CHROMIUM,
        ],
        runs: |a| keyless(crate::hol_blocking::runs(a)),
        run: |a| erased(crate::hol_blocking::run(a)),
    },
    Declaration {
        name: "nagle",
        about: "A request/response program writing each 70-byte message as 28 + 42 bytes over a \
                500 ms satellite path: Nagle on, TCP_NODELAY, and one writev() (about 80 s with \
                the default duration)",
        example: "--duration 20s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/nagle, DIR/nodelay and DIR/writev",
        params: &[duration(
            "20s",
            "an exchange takes up to 1.5 s",
            "How long each run's client keeps exchanging: a time (20s, 1m)",
        )],
        runs: |a| keyless(Ok(crate::nagle::runs(a))),
        run: |a| erased(crate::nagle::run(a)),
    },
    Declaration {
        name: "pps",
        about: "One bulk TCP download through a hop that forwards at most N packets a second, at \
                MTU 1500 and at MTU 9000 (about 50 s with the default duration)",
        example: "--duration 10s --pps 1000",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/mtu1500 and DIR/mtu9000",
        params: &[
            duration(
                "20s",
                "TCP needs a few seconds to fill the hop",
                "Length of each run's transfer: a time (20s, 1m)",
            ),
            count(
                "pps",
                100,
                100_000,
                "1000",
                "packets per second",
                "The hop's ceiling, packets per second each way (from 100 to 100000)",
            ),
        ],
        runs: |a| keyless(Ok(crate::pps::runs(a))),
        run: |a| erased(crate::pps::run(a)),
    },
    Declaration {
        name: "delayed-ack",
        about: "A bulk upload in 1000-byte writes into an 8 KB receive buffer on a 100 Mbit/s \
                LAN, the receiver deferring its ACKs (Linux's default), then with TCP_QUICKACK \
                after every read (about 75 s with the default duration)",
        example: "--duration 10s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/delayed and DIR/quickack",
        params: &[duration(
            "30s",
            "the transfer needs a few seconds",
            "Length of each run: a time (30s, 1m)",
        )],
        runs: |a| keyless(Ok(crate::delayed_ack::runs(a))),
        run: |a| erased(crate::delayed_ack::run(a)),
    },
    Declaration {
        name: "fallback",
        about: "A phone with Wi-Fi and cellular whose Wi-Fi passes nothing from 2 s to 20 s, \
                making a request a second: plain connect, an RFC 8305 race with a Better Route \
                probe, and MPTCP (about 105 s with the default duration)",
        example: "--duration 35s",
        leaves: "DIR/report.html, DIR/*.png, DIR/results.json, and each run's captures and logs \
                 in DIR/wifi-only, DIR/fallback and DIR/mptcp",
        params: &[time(
            "duration",
            23.0,
            300.0,
            "35s",
            "the Wi-Fi comes back at 20 s",
            "How long the phone makes requests: a time (35s), from 23s (the Wi-Fi comes back \
             at 20 s)",
        )],
        runs: |a| keyless(Ok(crate::fallback::runs(a))),
        run: |a| erased(crate::fallback::run(a)),
    },
    Declaration {
        name: "nat64",
        about: "One small client per class of app on an IPv6-only network (host name, IPv4 \
                literal, AF_INET-only, \"is IPv4 up?\" preflight, RFC 7050 local synthesis), each \
                through ipv6-check, then with 464XLAT (about 5 s)",
        example: "",
        leaves: "DIR/report.html, DIR/results.json, and each run's evidence (strace, captures, \
                 ipv6-check's report) in DIR/ipv6-only/SAMPLE and DIR/clat/SAMPLE",
        params: &[],
        runs: |a| keyless(Ok(crate::nat64::runs(a))),
        run: |a| erased(crate::nat64::run(a)),
    },
    Declaration {
        name: "responsiveness",
        about: "Responsiveness under working conditions (RPM) on the bufferbloat demo's home \
                line under FIFO, CoDel, FQ-CoDel, PIE and DualPI2, each loaded round trip taken \
                apart queue by queue (about 80 s with the default duration)",
        example: "--duration 30s",
        leaves: "DIR/report.html, DIR/parts.png, DIR/results.json, and each run's captures and \
                 logs in DIR/fifo, DIR/codel, DIR/fq-codel, DIR/pie and DIR/dualpi2",
        params: &[time(
            "duration",
            5.0,
            120.0,
            "15s",
            "the test needs a few 1 s intervals to find working conditions",
            "Each test's time limit: a time (15s); a test that finds stable working conditions \
             sooner ends sooner",
        )],
        runs: |a| keyless(Ok(crate::responsiveness::runs(a))),
        run: |a| erased(crate::responsiveness::run(a)),
    },
];

/// The demo `name`.
pub fn find(name: &str) -> Option<&'static Declaration> {
    DEMOS.iter().find(|d| d.name == name)
}

/// The demos' names, for messages.
pub fn names() -> Vec<&'static str> {
    DEMOS.iter().map(|d| d.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_time_needs_its_unit_and_its_range() {
        let d = find("pipelining").unwrap();
        assert_eq!(d.read("rtt", "100ms").unwrap(), Value::Seconds(0.1));
        let e = d.read("rtt", "100").unwrap_err().0;
        assert_eq!(
            e,
            "cannot use '100' (a time from 1ms to 2s, with its unit, e.g. 100ms)"
        );
        // Neither seconds nor milliseconds: the range's low end as the example.
        let e = find("bufferbloat")
            .unwrap()
            .read("duration", "3")
            .unwrap_err()
            .0;
        assert!(
            e.starts_with("cannot use '3' (a time from 5s to 600s, with its unit, e.g. 5s;"),
            "{e}"
        );
        let e = find("nagle").unwrap().read("duration", "20").unwrap_err().0;
        assert!(
            e.starts_with("cannot use '20' (a time from 5s to 600s, with its unit, e.g. 20s;"),
            "{e}"
        );
        let e = d.read("rtt", "3s").unwrap_err().0;
        assert_eq!(e, "cannot use '3s' (a time from 1ms to 2s)");
        let f = find("fallback").unwrap();
        let e = f.read("duration", "20s").unwrap_err().0;
        assert_eq!(
            e,
            "cannot use '20s' (a time from 23s to 300s; the Wi-Fi comes back at 20 s)"
        );
    }

    #[test]
    fn counts_words_flags_and_packets_are_read_as_declared() {
        let c = find("conn-reuse").unwrap();
        assert_eq!(c.read("buffer", "bdp").unwrap(), Value::Text("bdp".into()));
        assert_eq!(
            c.read("buffer", "1000").unwrap(),
            Value::Text("1000".into())
        );
        assert!(c.read("buffer", "big").is_err());
        // What the demo's own reader takes, no more: a bad value never reaches the demo.
        for bad in ["1", "0", "100001"] {
            assert!(c.read("buffer", bad).is_err(), "{bad}");
            assert!(crate::conn_reuse::Buffer::parse(bad).is_err(), "{bad}");
        }
        assert!(c
            .read("html-scan", "lazy")
            .unwrap_err()
            .0
            .contains("stream, whole"));
        assert_eq!(c.read("down-mbit", "2.5").unwrap(), Value::Number(2.5));
        let w = find("cwnd-reuse").unwrap();
        assert_eq!(w.read("no-control", "true").unwrap(), Value::Flag(true));
        assert!(w.read("clicks", "4").unwrap_err().0.contains("from 1 to 3"));
        assert_eq!(w.read("seed", "7").unwrap(), Value::Count(7));
    }

    #[test]
    fn an_unknown_parameter_or_demo_names_what_there_is() {
        let e = find("nagle").unwrap().read("jitter", "5ms").unwrap_err().0;
        assert_eq!(
            e,
            "demo nagle has no parameter 'jitter' (known: duration, seed)"
        );
        assert!(find("bufferbloot").is_none());
        assert_eq!(names().len(), 16);
    }
}

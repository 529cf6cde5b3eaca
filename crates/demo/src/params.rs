//! Every demo's parameters, declared once: name (the `--option` of `latencylab demo NAME`
//! and the key of a sweep's `[demo]` table and axes), what values it takes, and why its
//! bounds are what they are. The CLI checks its options here and a sweep checks its values
//! here, so a parameter a demo gains is sweepable at once; a test of the CLI fails when a
//! demo's options and its declaration differ.
//!
//! Not here: what a demo does with a value (its `Options`), or running anything.

use std::fmt;

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
    /// `bdp` or a number of packets (a FIFO's size).
    Packets,
    /// On or off: `--NAME` given or not; a sweep writes `true` or `false`.
    Flag,
    /// A file's path.
    File,
}

/// One parameter of a demo.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub kind: Kind,
    /// Why the bounds are what they are, for the error message ("the Wi-Fi comes back at 20 s").
    pub why: &'static str,
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
                if text == "bdp" || text.parse::<u32>().is_ok_and(|n| n >= 1) {
                    Ok(Value::Text(text.into()))
                } else {
                    bad("bdp or a number of packets, e.g. 1000".into())
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

/// One demo: its name and its parameters (besides `seed`, which every demo has).
#[derive(Clone, Copy, Debug)]
pub struct Declaration {
    pub name: &'static str,
    pub params: &'static [Param],
}

/// Every demo's seed: the seed of every random choice in its labs.
pub const SEED: Param = Param {
    name: "seed",
    kind: Kind::Count {
        min: 0,
        max: u64::MAX,
    },
    why: "",
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

const fn time(name: &'static str, min_s: f64, max_s: f64, why: &'static str) -> Param {
    Param {
        name,
        kind: Kind::Time { min_s, max_s },
        why,
    }
}

const fn count(name: &'static str, min: u64, max: u64, why: &'static str) -> Param {
    Param {
        name,
        kind: Kind::Count { min, max },
        why,
    }
}

const fn flag(name: &'static str) -> Param {
    Param {
        name,
        kind: Kind::Flag,
        why: "",
    }
}

/// An RTT of a web demo, 1 ms to 2 s.
const fn rtt(name: &'static str) -> Param {
    time(name, 0.001, 2.0, "")
}

/// Every demo, in the order `latencylab demo --help` lists them.
pub const DEMOS: &[Declaration] = &[
    Declaration {
        name: "bufferbloat",
        params: &[time(
            "duration",
            5.0,
            600.0,
            "the FIFO needs several seconds to fill",
        )],
    },
    Declaration {
        name: "l4s",
        params: &[time(
            "duration",
            5.0,
            600.0,
            "the call needs a few seconds to settle",
        )],
    },
    Declaration {
        name: "notsent-lowat",
        params: &[time(
            "duration",
            5.0,
            600.0,
            "the send buffer needs seconds to fill",
        )],
    },
    Declaration {
        name: "tfo",
        params: &[count(
            "requests",
            3,
            1000,
            "the first one fetches the cookie",
        )],
    },
    Declaration {
        name: "handshake-cdf",
        params: &[count("servers", 2, 60, ""), count("per-server", 1, 50, "")],
    },
    Declaration {
        name: "pipelining",
        params: &[rtt("rtt"), rtt("rtt2")],
    },
    Declaration {
        name: "conn-reuse",
        params: &[
            rtt("rtt"),
            Param {
                name: "down-mbit",
                kind: Kind::Number {
                    min: 0.1,
                    max: 1000.0,
                },
                why: "",
            },
            Param {
                name: "up-mbit",
                kind: Kind::Number {
                    min: 0.1,
                    max: 1000.0,
                },
                why: "",
            },
            Param {
                name: "buffer",
                kind: Kind::Packets,
                why: "",
            },
            Param {
                name: "html-scan",
                kind: Kind::Word(&["stream", "whole"]),
                why: "",
            },
            Param {
                name: "page",
                kind: Kind::File,
                why: "",
            },
        ],
    },
    Declaration {
        name: "cwnd-reuse",
        params: &[
            rtt("rtt"),
            time("idle", 0.1, 60.0, ""),
            count("clicks", 1, 3, ""),
            flag("no-control"),
        ],
    },
    Declaration {
        name: "http-parallel",
        params: &[flag("no-chromium")],
    },
    Declaration {
        name: "hol-blocking",
        params: &[
            count(
                "runs",
                1,
                20,
                "runs per protocol and loss setting, each its own seed",
            ),
            flag("no-chromium"),
        ],
    },
    Declaration {
        name: "nagle",
        params: &[time(
            "duration",
            5.0,
            600.0,
            "an exchange takes up to 1.5 s",
        )],
    },
    Declaration {
        name: "pps",
        params: &[
            time(
                "duration",
                5.0,
                600.0,
                "TCP needs a few seconds to fill the hop",
            ),
            count("pps", 100, 100_000, "packets per second"),
        ],
    },
    Declaration {
        name: "delayed-ack",
        params: &[time(
            "duration",
            5.0,
            600.0,
            "the transfer needs a few seconds",
        )],
    },
    Declaration {
        name: "fallback",
        params: &[time(
            "duration",
            23.0,
            300.0,
            "the Wi-Fi comes back at 20 s",
        )],
    },
    Declaration {
        name: "nat64",
        params: &[],
    },
    Declaration {
        name: "responsiveness",
        params: &[time(
            "duration",
            5.0,
            120.0,
            "the test needs a few 1 s intervals to find working conditions",
        )],
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

//! tc-style queue specs: `fifo limit 1000`, `bfifo limit 150kb`, `codel target 5ms ecn` …
//!
//! Parsing is two-stage, as ripgrep does it: words into a [`Spec`] with every parameter
//! resolved (Linux's default where the spec is silent), then [`Spec::build`] into a running
//! discipline. [`Spec`]'s `Display` prints the fully resolved form, which is what lab.json
//! records, so a run says exactly what queue it had.

use std::fmt;

use crate::fifo::{Fifo, Limit};
use crate::Qdisc;

/// Linux's default txqueuelen, the default pfifo limit.
pub const DEFAULT_TXQUEUELEN: usize = 1000;
/// Default bfifo limit: txqueuelen × MTU (1500, a TUN device has no link header).
pub const DEFAULT_BFIFO_BYTES: usize = DEFAULT_TXQUEUELEN * 1500;

/// The disciplines this build knows, for error messages.
pub const KINDS: &str = "fifo, bfifo";

/// A fully resolved queue spec.
#[derive(Clone, Debug, PartialEq)]
pub enum Spec {
    Fifo { limit_packets: usize },
    Bfifo { limit_bytes: usize },
}

/// A spec that cannot be read; the message names the word and what would be accepted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(pub String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

/// The words of a spec after its kind, consumed keyword by keyword.
pub(crate) struct Words<'a> {
    kind: &'a str,
    words: std::slice::Iter<'a, &'a str>,
}

impl<'a> Words<'a> {
    pub(crate) fn next(&mut self) -> Option<&'a str> {
        self.words.next().copied()
    }

    /// The value after `keyword`, or an error naming the keyword.
    pub(crate) fn value(&mut self, keyword: &str, example: &str) -> Result<&'a str, SpecError> {
        self.next().ok_or_else(|| {
            SpecError(format!(
                "{}: '{keyword}' needs a value (e.g. '{keyword} {example}')",
                self.kind
            ))
        })
    }

    pub(crate) fn unknown(&self, word: &str, accepted: &str) -> SpecError {
        SpecError(format!(
            "{}: unknown keyword '{word}' (accepted: {accepted})",
            self.kind
        ))
    }

    pub(crate) fn bad(&self, keyword: &str, value: &str, expected: &str) -> SpecError {
        SpecError(format!(
            "{}: cannot read {keyword} '{value}' (try {expected})",
            self.kind
        ))
    }

    /// A packet count: a positive integer.
    pub(crate) fn count(&mut self, keyword: &str, example: &str) -> Result<usize, SpecError> {
        let v = self.value(keyword, example)?;
        match v.parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(self.bad(keyword, v, example)),
        }
    }

    /// A size in bytes, tc units.
    pub(crate) fn size(&mut self, keyword: &str, example: &str) -> Result<usize, SpecError> {
        let v = self.value(keyword, example)?;
        match wire::units::parse_size(v) {
            Ok(n) if n > 0 => Ok(n as usize),
            _ => Err(self.bad(keyword, v, example)),
        }
    }

    /// A time, with a unit.
    #[allow(dead_code)] // used by the AQM specs
    pub(crate) fn time(
        &mut self,
        keyword: &str,
        example: &str,
    ) -> Result<wire::Duration, SpecError> {
        let v = self.value(keyword, example)?;
        wire::units::parse_time(v).map_err(|_| self.bad(keyword, v, example))
    }
}

/// Parses a tc-style spec.
pub fn parse(s: &str) -> Result<Spec, SpecError> {
    let all: Vec<&str> = s.split_whitespace().collect();
    let Some((&kind, rest)) = all.split_first() else {
        return Err(SpecError(format!("empty queue spec (try one of: {KINDS})")));
    };
    let mut w = Words {
        kind,
        words: rest.iter(),
    };
    match kind {
        "fifo" | "pfifo" => {
            let mut limit_packets = DEFAULT_TXQUEUELEN;
            while let Some(word) = w.next() {
                match word {
                    "limit" => limit_packets = w.count("limit", "1000")?,
                    _ => return Err(w.unknown(word, "limit PACKETS")),
                }
            }
            Ok(Spec::Fifo { limit_packets })
        }
        "bfifo" => {
            let mut limit_bytes = DEFAULT_BFIFO_BYTES;
            while let Some(word) = w.next() {
                match word {
                    "limit" => limit_bytes = w.size("limit", "150kb")?,
                    _ => return Err(w.unknown(word, "limit BYTES")),
                }
            }
            Ok(Spec::Bfifo { limit_bytes })
        }
        other => Err(SpecError(format!(
            "unknown queue discipline '{other}' (try one of: {KINDS})"
        ))),
    }
}

impl Spec {
    /// Builds the running discipline. `seed` feeds any random choice it makes.
    pub fn build(&self, seed: u64) -> Box<dyn Qdisc> {
        let _ = seed;
        match *self {
            Spec::Fifo { limit_packets } => Box::new(Fifo::new(Limit::Packets(limit_packets))),
            Spec::Bfifo { limit_bytes } => Box::new(Fifo::new(Limit::Bytes(limit_bytes))),
        }
    }

    /// The tc name of the discipline.
    pub fn kind(&self) -> &'static str {
        match self {
            Spec::Fifo { .. } => "fifo",
            Spec::Bfifo { .. } => "bfifo",
        }
    }
}

impl Default for Spec {
    fn default() -> Spec {
        Spec::Fifo {
            limit_packets: DEFAULT_TXQUEUELEN,
        }
    }
}

impl fmt::Display for Spec {
    /// The fully resolved spec, parseable again by [`parse`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Spec::Fifo { limit_packets } => write!(f, "fifo limit {limit_packets}"),
            Spec::Bfifo { limit_bytes } => write!(f, "bfifo limit {limit_bytes}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_specs_take_linux_defaults() {
        assert_eq!(
            parse("fifo").unwrap(),
            Spec::Fifo {
                limit_packets: 1000
            }
        );
        assert_eq!(
            parse("fifo limit 50").unwrap(),
            Spec::Fifo { limit_packets: 50 }
        );
        assert_eq!(
            parse("pfifo limit 50").unwrap(),
            Spec::Fifo { limit_packets: 50 }
        );
        assert_eq!(
            parse("bfifo limit 150kb").unwrap(),
            Spec::Bfifo {
                limit_bytes: 153_600
            }
        );
        assert_eq!(
            parse("bfifo").unwrap(),
            Spec::Bfifo {
                limit_bytes: 1_500_000
            }
        );
    }

    #[test]
    fn resolved_specs_print_and_parse_back() {
        for s in ["fifo limit 7", "bfifo limit 3000"] {
            assert_eq!(parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_specs_name_the_culprit_and_what_is_accepted() {
        let e = |s: &str| parse(s).unwrap_err().to_string();
        assert_eq!(e(""), "empty queue spec (try one of: fifo, bfifo)");
        assert_eq!(
            e("redq"),
            "unknown queue discipline 'redq' (try one of: fifo, bfifo)"
        );
        assert_eq!(
            e("fifo lmit 5"),
            "fifo: unknown keyword 'lmit' (accepted: limit PACKETS)"
        );
        assert_eq!(
            e("fifo limit"),
            "fifo: 'limit' needs a value (e.g. 'limit 1000')"
        );
        assert_eq!(e("fifo limit 0"), "fifo: cannot read limit '0' (try 1000)");
        assert_eq!(
            e("bfifo limit lots"),
            "bfifo: cannot read limit 'lots' (try 150kb)"
        );
    }

    #[test]
    fn built_discipline_has_the_spec_kind() {
        assert_eq!(parse("bfifo").unwrap().build(1).kind(), "bfifo");
        assert_eq!(Spec::default().build(1).kind(), "fifo");
    }
}

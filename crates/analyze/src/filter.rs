//! `--filter` expressions: pick connections and flows by address, port and protocol.
//!
//! A small tcpdump-like language, matched against a flow's two endpoints (either direction):
//! `port 80`, `host 10.0.0.1`, `10.0.0.1:5201`, `[fd00::1]:443`, a bare address, `tcp`, `udp`,
//! joined by `and` (binds tighter) and `or`. It is not a BPF compiler and matches nothing
//! below the transport ports.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// A filter expression that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterError {
    /// The offending word (or the whole expression when it is empty).
    pub culprit: String,
    pub why: &'static str,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad filter {:?}: {}; accepted: port N, host ADDR, ADDR:PORT, [V6ADDR]:PORT, ADDR, tcp, udp, joined by and/or",
            self.culprit, self.why
        )
    }
}

impl std::error::Error for FilterError {}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    Port(u16),
    Host(IpAddr),
    Endpoint(SocketAddr),
    Tcp,
    Udp,
}

/// A parsed filter: an OR of ANDs of terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    any_of: Vec<Vec<Term>>,
}

impl Filter {
    /// Parses an expression such as `host 10.0.0.1 and port 80 or udp`.
    pub fn parse(expr: &str) -> Result<Filter, FilterError> {
        let words: Vec<&str> = expr.split_whitespace().collect();
        if words.is_empty() {
            return Err(FilterError {
                culprit: expr.to_string(),
                why: "empty expression",
            });
        }
        let mut any_of = vec![Vec::new()];
        let mut i = 0;
        let mut expect_term = true;
        while i < words.len() {
            let w = words[i];
            if !expect_term {
                match w.to_ascii_lowercase().as_str() {
                    "and" | "&&" => {}
                    "or" | "||" => any_of.push(Vec::new()),
                    _ => {
                        return Err(FilterError {
                            culprit: w.to_string(),
                            why: "expected `and` or `or` here",
                        })
                    }
                }
                expect_term = true;
                i += 1;
                continue;
            }
            let needs_arg = |i: usize| {
                words.get(i + 1).copied().ok_or(FilterError {
                    culprit: w.to_string(),
                    why: "needs a value after it",
                })
            };
            let term = match w.to_ascii_lowercase().as_str() {
                "port" => {
                    let v = needs_arg(i)?;
                    i += 1;
                    Term::Port(v.parse().map_err(|_| FilterError {
                        culprit: v.to_string(),
                        why: "not a port number (0-65535)",
                    })?)
                }
                "host" => {
                    let v = needs_arg(i)?;
                    i += 1;
                    Term::Host(v.parse().map_err(|_| FilterError {
                        culprit: v.to_string(),
                        why: "not an IPv4 or IPv6 address",
                    })?)
                }
                "tcp" => Term::Tcp,
                "udp" => Term::Udp,
                _ => {
                    if let Ok(sa) = w.parse::<SocketAddr>() {
                        Term::Endpoint(sa)
                    } else if let Ok(ip) = w.parse::<IpAddr>() {
                        Term::Host(ip)
                    } else {
                        return Err(FilterError {
                            culprit: w.to_string(),
                            why: "not a term",
                        });
                    }
                }
            };
            if let Some(last) = any_of.last_mut() {
                last.push(term);
            }
            expect_term = false;
            i += 1;
        }
        if expect_term {
            return Err(FilterError {
                culprit: words[words.len() - 1].to_string(),
                why: "the expression ends after a conjunction",
            });
        }
        Ok(Filter { any_of })
    }

    /// Whether a flow between `x` and `y` (either direction) matches; `tcp` says which
    /// protocol it is.
    pub fn matches(&self, tcp: bool, x: SocketAddr, y: SocketAddr) -> bool {
        self.any_of.iter().any(|all| {
            all.iter().all(|t| match t {
                Term::Port(p) => x.port() == *p || y.port() == *p,
                Term::Host(h) => x.ip() == *h || y.ip() == *h,
                Term::Endpoint(e) => x == *e || y == *e,
                Term::Tcp => tcp,
                Term::Udp => !tcp,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn terms_match_either_endpoint() {
        let (c, s) = (sa("10.0.0.1:40000"), sa("10.0.0.2:80"));
        for yes in [
            "port 80",
            "port 40000",
            "host 10.0.0.2",
            "10.0.0.1:40000",
            "10.0.0.2",
            "tcp and port 80",
            "udp or port 80",
        ] {
            assert!(Filter::parse(yes).unwrap().matches(true, c, s), "{yes}");
            assert!(Filter::parse(yes).unwrap().matches(true, s, c), "{yes}");
        }
        for no in [
            "port 81",
            "host 10.0.0.3",
            "10.0.0.1:80",
            "udp",
            "tcp and port 1",
        ] {
            assert!(!Filter::parse(no).unwrap().matches(true, c, s), "{no}");
        }
        let v6 = Filter::parse("[fd00::1]:443").unwrap();
        assert!(v6.matches(true, sa("[fd00::1]:443"), sa("[fd00::2]:9")));
    }

    #[test]
    fn bad_expressions_name_the_culprit() {
        let e = Filter::parse("port http").unwrap_err();
        assert_eq!(e.culprit, "http");
        assert!(e.to_string().contains("\"http\""));
        assert_eq!(Filter::parse("host").unwrap_err().culprit, "host");
        assert_eq!(Filter::parse("tcp and").unwrap_err().culprit, "and");
        assert_eq!(Filter::parse("tcp udp").unwrap_err().culprit, "udp");
        assert!(Filter::parse("  ").is_err());
    }

    proptest::proptest! {
        #[test]
        fn no_expression_makes_the_parser_panic(s in "\\PC{0,40}") {
            let _ = Filter::parse(&s);
        }
    }
}

//! IPv4-embedded IPv6 addresses (RFC 6052): the NAT64 prefix, synthesis of an IPv6 address
//! from an IPv4 one and extraction back.
//!
//! This module only does the address arithmetic of RFC 6052 §2.2 and the checks of §2.1/§3.1
//! that a prefix can carry; it knows nothing of packets, sessions or DNS. The default prefix is
//! the Well-Known Prefix `64:ff9b::/96` (§2.1).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// Why a prefix cannot be used for RFC 6052 address synthesis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// RFC 6052 §2.2 allows only 32, 40, 48, 56, 64 and 96.
    BadLength(u8),
    /// Bits 64 to 71 (the "u" octet) must be zero for every length but 96 (§2.2).
    NonZeroU(Ipv6Addr),
    /// Bits beyond the prefix length are set.
    HostBitsSet(Ipv6Addr, u8),
    /// The text is not `ADDRESS/LENGTH`.
    Syntax(String),
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrefixError::BadLength(l) => write!(
                f,
                "nat64 prefix length /{l} is not one of 32, 40, 48, 56, 64, 96 (rfc 6052 section 2.2)"
            ),
            PrefixError::NonZeroU(a) => write!(
                f,
                "nat64 prefix {a} has bits 64 to 71 set; rfc 6052 section 2.2 requires them zero"
            ),
            PrefixError::HostBitsSet(a, l) => {
                write!(f, "nat64 prefix {a}/{l} has bits set beyond its length")
            }
            PrefixError::Syntax(s) => {
                write!(
                    f,
                    "nat64 prefix {s:?} is not ADDRESS/LENGTH, e.g. 64:ff9b::/96"
                )
            }
        }
    }
}

impl std::error::Error for PrefixError {}

/// A validated NAT64 prefix (Pref64::/n).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    addr: [u8; 16],
    len_bits: u8,
}

/// The Well-Known Prefix `64:ff9b::/96` (RFC 6052 §2.1).
pub const WELL_KNOWN: Prefix = Prefix {
    addr: [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    len_bits: 96,
};

impl Default for Prefix {
    fn default() -> Prefix {
        WELL_KNOWN
    }
}

impl Prefix {
    /// Checks `addr/len_bits` against RFC 6052 §2.2: an allowed length, the "u" octet (bits
    /// 64..71) zero, and no bits beyond the length.
    pub fn new(addr: Ipv6Addr, len_bits: u8) -> Result<Prefix, PrefixError> {
        if !matches!(len_bits, 32 | 40 | 48 | 56 | 64 | 96) {
            return Err(PrefixError::BadLength(len_bits));
        }
        let o = addr.octets();
        let full = usize::from(len_bits / 8);
        if o[full..].iter().any(|&b| b != 0) {
            return Err(PrefixError::HostBitsSet(addr, len_bits));
        }
        // For /96 bits 64..71 are part of the prefix and §2.2 still says they SHOULD be zero
        // ("u" is reserved for compatibility with RFC 4291 host identifiers); we insist.
        if o[8] != 0 {
            return Err(PrefixError::NonZeroU(addr));
        }
        Ok(Prefix { addr: o, len_bits })
    }

    pub fn addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.addr)
    }
    pub fn len_bits(&self) -> u8 {
        self.len_bits
    }

    /// Where the 4 IPv4 octets go for this length (RFC 6052 §2.2, Figure 1): the octet
    /// indexes of the IPv6 address, skipping octet 8 (the "u" octet).
    fn slots(&self) -> [usize; 4] {
        match self.len_bits {
            32 => [4, 5, 6, 7],
            40 => [5, 6, 7, 9],
            48 => [6, 7, 9, 10],
            56 => [7, 9, 10, 11],
            64 => [9, 10, 11, 12],
            _ => [12, 13, 14, 15],
        }
    }

    /// RFC 6052 §2.3: the IPv4-embedded IPv6 address of `v4` under this prefix. The suffix
    /// after the embedded address is zero.
    pub fn embed(&self, v4: Ipv4Addr) -> Ipv6Addr {
        let mut o = self.addr;
        for (slot, b) in self.slots().into_iter().zip(v4.octets()) {
            o[slot] = b;
        }
        Ipv6Addr::from(o)
    }

    /// Whether `v6` starts with this prefix.
    pub fn contains(&self, v6: Ipv6Addr) -> bool {
        let o = v6.octets();
        let full = usize::from(self.len_bits / 8);
        o[..full] == self.addr[..full]
    }

    /// RFC 6052 §2.3: the IPv4 address embedded in `v6`, if `v6` is under this prefix. The "u"
    /// octet and the suffix are not checked: §2.2 says receivers ignore the suffix, and a
    /// translator that refused a set "u" would only break peers that do not follow the RFC.
    pub fn extract(&self, v6: Ipv6Addr) -> Option<Ipv4Addr> {
        if !self.contains(v6) {
            return None;
        }
        let o = v6.octets();
        let s = self.slots();
        Some(Ipv4Addr::new(o[s[0]], o[s[1]], o[s[2]], o[s[3]]))
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr(), self.len_bits)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;
    fn from_str(s: &str) -> Result<Prefix, PrefixError> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| PrefixError::Syntax(s.to_string()))?;
        let addr: Ipv6Addr = a.parse().map_err(|_| PrefixError::Syntax(s.to_string()))?;
        let len: u8 = l.parse().map_err(|_| PrefixError::Syntax(s.to_string()))?;
        Prefix::new(addr, len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// RFC 6052 §2.4, Table 1: 192.0.2.33 under 2001:db8:122:344::/n.
    const RFC6052_TABLE: [(&str, &str); 6] = [
        ("2001:db8::/32", "2001:db8:c000:221::"),
        ("2001:db8:100::/40", "2001:db8:1c0:2:21::"),
        ("2001:db8:122::/48", "2001:db8:122:c000:2:2100::"),
        ("2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"),
        ("2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"),
        ("2001:db8:122:344::/96", "2001:db8:122:344::192.0.2.33"),
    ];

    #[test]
    fn rfc6052_table_synthesises_192_0_2_33_under_each_length() {
        let v4 = Ipv4Addr::new(192, 0, 2, 33);
        for (prefix, want) in RFC6052_TABLE {
            assert_eq!(p(prefix).embed(v4), v6(want), "under {prefix}");
        }
    }

    #[test]
    fn rfc6052_table_extracts_192_0_2_33_under_each_length() {
        for (prefix, addr) in RFC6052_TABLE {
            assert_eq!(
                p(prefix).extract(v6(addr)),
                Some(Ipv4Addr::new(192, 0, 2, 33)),
                "under {prefix}"
            );
        }
    }

    #[test]
    fn well_known_prefix_embeds_in_the_last_32_bits() {
        // RFC 6052 §2.4's Well-Known Prefix example.
        assert_eq!(
            WELL_KNOWN.embed(Ipv4Addr::new(192, 0, 2, 33)),
            v6("64:ff9b::c000:221")
        );
        assert_eq!(
            WELL_KNOWN.embed(Ipv4Addr::new(192, 0, 0, 170)),
            v6("64:ff9b::c000:aa")
        );
        assert_eq!(Prefix::default().to_string(), "64:ff9b::/96");
    }

    #[test]
    fn other_addresses_round_trip_under_every_length_and_skip_the_u_octet() {
        let addrs = [
            Ipv4Addr::new(0, 0, 0, 0),
            Ipv4Addr::new(255, 255, 255, 255),
            Ipv4Addr::new(10, 1, 2, 3),
            Ipv4Addr::new(198, 51, 100, 7),
        ];
        for (prefix, _) in RFC6052_TABLE {
            let pf = p(prefix);
            for a in addrs {
                let e = pf.embed(a);
                assert_eq!(e.octets()[8], 0, "u octet of {e}");
                assert_eq!(pf.extract(e), Some(a), "{a} under {prefix}");
            }
        }
    }

    #[test]
    fn extract_refuses_addresses_outside_the_prefix() {
        assert_eq!(WELL_KNOWN.extract(v6("2001:db8::c000:221")), None);
        assert_eq!(p("2001:db8::/32").extract(v6("2001:db9::1")), None);
        assert!(WELL_KNOWN.contains(v6("64:ff9b::1.2.3.4")));
    }

    #[test]
    fn bad_prefixes_are_refused_with_reasons() {
        assert_eq!(
            "2001:db8::/33".parse::<Prefix>(),
            Err(PrefixError::BadLength(33))
        );
        assert_eq!(
            "2001:db8:0:0:ff00::/96".parse::<Prefix>(),
            Err(PrefixError::NonZeroU(v6("2001:db8:0:0:ff00::")))
        );
        assert_eq!(
            "2001:db8::1/64".parse::<Prefix>(),
            Err(PrefixError::HostBitsSet(v6("2001:db8::1"), 64))
        );
        assert!(matches!(
            "64:ff9b::".parse::<Prefix>(),
            Err(PrefixError::Syntax(_))
        ));
        let msg = PrefixError::BadLength(33).to_string();
        assert!(msg.contains("/33"), "{msg}");
    }
}

//! The CLATs of a NAT64 lab (464XLAT, RFC 6877): which hosts have one, the addresses each
//! uses, and the prefix they translate to, discovered per RFC 7050 from the lab's DNS64 or
//! given. The forwarder runs each CLAT on its host's side of the lab (between the host's
//! interface and its link); the translation itself is the pure `nat64::Clat`.
//!
//! A CLAT host keeps its IPv6 address and gains 192.0.0.2/29 (RFC 7335) with an IPv4 default
//! route into the lab; the CLAT's own IPv6 address is in the host's /64 with interface
//! identifier `::464`, so the translated traffic is told apart from the host's own.

use std::net::{Ipv4Addr, Ipv6Addr};

use nat64::clat::{self, ClatParams};
use nat64::dns64::{Dns64, Dns64Params};
use nat64::Prefix;

use crate::spec::{usage, LabConfig, Nat64Spec, UsageError};

/// The interface identifier of a CLAT's IPv6 address in its host's /64.
pub const CLAT_IID: u16 = 0x464;

/// The CLAT's IPv6 address next to the interface address `iface6`.
pub fn clat_ipv6(iface6: Ipv6Addr) -> Ipv6Addr {
    let mut s = iface6.segments();
    s[4..].copy_from_slice(&[0, 0, 0, CLAT_IID]);
    Ipv6Addr::from(s)
}

/// `/etc/gai.conf` for a host with a CLAT. Such a host has an IPv4 address, so glibc's
/// `getaddrinfo` asks for A records too, and RFC 6724 rule 5 (prefer a destination whose label
/// matches its source's) would then pick the server's IPv4 address through the CLAT over the
/// DNS64's synthesised IPv6 one, only because the lab's own IPv6 addresses are ULAs
/// (fd4c:…, label 6) where a carrier gives a phone global ones (label 1). These are glibc's
/// default labels (gai.conf(5), RFC 3484 §2.1) without the ULA line, so the lab's addresses
/// sort as a phone's do: names go over IPv6 (precedence 40 over IPv4's 10, rule 6), and only
/// IPv4 literals and AF_INET-only code use the CLAT.
pub const GAI_CONF: &str =
    "# latencylab: a host with a CLAT: glibc's default labels without fc00::/7, so that\n\
# the lab's ULA addresses sort like a phone's global ones (see docs/nat64.md)\n\
label ::1/128       0\n\
label ::/0          1\n\
label 2002::/16     2\n\
label ::/96         3\n\
label ::ffff:0:0/96 4\n\
label fec0::/10     5\n\
label 2001:0::/32   7\n";

/// Where the CLATs' prefix came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PrefixSource {
    /// RFC 7050: the AAAA records of `ipv4only.arpa`, as the lab's DNS64 answers them.
    Discovered { answer: Vec<Ipv6Addr> },
    /// Given (`--clat-prefix`, `clat_prefix` in a run file).
    Given,
}

impl PrefixSource {
    /// How the prefix was found, in words for the summary.
    pub fn describe(&self) -> String {
        match self {
            PrefixSource::Discovered { answer } => {
                let a: Vec<String> = answer.iter().map(|a| a.to_string()).collect();
                format!(
                    "discovered per RFC 7050: the lab's DNS64 answered ipv4only.arpa AAAA with {}",
                    a.join(", ")
                )
            }
            PrefixSource::Given => "given".into(),
        }
    }
}

/// Bytes an IPv4 packet may grow by in the CLAT: 20 for the IPv6 header, 8 for a fragment
/// header. The host's IPv4 route gets an MTU this much below its interface's, as a phone's
/// CLAT interface has (Android's clatd), so that its IPv4 packets and the MSS its TCP
/// announces fit the IPv6 path after translation, with no Fragmentation Needed round trip
/// from the CLAT or the NAT64.
pub const TRANSLATION_GROWTH_BYTES: u32 = 28;

/// One host's CLAT.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClatHost {
    /// Index of the host in the configuration; the CLAT sits on its first interface.
    pub host: usize,
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
    /// The MTU of the host's IPv4 default route.
    pub route_mtu_bytes: u32,
}

/// The CLATs of a lab and their prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClatPlan {
    pub prefix: Prefix,
    pub source: PrefixSource,
    pub hosts: Vec<ClatHost>,
}

impl ClatPlan {
    /// The CLATs of `cfg`, or `None` when it has none. The prefix is the given one or asked of
    /// a DNS64 built as the lab's is: the discovery query goes to the DNS64's code directly,
    /// not over the host's link, before the lab runs.
    pub fn of(cfg: &LabConfig) -> Result<Option<ClatPlan>, UsageError> {
        let Some(n) = &cfg.nat64 else {
            return Ok(None);
        };
        if n.clat.is_empty() {
            return Ok(None);
        }
        let (prefix, source) = match n.clat_prefix {
            Some(p) => (p, PrefixSource::Given),
            None => discover(cfg, n)?,
        };
        let mut hosts = Vec::new();
        for name in &n.clat {
            let Some(hi) = cfg.hosts.iter().position(|h| &h.name == name) else {
                return usage(format!("nat64: clat: no host '{name}'"));
            };
            let iface = &cfg.hosts[hi].interfaces[0];
            hosts.push(ClatHost {
                host: hi,
                ipv4: clat::HOST_IPV4,
                ipv6: clat_ipv6(iface.ipv6),
                route_mtu_bytes: cfg.hosts[hi].settings.mtu - TRANSLATION_GROWTH_BYTES,
            });
        }
        Ok(Some(ClatPlan {
            prefix,
            source,
            hosts,
        }))
    }

    /// The translator's parameters for one of the CLATs, with its host's MTU on both sides.
    pub fn params(&self, cfg: &LabConfig, h: &ClatHost) -> ClatParams {
        let mtu = u16::try_from(cfg.hosts[h.host].settings.mtu).unwrap_or(u16::MAX);
        ClatParams {
            ipv4: h.ipv4,
            mtu4_bytes: mtu,
            mtu6_bytes: mtu,
            ..ClatParams::new(self.prefix, h.ipv6)
        }
    }
}

/// RFC 7050 §3 against the lab's DNS64.
fn discover(cfg: &LabConfig, n: &Nat64Spec) -> Result<(Prefix, PrefixSource), UsageError> {
    let dns = Dns64::new(
        Dns64Params {
            prefix: n.prefix,
            ..Dns64Params::default()
        },
        cfg.dns_zone(),
    );
    let answer = dns
        .answer(&clat::discovery_query(0x7050))
        .map_err(|e| UsageError(format!("nat64: clat: discovering the prefix: {e}")))?;
    let found = clat::prefixes_from_answer(&answer).map_err(|e| {
        UsageError(format!(
            "nat64: clat: discovering the prefix: {e} (give one with --clat-prefix)"
        ))
    })?;
    let records = clat::aaaa_records(&answer);
    Ok((found[0], PrefixSource::Discovered { answer: records }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};

    #[test]
    fn the_prefix_is_discovered_from_the_labs_dns64_or_given() {
        let mut o = ShellOptions {
            nat64: true,
            clat: true,
            ..ShellOptions::default()
        };
        let c = shell_config(&o, &no_files).unwrap();
        let p = ClatPlan::of(&c).unwrap().unwrap();
        assert_eq!(p.prefix, nat64::prefix::WELL_KNOWN);
        assert_eq!(
            p.source,
            PrefixSource::Discovered {
                answer: vec![
                    "64:ff9b::c000:aa".parse().unwrap(),
                    "64:ff9b::c000:ab".parse().unwrap()
                ]
            }
        );
        assert_eq!(
            p.hosts,
            vec![ClatHost {
                host: 0,
                ipv4: Ipv4Addr::new(192, 0, 0, 2),
                ipv6: "fd4c:6c61:6200:1::464".parse().unwrap(),
                route_mtu_bytes: 1472,
            }]
        );
        o.clat_prefix = Some("2001:db8:64::/96".into());
        let c = shell_config(&o, &no_files).unwrap();
        let p = ClatPlan::of(&c).unwrap().unwrap();
        assert_eq!(
            (p.prefix.to_string(), p.source),
            ("2001:db8:64::/96".to_string(), PrefixSource::Given)
        );
        o.nat64 = false;
        let e = shell_config(&o, &no_files).unwrap_err();
        assert!(e.0.contains("--clat needs --nat64"), "{e}");
        o.nat64 = true;
        o.clat_prefix = Some("64:ff9b::1/96".into());
        let e = shell_config(&o, &no_files).unwrap_err();
        assert!(e.0.starts_with("--clat-prefix:"), "{e}");
    }
}

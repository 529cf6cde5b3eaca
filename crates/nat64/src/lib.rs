//! nat64: stateful NAT64, the 464XLAT CLAT and DNS64 as pure functions of packets and `now`.
//!
//! - [`prefix`]: IPv4-embedded IPv6 addresses (RFC 6052).
//! - [`Nat64`]: a stateful NAT64 (RFC 6146) that translates IP/ICMP headers per RFC 7915,
//!   with binding and session tables for TCP, UDP and ICMP echo, timers in simulated time and
//!   an IPv4 address/port pool. Packets in, packets (or a counted drop reason) out.
//! - [`Clat`]: the customer-side translator of 464XLAT (RFC 6877), stateless (RFC 7915
//!   SIIT) over the same header translation as the NAT64, and RFC 7050 prefix discovery.
//! - [`dns64`]: DNS64 answers (RFC 6147, RFC 7050) for a zone of the lab's own names.
//!
//! Nothing here reads a clock, opens a socket or spawns a thread: the `lab` shell passes `now`
//! and moves the bytes. Untrusted bytes (packets, DNS messages) never make it panic; a bad
//! input is a counted [`DropReason`] or an error value.
//!
//! RFCs to read before editing: RFC 6052, RFC 6146, RFC 7915, RFC 6147, RFC 7050, RFC 8880,
//! RFC 4443 and RFC 792 (ICMP), RFC 1191 (plateaus), RFC 4787 (NAT behaviour).

pub mod clat;
mod csum;
pub mod dns64;
mod hash;
pub mod icmp;
pub mod prefix;
mod state;
mod stateful;
mod translate;

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use wire::Duration;

pub use clat::{Clat, ClatParams};
pub use prefix::{Prefix, PrefixError};
pub use state::{Proto, TableStats, TcpState};
pub use stateful::Nat64;

/// Which inbound packets may open a session on an existing binding (RFC 6146 §3.5.1.1,
/// RFC 4787 §5).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Filtering {
    /// Only packets of an existing session pass (address- and port-dependent filtering): an
    /// IPv4 host that the IPv6 client never talked to cannot reach it.
    #[default]
    SessionOnly,
    /// Any IPv4 host may send to an existing binding (T, t); a session is created for it
    /// (endpoint-independent filtering).
    EndpointIndependent,
}

/// Parameters of a [`Nat64`]. Timeouts default to RFC 6146 §4's values.
#[derive(Clone, Debug)]
pub struct Params {
    /// Pref64::/n used to synthesise and extract IPv4-embedded addresses.
    pub prefix: Prefix,
    /// The IPv4 addresses the translator owns (T in RFC 6146). Must not be empty.
    pub pool4: Vec<Ipv4Addr>,
    /// UDP session lifetime (UDP_DEFAULT, 5 min; §4 requires at least UDP_MIN, 2 min).
    pub udp_timeout: Duration,
    /// TCP ESTABLISHED lifetime (TCP_EST, 2 h 4 min).
    pub tcp_established_timeout: Duration,
    /// TCP transitory lifetime (TCP_TRANS, 4 min).
    pub tcp_transitory_timeout: Duration,
    /// Lifetime of a session opened by an IPv4 SYN (TCP_INCOMING_SYN, 6 s).
    pub tcp_incoming_syn_timeout: Duration,
    /// ICMP query session lifetime (ICMP_DEFAULT, 60 s).
    pub icmp_timeout: Duration,
    /// How long the translation of a first fragment is kept for its later fragments
    /// (FRAGMENT_MIN, 2 s).
    pub fragment_timeout: Duration,
    /// Most sessions at once, over all protocols; a new one beyond is refused and counted.
    pub max_sessions: usize,
    /// Most bindings (BIB entries) at once, over all protocols.
    pub max_bindings: usize,
    /// Most fragmented datagrams tracked at once.
    pub max_fragments: usize,
    pub filtering: Filtering,
    /// MTU of the IPv4 next hop (for Packet Too Big and the §4.2/§5.2 MTU arithmetic).
    /// At least 1260, so that any IPv6 packet of the minimum MTU fits after translation.
    pub mtu4_bytes: u16,
    /// MTU of the IPv6 next hop; at least 1280 (RFC 8200 §5).
    pub mtu6_bytes: u16,
    /// Check TCP, UDP and ICMP checksums and drop (and count) segments whose checksum is
    /// wrong. Without it, translated checksums are adjusted incrementally and a wrong one
    /// stays wrong, so the receiver drops the segment instead.
    pub verify_checksums: bool,
    /// Source of the ICMPv6 errors the translator itself sends (Time Exceeded, Packet Too
    /// Big, Parameter Problem). Default: the first pool address under the prefix.
    pub router6: Option<Ipv6Addr>,
    /// Source of the ICMPv4 errors the translator itself sends. Default: the first pool
    /// address.
    pub router4: Option<Ipv4Addr>,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            prefix: Prefix::default(),
            pool4: Vec::new(),
            udp_timeout: Duration::from_secs(5 * 60),
            tcp_established_timeout: Duration::from_secs(2 * 3600 + 4 * 60),
            tcp_transitory_timeout: Duration::from_secs(4 * 60),
            tcp_incoming_syn_timeout: Duration::from_secs(6),
            icmp_timeout: Duration::from_secs(60),
            fragment_timeout: Duration::from_secs(2),
            max_sessions: 65_536,
            max_bindings: 65_536,
            max_fragments: 1024,
            filtering: Filtering::SessionOnly,
            mtu4_bytes: 1500,
            mtu6_bytes: 1500,
            verify_checksums: true,
            router6: None,
            router4: None,
        }
    }
}

/// Why a [`Params`] cannot make a translator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigError {
    EmptyPool,
    /// UDP lifetime below UDP_MIN (2 min, RFC 6146 §4).
    UdpTimeoutTooShort(Duration),
    Mtu4TooSmall(u16),
    Mtu6TooSmall(u16),
    /// A zero-sized table.
    ZeroTable(&'static str),
    /// A CLAT's IPv6 address that is not a unicast address outside the prefix.
    ClatAddress(Ipv6Addr),
    /// A CLAT's IPv4 address that is not unicast.
    ClatAddress4(Ipv4Addr),
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::EmptyPool => write!(f, "nat64 ipv4 pool is empty"),
            ConfigError::UdpTimeoutTooShort(d) => write!(
                f,
                "udp session timeout {d:?} is below rfc 6146's minimum of 2 minutes"
            ),
            ConfigError::Mtu4TooSmall(m) => write!(f, "ipv4 mtu {m} is below 1260 bytes"),
            ConfigError::Mtu6TooSmall(m) => write!(f, "ipv6 mtu {m} is below 1280 bytes"),
            ConfigError::ZeroTable(which) => write!(f, "{which} must be at least 1"),
            ConfigError::ClatAddress(a) => write!(
                f,
                "clat ipv6 address {a} must be a unicast address outside the nat64 prefix"
            ),
            ConfigError::ClatAddress4(a) => {
                write!(f, "clat ipv4 address {a} must be a unicast address")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

macro_rules! drop_reasons {
    ($($(#[$doc:meta])* $variant:ident => $name:literal,)*) => {
        /// Why a packet was not translated. Every drop is counted in [`Stats`].
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub enum DropReason {
            $($(#[$doc])* $variant,)*
        }

        impl DropReason {
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// A short name for logs and summaries.
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $name,)*
                }
            }
        }
    };
}

drop_reasons! {
    /// Fewer bytes than a header or length field needs.
    Truncated => "truncated",
    /// Inconsistent header fields (version, lengths, IHL, a zero IPv6 UDP checksum's absence).
    Malformed => "malformed",
    /// An IPv4 header, TCP, UDP or ICMP checksum is wrong.
    BadChecksum => "bad-checksum",
    /// An IPv6 extension header the translator does not carry (ESP, AH, mobility, …) or too
    /// many of them.
    UnsupportedExtension => "unsupported-extension",
    /// Not TCP, UDP or ICMP: a stateful NAT64 has no sessions for it (RFC 6146 §3.1).
    UnsupportedProtocol => "unsupported-protocol",
    /// An IPv6 destination outside Pref64::/n.
    NotInPrefix => "not-in-prefix",
    /// An IPv4 destination that is not one of the pool's addresses.
    NotInPool => "not-in-pool",
    /// An embedded or source address that must not be translated (unspecified, loopback,
    /// multicast, broadcast).
    BadAddress => "bad-address",
    /// An IPv6 host addressing the pool through the prefix (hairpinning is not supported).
    Hairpin => "hairpin",
    /// An inbound packet (or a non-SYN TCP segment) with no session to carry it.
    NoSession => "no-session",
    /// The session or binding table was full.
    TableFull => "table-full",
    /// No free port on any pool address.
    PoolExhausted => "pool-exhausted",
    /// An ICMP message with no translation (RFC 7915 §4.2/§5.2 "silently drop").
    IcmpUntranslatable => "icmp-untranslatable",
    /// A fragment that cannot be translated: a later fragment before its first, a first
    /// fragment too short for its ports, a fragmented ICMP message or UDP datagram without
    /// checksum.
    Fragment => "fragment",
    /// Hop limit or TTL ran out where no ICMP error may be sent (e.g. for an ICMP error).
    HopLimit => "hop-limit",
    /// Too big for the next hop where no ICMP error may be sent, or an IPv4 packet without DF
    /// that would need IPv6 fragmentation (not implemented).
    TooBig => "too-big",
    /// A packet the translator answered with an ICMP error instead (counted separately too).
    Answered => "answered",
    /// An address the translator does not serve: for a CLAT, an IPv4 source other than its
    /// host's, or an IPv6 destination (or quoted source) other than its own.
    NotOurs => "not-ours",
}

impl DropReason {
    pub const COUNT: usize = DropReason::ALL.len();
    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The result of offering a packet to the translator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The translated packet, to be sent on the other side.
    Forward(Vec<u8>),
    /// An ICMP error for the packet's sender, to be sent back on the side it came from; the
    /// packet itself is not forwarded.
    Reply(Vec<u8>),
    /// Not translated; the reason is counted in [`Stats`].
    Drop(DropReason),
}

/// [`Outcome`] without the bytes, for the `_into` variants that write into a caller's buffer.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Forward,
    Reply,
    Drop(DropReason),
}

/// Counters of a [`Nat64`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets translated IPv6 → IPv4.
    pub translated_6to4: u64,
    /// Packets translated IPv4 → IPv6.
    pub translated_4to6: u64,
    /// ICMP errors about translated packets, translated (counted in the two above too).
    pub icmp_errors_translated: u64,
    /// ICMPv6 / ICMPv4 Time Exceeded sent by the translator.
    pub time_exceeded_sent: u64,
    /// Packet Too Big / Fragmentation Needed sent by the translator.
    pub too_big_sent: u64,
    /// Parameter Problem / Source Route Failed sent by the translator.
    pub param_problem_sent: u64,
    /// Drops per [`DropReason`], indexed in [`DropReason::ALL`] order.
    pub drops: [u64; DropReason::COUNT],
    /// Table counters: sessions and bindings created and expired, table full, pool exhausted.
    pub tables: TableStats,
    /// Sessions alive when the snapshot was taken.
    pub sessions: usize,
    /// Bindings alive when the snapshot was taken.
    pub bindings: usize,
}

impl Stats {
    pub fn drops_of(&self, r: DropReason) -> u64 {
        self.drops[r.index()]
    }
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    pub(crate) fn count_drop(&mut self, r: DropReason) {
        self.drops[r.index()] += 1;
    }
}

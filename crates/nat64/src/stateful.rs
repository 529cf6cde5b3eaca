//! The stateful NAT64 (RFC 6146): the binding and session tables of [`crate::state`] as the
//! [`Mapping`] of the shared header translator. An IPv6 host X' reaches an IPv4 host Z through
//! Pref64::Z and leaves as one of the pool's transport addresses (T, t); only packets of an
//! existing session come back. This module decides nothing about headers: that is
//! [`crate::translate`]'s.

use std::net::{Ipv4Addr, Ipv6Addr};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::Instant;

use crate::state::{Flow6, Key4, Proto, Tables, TcpFlags, TcpState};
use crate::translate::{bad_v4, Dst6, Ends4, Ends6, Engine, HeaderParams, Mapping, Src4};
use crate::{ConfigError, DropReason, Outcome, Params, Stats, Verdict};

/// The session state of a NAT64 and its parameters.
pub(crate) struct Stateful {
    params: Params,
    tables: Tables,
}

impl Mapping for Stateful {
    fn addrs_6to4(&self, src: Ipv6Addr, dst: Ipv6Addr) -> Result<(Src4, Ipv4Addr), DropReason> {
        let z = self
            .params
            .prefix
            .extract(dst)
            .ok_or(DropReason::NotInPrefix)?;
        if bad_v4(z) || src.is_multicast() || src.is_unspecified() {
            return Err(DropReason::BadAddress);
        }
        if self.params.pool4.contains(&z) {
            return Err(DropReason::Hairpin);
        }
        Ok((Src4::Session, z))
    }

    fn addrs_4to6(&self, src: Ipv4Addr, dst: Ipv4Addr) -> Result<(Ipv6Addr, Dst6), DropReason> {
        if !self.params.pool4.contains(&dst) {
            return Err(DropReason::NotInPool);
        }
        if bad_v4(src) {
            return Err(DropReason::BadAddress);
        }
        Ok((self.params.prefix.embed(src), Dst6::Session))
    }

    fn session_6to4(
        &mut self,
        now: Instant,
        flow: Flow6,
        tcp: TcpFlags,
        may_create: bool,
    ) -> Result<(Ipv4Addr, u16), DropReason> {
        self.tables
            .outbound(&self.params, now, flow, tcp, may_create)
    }

    fn session_4to6(
        &mut self,
        now: Instant,
        key: Key4,
        tcp: TcpFlags,
    ) -> Result<(Ipv6Addr, u16), DropReason> {
        self.tables.inbound(&self.params, now, key, tcp)
    }

    /// The quoted packet went Z:z → X':x (Y' being Pref64::Z), so (X', x) is its destination
    /// and names the session (RFC 6146 §3.5.3).
    fn quoted_6to4(&self, proto: Proto, q: Ends6) -> Result<Ends4, DropReason> {
        let zi = self
            .params
            .prefix
            .extract(q.src)
            .ok_or(DropReason::NotInPrefix)?;
        let (t, tport) = self
            .tables
            .peek_out(proto, q.dst, q.dport, zi, q.sport)
            .ok_or(DropReason::NoSession)?;
        let sport = if proto == Proto::Icmp { tport } else { q.sport };
        Ok(Ends4 {
            src: zi,
            sport,
            dst: t,
            dport: tport,
        })
    }

    /// The quoted packet went T:t → Z:z: the session (T, t, Z, z) gives (X', x).
    fn quoted_4to6(&self, proto: Proto, q: Ends4) -> Result<Ends6, DropReason> {
        let key = Key4 {
            proto,
            t: q.src,
            tport: q.sport,
            z: q.dst,
            zport: q.dport,
        };
        let (x, xport) = self.tables.peek_in(key).ok_or(DropReason::NoSession)?;
        let dport = if proto == Proto::Icmp { xport } else { q.dport };
        Ok(Ends6 {
            src: x,
            sport: xport,
            dst: self.params.prefix.embed(q.dst),
            dport,
        })
    }

    fn next_timeout(&self) -> Option<Instant> {
        self.tables.next_timeout()
    }

    fn expire(&mut self, now: Instant) {
        self.tables.expire(now);
    }
}

/// A stateful NAT64 (RFC 6146) translating per RFC 7915. See the crate documentation.
pub struct Nat64 {
    engine: Engine<Stateful>,
}

impl Nat64 {
    /// A translator with `params`; `seed` makes port choices repeatable.
    pub fn new(params: Params, seed: u64) -> Result<Nat64, ConfigError> {
        let Some(&first) = params.pool4.first() else {
            return Err(ConfigError::EmptyPool);
        };
        if params.udp_timeout < wire::Duration::from_secs(120) {
            return Err(ConfigError::UdpTimeoutTooShort(params.udp_timeout));
        }
        if params.mtu4_bytes < 1260 {
            return Err(ConfigError::Mtu4TooSmall(params.mtu4_bytes));
        }
        if params.mtu6_bytes < 1280 {
            return Err(ConfigError::Mtu6TooSmall(params.mtu6_bytes));
        }
        for (n, which) in [
            (params.max_sessions, "max_sessions"),
            (params.max_bindings, "max_bindings"),
            (params.max_fragments, "max_fragments"),
        ] {
            if n == 0 {
                return Err(ConfigError::ZeroTable(which));
            }
        }
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let first_ip_id = rng.gen();
        let router4 = params.router4.unwrap_or(first);
        let hdr = HeaderParams {
            mtu4_bytes: params.mtu4_bytes,
            mtu6_bytes: params.mtu6_bytes,
            verify_checksums: params.verify_checksums,
            router4,
            router6: params.router6.unwrap_or_else(|| params.prefix.embed(first)),
            // Every source a NAT64 translates is in a session; an error from elsewhere is
            // dropped before this is needed.
            unmapped4: router4,
            fragment_timeout: params.fragment_timeout,
            max_fragments: params.max_fragments,
        };
        let map = Stateful {
            params,
            tables: Tables::new(rng),
        };
        Ok(Nat64 {
            engine: Engine::new(map, hdr, first_ip_id),
        })
    }

    pub fn params(&self) -> &Params {
        &self.engine.map.params
    }

    /// A snapshot of the counters, with the current table sizes.
    pub fn stats(&self) -> Stats {
        let t = &self.engine.map.tables;
        let mut s = self.engine.stats.clone();
        s.tables = t.stats.clone();
        s.sessions = t.session_count();
        s.bindings = t.binding_count();
        s
    }

    /// The TCP state of the session for an IPv4-side 5-tuple (`Closed` when there is none).
    pub fn tcp_state(&self, t: Ipv4Addr, tport: u16, z: Ipv4Addr, zport: u16) -> TcpState {
        self.engine.map.tables.tcp_state(Key4 {
            proto: Proto::Tcp,
            t,
            tport,
            z,
            zport,
        })
    }

    /// When [`Nat64::expire`] next has work; may be early, never late.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.engine.next_timeout()
    }

    /// Removes sessions, bindings and fragment records whose time ran out at or before `now`.
    /// The translate calls do this too, so a caller that never calls it still sees
    /// expired sessions go.
    pub fn expire(&mut self, now: Instant) {
        self.engine.expire(now);
    }

    /// Translates an IPv6 packet from the IPv6 side.
    pub fn translate_6to4(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        self.engine.translate_6to4(now, packet)
    }

    /// Translates an IPv4 packet from the IPv4 side.
    pub fn translate_4to6(&mut self, now: Instant, packet: &[u8]) -> Outcome {
        self.engine.translate_4to6(now, packet)
    }

    /// [`Nat64::translate_6to4`] writing into `out` (cleared first), so a caller can reuse
    /// one buffer.
    pub fn translate_6to4_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        self.engine.translate_6to4_into(now, packet, out)
    }

    /// [`Nat64::translate_4to6`] writing into `out` (cleared first).
    pub fn translate_4to6_into(
        &mut self,
        now: Instant,
        packet: &[u8],
        out: &mut Vec<u8>,
    ) -> Verdict {
        self.engine.translate_4to6_into(now, packet, out)
    }
}

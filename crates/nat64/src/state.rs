//! The stateful part of NAT64 (RFC 6146 §3): binding information bases (BIBs), the session
//! table, the TCP state machine (§3.5.2), timers in simulated time and the IPv4 address and
//! port pool.
//!
//! This module decides whether a flow may pass and with which IPv4 transport address; it does
//! not read or write packets (the translator hands it addresses, ports and TCP flags) and it
//! keeps no clock (every call takes `now`). Timers are plain data: each session has an expiry
//! instant, and a min-heap of (instant, key, generation) answers "when next?" cheaply; stale
//! heap entries are skipped on the way out, so asking early is harmless.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::net::{Ipv4Addr, Ipv6Addr};

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use wire::{Duration, Instant};

use crate::hash::KeyedState;
use crate::{DropReason, Filtering, Params};

/// The three kinds of flow a stateful NAT64 keeps (RFC 6146 §3.1). For ICMP the "port" is the
/// echo identifier (§3.5.3).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    Tcp,
    Udp,
    Icmp,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
            Proto::Icmp => "icmp",
        }
    }
}

/// Which side a packet came from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    /// From the IPv6 side (the "V6" of RFC 6146's state names).
    Out,
    /// From the IPv4 side.
    In,
}

/// The TCP flags the state machine looks at.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TcpFlags {
    pub syn: bool,
    pub fin: bool,
    pub rst: bool,
}

/// RFC 6146 §3.5.2.2's TCP session states. `Closed` is the state of a flow with no session.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TcpState {
    Closed,
    V6Init,
    V4Init,
    Established,
    V4FinRcv,
    V6FinRcv,
    V6FinV4FinRcv,
    Trans,
}

/// What a packet does to a session's lifetime.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Lifetime {
    /// Leave the expiry as it is.
    Keep,
    /// TCP_TRANS from now.
    Transitory,
    /// TCP_EST from now.
    Established,
    /// TCP_INCOMING_SYN from now.
    IncomingSyn,
}

/// RFC 6146 §3.5.2.2: the next state and lifetime after a packet, or `None` when a packet
/// cannot open a session (anything but a SYN on a closed flow).
pub(crate) fn tcp_next(state: TcpState, dir: Dir, f: TcpFlags) -> Option<(TcpState, Lifetime)> {
    use Dir::*;
    use TcpState::*;
    let next = match (state, dir) {
        (Closed, Out) if f.syn => (V6Init, Lifetime::Transitory),
        // An IPv4-initiated SYN (only reached when filtering lets it in): a short lifetime so
        // that unsolicited SYNs do not pin table space (our reading of §3.5.2.2; the RFC keeps
        // such packets TCP_INCOMING_SYN seconds).
        (Closed, In) if f.syn => (V4Init, Lifetime::IncomingSyn),
        (Closed, _) => return None,
        (V6Init, In) if f.syn => (Established, Lifetime::Established),
        (V6Init, Out) if f.syn => (V6Init, Lifetime::Transitory),
        (V6Init, _) => (V6Init, Lifetime::Keep),
        (V4Init, Out) if f.syn => (Established, Lifetime::Established),
        (V4Init, _) => (V4Init, Lifetime::Keep),
        (Established | V4FinRcv | V6FinRcv, _) if f.rst => (Trans, Lifetime::Transitory),
        (Established, In) if f.fin => (V4FinRcv, Lifetime::Established),
        (Established, Out) if f.fin => (V6FinRcv, Lifetime::Established),
        (Established, _) => (Established, Lifetime::Established),
        (V4FinRcv, Out) if f.fin => (V6FinV4FinRcv, Lifetime::Transitory),
        (V4FinRcv, _) => (V4FinRcv, Lifetime::Established),
        (V6FinRcv, In) if f.fin => (V6FinV4FinRcv, Lifetime::Transitory),
        (V6FinRcv, _) => (V6FinRcv, Lifetime::Established),
        (V6FinV4FinRcv, _) => (V6FinV4FinRcv, Lifetime::Keep),
        (Trans, _) if f.rst => (Trans, Lifetime::Keep),
        (Trans, _) => (Established, Lifetime::Established),
    };
    Some(next)
}

/// A session's identity: its IPv4-side 5-tuple (T, t, Z, z), unique in a stateful NAT64
/// because Y' is always Pref64::Z (§3.1).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key4 {
    pub proto: Proto,
    pub t: Ipv4Addr,
    pub tport: u16,
    pub z: Ipv4Addr,
    pub zport: u16,
}

/// A flow seen from the IPv6 side: (X', x) towards Z:z (Y' being Pref64::Z).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct Flow6 {
    pub proto: Proto,
    pub x: Ipv6Addr,
    pub xport: u16,
    pub z: Ipv4Addr,
    pub zport: u16,
}

#[derive(Clone, Debug)]
struct Session {
    x: Ipv6Addr,
    xport: u16,
    tcp: TcpState,
    expires_at: Instant,
    /// Which heap entry is this session's; older ones are stale.
    generation: u32,
}

#[derive(Clone, Debug)]
struct Binding {
    x: Ipv6Addr,
    xport: u16,
    sessions: u32,
}

/// Counters kept by the tables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableStats {
    pub sessions_created: u64,
    pub sessions_expired: u64,
    pub bindings_created: u64,
    pub bindings_removed: u64,
    /// Session or binding refused because its table was at its limit.
    pub table_full: u64,
    /// No free port for a new binding on any pool address.
    pub pool_exhausted: u64,
}

/// BIBs, sessions, timers and the pool.
pub(crate) struct Tables {
    /// (X', x) → (T, t): the BIB looked up from the IPv6 side.
    bib6: HashMap<(Proto, Ipv6Addr, u16), (Ipv4Addr, u16), KeyedState>,
    /// (T, t) → (X', x) and a session count: the BIB looked up from the IPv4 side.
    bib4: HashMap<(Proto, Ipv4Addr, u16), Binding, KeyedState>,
    sessions: HashMap<Key4, Session, KeyedState>,
    timers: BinaryHeap<Reverse<(Instant, Key4, u32)>>,
    rng: ChaCha8Rng,
    pub stats: TableStats,
}

impl Tables {
    pub fn new(mut rng: ChaCha8Rng) -> Tables {
        let hs = KeyedState::new(rng.gen());
        Tables {
            bib6: HashMap::with_hasher(hs),
            bib4: HashMap::with_hasher(hs),
            sessions: HashMap::with_hasher(hs),
            timers: BinaryHeap::new(),
            rng,
            stats: TableStats::default(),
        }
    }

    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }
    pub fn binding_count(&self) -> usize {
        self.bib4.len()
    }

    fn lifetime_of(p: &Params, proto: Proto, l: Lifetime) -> Option<Duration> {
        match (proto, l) {
            (_, Lifetime::Keep) => None,
            (Proto::Udp, _) => Some(p.udp_timeout),
            (Proto::Icmp, _) => Some(p.icmp_timeout),
            (Proto::Tcp, Lifetime::Transitory) => Some(p.tcp_transitory_timeout),
            (Proto::Tcp, Lifetime::Established) => Some(p.tcp_established_timeout),
            (Proto::Tcp, Lifetime::IncomingSyn) => Some(p.tcp_incoming_syn_timeout),
        }
    }

    /// A packet from the IPv6 side from (X', x) to Z:z (RFC 6146 §3.5.1, §3.5.2, §3.5.3):
    /// finds or creates the binding and the session and returns (T, t).
    pub fn outbound(
        &mut self,
        p: &Params,
        now: Instant,
        f: Flow6,
        tcp: TcpFlags,
        may_create: bool,
    ) -> Result<(Ipv4Addr, u16), DropReason> {
        let Flow6 {
            proto,
            x,
            xport,
            z,
            zport,
        } = f;
        if let Some(&(t, tport)) = self.bib6.get(&(proto, x, xport)) {
            let key = Key4 {
                proto,
                t,
                tport,
                z,
                zport,
            };
            if self.sessions.contains_key(&key) {
                self.touch(p, now, key, Dir::Out, tcp)?;
                return Ok((t, tport));
            }
            if !may_create {
                return Err(DropReason::NoSession);
            }
            self.create_session(p, now, key, (x, xport), Dir::Out, tcp)?;
            return Ok((t, tport));
        }
        if !may_create {
            return Err(DropReason::NoSession);
        }
        // Refuse before allocating, so a refused TCP segment leaves no binding behind.
        if proto == Proto::Tcp && !tcp.syn {
            return Err(DropReason::NoSession);
        }
        if self.bib4.len() >= p.max_bindings || self.sessions.len() >= p.max_sessions {
            self.stats.table_full += 1;
            return Err(DropReason::TableFull);
        }
        let (t, tport) = match self.allocate(p, proto, x, xport) {
            Some(a) => a,
            None => {
                self.stats.pool_exhausted += 1;
                return Err(DropReason::PoolExhausted);
            }
        };
        self.bib6.insert((proto, x, xport), (t, tport));
        self.bib4.insert(
            (proto, t, tport),
            Binding {
                x,
                xport,
                sessions: 0,
            },
        );
        self.stats.bindings_created += 1;
        let key = Key4 {
            proto,
            t,
            tport,
            z,
            zport,
        };
        self.create_session(p, now, key, (x, xport), Dir::Out, tcp)?;
        Ok((t, tport))
    }

    /// A packet from the IPv4 side from Z:z to T:t: the session's (X', x), or why not.
    pub fn inbound(
        &mut self,
        p: &Params,
        now: Instant,
        key: Key4,
        tcp: TcpFlags,
    ) -> Result<(Ipv6Addr, u16), DropReason> {
        if let Some(found) = self.touch(p, now, key, Dir::In, tcp)? {
            return Ok(found);
        }
        // No session: with endpoint-independent filtering (RFC 4787 REQ-8, RFC 6146
        // §3.5.1.1) a packet to an existing binding opens one; otherwise it is dropped.
        if p.filtering == Filtering::EndpointIndependent {
            if let Some(b) = self.bib4.get(&(key.proto, key.t, key.tport)) {
                let (x, xport) = (b.x, b.xport);
                self.create_session(p, now, key, (x, xport), Dir::In, tcp)?;
                return Ok((x, xport));
            }
        }
        Err(DropReason::NoSession)
    }

    /// The session for an IPv4-side 5-tuple, without touching it (for ICMP errors, which
    /// refresh nothing).
    pub fn peek_in(&self, key: Key4) -> Option<(Ipv6Addr, u16)> {
        self.sessions.get(&key).map(|s| (s.x, s.xport))
    }

    /// The binding (T, t) for (X', x), if a session with Z:z exists, without touching it.
    pub fn peek_out(
        &self,
        proto: Proto,
        x: Ipv6Addr,
        xport: u16,
        z: Ipv4Addr,
        zport: u16,
    ) -> Option<(Ipv4Addr, u16)> {
        let &(t, tport) = self.bib6.get(&(proto, x, xport))?;
        self.sessions
            .contains_key(&Key4 {
                proto,
                t,
                tport,
                z,
                zport,
            })
            .then_some((t, tport))
    }

    /// The TCP state of a session (`Closed` when there is none); for tests and the lab.
    pub fn tcp_state(&self, key: Key4) -> TcpState {
        self.sessions.get(&key).map_or(TcpState::Closed, |s| s.tcp)
    }

    fn create_session(
        &mut self,
        p: &Params,
        now: Instant,
        key: Key4,
        (x, xport): (Ipv6Addr, u16),
        dir: Dir,
        tcp: TcpFlags,
    ) -> Result<(), DropReason> {
        let (state, life) = if key.proto == Proto::Tcp {
            tcp_next(TcpState::Closed, dir, tcp).ok_or(DropReason::NoSession)?
        } else {
            (TcpState::Closed, Lifetime::Established)
        };
        if self.sessions.len() >= p.max_sessions {
            self.stats.table_full += 1;
            self.release_if_unused(key.proto, key.t, key.tport);
            return Err(DropReason::TableFull);
        }
        let expires_at = now + Self::lifetime_of(p, key.proto, life).unwrap_or(Duration::ZERO);
        self.sessions.insert(
            key,
            Session {
                x,
                xport,
                tcp: state,
                expires_at,
                generation: 0,
            },
        );
        if let Some(b) = self.bib4.get_mut(&(key.proto, key.t, key.tport)) {
            b.sessions += 1;
        }
        self.timers.push(Reverse((expires_at, key, 0)));
        self.stats.sessions_created += 1;
        Ok(())
    }

    /// A binding without sessions goes (§3.5.1: a dynamic BIB entry lives as long as its
    /// sessions).
    fn release_if_unused(&mut self, proto: Proto, t: Ipv4Addr, tport: u16) {
        if let Some(b) = self.bib4.get(&(proto, t, tport)) {
            if b.sessions == 0 {
                let (x, xport) = (b.x, b.xport);
                self.bib4.remove(&(proto, t, tport));
                self.bib6.remove(&(proto, x, xport));
                self.stats.bindings_removed += 1;
            }
        }
    }

    /// A packet on an existing session: TCP state transition and lifetime refresh. Returns
    /// the session's (X', x), or `None` when there is no session.
    fn touch(
        &mut self,
        p: &Params,
        now: Instant,
        key: Key4,
        dir: Dir,
        tcp: TcpFlags,
    ) -> Result<Option<(Ipv6Addr, u16)>, DropReason> {
        let Some(s) = self.sessions.get_mut(&key) else {
            return Ok(None);
        };
        let life = if key.proto == Proto::Tcp {
            let (state, life) = tcp_next(s.tcp, dir, tcp).ok_or(DropReason::NoSession)?;
            s.tcp = state;
            life
        } else {
            Lifetime::Established
        };
        if let Some(d) = Self::lifetime_of(p, key.proto, life) {
            let at = now + d;
            // A shorter expiry than the heap knows needs a new heap entry; a longer one is
            // found when the old entry comes up and is re-filed then.
            if at < s.expires_at {
                s.generation = s.generation.wrapping_add(1);
                self.timers.push(Reverse((at, key, s.generation)));
            }
            s.expires_at = at;
        }
        Ok(Some((s.x, s.xport)))
    }

    /// The earliest instant a session may expire; may be early, never late.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((at, _, _))| *at)
    }

    /// Removes every session whose lifetime ended at or before `now`, and bindings left with
    /// none (RFC 6146 §3.5.1, §3.5.2.2, §3.5.3). TCP sessions in ESTABLISHED are removed
    /// without the keepalive probe §3.5.2.2 allows.
    pub fn expire(&mut self, now: Instant) {
        while let Some(&Reverse((at, key, generation))) = self.timers.peek() {
            if at > now {
                break;
            }
            self.timers.pop();
            let Some(s) = self.sessions.get(&key) else {
                continue;
            };
            if s.generation != generation {
                continue;
            }
            if s.expires_at > now {
                self.timers.push(Reverse((s.expires_at, key, generation)));
                continue;
            }
            self.sessions.remove(&key);
            self.stats.sessions_expired += 1;
            if let Some(b) = self.bib4.get_mut(&(key.proto, key.t, key.tport)) {
                b.sessions = b.sessions.saturating_sub(1);
            }
            self.release_if_unused(key.proto, key.t, key.tport);
        }
    }

    /// Picks (T, t) for a new binding of (X', x).
    ///
    /// - Address: "paired" pooling (RFC 4787 REQ-2, RFC 6146 §3.5.1.1): every binding of one
    ///   IPv6 host starts at the same pool address, chosen by a fixed hash of X'.
    /// - Port: x itself when free on that address (port preservation); otherwise a random
    ///   port from x's range, then a scan of the range; then the next pool address.
    /// - Range: ports below 1024 are kept below 1024 (1..=1023) and the rest in 1024..=65535
    ///   (§3.5.1.1's port range preservation); ICMP identifiers use 0..=65535. Parity is not
    ///   preserved (RFC 4787 REQ-4 is a MAY for NAT64).
    fn allocate(
        &mut self,
        p: &Params,
        proto: Proto,
        x: Ipv6Addr,
        xport: u16,
    ) -> Option<(Ipv4Addr, u16)> {
        let n = p.pool4.len();
        let start = (x
            .octets()
            .iter()
            .fold(0u32, |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
            as usize)
            % n;
        let (lo, hi) = match proto {
            Proto::Icmp => (0u16, u16::MAX),
            _ if xport < 1024 => (1, 1023),
            _ => (1024, u16::MAX),
        };
        for i in 0..n {
            let t = p.pool4[(start + i) % n];
            let free = |port: u16| !self.bib4.contains_key(&(proto, t, port));
            if (lo..=hi).contains(&xport) && free(xport) {
                return Some((t, xport));
            }
            for _ in 0..16 {
                let port = self.rng.gen_range(lo..=hi);
                if !self.bib4.contains_key(&(proto, t, port)) {
                    return Some((t, port));
                }
            }
            let from = self.rng.gen_range(lo..=hi);
            let span = u32::from(hi - lo) + 1;
            for k in 0..span {
                let port = lo + ((u32::from(from - lo) + k) % span) as u16;
                if !self.bib4.contains_key(&(proto, t, port)) {
                    return Some((t, port));
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn params() -> Params {
        Params {
            pool4: vec![Ipv4Addr::new(192, 0, 2, 1)],
            ..Params::default()
        }
    }
    fn x() -> Ipv6Addr {
        "2001:db8::2".parse().unwrap()
    }
    const Z: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 10);
    const SYN: TcpFlags = TcpFlags {
        syn: true,
        fin: false,
        rst: false,
    };
    const ACK: TcpFlags = TcpFlags {
        syn: false,
        fin: false,
        rst: false,
    };
    const FIN: TcpFlags = TcpFlags {
        syn: false,
        fin: true,
        rst: false,
    };
    const RST: TcpFlags = TcpFlags {
        syn: false,
        fin: false,
        rst: true,
    };

    fn fl(proto: Proto, x: Ipv6Addr, xport: u16, z: Ipv4Addr, zport: u16) -> Flow6 {
        Flow6 {
            proto,
            x,
            xport,
            z,
            zport,
        }
    }

    fn tables() -> Tables {
        Tables::new(ChaCha8Rng::seed_from_u64(1))
    }

    #[test]
    fn udp_session_lives_five_minutes_after_its_last_packet() {
        let p = params();
        let mut t = tables();
        let s = Instant::from_secs(10);
        let (a, port) = t
            .outbound(&p, s, fl(Proto::Udp, x(), 5000, Z, 53), ACK, true)
            .unwrap();
        assert_eq!((a, port), (p.pool4[0], 5000), "port preserved");
        let key = Key4 {
            proto: Proto::Udp,
            t: a,
            tport: port,
            z: Z,
            zport: 53,
        };
        // A reply after 4 minutes refreshes the session.
        let r = s + Duration::from_secs(240);
        t.expire(r);
        assert_eq!(t.inbound(&p, r, key, ACK), Ok((x(), 5000)));
        t.expire(r + Duration::from_secs(299));
        assert_eq!(t.session_count(), 1);
        t.expire(r + Duration::from_secs(300));
        assert_eq!(t.session_count(), 0);
        assert_eq!(
            t.binding_count(),
            0,
            "the binding goes with its last session"
        );
        assert_eq!(
            t.inbound(&p, r + Duration::from_secs(301), key, ACK),
            Err(DropReason::NoSession)
        );
    }

    #[test]
    fn icmp_session_lives_sixty_seconds() {
        let p = params();
        let mut t = tables();
        t.outbound(&p, Instant::ZERO, fl(Proto::Icmp, x(), 7, Z, 7), ACK, true)
            .unwrap();
        t.expire(Instant::from_secs(59));
        assert_eq!(t.session_count(), 1);
        assert!(t.next_timeout() <= Some(Instant::from_secs(60)));
        t.expire(Instant::from_secs(60));
        assert_eq!(t.session_count(), 0);
    }

    #[test]
    fn tcp_walks_the_rfc_6146_states_with_their_timeouts() {
        let p = params();
        let mut t = tables();
        let t0 = Instant::ZERO;
        let (a, port) = t
            .outbound(&p, t0, fl(Proto::Tcp, x(), 40000, Z, 80), SYN, true)
            .unwrap();
        let key = Key4 {
            proto: Proto::Tcp,
            t: a,
            tport: port,
            z: Z,
            zport: 80,
        };
        assert_eq!(t.tcp_state(key), TcpState::V6Init);
        t.inbound(&p, t0, key, SYN).unwrap();
        assert_eq!(t.tcp_state(key), TcpState::Established);
        // Established lasts 2 h 4 min.
        t.expire(t0 + Duration::from_secs(7439));
        assert_eq!(t.tcp_state(key), TcpState::Established);
        let t1 = t0 + Duration::from_secs(7000);
        t.outbound(&p, t1, fl(Proto::Tcp, x(), 40000, Z, 80), FIN, true)
            .unwrap();
        assert_eq!(t.tcp_state(key), TcpState::V6FinRcv);
        t.inbound(&p, t1, key, FIN).unwrap();
        assert_eq!(t.tcp_state(key), TcpState::V6FinV4FinRcv);
        // Both FINs seen: transitory, 4 minutes.
        t.expire(t1 + Duration::from_secs(239));
        assert_eq!(t.session_count(), 1);
        t.expire(t1 + Duration::from_secs(240));
        assert_eq!(t.session_count(), 0);
    }

    #[test]
    fn tcp_rst_moves_to_trans_and_a_later_packet_back_to_established() {
        let p = params();
        let mut t = tables();
        let (a, port) = t
            .outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Tcp, x(), 40000, Z, 80),
                SYN,
                true,
            )
            .unwrap();
        let key = Key4 {
            proto: Proto::Tcp,
            t: a,
            tport: port,
            z: Z,
            zport: 80,
        };
        t.inbound(&p, Instant::ZERO, key, SYN).unwrap();
        t.inbound(&p, Instant::from_secs(1), key, RST).unwrap();
        assert_eq!(t.tcp_state(key), TcpState::Trans);
        t.outbound(
            &p,
            Instant::from_secs(2),
            fl(Proto::Tcp, x(), 40000, Z, 80),
            ACK,
            true,
        )
        .unwrap();
        assert_eq!(t.tcp_state(key), TcpState::Established);
        t.inbound(&p, Instant::from_secs(3), key, RST).unwrap();
        // The shortened lifetime is honoured although the heap held a 2-hour entry.
        t.expire(Instant::from_secs(3 + 240));
        assert_eq!(t.tcp_state(key), TcpState::Closed);
    }

    #[test]
    fn v6_init_without_answer_expires_after_four_minutes() {
        let p = params();
        let mut t = tables();
        t.outbound(
            &p,
            Instant::ZERO,
            fl(Proto::Tcp, x(), 40000, Z, 80),
            SYN,
            true,
        )
        .unwrap();
        t.expire(Instant::from_secs(239));
        assert_eq!(t.session_count(), 1);
        t.expire(Instant::from_secs(240));
        assert_eq!(t.session_count(), 0);
    }

    #[test]
    fn tcp_non_syn_without_session_is_refused_and_leaves_nothing() {
        let p = params();
        let mut t = tables();
        assert_eq!(
            t.outbound(&p, Instant::ZERO, fl(Proto::Tcp, x(), 1, Z, 80), ACK, true),
            Err(DropReason::NoSession)
        );
        assert_eq!((t.session_count(), t.binding_count()), (0, 0));
    }

    #[test]
    fn mapping_is_endpoint_independent() {
        let p = params();
        let mut t = tables();
        let a = t
            .outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 5000, Z, 53),
                ACK,
                true,
            )
            .unwrap();
        let b = t
            .outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 5000, Ipv4Addr::new(203, 0, 113, 1), 9),
                ACK,
                true,
            )
            .unwrap();
        assert_eq!(a, b);
        assert_eq!((t.session_count(), t.binding_count()), (2, 1));
    }

    #[test]
    fn inbound_to_a_binding_without_session_depends_on_filtering() {
        let mut p = params();
        let mut t = tables();
        let (a, port) = t
            .outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 5000, Z, 53),
                ACK,
                true,
            )
            .unwrap();
        let other = Key4 {
            proto: Proto::Udp,
            t: a,
            tport: port,
            z: Ipv4Addr::new(203, 0, 113, 1),
            zport: 9,
        };
        assert_eq!(
            t.inbound(&p, Instant::ZERO, other, ACK),
            Err(DropReason::NoSession)
        );
        p.filtering = Filtering::EndpointIndependent;
        assert_eq!(t.inbound(&p, Instant::ZERO, other, ACK), Ok((x(), 5000)));
        assert_eq!(t.session_count(), 2);
    }

    #[test]
    fn a_taken_port_gets_another_in_the_same_range() {
        let p = params();
        let mut t = tables();
        let y: Ipv6Addr = "2001:db8::3".parse().unwrap();
        t.outbound(
            &p,
            Instant::ZERO,
            fl(Proto::Udp, x(), 5000, Z, 53),
            ACK,
            true,
        )
        .unwrap();
        let (_, port) = t
            .outbound(&p, Instant::ZERO, fl(Proto::Udp, y, 5000, Z, 53), ACK, true)
            .unwrap();
        assert_ne!(port, 5000);
        assert!(port >= 1024);
        t.outbound(
            &p,
            Instant::ZERO,
            fl(Proto::Udp, x(), 123, Z, 123),
            ACK,
            true,
        )
        .unwrap();
        let (_, low) = t
            .outbound(&p, Instant::ZERO, fl(Proto::Udp, y, 123, Z, 123), ACK, true)
            .unwrap();
        assert!((1..1024).contains(&low) && low != 123, "{low}");
    }

    #[test]
    fn full_tables_refuse_and_count() {
        let p = Params {
            max_sessions: 2,
            max_bindings: 100,
            ..params()
        };
        let mut t = tables();
        for port in [1000, 1001] {
            t.outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), port + 4000, Z, 53),
                ACK,
                true,
            )
            .unwrap();
        }
        assert_eq!(
            t.outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 6000, Z, 53),
                ACK,
                true
            ),
            Err(DropReason::TableFull)
        );
        // A new session on an existing binding is refused too, and the binding survives.
        assert_eq!(
            t.outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 5000, Z, 54),
                ACK,
                true
            ),
            Err(DropReason::TableFull)
        );
        assert_eq!(t.stats.table_full, 2);
        assert_eq!((t.session_count(), t.binding_count()), (2, 2));
        let p = Params {
            max_sessions: 100,
            max_bindings: 1,
            ..params()
        };
        let mut t = tables();
        t.outbound(
            &p,
            Instant::ZERO,
            fl(Proto::Udp, x(), 5000, Z, 53),
            ACK,
            true,
        )
        .unwrap();
        assert_eq!(
            t.outbound(
                &p,
                Instant::ZERO,
                fl(Proto::Udp, x(), 5001, Z, 53),
                ACK,
                true
            ),
            Err(DropReason::TableFull)
        );
    }

    #[test]
    fn a_full_port_range_exhausts_the_pool() {
        let p = Params {
            max_sessions: 2000,
            max_bindings: 2000,
            ..params()
        };
        let mut t = tables();
        // 1023 privileged ports on one address.
        for i in 0..1023u16 {
            let h = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 1, i);
            t.outbound(&p, Instant::ZERO, fl(Proto::Udp, h, 80, Z, 80), ACK, true)
                .unwrap();
        }
        assert_eq!(
            t.outbound(&p, Instant::ZERO, fl(Proto::Udp, x(), 80, Z, 80), ACK, true),
            Err(DropReason::PoolExhausted)
        );
        assert_eq!(t.stats.pool_exhausted, 1);
    }
}

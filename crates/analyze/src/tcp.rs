//! TCP reconstruction: one connection at one vantage point, both directions.
//!
//! [`TcpConn::handle`] takes each packet of the connection in capture order, with its time,
//! and keeps per-direction state: the unwrapped sequence space (RFC 9293 §3.4, 32-bit
//! sequence numbers unwrapped to `u64` relative offsets), which bytes were seen (to tell a
//! retransmission, RFC 9293 §3.8.1, from a reordered segment), the unacknowledged segments
//! (for RTT samples under Karn's rule, RFC 6298 §3), the other side's cumulative ACK, scaled
//! window (RFC 7323 §2.3) and SACK blocks (RFC 2018), and the evidence the diagnoses need.
//! State is bounded by the window, not by the number of packets, unless series are kept.
//! It does not name causes (that is [`crate::diagnose`]) and does not parse headers (that is
//! `wire::packet::parse` and [`crate::tcpopt`]).

use std::collections::VecDeque;
use std::net::SocketAddr;

use wire::packet::TcpHeader;
use wire::time::duration_nanos;
use wire::{Duration, Ecn, Instant};

use crate::budget::{self, PacketInfo, Timeline};
use crate::diagnose::{self, Evidence};
use crate::frames::FrameIndex;
use crate::model::*;
use crate::stories;
use crate::tcpopt::TcpOptions;

/// Unacknowledged segments remembered per direction for RTT samples; beyond this (a capture
/// that misses the ACKs) the oldest are forgotten.
const MAX_OUTSTANDING: usize = 65_536;

/// Offset that keeps unwrapped sequence numbers away from zero, so that values a little
/// below the first one seen (old retransmissions) do not underflow.
const EXT_ORIGIN: u64 = 1 << 40;

/// One direction's 32-bit sequence space, unwrapped (RFC 9293 §3.4: arithmetic modulo 2^32;
/// any two numbers in use are less than 2^31 apart, which is what makes unwrapping sound).
#[derive(Clone, Debug, Default)]
struct SeqSpace {
    /// Unwrapped value of relative offset 0 (the ISN).
    base: Option<u64>,
    /// Highest unwrapped value seen: the reference for the next one.
    top: u64,
}

impl SeqSpace {
    /// Starts the space with `isn` as relative 0.
    fn set_isn(&mut self, isn: u32) {
        self.top = EXT_ORIGIN + u64::from(isn);
        self.base = Some(self.top);
    }

    fn unwrap(&mut self, s: u32, isn_if_new: u32) -> u64 {
        if self.base.is_none() {
            self.set_isn(isn_if_new);
        }
        let delta = i64::from(s.wrapping_sub(self.top as u32) as i32);
        let ext = (self.top as i64).saturating_add(delta).max(0) as u64;
        self.top = self.top.max(ext);
        ext
    }

    /// Relative offset of `s`; when the space is new, `s - 1` becomes its origin (the byte at
    /// `s` is then relative 1, as if its ISN had been seen).
    fn rel(&mut self, s: u32) -> u64 {
        let ext = self.unwrap(s, s.wrapping_sub(1));
        ext.saturating_sub(self.base.unwrap_or(0))
    }
}

/// Sorted, disjoint byte ranges: which parts of the sequence space were sent.
#[derive(Clone, Debug, Default)]
struct RangeSet {
    r: Vec<(u64, u64)>,
}

impl RangeSet {
    /// Bytes of `s..e` not covered, and not below `floor`.
    fn uncovered(&self, s: u64, e: u64, floor: u64) -> u64 {
        let s = s.max(floor);
        if s >= e {
            return 0;
        }
        let mut covered = 0;
        for &(a, b) in &self.r {
            let (lo, hi) = (a.max(s), b.min(e));
            if lo < hi {
                covered += hi - lo;
            }
        }
        (e - s) - covered
    }

    #[inline(always)]
    fn insert(&mut self, s: u64, e: u64) {
        if s >= e {
            return;
        }
        // Fast path, inlined: appending to or extending the last range (in-order data).
        if let Some(last) = self.r.last_mut() {
            if s >= last.0 && s <= last.1 {
                last.1 = last.1.max(e);
                return;
            }
        }
        self.insert_apart(s, e);
    }

    /// [`RangeSet::insert`] of a range that does not start inside the last one.
    #[cold]
    #[inline(never)]
    fn insert_apart(&mut self, s: u64, e: u64) {
        self.r.push((s, e));
        self.r.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(self.r.len());
        for &(a, b) in &self.r {
            match out.last_mut() {
                Some(l) if a <= l.1 => l.1 = l.1.max(b),
                _ => out.push((a, b)),
            }
        }
        self.r = out;
    }

    /// Forgets everything below `floor` (ACKed bytes count as seen by the caller).
    fn prune(&mut self, floor: u64) {
        if self.r.first().is_some_and(|f| f.1 <= floor) {
            self.r.retain(|&(_, b)| b > floor);
        }
    }
}

#[derive(Copy, Clone, Debug)]
struct Outstanding {
    start: u64,
    end: u64,
    time: Instant,
    /// Sent more than once, or waited above a hole: an ACK of it gives no RTT sample (Karn).
    retx: bool,
}

/// Smallest and largest of some TTLs, without a test for the first: empty, it is (255, 0).
#[derive(Copy, Clone, Debug)]
struct TtlRange {
    lo: u8,
    hi: u8,
}

impl Default for TtlRange {
    fn default() -> TtlRange {
        TtlRange { lo: u8::MAX, hi: 0 }
    }
}

impl TtlRange {
    #[inline]
    fn add(&mut self, ttl: u8) {
        self.lo = self.lo.min(ttl);
        self.hi = self.hi.max(ttl);
    }

    /// (smallest, largest), if any was added (then `lo <= hi`).
    fn get(self) -> Option<(u8, u8)> {
        (self.lo <= self.hi).then_some((self.lo, self.hi))
    }
}

/// State of one direction: this side's data and what the other side said about it.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirState {
    space: SeqSpace,
    /// Highest relative sequence end sent.
    snd_max: u64,
    any_seq: bool,
    seen: RangeSet,
    outstanding: VecDeque<Outstanding>,
    /// The other side's cumulative ACK (relative) and whether one was seen.
    acked: u64,
    any_ack: bool,
    /// The other side's last advertised window, scaled, bytes.
    peer_window: u64,
    any_window: bool,
    /// Last ACK number and raw window this side sent (for duplicate-ACK detection).
    my_last_ack: Option<(u32, u16)>,
    rtt_sum_ms: f64,
    rtt_sumsq_ms: f64,
    pub(crate) options: SynOptions,
    pub(crate) stats: DirectionStats,
    pub(crate) series: TimeSequence,
    pub(crate) ev: Evidence,
    first_data: Option<Instant>,
    last_data: Option<Instant>,
    last_send: Option<Instant>,
    prev_data: Option<(Instant, u32)>,
    /// Last ACK from the other side: time, whether it carried no data, whether it covered
    /// everything sent.
    last_peer_ack: Option<(Instant, bool, bool)>,
    /// When everything sent was last acknowledged (start of an idle period).
    all_acked_at: Option<Instant>,
    /// When the other side's cumulative ACK last moved forward.
    last_ack_advance: Option<Instant>,
    /// Smallest and largest IP TTL (IPv6 hop limit) of this side's packets as captured.
    ttl: TtlRange,
    window_full_since: Option<Instant>,
    /// Open loss-recovery episode: (start, recovery point, packets, bytes).
    recovery: Option<(Instant, u64, u64, u64)>,
    src: Option<SocketAddr>,
}

/// One connection being rebuilt.
#[derive(Clone, Debug)]
pub(crate) struct TcpConn {
    pub(crate) vantage: Vantage,
    pub(crate) a: SocketAddr,
    pub(crate) b: SocketAddr,
    first_time: Instant,
    last_time: Instant,
    hs: Handshake,
    last_syn: Option<Instant>,
    last_synack: Option<Instant>,
    isn_b: Option<u32>,
    pub(crate) state: ConnState,
    fins: [bool; 2],
    pub(crate) dirs: [DirState; 2],
    keep_series: bool,
    timeline: Timeline,
    /// The path's round trip from [`TcpConn::rtt_to`] (their sum, ns), computed again only
    /// when `rtt_path_stale` says that what it depends on changed (a handshake round trip,
    /// a new smallest RTT): converting milliseconds back to a `Duration` on every packet
    /// showed in profiles.
    rtt_path_ns: Option<u64>,
    rtt_path_stale: bool,
    /// The handshake's round trip (SYN -> SYN-ACK plus SYN-ACK -> ACK), ns, set with them.
    hs_path_ns: Option<u64>,
    /// Every packet's frame number, for the evidence of the diagnoses.
    frames: FrameIndex,
}

/// Everything `handle` needs from one packet.
pub(crate) struct TcpPacket<'a> {
    pub time: Instant,
    pub h: &'a TcpHeader,
    pub opts: &'a TcpOptions,
    pub ecn: Ecn,
    /// Payload bytes as captured (cut by the snaplen, possibly empty).
    pub payload: &'a [u8],
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// Its frame number in its capture (1-based, as Wireshark counts them).
    pub frame: u64,
}

impl TcpConn {
    /// A new connection whose first packet goes from `src` to `dst`.
    pub(crate) fn new(
        vantage: Vantage,
        src: SocketAddr,
        dst: SocketAddr,
        first: &TcpHeader,
        time: Instant,
        keep_series: bool,
    ) -> TcpConn {
        // The active opener is `a`: the sender of a SYN, the receiver of a SYN-ACK, or else
        // whoever spoke first.
        let synack = first.has(TcpHeader::SYN) && first.has(TcpHeader::ACK);
        let (a, b) = if synack { (dst, src) } else { (src, dst) };
        let mut dirs: [DirState; 2] = Default::default();
        dirs[0].src = Some(a);
        dirs[1].src = Some(b);
        TcpConn {
            vantage,
            a,
            b,
            first_time: time,
            last_time: time,
            hs: Handshake::default(),
            last_syn: None,
            last_synack: None,
            isn_b: None,
            state: ConnState::Open,
            fins: [false; 2],
            dirs,
            keep_series,
            timeline: Timeline::default(),
            rtt_path_ns: None,
            rtt_path_stale: false,
            hs_path_ns: None,
            frames: FrameIndex::default(),
        }
    }

    /// Round trip from the capture point to `a` and to `b` as known now: the handshake's part
    /// (sent once, Karn) or the other direction's smallest data RTT, whichever is smaller.
    fn rtt_to(&self) -> [Option<Duration>; 2] {
        let min = |x: Option<Duration>, y: Option<f64>| {
            let y = y.map(|ms| Duration::from_nanos((ms * 1e6) as u64));
            match (x, y) {
                (Some(x), Some(y)) => Some(x.min(y)),
                (x, y) => x.or(y),
            }
        };
        [
            min(self.hs.synack_rtt, self.dirs[1].stats.rtt_min_ms),
            min(self.hs.syn_rtt, self.dirs[0].stats.rtt_min_ms),
        ]
    }

    /// The sum of [`TcpConn::rtt_to`] in nanoseconds, computed again only when what it
    /// depends on changed.
    #[inline]
    fn rtt_path_now(&mut self) -> Option<u64> {
        if self.rtt_path_stale {
            self.update_rtt_path();
        }
        // Every test's packets check that no change went unnoticed.
        debug_assert_eq!(self.rtt_path_ns, budget::rtt_path_ns(self.rtt_to()));
        self.rtt_path_ns
    }

    #[cold]
    #[inline(never)]
    fn update_rtt_path(&mut self) {
        self.rtt_path_ns = budget::rtt_path_ns(self.rtt_to());
        self.rtt_path_stale = false;
    }

    /// After a handshake round trip was measured.
    fn handshake_rtt_changed(&mut self) {
        self.hs_path_ns = self.handshake_path_ns();
        self.rtt_path_stale = true;
    }

    /// The handshake's round trip, SYN -> SYN-ACK plus SYN-ACK -> ACK, ns.
    fn handshake_path_ns(&self) -> Option<u64> {
        (self.hs.syn_rtt.zip(self.hs.synack_rtt))
            .map(|(x, y)| duration_nanos(x).saturating_add(duration_nanos(y)))
    }

    fn outstanding(&self, d: usize) -> bool {
        let ds = &self.dirs[d];
        ds.any_seq && (!ds.any_ack || ds.acked < ds.snd_max)
    }

    /// Whether a SYN from side `d` (0: `a`, 1: `b`) starts a new connection on a reused 4-tuple.
    pub(crate) fn is_reuse_by(&self, d: usize, h: &TcpHeader) -> bool {
        h.has(TcpHeader::SYN)
            && !h.has(TcpHeader::ACK)
            && matches!(self.state, ConnState::Closed | ConnState::Reset)
            && self.dirs[d]
                .space
                .base
                .is_some_and(|b| b.wrapping_sub(EXT_ORIGIN) as u32 != h.seq)
    }

    /// Closed (FIN both ways, or RST) with its last packet before `t`.
    pub(crate) fn closed_before(&self, t: Instant) -> bool {
        matches!(self.state, ConnState::Closed | ConnState::Reset) && self.last_time < t
    }

    /// Feeds one packet sent by side `d` (0: `a`, 1: `b`).
    pub(crate) fn handle(&mut self, d: usize, p: &TcpPacket) {
        if p.h.flags & (TcpHeader::SYN | TcpHeader::FIN | TcpHeader::RST) == 0 {
            self.step::<false>(d, p);
        } else {
            self.handle_control(d, p);
        }
    }

    /// [`TcpConn::handle`] of a SYN, FIN or RST (a few per connection), out of line.
    #[cold]
    #[inline(never)]
    fn handle_control(&mut self, d: usize, p: &TcpPacket) {
        self.step::<true>(d, p);
    }

    /// [`TcpConn::handle`]; with `CONTROL` false the packet carries no SYN, FIN or RST, and
    /// every test of them folds away in the path that almost every packet takes.
    #[inline(always)]
    fn step<const CONTROL: bool>(&mut self, d: usize, p: &TcpPacket) {
        let o = 1 - d;
        let h = p.h;
        let now = p.time;
        self.frames.push(now, p.frame);
        self.last_time = self.last_time.max(now);
        let syn = CONTROL && h.has(TcpHeader::SYN);
        let ack = h.has(TcpHeader::ACK);
        let fin = CONTROL && h.has(TcpHeader::FIN);
        let rst = CONTROL && h.has(TcpHeader::RST);
        let len = h.payload_len as u32;

        // Counters that need no sequence space.
        {
            self.dirs[d].ttl.add(p.ttl);
            let st = &mut self.dirs[d].stats;
            st.packets += 1;
            match p.ecn {
                Ecn::NotEct => st.not_ect += 1,
                Ecn::Ect0 => st.ect0 += 1,
                Ecn::Ect1 => st.ect1 += 1,
                Ecn::Ce => st.ce += 1,
            }
            if CONTROL {
                st.syn += u64::from(syn);
                st.fin += u64::from(fin);
                st.rst += u64::from(rst);
            }
            if !syn {
                st.ece += u64::from(h.has(TcpHeader::ECE));
                st.cwr += u64::from(h.has(TcpHeader::CWR));
            }
            if ack && len == 0 && !syn && !fin && !rst {
                st.pure_acks += 1;
            }
        }

        if syn {
            self.handle_syn(d, p);
        }
        if rst {
            self.state = ConnState::Reset;
        } else if fin {
            self.fins[d] = true;
            if self.state != ConnState::Reset {
                self.state = if self.fins[0] && self.fins[1] {
                    ConnState::Closed
                } else {
                    ConnState::Closing
                };
            }
        }

        let outstanding_before = self.outstanding(d);
        let window_full_before = self.dirs[d].window_full_since.is_some();
        // ACK first: it is about the other direction's data and must not see this packet's
        // own data as outstanding.
        let acked_new = ack && self.handle_ack::<CONTROL>(d, o, p);
        let (mut new_bytes, mut retx) = (0, false);
        if len > 0 || syn || fin {
            (new_bytes, retx) = self.handle_seq::<CONTROL>(d, o, p);
        }
        if syn {
            retx |= if d == 0 {
                self.hs.syn_count > 1
            } else {
                self.hs.synack_count > 1
            };
        }
        // Full-sized: within 40 bytes of options of the peer's MSS, or as large as anything
        // this side sent and at least RFC 9293's default MSS (536) when no MSS was seen; and
        // not pushed, since stacks set PSH on the last segment of a write (RFC 9293 §3.9.1),
        // and offloads that merge segments stop at it.
        let largest = self.dirs[d].stats.max_segment_bytes;
        let full_sized = len > 0
            && !h.has(TcpHeader::PSH)
            && match self.dirs[o].options.mss {
                Some(m) => len + 40 >= u32::from(m),
                None => u64::from(len) >= largest && len >= 536,
            };
        // Only packets that occupy sequence space or reset the connection use the round trip.
        let rtt_path_ns = if len > 0 || syn || fin || rst {
            self.rtt_path_now()
        } else {
            None
        };
        let info = PacketInfo {
            time: now,
            side: d,
            syn,
            fin,
            rst,
            ack,
            retx,
            new_bytes,
            seq_space: len > 0 || syn || fin,
            acked_new,
            other_all_acked: acked_new
                && self.dirs[o].any_ack
                && self.dirs[o].acked >= self.dirs[o].snd_max,
            zero_window: (ack && !syn && !rst).then_some(h.window == 0),
            outstanding_before,
            window_full_before,
            full_sized,
            payload: p.payload,
            seq: h.seq,
            rtt_path_ns,
        };
        self.timeline.packet(&info);
    }

    fn handle_syn(&mut self, d: usize, p: &TcpPacket) {
        let h = p.h;
        let ds = &mut self.dirs[d];
        if ds.space.base.is_none() || !ds.options.syn_seen {
            ds.space.set_isn(h.seq);
        }
        let op = &mut ds.options;
        op.syn_seen = true;
        op.mss = p.opts.mss.or(op.mss);
        op.window_scale = p.opts.window_scale.or(op.window_scale);
        op.sack_permitted |= p.opts.sack_permitted;
        op.timestamps |= p.opts.timestamps.is_some();
        op.tfo_cookie_len = p.opts.tfo_cookie_len.or(op.tfo_cookie_len);
        op.syn_data_bytes = op.syn_data_bytes.max(h.payload_len as u32);
        op.syn_ece = h.has(TcpHeader::ECE);
        op.syn_cwr = h.has(TcpHeader::CWR);
        op.syn_ae = h.ae;
        let now = p.time;
        if !h.has(TcpHeader::ACK) && d == 0 {
            self.hs.syn_count += 1;
            self.hs.syn_time.get_or_insert(now);
            self.last_syn = Some(now);
            // RFC 3168 §6.1.1: ECE+CWR on the SYN asks for ECN; RFC 9768 §3.1.1: AE+CWR+ECE
            // asks for AccECN.
            if h.has(TcpHeader::ECE) && h.has(TcpHeader::CWR) {
                self.hs.ecn = EcnSetup::Requested;
            }
        } else if h.has(TcpHeader::ACK) && d == 1 {
            self.hs.synack_count += 1;
            self.isn_b = Some(h.seq);
            if self.hs.synack_time.is_none() {
                self.hs.synack_time = Some(now);
                if let (1, Some(s)) = (self.hs.syn_count, self.last_syn) {
                    self.hs.syn_rtt = Some(now - s);
                    self.handshake_rtt_changed();
                }
            }
            self.last_synack = Some(now);
            if self.hs.ecn == EcnSetup::Requested {
                let a = &self.dirs[0].options;
                let (ae, cwr, ece) = (h.ae, h.has(TcpHeader::CWR), h.has(TcpHeader::ECE));
                self.hs.ecn = if a.syn_ae {
                    // RFC 9768 §3.1.1 Table 2: these SYN-ACK codes accept AccECN; 001 is a
                    // classic-ECN server.
                    match (ae, cwr, ece) {
                        (false, true, false)
                        | (false, true, true)
                        | (true, false, false)
                        | (true, true, false) => EcnSetup::AccEcn,
                        (false, false, true) => EcnSetup::Classic,
                        _ => EcnSetup::Requested,
                    }
                } else if ece && !cwr {
                    EcnSetup::Classic
                } else {
                    EcnSetup::Requested
                };
            }
            // RFC 7323 §2.2: scaling applies only when both SYNs carried the option.
            if let (Some(sa), Some(sb)) = (
                self.dirs[0].options.window_scale,
                self.dirs[1].options.window_scale,
            ) {
                self.dirs[0].options.window_scale_applied = sa;
                self.dirs[1].options.window_scale_applied = sb;
            }
        }
    }

    /// Returns whether the ACK moved the other direction's cumulative ACK forward.
    /// `CONTROL`: as in [`TcpConn::step`].
    #[inline(always)]
    fn handle_ack<const CONTROL: bool>(&mut self, d: usize, o: usize, p: &TcpPacket) -> bool {
        let h = p.h;
        let now = p.time;
        let syn = CONTROL && h.has(TcpHeader::SYN);
        let fin = CONTROL && h.has(TcpHeader::FIN);
        let rst = CONTROL && h.has(TcpHeader::RST);
        let len = h.payload_len as u32;
        // Handshake completion: a's first ACK of b's ISN+1.
        if d == 0 && !syn && self.hs.ack_time.is_none() {
            if let Some(isn) = self.isn_b {
                if h.ack == isn.wrapping_add(1) {
                    self.hs.ack_time = Some(now);
                    if let Some(s) = self.hs.syn_time {
                        self.hs.duration = Some(now - s);
                    }
                    if let (1, Some(sa)) = (self.hs.synack_count, self.last_synack) {
                        self.hs.synack_rtt = Some(now - sa);
                        self.handshake_rtt_changed();
                    }
                }
            }
        }

        // The window this side advertises (RFC 7323 §2.3: never scaled on a SYN).
        let shift = if syn {
            0
        } else {
            self.dirs[d].options.window_scale_applied
        };
        let window = u64::from(h.window) << shift;
        let pure = len == 0 && !syn && !fin && !rst;
        {
            let st = &mut self.dirs[d].stats;
            if !syn && !rst {
                if h.window == 0 {
                    st.zero_window += 1;
                }
                st.min_window_bytes = Some(st.min_window_bytes.map_or(window, |m| m.min(window)));
                st.max_window_bytes = Some(st.max_window_bytes.map_or(window, |m| m.max(window)));
            }
        }
        // Duplicate ACK (RFC 5681 §2): same ACK number and window, no data, data outstanding.
        let was = self.dirs[d].my_last_ack;
        self.dirs[d].my_last_ack = Some((h.ack, h.window));

        let keep = self.keep_series;
        let mut new_min_rtt = false;
        let ds = &mut self.dirs[o];
        let ack_rel = ds.space.rel(h.ack);
        if pure && was == Some((h.ack, h.window)) && ds.snd_max > ack_rel && ds.any_ack {
            self.dirs[d].stats.dup_acks += 1;
        }
        let ds = &mut self.dirs[o];
        let advanced = !ds.any_ack || ack_rel > ds.acked;
        let window_changed = !ds.any_window || ds.peer_window != window;
        if advanced {
            // RTT sample: the segment whose end this ACK is exactly, if sent only once, and
            // only when the ACK covers no retransmitted segment: such an ACK was released by
            // the retransmission, so its delay includes the recovery (Karn, RFC 6298 §3).
            let mut sample = None;
            let mut covers_retx = false;
            while let Some(f) = ds.outstanding.front() {
                if f.end > ack_rel {
                    break;
                }
                covers_retx |= f.retx;
                if f.end == ack_rel && !f.retx {
                    sample = Some(now - f.time);
                }
                ds.outstanding.pop_front();
            }
            if covers_retx {
                sample = None;
            }
            if let Some(rtt) = sample {
                let ms = rtt.as_secs_f64() * 1e3;
                let st = &mut ds.stats;
                new_min_rtt = st.rtt_min_ms.is_none_or(|m| ms < m);
                st.rtt_samples += 1;
                st.rtt_min_ms = Some(st.rtt_min_ms.map_or(ms, |m| m.min(ms)));
                st.rtt_max_ms = Some(st.rtt_max_ms.map_or(ms, |m| m.max(ms)));
                ds.rtt_sum_ms += ms;
                ds.rtt_sumsq_ms += ms * ms;
                ds.ev.rtt_min = Some(ds.ev.rtt_min.map_or(rtt, |m| m.min(rtt)));
                // Evidence of a queue only while more data was in flight behind the sampled
                // segment: an ACK of the last byte sent may have waited for the receiver's
                // delayed-ACK timer or its application's next write (think time).
                if ds.snd_max > ack_rel {
                    ds.ev.queue_rtt.add(now, rtt);
                }
                if keep {
                    ds.series.rtt.push(RttSample {
                        time: now,
                        seq: ack_rel,
                        rtt,
                    });
                }
            }
            ds.acked = ack_rel;
            ds.any_ack = true;
            ds.last_ack_advance = Some(now);
            ds.seen.prune(ack_rel);
            if keep {
                ds.series.acks.push(SeqPoint {
                    time: now,
                    seq: ack_rel,
                });
            }
            if let Some((start, point, pk, by)) = ds.recovery {
                if ack_rel >= point {
                    ds.ev.recoveries.push(diagnose::Recovery {
                        start,
                        end: now,
                        packets: pk,
                        bytes: by,
                        recovered: true,
                    });
                    ds.recovery = None;
                }
            }
        }
        ds.peer_window = window;
        ds.any_window = true;
        if keep && (advanced || window_changed) {
            ds.series.windows.push(WindowPoint {
                time: now,
                ack: ds.acked,
                window_bytes: window,
            });
        }
        let all = ds.acked >= ds.snd_max;
        ds.last_peer_ack = Some((now, pure, all));
        if all && advanced && ds.any_seq {
            ds.all_acked_at = Some(now);
        }
        // SACK blocks are about the other direction's data.
        if p.opts.sack_len > 0 {
            let sacks = p.opts.sack_blocks();
            let st = &mut self.dirs[d].stats;
            st.sack_packets += 1;
            st.max_sack_blocks = st.max_sack_blocks.max(sacks.len() as u64);
            if keep {
                let ds = &mut self.dirs[o];
                for &(l, r) in sacks {
                    let (left, right) = (ds.space.rel(l), ds.space.rel(r));
                    ds.series.sacks.push(SackBlock {
                        time: now,
                        left,
                        right,
                    });
                }
            }
        }
        if keep && !syn && h.has(TcpHeader::ECE) {
            self.dirs[o].series.marks.push(Mark {
                time: now,
                seq: ack_rel,
                kind: MarkKind::Ece,
            });
        }
        if new_min_rtt {
            self.rtt_path_stale = true;
        }
        advanced && self.dirs[o].any_seq
    }

    /// Returns the payload bytes sent for the first time and whether the segment was a
    /// retransmission.
    /// `CONTROL`: as in [`TcpConn::step`].
    #[inline(always)]
    fn handle_seq<const CONTROL: bool>(
        &mut self,
        d: usize,
        o: usize,
        p: &TcpPacket,
    ) -> (u64, bool) {
        let h = p.h;
        let now = p.time;
        let syn = CONTROL && h.has(TcpHeader::SYN);
        let fin = CONTROL && h.has(TcpHeader::FIN);
        let len = h.payload_len as u32;
        let keep = self.keep_series;
        let peer_mss = self.dirs[o].options.mss;
        let peer_last_data = self.dirs[o].last_data;
        let path_rtt_ns = self.hs_path_ns;
        debug_assert_eq!(path_rtt_ns, self.handshake_path_ns());
        let peer_zero_windows = self.dirs[o].stats.zero_window;
        let ds = &mut self.dirs[d];
        let start = ds.space.rel(h.seq);
        let data_start = start + u64::from(syn);
        let data_end = data_start + u64::from(len);
        let end = data_end + u64::from(fin);
        let st = &mut ds.stats;

        let mut kind = SegmentKind::New;
        let mut new_bytes = len as u64;
        if len > 0 {
            st.data_packets += 1;
            st.data_bytes += u64::from(len);
            st.max_segment_bytes = st.max_segment_bytes.max(u64::from(len));
            let floor = if ds.any_ack { ds.acked } else { 0 };
            if ds.any_seq && data_start < ds.snd_max.max(floor) {
                new_bytes = ds.seen.uncovered(data_start, data_end, floor);
                if new_bytes < u64::from(len) {
                    kind = SegmentKind::Retransmit;
                    st.retransmitted_packets += 1;
                    st.retransmitted_bytes += u64::from(len);
                } else {
                    kind = SegmentKind::OutOfOrder;
                    st.out_of_order_packets += 1;
                }
            }
            st.unique_bytes += new_bytes;
            if ds.any_window && ds.peer_window == 0 && ds.any_ack && data_start >= ds.acked {
                st.window_probes += 1;
                if kind == SegmentKind::New {
                    kind = SegmentKind::WindowProbe;
                }
            }
        }
        let in_flight_before = if ds.any_ack {
            ds.snd_max.saturating_sub(ds.acked)
        } else {
            0
        };

        if len > 0 {
            // A full window ends when data flows again; the ACK just before this segment is
            // what reopened it.
            if let Some(since) = ds.window_full_since.take() {
                let reopen = ds
                    .last_peer_ack
                    .map(|a| a.0)
                    .filter(|&t| t > since)
                    .unwrap_or(now);
                let last = ds.last_send.unwrap_or(since);
                let acked = ds.last_ack_advance == Some(reopen);
                ds.ev
                    .window_full(since, last, reopen, ds.peer_window, acked);
            }
            // Nagle (RFC 896, RFC 9293 §3.7.4): this segment left right after an ACK (with no
            // data) that covered everything, and the previous data segment had been waiting
            // for it.
            let mut nagle = false;
            if let (Some((tp, plen)), Some((ta, true, true))) = (ds.prev_data, ds.last_peer_ack) {
                // In integer nanoseconds: at a receiver every ACK covers everything, so this
                // runs for most data segments there.
                const MS_NS: u64 = 1_000_000;
                const SLACK_NS: u64 = diagnose::NAGLE_SLACK.as_nanos() as u64;
                const NEAR_NS: u64 = diagnose::NEAR.as_nanos() as u64;
                let gap_ns = now.as_nanos().saturating_sub(tp.as_nanos());
                let after_ack_ns = now.as_nanos().saturating_sub(ta.as_nanos());
                if kind == SegmentKind::New
                    && ta > tp
                    && gap_ns >= MS_NS
                    && after_ack_ns <= (gap_ns / 10).max(SLACK_NS) + NEAR_NS
                {
                    nagle = true;
                    ds.ev.nagle.push(diagnose::NagleEvent {
                        prev_time: tp,
                        prev_len: plen,
                        after_ack: Duration::from_nanos(after_ack_ns),
                        ack_time: ta,
                        time: now,
                        len,
                        peer_window: ds.peer_window,
                    });
                }
            }
            // Application-limited: nothing in flight, nothing sent for a while.
            if !nagle && kind == SegmentKind::New && in_flight_before == 0 {
                // Silence before the peer's last data was waiting for the peer (a reply
                // waits for its request); only the time since is this application's own.
                if let Some(acked_at) = ds.all_acked_at {
                    let idle_from = peer_last_data.map_or(acked_at, |t| t.max(acked_at));
                    let idle = now - idle_from;
                    let rtt_min = ds.ev.rtt_min.unwrap_or(Duration::ZERO);
                    if idle >= rtt_min.max(Duration::from_millis(1)) {
                        ds.ev.app_idle(idle_from, now);
                    }
                }
            }
            if kind == SegmentKind::Retransmit {
                // RTO (RFC 6298 §5): silence well beyond a few RTTs, then the retransmission.
                if let Some(last) = ds.last_send {
                    let gap = now - last;
                    let rtt_min = ds.ev.rtt_min.unwrap_or(Duration::ZERO);
                    if in_flight_before > 0 && gap >= (rtt_min * 3).max(Duration::from_millis(180))
                    {
                        ds.ev.rto.push(diagnose::RtoEvent {
                            last_send: last,
                            time: now,
                            seq: data_start,
                        });
                    }
                }
                // A loss-recovery episode lasts until the ACK passes the highest sequence
                // sent when it began (the recovery point of RFC 6675 §5).
                match &mut ds.recovery {
                    Some((_, _, pk, by)) => {
                        *pk += 1;
                        *by += u64::from(len);
                    }
                    None => ds.recovery = Some((now, ds.snd_max, 1, u64::from(len))),
                }
                for s in ds.outstanding.iter_mut() {
                    if s.start < data_end && s.end > data_start {
                        s.retx = true;
                    }
                }
            }
            if let Some((tsval, _)) = p.opts.timestamps {
                ds.ev.one_way_delay(now, tsval);
            }
            if kind == SegmentKind::New {
                let peer = diagnose::PeerView {
                    last_data: peer_last_data,
                    window: if ds.any_window {
                        ds.peer_window
                    } else {
                        u64::MAX
                    },
                    zero_windows: peer_zero_windows,
                };
                ds.ev.flights.data(now, u64::from(len), path_rtt_ns, peer);
            }
            if kind == SegmentKind::OutOfOrder {
                // The segments above a hole wait for it to be filled before the cumulative ACK
                // can cover them, so the ACK that does says nothing about their RTT.
                for s in ds.outstanding.iter_mut() {
                    if s.start >= data_start {
                        s.retx = true;
                    }
                }
            }
            ds.prev_data = Some((now, len));
            ds.first_data.get_or_insert(now);
            ds.last_data = Some(now);
        }

        if ds.outstanding.len() >= MAX_OUTSTANDING {
            ds.outstanding.pop_front();
        }
        let seg = Outstanding {
            start,
            end,
            time: now,
            retx: kind == SegmentKind::Retransmit,
        };
        if kind == SegmentKind::OutOfOrder {
            // A hole filler goes where its bytes are, so that the ACK that ends exactly at it
            // finds it at the front (the queue is otherwise in sending order).
            let at = ds.outstanding.partition_point(|s| s.start < start);
            ds.outstanding.insert(at, seg);
        } else {
            ds.outstanding.push_back(seg);
        }
        ds.seen.insert(data_start, data_end);
        ds.snd_max = if ds.any_seq { ds.snd_max.max(end) } else { end };
        ds.any_seq = true;
        ds.last_send = Some(now);
        let st = &mut ds.stats;
        st.seq_extent_bytes = st.seq_extent_bytes.max(data_end);
        let in_flight = if ds.any_ack {
            ds.snd_max.saturating_sub(ds.acked)
        } else {
            ds.snd_max.saturating_sub(start)
        };
        st.max_in_flight_bytes = st.max_in_flight_bytes.max(in_flight);
        // The window is full when another full-sized segment would not fit.
        let full_seg = u64::from(peer_mss.unwrap_or(0))
            .min(st.max_segment_bytes)
            .max(st.max_segment_bytes.min(536))
            .max(1);
        if len > 0 && ds.any_window && ds.any_ack {
            let usable = (ds.acked + ds.peer_window).saturating_sub(ds.snd_max);
            if usable < full_seg && ds.window_full_since.is_none() {
                ds.window_full_since = Some(now);
            }
        }
        if keep {
            let s = &mut ds.series;
            s.segments.push(Segment {
                time: now,
                seq: start,
                len,
                kind,
                ecn: p.ecn,
                flags: h.flags,
            });
            s.in_flight.push(InFlightPoint {
                time: now,
                bytes: in_flight,
            });
            if p.ecn == Ecn::Ce {
                s.marks.push(Mark {
                    time: now,
                    seq: start,
                    kind: MarkKind::Ce,
                });
            }
            if !syn && h.has(TcpHeader::CWR) {
                s.marks.push(Mark {
                    time: now,
                    seq: start,
                    kind: MarkKind::Cwr,
                });
            }
        }
        (new_bytes, kind == SegmentKind::Retransmit)
    }

    /// Closes the books: averages, throughput, series, diagnoses.
    pub(crate) fn finish(mut self) -> Connection {
        let rtt_to = self.rtt_to();
        // The capture point's round trip to each end: the path's whole round trip.
        let path_rtt = rtt_to[0].zip(rtt_to[1]).map(|(x, y)| x + y);
        let outstanding = [self.outstanding(0), self.outstanding(1)];
        let duration = self.last_time - self.first_time;
        let secs = duration.as_secs_f64();
        for ds in self.dirs.iter_mut() {
            // A window still full at the end counts if an ACK reopened it.
            if let (Some(since), Some((ta, _, _))) = (ds.window_full_since.take(), ds.last_peer_ack)
            {
                if ta > since {
                    let last = ds.last_send.unwrap_or(since);
                    let acked = ds.last_ack_advance == Some(ta);
                    ds.ev.window_full(since, last, ta, ds.peer_window, acked);
                }
            }
            if let Some((start, _, pk, by)) = ds.recovery.take() {
                ds.ev.recoveries.push(diagnose::Recovery {
                    start,
                    end: self.last_time,
                    packets: pk,
                    bytes: by,
                    recovered: false,
                });
            }
            let st = &mut ds.stats;
            if st.rtt_samples > 0 {
                let n = st.rtt_samples as f64;
                let avg = ds.rtt_sum_ms / n;
                st.rtt_avg_ms = Some(avg);
                st.rtt_stdev_ms = Some((ds.rtt_sumsq_ms / n - avg * avg).max(0.0).sqrt());
            }
            st.throughput_bps = if secs > 0.0 {
                st.unique_bytes as f64 * 8.0 / secs
            } else {
                0.0
            };
            if self.keep_series {
                ds.series.throughput = throughput_series(&ds.series.segments, path_rtt);
            }
        }
        let [a2b_state, b2a_state] = self.dirs;
        let mut conn = Connection {
            vantage: self.vantage,
            a: self.a,
            b: self.b,
            first_time: self.first_time,
            last_time: self.last_time,
            handshake: self.hs,
            a2b: Direction {
                src: a2b_state.src,
                options: a2b_state.options,
                stats: a2b_state.stats,
                capture_point: CapturePoint::Unknown,
                vantage_basis: VantageBasis::None,
                not_judged: Vec::new(),
                series: a2b_state.series,
            },
            b2a: Direction {
                src: b2a_state.src,
                options: b2a_state.options,
                stats: b2a_state.stats,
                capture_point: CapturePoint::Unknown,
                vantage_basis: VantageBasis::None,
                not_judged: Vec::new(),
                series: b2a_state.series,
            },
            diagnoses: Vec::new(),
            frames: Frames::default(),
            state: self.state,
            story: Story::default(),
        };
        let [p_a2b, p_b2a] = capture_points(
            &conn.handshake,
            conn.a2b.stats.rtt_min_ms,
            conn.b2a.stats.rtt_min_ms,
            [a2b_state.ttl.get(), b2a_state.ttl.get()],
        );
        (conn.a2b.capture_point, conn.a2b.vantage_basis) = p_a2b;
        (conn.b2a.capture_point, conn.b2a.vantage_basis) = p_b2a;
        if conn.handshake.syn_count > 0
            && conn.handshake.synack_count == 0
            && self.state != ConnState::Reset
        {
            conn.state = ConnState::SynSent;
        }
        (conn.diagnoses, [conn.a2b.not_judged, conn.b2a.not_judged]) = diagnose::diagnose(
            &conn,
            [&a2b_state.ev, &b2a_state.ev],
            self.last_syn,
            self.last_synack,
        );
        let story_ev;
        let at_receiver = [
            conn.a2b.capture_point == CapturePoint::Receiver,
            conn.b2a.capture_point == CapturePoint::Receiver,
        ];
        (conn.story, story_ev) = self.timeline.finish(rtt_to, outstanding, at_receiver);
        stories::tell(&mut conn, &story_ev, rtt_to);
        conn.frames = self.frames.span(conn.first_time, conn.last_time);
        for d in &mut conn.diagnoses {
            d.frames = self.frames.span(d.start, d.end);
        }
        conn
    }
}

/// Where the capture point sits on each direction's path ([`CapturePoint`]) and what that
/// was decided from ([`VantageBasis`]).
///
/// At a point X, the SYN -> SYN-ACK time is the round trip X <-> b and the SYN-ACK -> ACK
/// time the round trip X <-> a; `a2b`'s data is ACKed after the first, `b2a`'s after the
/// second, which is why the data RTTs can stand in for them when the handshake is missing.
/// On a path whose whole round trip is under [`diagnose::NEAR`] (a LAN, two namespaces on one
/// machine) the split is the hosts' own processing time and says nothing; there the IP TTLs
/// decide: a packet still carrying its sender's initial TTL was captured on its sender's
/// link, before any router.
pub(crate) fn capture_points(
    hs: &Handshake,
    a2b_rtt_min_ms: Option<f64>,
    b2a_rtt_min_ms: Option<f64>,
    ttl: [Option<(u8, u8)>; 2],
) -> [(CapturePoint, VantageBasis); 2] {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let near_ms = ms(diagnose::NEAR);
    let by_split = |to_b: f64, to_a: f64, basis: VantageBasis| {
        let whole = to_b + to_a;
        // Beyond 3/4 of the round trip on one side is "next to" the other end: close enough
        // that bytes in flight and ACK arrival times are the sender's (or the receiver's) own.
        let point = |beyond: f64| {
            let share = beyond / whole;
            if share >= 0.75 {
                CapturePoint::Sender
            } else if share <= 0.25 {
                CapturePoint::Receiver
            } else {
                CapturePoint::Middle
            }
        };
        [(point(to_b), basis), (point(to_a), basis)]
    };
    let handshake = hs.syn_rtt.zip(hs.synack_rtt).map(|(b, a)| (ms(b), ms(a)));
    if let Some((to_b, to_a)) = handshake.filter(|(b, a)| b + a >= near_ms) {
        return by_split(to_b, to_a, VantageBasis::Handshake);
    }
    // Initial TTLs (and IPv6 hop limits) in common use: 64 (Linux, macOS, the BSDs), 128
    // (Windows), 255 (network gear, Solaris), 32 (old Windows).
    let initial = |t: Option<(u8, u8)>| {
        t.is_some_and(|(lo, hi)| lo == hi && matches!(lo, 32 | 64 | 128 | 255))
    };
    let by_ttl = |s: usize| {
        let (sender, receiver) = (initial(ttl[s]), initial(ttl[1 - s]));
        let point = match (sender, receiver) {
            (true, false) => CapturePoint::Sender,
            (false, true) => CapturePoint::Receiver,
            (false, false) if ttl[s].is_some() && ttl[1 - s].is_some() => CapturePoint::Middle,
            _ => return None,
        };
        Some((point, VantageBasis::Ttl))
    };
    if let (Some(x), Some(y)) = (by_ttl(0), by_ttl(1)) {
        return [x, y];
    }
    if handshake.is_some() {
        // A short path whose TTLs do not tell either: the point is unknown, but every point
        // is within a millisecond of both ends (see `diagnose`).
        return [(CapturePoint::Unknown, VantageBasis::ShortPath); 2];
    }
    match a2b_rtt_min_ms.zip(b2a_rtt_min_ms) {
        Some((to_b, to_a)) if to_b + to_a >= near_ms => by_split(to_b, to_a, VantageBasis::DataRtt),
        _ => [(CapturePoint::Unknown, VantageBasis::None); 2],
    }
}

/// Goodput and throughput in about 100 bins of a round width (1, 2 or 5 × 10^k ms), none
/// narrower than `path_rtt` when it is known: within one round trip a sender's rate is its
/// bursts (an initial window leaves at once, ACKs release data in clumps), not the rate the
/// path carries, which a window per round trip sets.
fn throughput_series(segs: &[Segment], path_rtt: Option<Duration>) -> Vec<ThroughputPoint> {
    let data: Vec<&Segment> = segs.iter().filter(|s| s.len > 0).collect();
    // Min and max rather than first and last: a capture's clock may step backwards.
    let (Some(t_min), Some(t_max)) = (
        data.iter().map(|s| s.time.as_nanos()).min(),
        data.iter().map(|s| s.time.as_nanos()).max(),
    ) else {
        return Vec::new();
    };
    let span_ns = t_max - t_min;
    let rtt_ns = path_rtt.map_or(0, duration_nanos);
    let mut width_ns = 1_000_000u64;
    'outer: for exp in 0..12 {
        for m in [1u64, 2, 5] {
            width_ns = m * 10u64.pow(exp) * 1_000_000;
            if span_ns / width_ns < 100 && width_ns >= rtt_ns {
                break 'outer;
            }
        }
    }
    // From the first data segment: a bin that began before it would read low.
    let t0 = t_min;
    let n = ((t_max - t0) / width_ns + 1) as usize;
    let mut good = vec![0u64; n];
    let mut all = vec![0u64; n];
    for s in data {
        let i = ((s.time.as_nanos() - t0) / width_ns) as usize;
        all[i] += u64::from(s.len);
        if s.kind != SegmentKind::Retransmit {
            good[i] += u64::from(s.len);
        }
    }
    let w = width_ns as f64 / 1e9;
    (0..n)
        .map(|i| ThroughputPoint {
            time: Instant::from_nanos(t0 + i as u64 * width_ns),
            width: Duration::from_nanos(width_ns),
            goodput_bps: good[i] as f64 * 8.0 / w,
            throughput_bps: all[i] as f64 * 8.0 / w,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequence_numbers_unwrap_across_the_32_bit_boundary() {
        let mut s = SeqSpace::default();
        s.set_isn(u32::MAX - 10);
        assert_eq!(s.rel(u32::MAX - 9), 1);
        assert_eq!(s.rel(5), 16);
        assert_eq!(s.rel(u32::MAX), 10);
        assert_eq!(s.rel(1_000_000), 1_000_011);
    }

    #[test]
    fn a_space_first_seen_mid_stream_numbers_its_first_byte_one() {
        let mut s = SeqSpace::default();
        assert_eq!(s.rel(1000), 1);
        assert_eq!(s.rel(900), 0, "old bytes clamp at the origin");
    }

    #[test]
    fn range_set_counts_only_bytes_not_seen_before() {
        let mut r = RangeSet::default();
        r.insert(0, 100);
        r.insert(200, 300);
        assert_eq!(r.uncovered(50, 250, 0), 100);
        assert_eq!(r.uncovered(100, 200, 0), 100);
        assert_eq!(r.uncovered(100, 200, 150), 50);
        r.insert(100, 200);
        assert_eq!(r.r, vec![(0, 300)]);
        r.prune(300);
        assert!(r.r.is_empty());
    }

    #[test]
    fn throughput_bins_are_never_narrower_than_the_paths_round_trip() {
        // An initial window of ten segments at once, then one segment every 7.5 ms (1.6 Mbit/s)
        // for 200 ms.
        let seg = |ms: f64, i: u64| Segment {
            time: Instant::from_nanos((ms * 1e6) as u64),
            seq: 1 + 1448 * i,
            len: 1448,
            kind: SegmentKind::New,
            ecn: Ecn::NotEct,
            flags: 0x10,
        };
        let mut segs: Vec<Segment> = (0..10).map(|i| seg(0.0, i)).collect();
        segs.extend((0..27).map(|i| seg(7.5 * f64::from(i as u32), 10 + i)));
        // Without a round trip: 2 ms bins, where the initial window reads as 58 Mbit/s.
        let fine = throughput_series(&segs, None);
        assert_eq!(fine[0].width, Duration::from_millis(2));
        assert!(fine[0].goodput_bps > 50e6, "{:?}", fine[0]);
        // With the path's 150 ms: 200 ms bins, and a first bin near what the path carried.
        let rtt = throughput_series(&segs, Some(Duration::from_millis(150)));
        assert_eq!(rtt[0].width, Duration::from_millis(200));
        assert_eq!(rtt.len(), 1);
        let first_mbps = rtt[0].goodput_bps / 1e6;
        assert!((1.5..2.5).contains(&first_mbps), "{first_mbps}");
        // Every byte is in it.
        let bytes: f64 = rtt.iter().map(|p| p.goodput_bps / 8.0 * 0.2).sum();
        assert!((bytes - 37.0 * 1448.0).abs() < 1.0, "{bytes}");
    }
}

/// Statistics on whole synthetic transfers (crate::synth), checked against what the model
/// itself sent.
#[cfg(test)]
mod transfer_tests {
    use std::collections::{BTreeMap, BTreeSet};

    use crate::model::*;
    use crate::synth::{self, Bulk};
    use crate::tcp::capture_points;
    use crate::{analyze_bytes, Options};
    use wire::Duration;

    fn hs(syn_rtt_ms: Option<u64>, synack_rtt_ms: Option<u64>) -> Handshake {
        Handshake {
            syn_rtt: syn_rtt_ms.map(Duration::from_millis),
            synack_rtt: synack_rtt_ms.map(Duration::from_millis),
            ..Handshake::default()
        }
    }

    fn points(
        hs: &Handshake,
        a2b: Option<f64>,
        b2a: Option<f64>,
        ttl: [Option<(u8, u8)>; 2],
    ) -> [CapturePoint; 2] {
        capture_points(hs, a2b, b2a, ttl).map(|(p, _)| p)
    }

    #[test]
    fn the_handshake_split_places_the_capture_on_each_directions_path() {
        use CapturePoint::*;
        let no = [None, None];
        // At the client: the SYN-ACK takes the whole RTT, the client's ACK leaves at once.
        assert_eq!(
            points(&hs(Some(40), Some(0)), None, None, no),
            [Sender, Receiver]
        );
        // At the server, the other way round.
        assert_eq!(
            points(&hs(Some(0), Some(40)), None, None, no),
            [Receiver, Sender]
        );
        // Halfway along the path.
        assert_eq!(
            points(&hs(Some(20), Some(20)), None, None, no),
            [Middle, Middle]
        );
        // Without a handshake the data RTTs split the round trip the same way...
        assert_eq!(
            points(&hs(None, None), Some(40.0), Some(0.2), no),
            [Sender, Receiver]
        );
        // ...and with data one way only nothing can be said.
        assert_eq!(
            points(&hs(None, Some(3)), Some(40.0), None, no),
            [Unknown, Unknown]
        );
    }

    #[test]
    fn on_a_sub_millisecond_path_the_ttls_decide_and_the_handshake_split_does_not() {
        use CapturePoint::*;
        let us = |b, a| Handshake {
            syn_rtt: Some(Duration::from_micros(b)),
            synack_rtt: Some(Duration::from_micros(a)),
            ..Handshake::default()
        };
        // At the client, one router away from the server: the client's packets carry 64,
        // the server's 63. The split (15 us vs 20 us) alone would say "middle".
        let client = [Some((64, 64)), Some((63, 63))];
        assert_eq!(points(&us(15, 20), None, None, client), [Sender, Receiver]);
        let server = [Some((63, 63)), Some((64, 64))];
        assert_eq!(points(&us(15, 20), None, None, server), [Receiver, Sender]);
        // Behind routers on both sides.
        let middle = [Some((62, 62)), Some((120, 120))];
        assert_eq!(points(&us(15, 20), None, None, middle), [Middle, Middle]);
        // Same link as both ends: unknown, from a short path.
        let lan = [Some((64, 64)), Some((64, 64))];
        assert_eq!(
            capture_ptsb(&us(15, 20), lan),
            [(Unknown, VantageBasis::ShortPath); 2]
        );
        // A real path's handshake outweighs the TTLs.
        assert_eq!(
            points(&hs(Some(0), Some(30)), None, None, client),
            [Receiver, Sender]
        );
    }

    fn capture_ptsb(
        hs: &Handshake,
        ttl: [Option<(u8, u8)>; 2],
    ) -> [(CapturePoint, VantageBasis); 2] {
        capture_points(hs, None, None, ttl)
    }

    fn lossy(client: &str, server: &str) -> Bulk {
        let mut b = Bulk::new(client.parse().unwrap(), server.parse().unwrap());
        b.drop_first_tx = [100u64, 101, 102, 103, 300].into_iter().collect();
        b.drop_second_tx = [300u64].into_iter().collect();
        b.window_segments = 60;
        b
    }

    fn run(pkts: Vec<(u64, Vec<u8>)>) -> Analysis {
        analyze_bytes("t", &synth::pcap(pkts), Options::default()).unwrap()
    }

    /// What the model sent from the client: (data packets, data bytes, retransmitted packets,
    /// retransmitted bytes), counted from the datagrams themselves.
    fn truth(pkts: &[(u64, Vec<u8>)], client_port: u16) -> (u64, u64, u64, u64) {
        let mut seen: BTreeMap<u32, u64> = BTreeMap::new();
        let (mut dp, mut db, mut rp, mut rb) = (0, 0, 0, 0);
        let mut sorted: Vec<_> = pkts.to_vec();
        sorted.sort_by_key(|p| p.0);
        for (_, p) in &sorted {
            let h = wire::packet::parse(p).unwrap();
            if let wire::packet::Transport::Tcp(t) = h.transport {
                if t.src_port == client_port && t.payload_len > 0 {
                    dp += 1;
                    db += t.payload_len as u64;
                    if seen.insert(t.seq, t.payload_len as u64).is_some() {
                        rp += 1;
                        rb += t.payload_len as u64;
                    }
                }
            }
        }
        (dp, db, rp, rb)
    }

    #[test]
    fn a_lossy_transfer_counts_packets_bytes_and_retransmissions_as_sent() {
        let b = lossy("10.0.0.1:40000", "10.0.0.2:5201");
        let pkts = b.run();
        let (dp, db, rp, rb) = truth(&pkts, 40000);
        let a = run(pkts.clone());
        assert_eq!(a.connections.len(), 1);
        let c = &a.connections[0];
        let s = &c.a2b.stats;
        assert_eq!(c.a.to_string(), "10.0.0.1:40000");
        assert_eq!(
            s.packets as usize,
            pkts.iter()
                .filter(|p| p.1[21] == 0x40 && p.1[20] == 0x9c)
                .count()
        );
        assert_eq!((s.data_packets, s.data_bytes), (dp, db));
        assert_eq!((s.retransmitted_packets, s.retransmitted_bytes), (rp, rb));
        assert_eq!(s.unique_bytes, b.bytes);
        assert!(rp >= 5, "the model retransmitted {rp}");
        assert!(c.b2a.stats.sack_packets > 0);
        assert!(c.b2a.stats.dup_acks >= 3);
        assert_eq!(c.state, ConnState::Closed);
        // Handshake: sender-side capture, so SYN -> SYN-ACK is the base RTT.
        let rtt_ms = b.base_rtt_ns as f64 / 1e6;
        assert!((c.handshake.syn_rtt.unwrap().as_secs_f64() * 1e3 - rtt_ms).abs() < 0.01);
        assert_eq!(c.a2b.options.mss, Some(b.mss as u16));
        assert_eq!(c.a2b.options.window_scale_applied, 7);
        // RTT samples are never below the path's RTT plus one serialization time.
        assert!(s.rtt_min_ms.unwrap() >= rtt_ms);
        assert!(s.rtt_samples > 100);
        assert_eq!(c.b2a.stats.max_window_bytes, Some(60 * 1448 / 128 * 128));
    }

    #[test]
    fn ipv6_and_sequence_wrap_around_give_the_same_statistics() {
        let base = run(lossy("10.0.0.1:40000", "10.0.0.2:5201").run());
        let v6 = run(lossy("[fd00::1]:40000", "[fd00::2]:5201").run());
        let mut w = lossy("10.0.0.1:40000", "10.0.0.2:5201");
        w.isn_client = u32::MAX - 300_000; // wraps a third of the way through
        w.isn_server = u32::MAX;
        let wrapped = run(w.run());
        for other in [&v6, &wrapped] {
            let (x, y) = (&base.connections[0], &other.connections[0]);
            assert_eq!(x.a2b.stats, y.a2b.stats);
            assert_eq!(x.b2a.stats, y.b2a.stats);
            assert_eq!(x.diagnoses, y.diagnoses);
        }
        assert_eq!(wrapped.connections[0].a2b.stats.seq_extent_bytes, 1_000_001);
    }

    #[test]
    fn link_layers_and_pcapng_interfaces_do_not_change_the_analysis() {
        use crate::capture::testwrite;
        use crate::link::testwrap;
        let pkts = lossy("10.0.0.1:40000", "10.0.0.2:5201").run();
        let base = run(pkts.clone());
        let mut sorted = pkts.clone();
        sorted.sort_by_key(|p| p.0);
        for (lt, wrap) in [
            (113u32, testwrap::sll as fn(&[u8]) -> Vec<u8>),
            (276, testwrap::sll2),
            (0, testwrap::null_le),
            (1, |ip: &[u8]| testwrap::ethernet(ip, &[(0x8100, 42)])),
        ] {
            let mut w = wire::pcap::PcapWriter::with_linktype(Vec::new(), lt, 65535).unwrap();
            for (t, p) in &sorted {
                w.write(*t, &wrap(p)).unwrap();
            }
            let a = analyze_bytes("t", &w.into_inner(), Options::default()).unwrap();
            assert_eq!(
                a.connections[0].a2b.stats, base.connections[0].a2b.stats,
                "linktype {lt}"
            );
        }
        // pcapng, two interfaces with different link types and resolutions: the same traffic
        // on both is two vantage points with identical statistics.
        let mut f = testwrite::shb(false);
        f.extend(testwrite::idb(false, 101, 9, Some("raw")));
        f.extend(testwrite::idb(false, 1, 6, Some("eth")));
        for (t, p) in &sorted {
            f.extend(testwrite::epb(false, 0, *t, p, p.len() as u32));
            let e = testwrap::ethernet(p, &[]);
            f.extend(testwrite::epb(false, 1, *t / 1000, &e, e.len() as u32));
        }
        let a = analyze_bytes("t", &f, Options::default()).unwrap();
        assert_eq!(a.connections.len(), 2);
        assert_eq!(
            a.connections[0].vantage.interface + a.connections[1].vantage.interface,
            1
        );
        for c in &a.connections {
            assert_eq!(
                c.a2b.stats.retransmitted_packets,
                base.connections[0].a2b.stats.retransmitted_packets
            );
            assert_eq!(
                c.a2b.stats.data_bytes,
                base.connections[0].a2b.stats.data_bytes
            );
        }
    }

    #[test]
    fn gzip_and_headers_only_captures_give_the_same_counts() {
        use std::io::Write;
        let pkts = lossy("10.0.0.1:40000", "10.0.0.2:5201").run();
        let base = run(pkts.clone());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&synth::pcap(pkts.clone())).unwrap();
        let a = analyze_bytes("t.gz", &gz.finish().unwrap(), Options::default()).unwrap();
        assert_eq!(a.connections[0].a2b.stats, base.connections[0].a2b.stats);
        assert_eq!(a.captures[0].format, "pcap (gzip)");
        // Snaplen 80: IP + TCP headers with options, no payload.
        let mut sorted = pkts;
        sorted.sort_by_key(|p| p.0);
        let mut w = wire::pcap::PcapWriter::with_linktype(Vec::new(), 101, 80).unwrap();
        for (t, p) in &sorted {
            w.write(*t, p).unwrap();
        }
        let cut = analyze_bytes("cut", &w.into_inner(), Options::default()).unwrap();
        let (x, y) = (
            &base.connections[0].a2b.stats,
            &cut.connections[0].a2b.stats,
        );
        assert_eq!(
            (x.data_bytes, x.retransmitted_packets, x.rtt_samples),
            (y.data_bytes, y.retransmitted_packets, y.rtt_samples)
        );
    }

    #[test]
    fn ce_marks_show_as_ce_ece_and_cwr_at_the_receiver() {
        let mut b = Bulk::new(
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:5201".parse().unwrap(),
        );
        b.ecn = true;
        b.window_segments = 80;
        b.rate_bytes_per_s = 2_000_000;
        b.ce_threshold_segments = 5;
        b.vantage = synth::Vantage::Receiver;
        let pkts = b.run();
        let ce_sent = pkts.iter().filter(|p| p.1[1] & 3 == 3).count() as u64;
        let a = run(pkts);
        let c = &a.connections[0];
        assert_eq!(c.handshake.ecn, EcnSetup::Classic);
        assert_eq!(c.a2b.stats.ce, ce_sent);
        assert!(ce_sent > 0);
        assert!(c.b2a.stats.ece > 0);
        assert!(c.a2b.stats.cwr > 0);
        assert!(c.a2b.stats.ect0 > 0);
        assert!(!c
            .diagnoses
            .iter()
            .any(|d| d.kind == DiagnosisKind::EcnUnused));
    }

    #[test]
    fn a_syn_asking_for_a_fast_open_cookie_is_not_fast_open_yet() {
        use crate::synth::{Tcp, ACK, SYN};
        let (c, s) = (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:443".parse().unwrap(),
        );
        let t0 = 1_000_000_000u64;
        let mut syn = Tcp::new(c, s, 100, 0, SYN);
        syn.options = vec![34, 2];
        let mut sa = Tcp::new(s, c, 700, 101, SYN | ACK);
        sa.options = vec![34, 10, 1, 2, 3, 4, 5, 6, 7, 8];
        let a = run(vec![(t0, syn.build()), (t0 + 30_000_000, sa.build())]);
        assert_eq!(a.connections[0].a2b.options.tfo_cookie_len, Some(0));
        assert!(!a.connections[0].tfo());
        assert!(!a.json_report().connections[0].tfo);
    }

    #[test]
    fn fast_open_data_and_accecn_negotiation_are_read_from_the_handshake() {
        use crate::synth::{Tcp, ACK, CWR, ECE, SYN};
        let (c, s) = (
            "10.0.0.1:40000".parse().unwrap(),
            "10.0.0.2:443".parse().unwrap(),
        );
        let t0 = 1_000_000_000u64;
        let mut syn = Tcp::new(c, s, 100, 0, SYN | ECE | CWR);
        syn.ae = true;
        syn.options = vec![34, 10, 1, 2, 3, 4, 5, 6, 7, 8];
        syn.payload_len = 100;
        let mut sa = Tcp::new(s, c, 700, 201, SYN | ACK | CWR);
        sa.options = synth::tcp_option::mss(1460);
        let pk = vec![
            (t0, syn.build()),
            (t0 + 30_000_000, sa.build()),
            (t0 + 30_000_100, Tcp::new(c, s, 201, 701, ACK).build()),
        ];
        let a = run(pk);
        let conn = &a.connections[0];
        assert_eq!(conn.handshake.ecn, EcnSetup::AccEcn);
        assert_eq!(conn.a2b.options.tfo_cookie_len, Some(8));
        assert_eq!(conn.a2b.options.syn_data_bytes, 100);
        assert!(conn.tfo());
        assert!(a.json_report().connections[0].tfo);
        assert_eq!(conn.a2b.stats.data_bytes, 100);
        assert_eq!(conn.a2b.stats.unique_bytes, 100);
        assert!(conn.a2b.options.syn_ae);
        // The SYN-ACK acknowledged the SYN and its data: one RTT sample of 30 ms.
        assert_eq!(conn.a2b.stats.rtt_samples, 1);
        assert!((conn.a2b.stats.rtt_min_ms.unwrap() - 30.0).abs() < 1e-9);
        // A classic-ECN server answers AccECN's SYN with ECE alone.
        let mut sa2 = Tcp::new(s, c, 700, 201, SYN | ACK | ECE);
        sa2.options = synth::tcp_option::mss(1460);
        let mut syn2 = syn.clone();
        syn2.payload_len = 0;
        let a = run(vec![(t0, syn2.build()), (t0 + 1, sa2.build())]);
        assert_eq!(a.connections[0].handshake.ecn, EcnSetup::Classic);
    }

    #[test]
    fn series_are_kept_only_when_asked_and_match_the_counters() {
        let pkts = lossy("10.0.0.1:40000", "10.0.0.2:5201").run();
        let bytes = synth::pcap(pkts);
        let opts = Options {
            keep_series: true,
            ..Options::default()
        };
        let a = analyze_bytes("t", &bytes, opts).unwrap();
        let d = &a.connections[0].a2b;
        let retx = d
            .series
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::Retransmit)
            .count();
        assert_eq!(retx as u64, d.stats.retransmitted_packets);
        assert_eq!(d.series.rtt.len() as u64, d.stats.rtt_samples);
        assert!(!d.series.sacks.is_empty());
        assert!(d.series.acks.windows(2).all(|w| w[0].seq < w[1].seq));
        assert!(!d.series.throughput.is_empty());
        let plain = analyze_bytes("t", &bytes, Options::default()).unwrap();
        assert!(plain.connections[0].a2b.series.segments.is_empty());
        let seqs: BTreeSet<u64> = d.series.segments.iter().map(|s| s.seq).collect();
        assert!(seqs.contains(&1), "relative sequence numbers start at 1");
    }
}

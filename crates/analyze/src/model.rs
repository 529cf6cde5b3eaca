//! The public data model of an analysis: what the analyzer hands to the text summary, the JSON
//! output and the `report` crate (plots, xplot files, HTML).
//!
//! This module holds plain data only; it computes nothing. Conventions, once for all types:
//!
//! - Times are [`Instant`]s on the capture's own clock: nanoseconds since the Unix epoch, as the
//!   capture file stores them. [`Analysis::epoch`] is the earliest packet of all captures; use
//!   [`Analysis::rel_secs`] to put a time on a plot's x axis.
//! - Sequence numbers are *relative* and *unwrapped*: `u64` byte offsets from the direction's
//!   initial sequence number (the ISN itself is 0 and the first data byte is 1, as tcptrace and
//!   Wireshark print them). When the capture starts after the SYN, offset 0 is the first
//!   sequence number seen in that direction. Wrap-around of the 32-bit field never shows here.
//! - Each direction's series live in that direction's *own* sequence space: a
//!   [`Direction`]'s `acks`, `windows` and `sacks` are what the *other* side sent back about this
//!   direction's data, so a time-sequence graph of one direction needs only its [`Direction`].
//! - Counters say what they count in their doc comment; units are in the names.
//!
//! The JSON schema (`crate::json`) is a stable *view* of this model; this model may grow fields,
//! and changes to existing ones are announced in `crates/analyze/MODEL_CHANGES.md`.

use std::fmt;
use std::net::SocketAddr;

use serde::Serialize;
use wire::{Duration, Ecn, Instant};

/// Everything learnt from one or more captures.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// The earliest packet time over all captures (zero when there were no packets).
    pub epoch: Instant,
    /// One entry per capture file, in the order they were given.
    pub captures: Vec<CaptureSummary>,
    /// TCP connections, in order of their first packet. One per vantage point: the same
    /// connection seen in two captures (or on two interfaces of a pcapng) appears twice.
    pub connections: Vec<Connection>,
    /// UDP flows, in order of their first packet, one per vantage point.
    pub udp: Vec<UdpFlow>,
    /// Problems in the input that did not stop the analysis, in input order (capped; see
    /// [`CaptureSummary::warnings_dropped`]).
    pub warnings: Vec<Warning>,
}

impl Analysis {
    /// Seconds from [`Analysis::epoch`] to `t` (negative never happens for times in this
    /// analysis, but is not clamped).
    pub fn rel_secs(&self, t: Instant) -> f64 {
        (t.as_nanos() as f64 - self.epoch.as_nanos() as f64) / 1e9
    }
}

/// What a capture file held.
#[derive(Clone, Debug, Default)]
pub struct CaptureSummary {
    /// The name the caller gave (usually the path).
    pub name: String,
    /// "pcap" or "pcapng", with " (gzip)" when it was compressed.
    pub format: String,
    /// Records read (every packet record, whatever its content).
    pub packets: u64,
    /// Records that were IPv4 or IPv6 after the link-layer header.
    pub ip_packets: u64,
    /// Records that were not IP (ARP, LLDP…) or whose link-layer header was unreadable.
    pub non_ip_packets: u64,
    /// Captured bytes (after snaplen cuts) over all records.
    pub captured_bytes: u64,
    /// Interfaces (pcap: one; pcapng: one per Interface Description Block, over all sections).
    pub interfaces: Vec<InterfaceInfo>,
    /// Warnings beyond the cap that were counted but not kept.
    pub warnings_dropped: u64,
}

/// One capture interface: a pcap file's single link, or a pcapng IDB.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Index over the whole file (pcapng: IDBs numbered across sections, in file order).
    pub index: u32,
    /// LINKTYPE_ value (1 Ethernet, 101 raw IP, 113 SLL, 276 SLL2, 0/108 null/loop …).
    pub linktype: u32,
    /// The interface name (pcapng `if_name`), if recorded.
    pub name: Option<String>,
    /// Snapshot length the capture declared (0 = unlimited).
    pub snaplen: u32,
    /// Timestamp unit in nanoseconds (1000 for classic microsecond pcap).
    pub resolution_ns: u64,
}

/// Where a packet was seen: which capture, which interface in it. Connections are rebuilt per
/// vantage point, because the same packet seen twice must not count twice.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Vantage {
    /// Index into [`Analysis::captures`].
    pub capture: usize,
    /// [`InterfaceInfo::index`] within that capture.
    pub interface: u32,
}

/// A problem in the input that the analysis worked around.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// Index into [`Analysis::captures`].
    pub capture: usize,
    /// 1-based record number in that capture (0 for file-level warnings).
    pub packet: u64,
    /// Lowercase description.
    pub message: String,
}

/// One TCP connection as seen from one vantage point.
#[derive(Clone, Debug)]
pub struct Connection {
    pub vantage: Vantage,
    /// The active opener (sender of the first SYN without ACK); when the handshake was not
    /// captured, the source of the first packet seen.
    pub a: SocketAddr,
    /// The other end.
    pub b: SocketAddr,
    /// First and last packet of the connection at this vantage point.
    pub first_time: Instant,
    pub last_time: Instant,
    pub handshake: Handshake,
    /// Data sent by `a` (and what `b` said about it: ACKs, windows, SACKs).
    pub a2b: Direction,
    /// Data sent by `b`.
    pub b2a: Direction,
    /// What held this connection back, in order of start time.
    pub diagnoses: Vec<Diagnosis>,
    /// All of its packets, by frame number in its capture.
    pub frames: Frames,
    /// How the connection ended, as far as the capture shows.
    pub state: ConnState,
    /// Where its time went, and its request/response exchanges (see [`Story`]).
    pub story: Story,
}

impl Connection {
    /// `last_time - first_time`.
    pub fn duration(&self) -> Duration {
        self.last_time - self.first_time
    }
    /// Whether the connection used TCP Fast Open (RFC 7413 §3): `a`'s SYN carried data and a
    /// cookie. A SYN that only asks for a cookie (an empty option) is not Fast Open yet.
    pub fn tfo(&self) -> bool {
        let o = &self.a2b.options;
        o.syn_data_bytes > 0 && o.tfo_cookie_len.is_some_and(|n| n > 0)
    }
    /// The direction given by `dir`.
    pub fn dir(&self, dir: Dir) -> &Direction {
        match dir {
            Dir::AtoB => &self.a2b,
            Dir::BtoA => &self.b2a,
        }
    }
}

/// One of the two directions of a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Dir {
    #[serde(rename = "a2b")]
    AtoB,
    #[serde(rename = "b2a")]
    BtoA,
}

impl Dir {
    pub fn other(self) -> Dir {
        match self {
            Dir::AtoB => Dir::BtoA,
            Dir::BtoA => Dir::AtoB,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dir::AtoB => "a2b",
            Dir::BtoA => "b2a",
        }
    }
}

/// How far the connection got.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnState {
    /// Only SYNs seen.
    SynSent,
    /// Handshake seen (or data seen without a handshake) and no FIN/RST.
    #[default]
    Open,
    /// At least one FIN, no RST.
    Closing,
    /// FINs from both sides.
    Closed,
    /// A RST was seen.
    Reset,
}

/// The three-way handshake (RFC 9293 §3.5) and what it negotiated.
#[derive(Clone, Debug, Default)]
pub struct Handshake {
    /// First SYN from `a` (None when the capture started after it).
    pub syn_time: Option<Instant>,
    /// SYNs `a` sent, the first included (2 or more means the SYN was retransmitted).
    pub syn_count: u32,
    /// First SYN-ACK from `b`.
    pub synack_time: Option<Instant>,
    /// SYN-ACKs `b` sent.
    pub synack_count: u32,
    /// The ACK from `a` that acknowledged the SYN-ACK.
    pub ack_time: Option<Instant>,
    /// First SYN to the handshake-completing ACK: what the handshake cost the user, SYN
    /// retransmissions included. This is the JSON `handshake_ms`.
    pub duration: Option<Duration>,
    /// SYN to SYN-ACK, only when the SYN was sent once (Karn's rule, RFC 6298 §3): at a
    /// client-side capture, one network RTT.
    pub syn_rtt: Option<Duration>,
    /// SYN-ACK to ACK, only when the SYN-ACK was sent once: at a server-side capture, one RTT.
    pub synack_rtt: Option<Duration>,
    /// ECN as negotiated by the SYN and SYN-ACK flags.
    pub ecn: EcnSetup,
}

/// ECN negotiation (RFC 3168 §6.1.1; AccECN RFC 9768 §3.1).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EcnSetup {
    /// The SYN did not ask for ECN, or no SYN was seen.
    #[default]
    None,
    /// The SYN asked (ECE+CWR, or AE+CWR+ECE for AccECN) and the SYN-ACK declined or was not
    /// seen.
    Requested,
    /// Classic ECN: SYN with ECE+CWR, SYN-ACK with ECE and not CWR.
    Classic,
    /// Accurate ECN: SYN with AE+CWR+ECE, SYN-ACK with one of the AccECN codes.
    AccEcn,
}

impl EcnSetup {
    pub fn negotiated(self) -> bool {
        matches!(self, EcnSetup::Classic | EcnSetup::AccEcn)
    }
}

/// One direction of a connection: options from its SYN, counters, and (when asked for) the
/// time-sequence series.
#[derive(Clone, Debug, Default)]
pub struct Direction {
    /// Sender of this direction's data.
    pub src: Option<SocketAddr>,
    pub options: SynOptions,
    pub stats: DirectionStats,
    /// Where the capture point sits on this direction's path (decided when the connection
    /// finishes; see [`CapturePoint`]).
    pub capture_point: CapturePoint,
    /// What `capture_point` was decided from, and so how sure it is.
    pub vantage_basis: VantageBasis,
    /// Diagnoses about this direction's data that could not be judged from this capture
    /// point (empty at the sender).
    pub not_judged: Vec<DiagnosisKind>,
    /// Empty unless the analysis was run with `Options::keep_series` (memory then grows with
    /// the number of packets).
    pub series: TimeSequence,
}

/// Where a capture was taken, relative to one direction's sender and receiver.
///
/// Decided per direction ([`VantageBasis`] says from what): when the handshake's round trip
/// (SYN -> SYN-ACK -> ACK, each sent once) is at least 1 ms, by the part of it beyond the
/// capture point towards this direction's receiver (the SYN -> SYN-ACK time for `a2b`, the
/// SYN-ACK -> ACK time for `b2a`): at least 3/4 of the whole, next to the sender; at most
/// 1/4, next to the receiver; otherwise in the middle. On a shorter path, by which side's
/// packets still carry an initial TTL. Without a handshake, the two directions' minimum data
/// RTTs split the round trip the same way when both directions carried data; otherwise the
/// point is unknown. Which diagnoses are judged from each point is `diagnose`'s business;
/// rules and thresholds are written out in `docs/analyze.md`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CapturePoint {
    /// Not decidable (no handshake and data in one direction only); diagnoses are given as if
    /// the capture were at the sender, as tcptrace assumes.
    #[default]
    Unknown,
    /// Next to the sender: data as sent, ACKs as they arrive. Every diagnosis applies.
    Sender,
    /// Between the two: RTT samples cover only the path beyond the capture point, and
    /// bytes in flight before it are invisible.
    Middle,
    /// Next to the receiver: data as it arrives, ACKs as sent. RTT samples are the receiver's
    /// ACK delay and bytes in flight look like zero, so sender-side diagnoses do not apply
    /// unless the sender is within a millisecond with no queue in between.
    Receiver,
}

impl CapturePoint {
    /// The JSON / text name (`null` for unknown in JSON).
    pub fn name(self) -> &'static str {
        match self {
            CapturePoint::Unknown => "unknown",
            CapturePoint::Sender => "sender",
            CapturePoint::Middle => "middle",
            CapturePoint::Receiver => "receiver",
        }
    }
}

/// The evidence a [`CapturePoint`] was decided from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VantageBasis {
    /// Nothing to decide from.
    #[default]
    None,
    /// How the handshake's round trip (at least 1 ms) splits at the capture point.
    Handshake,
    /// Which side's packets still carry an initial TTL / hop limit (on a path of under 1 ms,
    /// where the handshake's split is only the hosts' processing time).
    Ttl,
    /// The two directions' minimum data RTTs, when the handshake was not captured.
    DataRtt,
    /// A handshake round trip under 1 ms and TTLs that do not tell: the point is unknown,
    /// but every point of such a path is within a millisecond of both ends.
    ShortPath,
}

impl VantageBasis {
    /// How sure the decision is: `high` from the handshake or TTLs, `medium` from data RTTs
    /// (ACK delays and queues blur them), `low` when nothing decided it.
    pub fn confidence(self) -> &'static str {
        match self {
            VantageBasis::Handshake | VantageBasis::Ttl => "high",
            VantageBasis::DataRtt => "medium",
            VantageBasis::None | VantageBasis::ShortPath => "low",
        }
    }
}

/// Options this side put in its SYN (or SYN-ACK) (RFC 9293 §3.1, RFC 7323, RFC 2018, RFC 7413).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SynOptions {
    /// A SYN from this side was captured.
    pub syn_seen: bool,
    /// MSS option, bytes.
    pub mss: Option<u16>,
    /// Window scale shift count offered (RFC 7323 §2.3); applies only if both sides offer it.
    pub window_scale: Option<u8>,
    /// The scale actually applied to this side's window field (0 when either side did not
    /// offer scaling or the handshake was not captured).
    pub window_scale_applied: u8,
    pub sack_permitted: bool,
    pub timestamps: bool,
    /// TCP Fast Open option (kind 34) length of the cookie; `Some(0)` is a cookie request.
    pub tfo_cookie_len: Option<u8>,
    /// Payload bytes carried in the SYN (TFO data).
    pub syn_data_bytes: u32,
    /// ECE, CWR and AE flags on the SYN.
    pub syn_ece: bool,
    pub syn_cwr: bool,
    pub syn_ae: bool,
}

/// Per-direction counters, comparable with `tcptrace -l -r`. "Sent" means sent by this
/// direction's sender; RTT fields are about this direction's data (ACKed by the other side).
/// This struct serializes as the JSON `a2b` / `b2a` object.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DirectionStats {
    /// All TCP packets sent.
    pub packets: u64,
    /// Packets with a payload (SYN data and window probes included).
    pub data_packets: u64,
    /// Payload bytes over all data packets, retransmissions included (from IP lengths, so
    /// snaplen cuts do not matter).
    pub data_bytes: u64,
    /// Sequence-space bytes sent for the first time.
    pub unique_bytes: u64,
    /// Data packets that carried any byte sent before (RFC 9293 retransmission).
    pub retransmitted_packets: u64,
    /// Payload bytes of those packets (whole packets, as tcptrace counts them).
    pub retransmitted_bytes: u64,
    /// Data packets that filled a hole below the highest sequence sent with bytes never seen
    /// before (reordered in the network, or sent out of order).
    pub out_of_order_packets: u64,
    /// Packets with ACK and no payload, SYN, FIN or RST.
    pub pure_acks: u64,
    /// Pure ACKs repeating the previous ACK number and window while data was outstanding
    /// (RFC 5681 §2 "duplicate acknowledgment").
    pub dup_acks: u64,
    /// Packets carrying SACK blocks (RFC 2018).
    pub sack_packets: u64,
    /// Largest number of SACK blocks in one packet.
    pub max_sack_blocks: u64,
    /// Packets advertising a zero receive window (SYN/RST excluded).
    pub zero_window: u64,
    /// Data packets sent while the other side advertised a zero window (RFC 9293 §3.8.6.1).
    pub window_probes: u64,
    /// RTT samples: ACKs that acknowledge exactly the end of a segment never retransmitted
    /// (Karn's rule, RFC 6298 §3).
    pub rtt_samples: u64,
    pub rtt_min_ms: Option<f64>,
    pub rtt_avg_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    pub rtt_stdev_ms: Option<f64>,
    /// Packets whose IP ECN field arrived as CE.
    pub ce: u64,
    /// Packets with the ECE flag, SYNs excluded (with AccECN this bit is part of the ACE
    /// counter and this count means little).
    pub ece: u64,
    /// Packets with the CWR flag, SYNs excluded.
    pub cwr: u64,
    /// Packets with ECT(0), ECT(1) and Not-ECT IP ECN fields.
    pub ect0: u64,
    pub ect1: u64,
    pub not_ect: u64,
    pub syn: u64,
    pub fin: u64,
    pub rst: u64,
    /// Largest payload in one packet.
    pub max_segment_bytes: u64,
    /// Largest amount of this direction's data sent and not yet cumulatively ACKed.
    pub max_in_flight_bytes: u64,
    /// Smallest and largest receive window this side advertised, scaled, in bytes (SYNs
    /// excluded, as their window is never scaled).
    pub min_window_bytes: Option<u64>,
    pub max_window_bytes: Option<u64>,
    /// Highest relative sequence number sent plus its length: the extent of the stream.
    pub seq_extent_bytes: u64,
    /// `unique_bytes * 8` over the connection's duration, bits per second (0 for a connection
    /// of one instant).
    pub throughput_bps: f64,
}

/// The time-sequence data of one direction, in the style of tcptrace's time-sequence graph.
#[derive(Clone, Debug, Default)]
pub struct TimeSequence {
    /// Every packet of this direction that carries sequence space (data, SYN or FIN).
    pub segments: Vec<Segment>,
    /// The other side's cumulative ACK, one point per change.
    pub acks: Vec<SeqPoint>,
    /// The other side's receive window: right edge = ack + scaled window, one point per
    /// change of either.
    pub windows: Vec<WindowPoint>,
    /// SACK blocks the other side reported about this direction's data.
    pub sacks: Vec<SackBlock>,
    /// CE on this direction's packets, ECE from the other side, CWR from this side.
    pub marks: Vec<Mark>,
    /// RTT samples of this direction's data.
    pub rtt: Vec<RttSample>,
    /// Bytes in flight after each segment sent.
    pub in_flight: Vec<InFlightPoint>,
    /// Goodput over fixed bins (computed when the analysis finishes).
    pub throughput: Vec<ThroughputPoint>,
}

/// One packet carrying sequence space.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub time: Instant,
    /// Relative sequence number of the first byte (of the SYN or FIN for those).
    pub seq: u64,
    /// Payload bytes (0 for a bare SYN or FIN).
    pub len: u32,
    pub kind: SegmentKind,
    /// The IP ECN field as captured.
    pub ecn: Ecn,
    /// TCP flags byte (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10, URG 0x20, ECE 0x40,
    /// CWR 0x80).
    pub flags: u8,
}

impl Segment {
    /// One past the last sequence number this segment occupies (SYN and FIN count one).
    pub fn end(&self) -> u64 {
        let syn_fin = u64::from(self.flags & 0x03 != 0) + u64::from(self.flags & 0x03 == 0x03);
        self.seq + u64::from(self.len) + syn_fin
    }
}

/// Why a segment is drawn the way it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// All bytes new, in order.
    New,
    /// Carries bytes sent before.
    Retransmit,
    /// New bytes below the highest sequence sent.
    OutOfOrder,
    /// Sent into a zero window.
    WindowProbe,
}

/// A (time, relative sequence) point.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SeqPoint {
    pub time: Instant,
    pub seq: u64,
}

/// The receiver's advertised window at one moment.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct WindowPoint {
    pub time: Instant,
    /// Cumulative ACK (relative, this direction's space).
    pub ack: u64,
    /// Scaled window in bytes; the right edge is `ack + window_bytes`.
    pub window_bytes: u64,
}

/// A SACK block (RFC 2018 §3): bytes `left..right` received above the cumulative ACK.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SackBlock {
    pub time: Instant,
    pub left: u64,
    pub right: u64,
}

/// An ECN event placed on the time-sequence graph.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    pub time: Instant,
    /// The segment's sequence number (CE, CWR) or the ACK number (ECE).
    pub seq: u64,
    pub kind: MarkKind,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum MarkKind {
    /// A data packet of this direction carried CE.
    Ce,
    /// The other side echoed congestion (ECE flag).
    Ece,
    /// This side reduced its window (CWR flag).
    Cwr,
}

/// One RTT sample (RFC 6298 §3, Karn's rule).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RttSample {
    /// When the ACK was seen.
    pub time: Instant,
    /// The acknowledged sequence number (end of the sampled segment).
    pub seq: u64,
    pub rtt: Duration,
}

/// Bytes in flight (sent, not cumulatively ACKed) right after a segment was seen.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InFlightPoint {
    pub time: Instant,
    pub bytes: u64,
}

/// Goodput in one bin.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ThroughputPoint {
    /// Bin start.
    pub time: Instant,
    pub width: Duration,
    /// New (non-retransmitted) payload bits per second in the bin.
    pub goodput_bps: f64,
    /// All payload bits per second in the bin, retransmissions included.
    pub throughput_bps: f64,
}

/// A named cause of delay, with its time span and evidence.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    pub kind: DiagnosisKind,
    /// The direction whose data was held back (None when it concerns the whole connection).
    pub dir: Option<Dir>,
    pub start: Instant,
    pub end: Instant,
    /// Time the problem cost (or, for `bufferbloat`, the standing queue), in milliseconds:
    /// the number the summary leads with. See `docs/analyze.md` per kind.
    pub delay_ms: f64,
    /// One or two sentences of plain words with the evidence (counts, sizes, times).
    pub summary: String,
    /// The connection's packets from `start` to `end`, as frame numbers of its capture: filled
    /// in when the connection is finished (zero until then).
    pub frames: Frames,
}

/// The packets that show a diagnosis: those of its connection whose time lies in the
/// diagnosis' span, by frame number as Wireshark counts them (1-based, every record of the
/// capture, whatever its protocol). Other connections' frames may lie between `first` and
/// `last`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct Frames {
    /// Frame number of the first of them (0: none).
    pub first: u64,
    /// Frame number of the last of them.
    pub last: u64,
    /// How many packets of the connection are in the span.
    pub packets: u64,
    /// Capture times of the first and the last.
    pub first_time: Instant,
    pub last_time: Instant,
}

impl Diagnosis {
    /// What the problem cost, in milliseconds (JSON `cost_ms`): `delay_ms`, which for every
    /// kind but `bufferbloat` is time lost; for `bufferbloat` it is the standing queue, the
    /// delay each round trip paid.
    pub fn cost_ms(&self) -> f64 {
        self.delay_ms
    }
}

/// The causes the analyzer can name. Definitions in `docs/analyze.md`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DiagnosisKind {
    NagleDelayedAck,
    DelayedAckPacing,
    Bufferbloat,
    RwndLimited,
    AppLimited,
    LossBurst,
    RtoStall,
    SynRetransmit,
    EcnUnused,
    EcnBleached,
    ServerDelay,
    ClientDelay,
    PathDelay,
    ZeroWindowStall,
    PeerUnresponsive,
    ConnectionRefused,
    SynTimeout,
    SlowStartAfterIdle,
}

impl DiagnosisKind {
    /// The snake_case name used in JSON and text.
    pub fn name(self) -> &'static str {
        match self {
            DiagnosisKind::NagleDelayedAck => "nagle_delayed_ack",
            DiagnosisKind::DelayedAckPacing => "delayed_ack_pacing",
            DiagnosisKind::Bufferbloat => "bufferbloat",
            DiagnosisKind::RwndLimited => "rwnd_limited",
            DiagnosisKind::AppLimited => "app_limited",
            DiagnosisKind::LossBurst => "loss_burst",
            DiagnosisKind::RtoStall => "rto_stall",
            DiagnosisKind::SynRetransmit => "syn_retransmit",
            DiagnosisKind::EcnUnused => "ecn_unused",
            DiagnosisKind::EcnBleached => "ecn_bleached",
            DiagnosisKind::ServerDelay => "server_delay",
            DiagnosisKind::ClientDelay => "client_delay",
            DiagnosisKind::PathDelay => "path_delay",
            DiagnosisKind::ZeroWindowStall => "zero_window_stall",
            DiagnosisKind::PeerUnresponsive => "peer_unresponsive",
            DiagnosisKind::ConnectionRefused => "connection_refused",
            DiagnosisKind::SynTimeout => "syn_timeout",
            DiagnosisKind::SlowStartAfterIdle => "slow_start_after_idle",
        }
    }

    /// The component this kind of diagnosis blames.
    pub fn component(self) -> Component {
        use DiagnosisKind::*;
        match self {
            NagleDelayedAck | AppLimited => Component::SenderApplication,
            DelayedAckPacing | RwndLimited | ZeroWindowStall => Component::ReceiverApplication,
            ServerDelay | ConnectionRefused => Component::Server,
            ClientDelay => Component::Client,
            Bufferbloat | LossBurst | RtoStall | SynRetransmit | EcnUnused | EcnBleached
            | PathDelay | PeerUnresponsive | SynTimeout | SlowStartAfterIdle => Component::Network,
        }
    }
}

impl fmt::Display for DiagnosisKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a connection's time went, seen from one vantage point. Every nanosecond between the
/// connection's first and last packet is counted in exactly one part, so the parts add up to
/// [`Connection::duration`]. Definitions in `docs/analyze.md` ("Where the time went").
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct TimeBudget {
    /// Round trips the data had to wait for (handshake, request to response, ACK-clocked
    /// rounds), up to the path's own round trip from this vantage point.
    pub network_ns: u64,
    /// The server's application: request complete to the first byte of the answer, beyond
    /// the round trip, and pauses within its answers.
    pub server_ns: u64,
    /// The client's application: handshake or answer complete to its next request, beyond
    /// the round trip, and pauses within its requests.
    pub client_ns: u64,
    /// Bytes moving at the rate the path and the sender allowed (gaps shorter than half a
    /// round trip between one side's segments).
    pub transfer_ns: u64,
    /// Waiting on a timer or a closed window: retransmission timeouts (SYN included) and
    /// zero-window periods.
    pub stalled_ns: u64,
    /// What this vantage point cannot attribute (no round-trip estimate, time before the
    /// first or after the last utterance that no ACK explains).
    pub unattributed_ns: u64,
}

impl TimeBudget {
    /// The parts in a fixed order with their JSON names.
    pub fn parts(&self) -> [(&'static str, u64); 6] {
        [
            ("network", self.network_ns),
            ("server", self.server_ns),
            ("client", self.client_ns),
            ("transfer", self.transfer_ns),
            ("stalled", self.stalled_ns),
            ("unattributed", self.unattributed_ns),
        ]
    }

    /// The sum of the parts.
    pub fn total_ns(&self) -> u64 {
        self.parts().iter().map(|p| p.1).sum()
    }
}

/// One request/response exchange: the client speaks, then the server. Times are as seen at
/// the vantage point.
#[derive(Clone, Debug, PartialEq)]
pub struct Exchange {
    /// First byte of the request.
    pub start: Instant,
    /// HTTP/1.x method and target ("GET /index.html") when the request's first bytes were
    /// captured and are HTTP.
    pub name: Option<String>,
    /// Request payload bytes sent for the first time.
    pub request_bytes: u64,
    /// Last new byte of the request.
    pub request_end: Instant,
    /// When the server's ACK first covered the whole request.
    pub request_acked: Option<Instant>,
    /// First and last new byte of the answer (None when the server never answered).
    pub response_start: Option<Instant>,
    pub response_end: Option<Instant>,
    pub response_bytes: u64,
    /// The exchange's time, from the end of the previous answer (or the handshake) to the end
    /// of its own answer, split as in [`TimeBudget`].
    pub budget: TimeBudget,
}

/// The component a diagnosis blames.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Network,
    Server,
    Client,
    SenderApplication,
    ReceiverApplication,
}

/// Where a connection's time went and how it talked: [`TimeBudget`] and [`Exchange`]s.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Story {
    /// The direction that carries the client's data: `a2b` when the handshake was seen (the
    /// SYN's sender is the client), else the direction of the first data byte; None when no
    /// data and no SYN were seen.
    pub client: Option<Dir>,
    pub budget: TimeBudget,
    pub exchanges: Vec<Exchange>,
    /// Exchanges beyond the listed ones (their time is still in `budget`).
    pub exchanges_dropped: u64,
}

/// A UDP flow (one per address/port pair and vantage point).
#[derive(Clone, Debug)]
pub struct UdpFlow {
    pub vantage: Vantage,
    /// Source of the first packet.
    pub a: SocketAddr,
    pub b: SocketAddr,
    pub first_time: Instant,
    pub last_time: Instant,
    pub a2b: UdpDirection,
    pub b2a: UdpDirection,
    /// The QUIC connections of the flow, when it began with a client's Initial.
    pub quic: Vec<crate::quic::QuicConnection>,
    /// Of such a flow, the packets not read as QUIC: reason and count.
    pub quic_rejected: Vec<(String, u64)>,
}

/// One direction of a UDP flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct UdpDirection {
    pub packets: u64,
    /// UDP payload bytes (from the UDP length field).
    pub bytes: u64,
    /// IP ECN codepoint counts.
    pub not_ect: u64,
    pub ect0: u64,
    pub ect1: u64,
    pub ce: u64,
    /// Average payload rate over the flow's duration, bits per second.
    pub rate_bps: f64,
    /// Payload rate over time: bins of [`UdpDirection::bin_ms`] from the flow's first packet,
    /// bits per second.
    pub rate_series_bps: Vec<f64>,
    /// Width of the rate bins in milliseconds.
    pub bin_ms: u64,
}

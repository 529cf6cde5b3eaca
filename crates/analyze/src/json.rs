//! The stable JSON schema of `latencylab analyze --json`, as Serialize structs over the model.
//!
//! Documented field by field in `docs/analyze.md`; fields may be added, never renamed or
//! removed without bumping [`SCHEMA_VERSION`]. Times are seconds from the analysis epoch (the
//! first packet of all captures); durations are in the unit their name says. Series for plots
//! are not in the JSON (they are the `report` crate's input).

use serde::Serialize;

use crate::model::*;

/// Bumped when a field changes meaning or disappears.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
pub struct JsonReport<'a> {
    pub schema_version: u32,
    pub captures: Vec<JsonCapture<'a>>,
    pub connections: Vec<JsonConnection<'a>>,
    pub udp: Vec<JsonUdp<'a>>,
    pub warnings: Vec<JsonWarning<'a>>,
    /// Handshake times over all connections (see `handshakes`).
    pub handshakes: JsonHandshakes,
}

/// The distribution of handshake times: one sample per connection whose handshake was
/// captured, SYN to SYN-ACK at the client, SYN-ACK to ACK at the server, SYN to ACK elsewhere.
#[derive(Serialize)]
pub struct JsonHandshakes {
    pub count: usize,
    /// Nearest-rank percentiles; null without samples.
    pub p50_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    /// Share of samples strictly under 100 ms; null without samples.
    pub under_100ms_pct: Option<f64>,
    pub measured_at_client: usize,
    pub measured_at_server: usize,
    pub measured_elsewhere: usize,
    /// The empirical CDF: every sample (at most 1000 points, then evenly spaced ranks).
    pub cdf: Vec<JsonCdfPoint>,
}

/// One step of a CDF: `fraction` of the samples are at most `ms`.
#[derive(Serialize)]
pub struct JsonCdfPoint {
    pub ms: f64,
    pub fraction: f64,
}

impl From<&crate::handshakes::HandshakeSummary> for JsonHandshakes {
    fn from(s: &crate::handshakes::HandshakeSummary) -> JsonHandshakes {
        JsonHandshakes {
            count: s.count(),
            p50_ms: s.percentile_ms(50.0),
            p90_ms: s.percentile_ms(90.0),
            under_100ms_pct: s.under_pct(100.0),
            measured_at_client: s.at_client,
            measured_at_server: s.at_server,
            measured_elsewhere: s.elsewhere,
            cdf: s
                .cdf()
                .into_iter()
                .map(|(ms, fraction)| JsonCdfPoint { ms, fraction })
                .collect(),
        }
    }
}

#[derive(Serialize)]
pub struct JsonCapture<'a> {
    pub name: &'a str,
    pub format: &'a str,
    pub packets: u64,
    pub ip_packets: u64,
    pub non_ip_packets: u64,
    pub linktypes: Vec<u32>,
    pub warnings_dropped: u64,
}

#[derive(Serialize)]
pub struct JsonConnection<'a> {
    pub a: String,
    pub b: String,
    pub capture: &'a str,
    pub interface: u32,
    pub start_s: f64,
    pub duration_s: f64,
    pub handshake_ms: Option<f64>,
    pub syn_rtt_ms: Option<f64>,
    pub synack_rtt_ms: Option<f64>,
    pub syn_count: u32,
    pub ecn: EcnSetup,
    /// `a`'s SYN carried data and a Fast Open cookie (RFC 7413).
    pub tfo: bool,
    pub state: ConnState,
    pub a_options: &'a SynOptions,
    pub b_options: &'a SynOptions,
    pub a2b: JsonDirection<'a>,
    pub b2a: JsonDirection<'a>,
    pub diagnoses: Vec<JsonDiagnosis<'a>>,
    /// All of the connection's packets.
    pub frames: Option<JsonFrames>,
    /// Where the connection's time went; the parts add up to `duration_s`.
    pub time_budget_ms: JsonBudget,
    /// "a2b" or "b2a": the direction of the client's data (null when unknown).
    pub client: Option<Dir>,
    pub exchanges: Vec<JsonExchange<'a>>,
    pub exchanges_dropped: u64,
}

/// A [`TimeBudget`] in milliseconds.
#[derive(Serialize)]
pub struct JsonBudget {
    pub network: f64,
    pub server: f64,
    pub client: f64,
    pub transfer: f64,
    pub stalled: f64,
    pub unattributed: f64,
}

impl From<&TimeBudget> for JsonBudget {
    fn from(b: &TimeBudget) -> JsonBudget {
        let ms = |ns: u64| ns as f64 / 1e6;
        JsonBudget {
            network: ms(b.network_ns),
            server: ms(b.server_ns),
            client: ms(b.client_ns),
            transfer: ms(b.transfer_ns),
            stalled: ms(b.stalled_ns),
            unattributed: ms(b.unattributed_ns),
        }
    }
}

/// One request/response exchange.
#[derive(Serialize)]
pub struct JsonExchange<'a> {
    pub start_s: f64,
    pub name: Option<&'a str>,
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// First request byte to the server's ACK covering the request.
    pub request_acked_ms: Option<f64>,
    /// Last request byte to the first byte of the answer.
    pub first_byte_ms: Option<f64>,
    /// First to last byte of the answer.
    pub response_ms: Option<f64>,
    pub time_budget_ms: JsonBudget,
}

/// One direction: the counters, and where the capture sat on this direction's path.
#[derive(Serialize)]
pub struct JsonDirection<'a> {
    #[serde(flatten)]
    pub stats: &'a DirectionStats,
    /// "sender", "receiver", "middle", or null when it could not be decided.
    pub vantage: Option<CapturePoint>,
    /// What `vantage` was decided from: "handshake", "ttl", "data_rtt", "short_path", "none".
    pub vantage_basis: VantageBasis,
    /// "high", "medium" or "low".
    pub vantage_confidence: &'static str,
    /// Diagnoses about this direction's data that cannot be judged from this capture point.
    pub not_judged: &'a [DiagnosisKind],
}

impl<'a> JsonDirection<'a> {
    fn new(d: &'a Direction) -> JsonDirection<'a> {
        JsonDirection {
            stats: &d.stats,
            vantage: (d.capture_point != CapturePoint::Unknown).then_some(d.capture_point),
            vantage_basis: d.vantage_basis,
            vantage_confidence: d.vantage_basis.confidence(),
            not_judged: &d.not_judged,
        }
    }
}

#[derive(Serialize)]
pub struct JsonDiagnosis<'a> {
    pub kind: DiagnosisKind,
    pub direction: Option<Dir>,
    pub start_s: f64,
    pub end_s: f64,
    pub delay_ms: f64,
    /// What it blames: "network", "server", "client", "sender_application",
    /// "receiver_application".
    pub component: Component,
    /// What it cost, in milliseconds.
    pub cost_ms: f64,
    pub summary: &'a str,
    /// The packets that show it (null when none of the connection's packets lies in its span).
    pub frames: Option<JsonFrames>,
}

/// Packets of one connection by frame number in its capture, as Wireshark numbers them
/// (`frame.number`, 1-based, every record counted): the first and the last, how many packets of
/// the connection lie between them (other connections' may too), and their times.
#[derive(Serialize)]
pub struct JsonFrames {
    pub first: u64,
    pub last: u64,
    pub packets: u64,
    pub first_s: f64,
    pub last_s: f64,
}

#[derive(Serialize)]
pub struct JsonUdp<'a> {
    pub a: String,
    pub b: String,
    pub capture: &'a str,
    pub interface: u32,
    pub start_s: f64,
    pub duration_s: f64,
    pub a2b: &'a UdpDirection,
    pub b2a: &'a UdpDirection,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quic: Vec<JsonQuic<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub quic_rejected: Vec<(&'a str, u64)>,
}

/// One QUIC connection: only what its headers show (see [`crate::quic`]).
#[derive(Serialize)]
pub struct JsonQuic<'a> {
    pub version: u32,
    pub original_dcid: &'a str,
    pub client_cid: &'a str,
    pub server_cid: &'a str,
    pub client: String,
    pub server: String,
    pub start_s: f64,
    pub duration_s: f64,
    /// The client's first Initial to its first 1-RTT packet.
    pub handshake_ms: Option<f64>,
    pub client_to_server: &'a crate::quic::QuicDirection,
    pub server_to_client: &'a crate::quic::QuicDirection,
    pub spin_rtt_ms_median: Option<f64>,
    pub spin_rtt_samples: usize,
    /// Connection IDs first seen in short headers (see [`crate::quic`]).
    pub ids_seen_later: u64,
}

#[derive(Serialize)]
pub struct JsonWarning<'a> {
    pub capture: &'a str,
    pub packet: u64,
    pub message: &'a str,
}

fn ms(d: Option<wire::Duration>) -> Option<f64> {
    d.map(|d| d.as_secs_f64() * 1e3)
}

impl Analysis {
    fn json_frames(&self, f: &Frames) -> Option<JsonFrames> {
        (f.packets > 0).then(|| JsonFrames {
            first: f.first,
            last: f.last,
            packets: f.packets,
            first_s: self.rel_secs(f.first_time),
            last_s: self.rel_secs(f.last_time),
        })
    }

    /// The JSON view of this analysis; serialize it with `serde_json`.
    pub fn json_report(&self) -> JsonReport<'_> {
        let cap = |i: usize| self.captures.get(i).map_or("", |c| c.name.as_str());
        JsonReport {
            schema_version: SCHEMA_VERSION,
            captures: self
                .captures
                .iter()
                .map(|c| JsonCapture {
                    name: &c.name,
                    format: &c.format,
                    packets: c.packets,
                    ip_packets: c.ip_packets,
                    non_ip_packets: c.non_ip_packets,
                    linktypes: c.interfaces.iter().map(|i| i.linktype).collect(),
                    warnings_dropped: c.warnings_dropped,
                })
                .collect(),
            connections: self
                .connections
                .iter()
                .map(|c| JsonConnection {
                    a: c.a.to_string(),
                    b: c.b.to_string(),
                    capture: cap(c.vantage.capture),
                    interface: c.vantage.interface,
                    start_s: self.rel_secs(c.first_time),
                    duration_s: c.duration().as_secs_f64(),
                    handshake_ms: ms(c.handshake.duration),
                    syn_rtt_ms: ms(c.handshake.syn_rtt),
                    synack_rtt_ms: ms(c.handshake.synack_rtt),
                    syn_count: c.handshake.syn_count,
                    ecn: c.handshake.ecn,
                    tfo: c.tfo(),
                    state: c.state,
                    a_options: &c.a2b.options,
                    b_options: &c.b2a.options,
                    a2b: JsonDirection::new(&c.a2b),
                    b2a: JsonDirection::new(&c.b2a),
                    diagnoses: c
                        .diagnoses
                        .iter()
                        .map(|d| JsonDiagnosis {
                            kind: d.kind,
                            direction: d.dir,
                            start_s: self.rel_secs(d.start),
                            end_s: self.rel_secs(d.end),
                            delay_ms: d.delay_ms,
                            component: d.kind.component(),
                            cost_ms: d.cost_ms(),
                            summary: &d.summary,
                            frames: self.json_frames(&d.frames),
                        })
                        .collect(),
                    frames: self.json_frames(&c.frames),
                    time_budget_ms: (&c.story.budget).into(),
                    client: c.story.client,
                    exchanges: c
                        .story
                        .exchanges
                        .iter()
                        .map(|e| {
                            let gap = |x: wire::Instant, y: Option<wire::Instant>| {
                                y.filter(|&y| y >= x).map(|y| (y - x).as_secs_f64() * 1e3)
                            };
                            JsonExchange {
                                start_s: self.rel_secs(e.start),
                                name: e.name.as_deref(),
                                request_bytes: e.request_bytes,
                                response_bytes: e.response_bytes,
                                request_acked_ms: gap(e.start, e.request_acked),
                                first_byte_ms: gap(e.request_end, e.response_start),
                                response_ms: e.response_start.and_then(|s| gap(s, e.response_end)),
                                time_budget_ms: (&e.budget).into(),
                            }
                        })
                        .collect(),
                    exchanges_dropped: c.story.exchanges_dropped,
                })
                .collect(),
            udp: self
                .udp
                .iter()
                .map(|u| JsonUdp {
                    a: u.a.to_string(),
                    b: u.b.to_string(),
                    capture: cap(u.vantage.capture),
                    interface: u.vantage.interface,
                    start_s: self.rel_secs(u.first_time),
                    duration_s: (u.last_time - u.first_time).as_secs_f64(),
                    a2b: &u.a2b,
                    b2a: &u.b2a,
                    quic: u
                        .quic
                        .iter()
                        .map(|q| {
                            let (client, server) = if q.client_is_a {
                                (u.a, u.b)
                            } else {
                                (u.b, u.a)
                            };
                            JsonQuic {
                                version: q.version,
                                original_dcid: &q.original_dcid,
                                client_cid: &q.client_cid,
                                server_cid: &q.server_cid,
                                client: client.to_string(),
                                server: server.to_string(),
                                start_s: self.rel_secs(q.first_time),
                                duration_s: (q.last_time - q.first_time).as_secs_f64(),
                                handshake_ms: q.handshake_ms(),
                                client_to_server: &q.client_to_server,
                                server_to_client: &q.server_to_client,
                                spin_rtt_ms_median: q.spin_rtt_median_ms(),
                                spin_rtt_samples: q.spin_rtt_ms.len(),
                                ids_seen_later: q.ids_seen_later,
                            }
                        })
                        .collect(),
                    quic_rejected: u
                        .quic_rejected
                        .iter()
                        .map(|(r, n)| (r.as_str(), *n))
                        .collect(),
                })
                .collect(),
            warnings: self
                .warnings
                .iter()
                .map(|w| JsonWarning {
                    capture: cap(w.capture),
                    packet: w.packet,
                    message: &w.message,
                })
                .collect(),
            handshakes: (&self.handshakes()).into(),
        }
    }
}

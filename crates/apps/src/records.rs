//! The JSON-lines records every program writes, one object per line, and the reader that turns
//! such a file back into typed records for the demos and reports.
//!
//! Every line has `"type"` (the variant name in snake_case) and `"t_s"` (seconds since the
//! program started; the `start` line gives the wall-clock and `CLOCK_MONOTONIC` origin). Fields
//! end in their unit (`_ms`, `_s`, `_mbps`, `_kbps`, `_pct`). Percentiles with no sample are
//! `null`. This module does no I/O except [`read_records`], which reads one file; it computes
//! nothing.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One JSON line. Unknown `type`s read back as [`Record::Other`], so that files written by a
/// newer version still load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    /// First line of every program. `monotonic_s` is CLOCK_MONOTONIC at `t_s = 0`.
    Start {
        t_s: f64,
        program: String,
        unix_time_s: f64,
        monotonic_s: f64,
    },
    /// A server is ready; `addr` is the bound address.
    Listening {
        t_s: f64,
        addr: String,
        proto: String,
    },
    /// A connection (or call peer) appeared; `conn` numbers them within the program.
    Connected { t_s: f64, conn: u64, peer: String },

    /// Bytes moved in one reporting interval of a bulk or stream connection. `role` is
    /// `"sender"` (bytes accepted by the socket) or `"receiver"` (bytes read by the app).
    Interval {
        t_s: f64,
        conn: u64,
        role: String,
        interval_s: f64,
        bytes: u64,
        goodput_mbps: f64,
    },
    /// The end of a bulk or stream connection. `peer_bytes` is what the other side counted
    /// (an upload's receiver reports it back), when known.
    Total {
        t_s: f64,
        conn: u64,
        role: String,
        duration_s: f64,
        bytes: u64,
        goodput_mbps: f64,
        peer_bytes: Option<u64>,
    },

    /// One probe round trip.
    Rtt {
        t_s: f64,
        proto: String,
        seq: u64,
        rtt_ms: f64,
    },
    /// A UDP probe with no answer within the probe timeout (`t_s` is when it was sent).
    Lost { t_s: f64, proto: String, seq: u64 },
    /// Per protocol, at the end of a probe run.
    ProbeSummary {
        t_s: f64,
        proto: String,
        sent: u64,
        received: u64,
        lost: u64,
        rtt_p50_ms: Option<f64>,
        rtt_p95_ms: Option<f64>,
        rtt_p99_ms: Option<f64>,
        rtt_max_ms: Option<f64>,
    },

    /// One second of a stream receiver: goodput, the longest gap between reads that
    /// returned data, and the playback buffer at the end of the second.
    StreamSecond {
        t_s: f64,
        bytes: u64,
        goodput_mbps: f64,
        max_gap_ms: Option<f64>,
        buffer_s: f64,
        playing: bool,
    },
    /// A gap between two reads longer than `--gap-threshold`; `t_s` is the later read.
    Gap { t_s: f64, gap_ms: f64 },
    /// Playback began; `startup_delay_s` is counted from the request.
    PlaybackStart { t_s: f64, startup_delay_s: f64 },
    /// The playback buffer ran dry at `t_s`; written when playback resumes (or at the end,
    /// then with `ongoing: true`).
    Stall {
        t_s: f64,
        duration_s: f64,
        ongoing: bool,
    },
    /// The end of a stream receiver.
    StreamSummary {
        t_s: f64,
        bytes: u64,
        duration_s: f64,
        goodput_mbps: f64,
        media_received_s: f64,
        longest_gap_ms: Option<f64>,
        longest_gap_at_s: Option<f64>,
        gap_p50_ms: Option<f64>,
        gap_p99_ms: Option<f64>,
        startup_delay_s: Option<f64>,
        stalls: u64,
        stall_total_s: f64,
    },

    /// One second of a video call endpoint. `fps_*` count frames sent / completely received /
    /// shown by the decoder in that second; `freeze_ms` is the picture's freeze time in it; RTT
    /// percentiles are over the per-packet samples that arrived in it; `rx_*` are cumulative
    /// counts of the ECN field on received media packets.
    CallSecond {
        t_s: f64,
        fps_sent: u64,
        fps_received: u64,
        #[serde(default)]
        fps_shown: u64,
        frames_skipped: u64,
        stall_ms: f64,
        #[serde(default)]
        freeze_ms: f64,
        rtt_samples: u64,
        rtt_p50_ms: Option<f64>,
        rtt_p99_ms: Option<f64>,
        loss_pct: f64,
        ce_pct: f64,
        rate_kbps: f64,
        send_kbps: f64,
        recv_kbps: f64,
        alpha: f64,
        ecn: String,
        rx_ect1: u64,
        rx_ect0: u64,
        rx_ce: u64,
        rx_not_ect: u64,
    },
    /// One per-packet RTT sample of the call (only with `--rtt-samples`): the media packet
    /// sent at `sent_s` came back in feedback at `t_s`.
    CallRtt { t_s: f64, sent_s: f64, rtt_ms: f64 },
    /// No complete frame for longer than the stall threshold, starting at `t_s`.
    CallStall { t_s: f64, duration_ms: f64 },
    /// The received picture froze (no frame shown for a freeze's length), from `t_s`.
    CallFreeze { t_s: f64, duration_ms: f64 },
    /// ECN validation failed and the sender fell back to Not-ECT classic mode.
    EcnFallback {
        t_s: f64,
        reason: String,
        detail: String,
    },
    /// The end of a call endpoint.
    CallSummary {
        t_s: f64,
        mode: String,
        duration_s: f64,
        frames_sent: u64,
        frames_received: u64,
        #[serde(default)]
        frames_shown: u64,
        fps_ge25_pct: f64,
        stalls: u64,
        /// Freezes of the received picture and their total length.
        #[serde(default)]
        freezes: u64,
        #[serde(default)]
        freeze_s_total: f64,
        /// Picture-loss indications this endpoint sent (its picture froze) and received (the
        /// peer's did), and the keyframes it made.
        #[serde(default)]
        plis_sent: u64,
        #[serde(default)]
        plis_received: u64,
        #[serde(default)]
        keyframes_sent: u64,
        rtt_p50_ms: Option<f64>,
        rtt_p99_ms: Option<f64>,
        loss_pct: f64,
        ce_pct: f64,
        fallback_s: Option<f64>,
        rx_ect1: u64,
        rx_ect0: u64,
        rx_ce: u64,
        rx_not_ect: u64,
    },

    /// A sample of a `screen-server` connection's send buffer: `queued_bytes` not yet
    /// acknowledged, of which `unsent_bytes` not yet sent (SIOCOUTQ, SIOCOUTQNSD).
    SendQueue {
        t_s: f64,
        conn: u64,
        queued_bytes: u64,
        unsent_bytes: u64,
    },
    /// The end of a `screen-server` connection; percentiles over its `send_queue` samples.
    ScreenServerSummary {
        t_s: f64,
        conn: u64,
        mode: String,
        frames: u64,
        bytes: u64,
        unsent_bytes_p50: Option<f64>,
        unsent_bytes_max: Option<f64>,
    },
    /// A click of `screen-viewer` at `t_s`; the first frame that drew it was complete
    /// `click_to_frame_ms` later (`null`: none came before the end).
    Click {
        t_s: f64,
        click: u64,
        click_to_frame_ms: Option<f64>,
    },
    /// The end of a `screen-viewer`.
    ScreenSummary {
        t_s: f64,
        frames: u64,
        bytes: u64,
        clicks: u64,
        answered: u64,
        click_to_frame_ms_p50: Option<f64>,
        click_to_frame_ms_p95: Option<f64>,
        click_to_frame_ms_max: Option<f64>,
    },

    /// One request of `tfo-client`, on a connection of its own opened at `t_s`: `request_ms`
    /// from `connect` to the whole response; `tfo` when the request rode in the SYN.
    Request {
        t_s: f64,
        request: u64,
        request_ms: f64,
        tfo: bool,
    },
    /// A request of `tfo-client` that failed (no connection, no answer).
    RequestFailed {
        t_s: f64,
        request: u64,
        error: String,
    },
    /// The end of a `tfo-client`.
    RequestSummary {
        t_s: f64,
        requests: u64,
        failed: u64,
        tfo: u64,
        request_ms_p50: Option<f64>,
        request_ms_p95: Option<f64>,
    },
    /// `tfo-server` acted on a request: the `count`-th time for this request id; `tfo` when
    /// the request came in the SYN.
    Action {
        t_s: f64,
        request: u64,
        count: u64,
        tfo: bool,
        peer: String,
    },
    /// The end of a `tfo-server`: distinct request ids, actions taken, and actions beyond the
    /// first for an id (a request done twice).
    ActionSummary {
        t_s: f64,
        requests: u64,
        actions: u64,
        double_actions: u64,
    },
    /// One request/response exchange of `rr-client`: the request written at `sent_s`, the
    /// whole response read at `t_s`.
    Exchange {
        t_s: f64,
        seq: u64,
        sent_s: f64,
        exchange_ms: f64,
    },
    /// The end of `rr-client`: how it wrote its messages and what the exchanges took.
    RrSummary {
        t_s: f64,
        nodelay: bool,
        writev: bool,
        exchanges: u64,
        exchange_p50_ms: Option<f64>,
        exchange_p95_ms: Option<f64>,
        exchange_max_ms: Option<f64>,
    },

    /// One request of `fallback-client`, started at `start_s`: the interface that carried it
    /// (`iface`; empty when it cannot be told), the connection attempts it started, and
    /// `request_ms` from its start to the whole answer.
    FallbackRequest {
        t_s: f64,
        request: u64,
        start_s: f64,
        iface: String,
        attempts: u32,
        request_ms: f64,
    },
    /// What `nat64-sample` did: its class, the target as given, whether it got through, the
    /// address it connected to, the time from its start to the answer's first byte, and the
    /// line it prints without `--out`.
    Nat64Sample {
        t_s: f64,
        class: String,
        target: String,
        ok: bool,
        addr: Option<String>,
        ttfb_ms: Option<f64>,
        line: String,
    },
    /// `fallback-client`'s Better Route probe connected over the preferred interface `iface`:
    /// new requests go back to it.
    BetterRoute { t_s: f64, iface: String },
    /// The end of `fallback-client`.
    FallbackSummary {
        t_s: f64,
        mode: String,
        requests: u64,
        failed: u64,
        request_ms_p50: Option<f64>,
        request_ms_max: Option<f64>,
    },

    /// A line of a type this version does not know.
    #[serde(other)]
    Other,
}

impl Record {
    /// Seconds since the program's start, for every known record.
    pub fn t_s(&self) -> Option<f64> {
        use Record::*;
        match self {
            Start { t_s, .. }
            | Listening { t_s, .. }
            | Connected { t_s, .. }
            | Interval { t_s, .. }
            | Total { t_s, .. }
            | Rtt { t_s, .. }
            | Lost { t_s, .. }
            | ProbeSummary { t_s, .. }
            | StreamSecond { t_s, .. }
            | Gap { t_s, .. }
            | PlaybackStart { t_s, .. }
            | Stall { t_s, .. }
            | StreamSummary { t_s, .. }
            | CallSecond { t_s, .. }
            | CallRtt { t_s, .. }
            | CallStall { t_s, .. }
            | CallFreeze { t_s, .. }
            | EcnFallback { t_s, .. }
            | CallSummary { t_s, .. }
            | SendQueue { t_s, .. }
            | ScreenServerSummary { t_s, .. }
            | Click { t_s, .. }
            | ScreenSummary { t_s, .. }
            | Request { t_s, .. }
            | RequestFailed { t_s, .. }
            | RequestSummary { t_s, .. }
            | Action { t_s, .. }
            | ActionSummary { t_s, .. }
            | Exchange { t_s, .. }
            | RrSummary { t_s, .. }
            | FallbackRequest { t_s, .. }
            | BetterRoute { t_s, .. }
            | FallbackSummary { t_s, .. }
            | Nat64Sample { t_s, .. } => Some(*t_s),
            Other => None,
        }
    }
}

/// A line that is not a JSON record.
#[derive(Debug)]
pub enum RecordsError {
    Io(std::io::Error),
    Line { line: usize, message: String },
}

impl fmt::Display for RecordsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordsError::Io(e) => write!(f, "cannot read records: {e}"),
            RecordsError::Line { line, message } => write!(f, "line {line}: {message}"),
        }
    }
}

impl std::error::Error for RecordsError {}

/// Parses JSON lines into records; blank lines are skipped, and a truncated last line (a
/// program killed mid-write) is ignored rather than failing the whole file.
pub fn parse_records(text: &str) -> Result<Vec<Record>, RecordsError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Record>(line) {
            Ok(r) => out.push(r),
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
            Err(e) => {
                return Err(RecordsError::Line {
                    line: i + 1,
                    message: e.to_string(),
                })
            }
        }
    }
    Ok(out)
}

/// Reads a JSON-lines file written with `--out FILE`.
pub fn read_records(path: &Path) -> Result<Vec<Record>, RecordsError> {
    let text = std::fs::read_to_string(path).map_err(RecordsError::Io)?;
    parse_records(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_one_line_each() {
        let recs = vec![
            Record::Rtt {
                t_s: 1.5,
                proto: "udp".into(),
                seq: 7,
                rtt_ms: 20.25,
            },
            Record::Stall {
                t_s: 3.0,
                duration_s: 0.5,
                ongoing: false,
            },
        ];
        let text: String = recs
            .iter()
            .map(|r| serde_json::to_string(r).unwrap() + "\n")
            .collect();
        assert!(text.starts_with(r#"{"type":"rtt","t_s":1.5,"proto":"udp","seq":7,"#));
        assert_eq!(parse_records(&text).unwrap(), recs);
    }

    #[test]
    fn unknown_types_are_kept_as_other_and_a_torn_last_line_is_ignored() {
        let text = "{\"type\":\"future_thing\",\"t_s\":1}\n\n{\"type\":\"gap\",\"t_s\":2.0,\"gap_ms\":5.0}\n{\"type\":\"ga";
        let recs = parse_records(text).unwrap();
        assert_eq!(
            recs,
            vec![
                Record::Other,
                Record::Gap {
                    t_s: 2.0,
                    gap_ms: 5.0
                }
            ]
        );
    }

    #[test]
    fn a_bad_line_in_the_middle_names_its_number() {
        let text = "{\"type\":\"gap\",\"t_s\":2.0,\"gap_ms\":5.0}\nnot json\n{\"type\":\"gap\",\"t_s\":2.0,\"gap_ms\":5.0}\n";
        match parse_records(text) {
            Err(RecordsError::Line { line, .. }) => assert_eq!(line, 2),
            other => panic!("expected a line error, got {other:?}"),
        }
    }
}

//! The JSON lines of `page-load` and `web-server`, one object per line with `"type"`, and
//! their reader. Times are ms since the page load started (`_ms` fields), so that one file
//! draws a waterfall without any other input. No I/O except [`read_records`].

use std::path::Path;

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WebRecord {
    /// The server is ready.
    Listening {
        addr: String,
        tls: bool,
        resources: usize,
        /// With HTTP/3 on the same port in UDP: its stream scheduling.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        http3: Option<Scheduling>,
    },
    /// One TCP connection of the client: when it started connecting, when TCP was up, and
    /// when TLS was (equal to `tcp_ms` without TLS).
    Connection {
        conn: u64,
        host: String,
        start_ms: f64,
        tcp_ms: f64,
        ready_ms: f64,
        protocol: String,
    },
    /// One resource: when the client knew it needed it (`queued_ms`), sent the request, saw
    /// the first byte of the response and the last one, on which connection, and whether that
    /// connection was opened for this request (`new_conn`).
    Resource {
        url: String,
        host: String,
        conn: u64,
        new_conn: bool,
        status: u16,
        bytes: u64,
        queued_ms: f64,
        sent_ms: f64,
        first_byte_ms: f64,
        last_byte_ms: f64,
        /// The longest wait between two arrivals of the response's bytes after its first
        /// (absent from older files).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        longest_gap_ms: Option<f64>,
    },
    /// The page: load time (the last byte of the last resource), mean time to first byte
    /// (request sent to first byte) and per transaction (request sent to last byte), over all
    /// resources including the HTML.
    Page {
        url: String,
        protocol: String,
        resources: usize,
        page_load_ms: f64,
        ttfb_ms_mean: f64,
        transaction_ms_mean: f64,
        wait_ms_mean: f64,
        connections: u64,
        bytes: u64,
        /// The mean over resources of `longest_gap_ms` (absent from older files).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        longest_gap_ms_mean: Option<f64>,
        /// The server's stream scheduling as its HTTP/3 responses stated it (`sequential` or
        /// `round-robin`); absent where the server did not say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        scheduling: Option<String>,
    },
    /// `web-server`: an HTTP/3 connection ended; what the server's QUIC loss detection
    /// counted over it (RFC 9002): packets sent and declared lost, congestion events, and its
    /// last smoothed RTT.
    QuicClosed {
        remote: String,
        duration_ms: f64,
        sent_packets: u64,
        lost_packets: u64,
        lost_bytes: u64,
        congestion_events: u64,
        rtt_ms: f64,
    },
    /// What `--conn-manager` did over the load (see [`crate::connmgr::Stats`]).
    ConnManager {
        design: crate::connmgr::Design,
        idle_choice: crate::connmgr::IdleChoice,
        new_connections_needed: usize,
        served_by_other: usize,
        saved_ms: Vec<f64>,
    },
    /// Anything else (a newer version's record).
    #[serde(other)]
    Other,
}

pub fn parse_records(text: &str) -> Result<Vec<WebRecord>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect()
}

pub fn read_records(path: &Path) -> Result<Vec<WebRecord>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_records(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The order in which the server sends the responses that are ready at once.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduling {
    /// One response after another, in the order they were written (quinn without fair
    /// queueing): what Chrome asks for with non-incremental priorities (RFC 9218 section 4).
    Sequential,
    /// A packet's worth of each ready response in turn (quinn's fair queueing).
    RoundRobin,
}

impl Scheduling {
    pub fn name(self) -> &'static str {
        match self {
            Scheduling::Sequential => "sequential",
            Scheduling::RoundRobin => "round-robin",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_unknown_types_read_as_other() {
        let r = WebRecord::Connection {
            conn: 1,
            host: "img1".into(),
            start_ms: 0.5,
            tcp_ms: 40.5,
            ready_ms: 40.5,
            protocol: "http/1.1".into(),
        };
        let line = serde_json::to_string(&r).unwrap();
        assert!(line.starts_with("{\"type\":\"connection\""), "{line}");
        let text = format!("{line}\n{{\"type\":\"future\",\"x\":1}}\n");
        assert_eq!(parse_records(&text).unwrap(), vec![r, WebRecord::Other]);
        assert!(parse_records("{\"type\":\"page\"}")
            .unwrap_err()
            .starts_with("line 1"));
    }
}

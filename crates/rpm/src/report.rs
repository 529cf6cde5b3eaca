//! What `latencylab rpm` reports: the JSON document (`--json`, `--out`), with foreign and self
//! probes apart and every probe kept, and the text summary in the style of Apple's
//! `networkQuality`. Pure: values in, text out; the JSON reads back for the lab's
//! attribution.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::algorithm::{Confidence, IntervalRecord, Load};

/// One probe, as measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeRecord {
    /// Start and end on the machine's CLOCK_MONOTONIC, nanoseconds (the clock of a lab's
    /// `engine.clock_monotonic_start_ns`, so that a probe can be set beside the link logs).
    pub start_mono_ns: u64,
    pub end_mono_ns: u64,
    /// Start and end in seconds since the test started.
    pub start_s: f64,
    pub end_s: f64,
    /// Foreign probes: the TCP handshake and the TLS handshake per round trip (`tcp_f`,
    /// `tls_f`), milliseconds; `None` for self probes (and `tls_ms` without TLS).
    pub tcp_ms: Option<f64>,
    pub tls_ms: Option<f64>,
    /// The GET of the 1-byte object, from request to the whole response (`http_f` or
    /// `http_l`), milliseconds.
    pub http_ms: f64,
    /// When the server received the GET, on its CLOCK_MONOTONIC, nanoseconds (the server's
    /// `x-received-monotonic-ns`): in a lab it splits the round trip into the request's way
    /// and the answer's. `None` from a server that does not say.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub server_received_mono_ns: Option<u64>,
    /// Self probes: the direction of the load-generating connection it went on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub on: Option<String>,
    /// The connection's client and server addresses (`10.77.1.1:40312`, `[fd00::1]:443`).
    pub local: String,
    pub remote: String,
    /// The test interval it finished in (from 0), and whether it is one of those the result
    /// is computed from (the last MAD intervals).
    pub interval: u32,
    pub in_window: bool,
}

impl ProbeRecord {
    /// The probe's round trips: three for a foreign probe with TLS (TCP, TLS 1.3, HTTP), two
    /// without, one for a self probe.
    pub fn round_trips(&self) -> f64 {
        match (self.tcp_ms, self.tls_ms) {
            (None, _) => 1.0,
            (Some(_), Some(_)) => 3.0,
            (Some(_), None) => 2.0,
        }
    }
    /// Its time per round trip, milliseconds.
    pub fn round_trip_ms(&self) -> f64 {
        (self.tcp_ms.unwrap_or(0.0) + self.tls_ms.unwrap_or(0.0) + self.http_ms)
            / self.round_trips()
    }
}

/// One kind of probe's part of the result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeSummary {
    /// Foreign_Responsiveness or Loaded_Responsiveness (draft section 5.3.1).
    pub rpm: Option<f64>,
    /// The trimmed means, milliseconds.
    pub tcp_ms: Option<f64>,
    pub tls_ms: Option<f64>,
    pub http_ms: Option<f64>,
    /// Probes in the result's window, and in all.
    pub in_window: usize,
    pub total: usize,
    pub probes: Vec<ProbeRecord>,
}

/// The path before the load: foreign probes run at once before the first load-generating
/// connection opened (what networkQuality prints as "Idle Latency").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleSummary {
    /// The median of their times per round trip, milliseconds; `None` when none finished.
    pub round_trip_ms: Option<f64>,
    /// Their `start_s` and `end_s` are negative: they ran before the test's start.
    pub probes: Vec<ProbeRecord>,
}

impl IdleSummary {
    pub fn of(probes: Vec<ProbeRecord>) -> IdleSummary {
        let mut rts: Vec<f64> = probes.iter().map(ProbeRecord::round_trip_ms).collect();
        rts.sort_by(f64::total_cmp);
        let n = rts.len();
        let round_trip_ms = match n {
            0 => None,
            _ if n % 2 == 1 => Some(rts[n / 2]),
            _ => Some((rts[n / 2 - 1] + rts[n / 2]) / 2.0),
        };
        IdleSummary {
            round_trip_ms,
            probes,
        }
    }
}

/// The whole report of one test.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RpmReport {
    /// The configuration URL used.
    pub config_url: String,
    pub protocol: String,
    /// The directions that carried load-generating connections (reports written before this
    /// field existed loaded both).
    #[serde(default)]
    pub load: Load,
    pub rpm: Option<f64>,
    pub rpm_confidence: Confidence,
    /// Goodput at the end (moving averages), bits per second.
    pub down_bps: f64,
    pub up_bps: f64,
    pub goodput_confidence: Confidence,
    pub flows_down: usize,
    pub flows_up: usize,
    pub duration_s: f64,
    pub foreign: ProbeSummary,
    #[serde(rename = "self")]
    pub self_probes: ProbeSummary,
    /// The idle latency, measured before the load (reports written before it was measured
    /// have none).
    #[serde(default)]
    pub idle: IdleSummary,
    /// Probes that failed (a connection refused or reset).
    pub failed_probes: u64,
    /// Load-generating connections that ended with an error.
    pub failed_flows: u64,
    /// The test's start on CLOCK_MONOTONIC, nanoseconds.
    pub start_mono_ns: u64,
    pub intervals: Vec<IntervalRecord>,
}

fn mbps(bps: f64) -> String {
    format!("{:.3} Mbps", bps / 1e6)
}

/// The summary as `networkQuality` prints it, with the probe kinds apart below.
pub fn text(r: &RpmReport) -> String {
    let mut s = String::from("==== SUMMARY ====\n");
    if r.load != Load::Down {
        let _ = writeln!(
            s,
            "Uplink capacity: {} (Accuracy: {})",
            mbps(r.up_bps),
            r.goodput_confidence.name()
        );
    }
    if r.load != Load::Up {
        let _ = writeln!(
            s,
            "Downlink capacity: {} (Accuracy: {})",
            mbps(r.down_bps),
            r.goodput_confidence.name()
        );
    }
    // networkQuality names a one-direction result after its direction.
    let what = match r.load {
        Load::Both => "Responsiveness",
        Load::Down => "Downlink Responsiveness",
        Load::Up => "Uplink Responsiveness",
    };
    match r.rpm {
        Some(rpm) => {
            let _ = writeln!(
                s,
                "{what}: {:.0} RPM ({:.0} milliseconds) (Accuracy: {})",
                rpm,
                60_000.0 / rpm,
                r.rpm_confidence.name()
            );
        }
        None => {
            let _ = writeln!(s, "{what}: not measured (no probe finished)");
        }
    }
    if let Some(idle) = r.idle.round_trip_ms {
        let _ = writeln!(
            s,
            "Idle Latency: {idle:.1} milliseconds (median round trip of {} probes before the load)",
            r.idle.probes.len()
        );
    }
    let f = &r.foreign;
    let ms = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.1} ms"));
    let rpm = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0} RPM"));
    let _ = writeln!(
        s,
        "  foreign probes (new connections): {}; TCP {}, TLS {}, HTTP {} ({} of {} probes)",
        rpm(f.rpm),
        ms(f.tcp_ms),
        ms(f.tls_ms),
        ms(f.http_ms),
        f.in_window,
        f.total
    );
    let l = &r.self_probes;
    let _ = writeln!(
        s,
        "  self probes (loaded connections): {}; HTTP {} ({} of {} probes)",
        rpm(l.rpm),
        ms(l.http_ms),
        l.in_window,
        l.total
    );
    let _ = writeln!(
        s,
        "Flows: {} down, {} up ({}); test ran {:.1} s",
        r.flows_down, r.flows_up, r.protocol, r.duration_s
    );
    if r.failed_probes + r.failed_flows > 0 {
        let _ = writeln!(
            s,
            "Errors: {} probes and {} load-generating connections failed",
            r.failed_probes, r.failed_flows
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(tcp: Option<f64>, tls: Option<f64>, http: f64) -> ProbeRecord {
        ProbeRecord {
            start_mono_ns: 0,
            end_mono_ns: 0,
            start_s: 0.0,
            end_s: 0.0,
            tcp_ms: tcp,
            tls_ms: tls,
            http_ms: http,
            on: None,
            local: "10.77.1.1:40000".into(),
            remote: "10.77.2.1:4043".into(),
            interval: 0,
            in_window: true,
            server_received_mono_ns: None,
        }
    }

    #[test]
    fn a_foreign_probe_with_tls_is_three_round_trips_a_self_probe_one() {
        assert_eq!(probe(Some(90.0), Some(100.0), 110.0).round_trip_ms(), 100.0);
        assert_eq!(probe(Some(90.0), None, 110.0).round_trip_ms(), 100.0);
        assert_eq!(probe(None, None, 70.0).round_trip_ms(), 70.0);
    }

    #[test]
    fn the_text_names_capacity_rpm_and_accuracy_as_network_quality_does() {
        let empty = ProbeSummary {
            rpm: None,
            tcp_ms: None,
            tls_ms: None,
            http_ms: None,
            in_window: 0,
            total: 0,
            probes: vec![],
        };
        let r = RpmReport {
            config_url: "https://server:4043/.well-known/nq".into(),
            protocol: "h2".into(),
            load: Load::Both,
            rpm: Some(121.0),
            rpm_confidence: Confidence::Medium,
            down_bps: 19_500_000.0,
            up_bps: 19_000_000.0,
            goodput_confidence: Confidence::High,
            flows_down: 8,
            flows_up: 8,
            duration_s: 20.0,
            foreign: empty.clone(),
            self_probes: empty,
            idle: Default::default(),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: 0,
            intervals: vec![],
        };
        let t = text(&r);
        assert!(
            t.contains("Downlink capacity: 19.500 Mbps (Accuracy: High)"),
            "{t}"
        );
        assert!(
            t.contains("Responsiveness: 121 RPM (496 milliseconds) (Accuracy: Medium)"),
            "{t}"
        );
        assert!(!t.contains("Errors"));
        let back: RpmReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(!t.contains("Idle"), "no idle probes, no line: {t}");
        let rt = |ms: f64| ProbeRecord {
            tcp_ms: Some(ms),
            tls_ms: Some(ms),
            http_ms: ms,
            ..probe(None, None, 0.0)
        };
        let idle = IdleSummary::of(vec![rt(21.0), rt(20.0), rt(40.0), rt(20.5)]);
        assert_eq!(idle.round_trip_ms, Some(20.75), "the median of four");
        assert_eq!(IdleSummary::of(vec![]).round_trip_ms, None);
        let with_idle = text(&RpmReport { idle, ..r.clone() });
        assert!(
            with_idle.contains("Idle Latency: 20.8 milliseconds (median round trip of 4 probes"),
            "{with_idle}"
        );
        // One direction: its capacity alone, and the result named after it.
        let down = text(&RpmReport {
            load: Load::Down,
            ..r.clone()
        });
        assert!(down.contains("Downlink Responsiveness: 121 RPM"), "{down}");
        assert!(!down.contains("Uplink"), "{down}");
        // A report written before `load` existed loaded both.
        let mut old = serde_json::to_value(&r).unwrap();
        old.as_object_mut().unwrap().remove("load");
        old.as_object_mut().unwrap().remove("idle");
        let back: RpmReport = serde_json::from_value(old).unwrap();
        assert_eq!(back.load, Load::Both);
        assert_eq!(back.idle, IdleSummary::default());
    }
}

//! Where a responsiveness test's round trips went, from a lab run's link logs: for each link
//! direction the probes crossed, the time they sat in its queue; the base RTT (the links'
//! propagation delays); and what is left, the hosts (their stacks, socket buffers, TLS and
//! HTTP/2 processing, and transmission times).
//!
//! Pure: the client's report, the lab's start on CLOCK_MONOTONIC and the parsed link logs in,
//! figures out. Each probe's own packets are found by its connection's addresses (a foreign
//! probe's connection is its own; a self probe's is the load-generating connection it went
//! on, whose packets its answer queued among), and the mean sojourn of those dequeued while
//! the probe was in flight is its time per crossing of that queue.
//!
//! The shares combine as the RPM does (draft-ietf-ippm-responsiveness-09 section 5.3.1): the
//! RPM is the mean of the foreign and loaded responsiveness, so its round trip
//! `60000 / RPM` is the harmonic mean of theirs, `L = 2 rF rS / (rF + rS)`, which is the
//! weighted sum `wF rF + wS rS` with `wF = rS / (rF + rS)`, `wS = rF / (rF + rS)`. Each part
//! of `L` is the same weighted sum of the part's mean share of each kind's round trip.

use std::collections::HashMap;

use link::EventKind;
use serde::Serialize;

use labnet::run_dir::LogLine;

use crate::report::{ProbeRecord, RpmReport};

/// One link direction of the run.
pub struct LinkLog<'a> {
    pub link: &'a str,
    /// `up` or `down`.
    pub side: &'a str,
    /// The queue's spec, as in summary.json (`fifo limit 1000`).
    pub queue: &'a str,
    /// Its propagation delay, milliseconds.
    pub delay_ms: f64,
    pub lines: &'a [LogLine],
}

/// One queue's part of the loaded round trip.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueuePart {
    pub link: String,
    pub side: String,
    pub queue: String,
    pub ms: f64,
    pub share: f64,
}

/// The loaded round trip `60000 / RPM`, taken apart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attribution {
    pub rpm: f64,
    pub confidence: String,
    pub loaded_rtt_ms: f64,
    pub queues: Vec<QueuePart>,
    pub base_rtt_ms: f64,
    /// What the queues and the base RTT do not explain (negative when they over-explain).
    pub hosts_ms: f64,
    pub foreign_probes: usize,
    pub self_probes: usize,
}

impl Attribution {
    pub fn base_share(&self) -> f64 {
        self.base_rtt_ms / self.loaded_rtt_ms
    }
    pub fn hosts_share(&self) -> f64 {
        self.hosts_ms / self.loaded_rtt_ms
    }

    /// "RPM 121 (Medium confidence); loaded RTT 496 ms: 91 % in `path` down FIFO queue, 4 %
    /// base RTT, 5 % hosts"
    pub fn line(&self) -> String {
        let mut parts: Vec<String> = self
            .queues
            .iter()
            .filter(|q| q.share >= 0.005)
            .map(|q| {
                format!(
                    "{:.0} % in `{}` {} {} queue",
                    q.share * 100.0,
                    q.link,
                    q.side,
                    queue_name(&q.queue)
                )
            })
            .collect();
        parts.push(format!("{:.0} % base RTT", self.base_share() * 100.0));
        parts.push(format!("{:.0} % hosts", self.hosts_share() * 100.0));
        format!(
            "RPM {:.0} ({} confidence); loaded RTT {:.0} ms: {}",
            self.rpm,
            self.confidence,
            self.loaded_rtt_ms,
            parts.join(", ")
        )
    }
}

/// A queue spec's discipline as people write it: `fifo limit 1000` is FIFO.
pub fn queue_name(spec: &str) -> String {
    let kind = spec.split_whitespace().next().unwrap_or("");
    match kind {
        "fifo" | "pfifo" => "FIFO".into(),
        "bfifo" => "FIFO (bytes)".into(),
        "codel" => "CoDel".into(),
        "fq_codel" => "FQ-CoDel".into(),
        "pie" => "PIE".into(),
        "dualpi2" => "DualPI2".into(),
        other => other.to_string(),
    }
}

/// Dequeue events of one link direction by flow: (time ns, sojourn ns), in time order.
type ByFlow<'a> = HashMap<&'a str, Vec<(u64, u64)>>;

fn index(lines: &[LogLine]) -> ByFlow<'_> {
    let mut m: ByFlow = HashMap::new();
    for l in lines {
        if l.event != EventKind::Dequeue {
            continue;
        }
        if let (Some(f), Some(s)) = (&l.flow, l.sojourn_ns) {
            m.entry(f.as_str()).or_default().push((l.time_ns, s));
        }
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// Per queue and the base RTT: this probe's time there as a share of its round trip, or
/// `None` when the probe left no packet in any log.
fn probe_shares(
    p: &ProbeRecord,
    lab_start_ns: u64,
    links: &[(&LinkLog, ByFlow)],
) -> Option<(Vec<f64>, f64)> {
    let from = p.start_mono_ns.checked_sub(lab_start_ns)?;
    let to = p.end_mono_ns.checked_sub(lab_start_ns)?;
    let rt = p.round_trip_ms();
    if rt <= 0.0 {
        return None;
    }
    let flows = [
        format!("tcp {} > {}", p.local, p.remote),
        format!("tcp {} > {}", p.remote, p.local),
    ];
    let mut queues = Vec::with_capacity(links.len());
    let mut base_ms = 0.0;
    let mut seen = false;
    for (l, by_flow) in links {
        let mut sum_ns = 0u128;
        let mut n = 0u64;
        for f in &flows {
            if let Some(v) = by_flow.get(f.as_str()) {
                let lo = v.partition_point(|(t, _)| *t < from);
                for (_, s) in v[lo..].iter().take_while(|(t, _)| *t <= to) {
                    sum_ns += u128::from(*s);
                    n += 1;
                }
            }
        }
        if n == 0 {
            queues.push(0.0);
            continue;
        }
        seen = true;
        let mean_ms = sum_ns as f64 / n as f64 / 1e6;
        queues.push(mean_ms / rt);
        base_ms += l.delay_ms;
    }
    seen.then_some((queues, base_ms / rt))
}

/// Takes the report's loaded round trip apart over `links`; `None` without an RPM or when
/// no probe of a kind left packets in the logs.
pub fn attribute(r: &RpmReport, lab_start_mono_ns: u64, links: &[LinkLog]) -> Option<Attribution> {
    let rpm = r.rpm?;
    let r_f = 60_000.0 / r.foreign.rpm?;
    let r_s = 60_000.0 / r.self_probes.rpm?;
    let indexed: Vec<(&LinkLog, ByFlow)> = links.iter().map(|l| (l, index(l.lines))).collect();
    // Mean shares of one kind of probe: per queue, and of the base RTT.
    let kind = |probes: &[ProbeRecord]| -> Option<(Vec<f64>, f64, usize)> {
        let mut q = vec![0.0; links.len()];
        let mut b = 0.0;
        let mut n = 0usize;
        for p in probes.iter().filter(|p| p.in_window) {
            if let Some((qs, bs)) = probe_shares(p, lab_start_mono_ns, &indexed) {
                for (acc, x) in q.iter_mut().zip(qs) {
                    *acc += x;
                }
                b += bs;
                n += 1;
            }
        }
        (n > 0).then(|| (q.iter().map(|x| x / n as f64).collect(), b / n as f64, n))
    };
    let (q_f, b_f, n_f) = kind(&r.foreign.probes)?;
    let (q_s, b_s, n_s) = kind(&r.self_probes.probes)?;
    let (w_f, w_s) = (r_s / (r_f + r_s), r_f / (r_f + r_s));
    let loaded = 60_000.0 / rpm;
    let queues: Vec<QueuePart> = links
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let ms = w_f * q_f[i] * r_f + w_s * q_s[i] * r_s;
            QueuePart {
                link: l.link.to_string(),
                side: l.side.to_string(),
                queue: l.queue.to_string(),
                ms,
                share: ms / loaded,
            }
        })
        .collect();
    let base = w_f * b_f * r_f + w_s * b_s * r_s;
    let hosts = loaded - base - queues.iter().map(|q| q.ms).sum::<f64>();
    Some(Attribution {
        rpm,
        confidence: r.rpm_confidence.name().to_string(),
        loaded_rtt_ms: loaded,
        queues,
        base_rtt_ms: base,
        hosts_ms: hosts,
        foreign_probes: n_f,
        self_probes: n_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::Confidence;
    use crate::report::ProbeSummary;

    const LAB0: u64 = 1_000_000_000;

    fn probe(start_ms: u64, end_ms: u64, foreign: bool, port: u16) -> ProbeRecord {
        let dur = (end_ms - start_ms) as f64;
        ProbeRecord {
            start_mono_ns: LAB0 + start_ms * 1_000_000,
            end_mono_ns: LAB0 + end_ms * 1_000_000,
            start_s: 0.0,
            end_s: 0.0,
            tcp_ms: foreign.then_some(dur / 3.0),
            tls_ms: foreign.then_some(dur / 3.0),
            http_ms: if foreign { dur / 3.0 } else { dur },
            on: (!foreign).then(|| "down".into()),
            local: format!("10.77.1.1:{port}"),
            remote: "10.77.2.1:4043".into(),
            interval: 0,
            in_window: true,
        }
    }

    fn line(t_ms: u64, sojourn_ms: u64, flow: &str) -> LogLine {
        LogLine {
            time_ns: t_ms * 1_000_000,
            event: EventKind::Dequeue,
            id: 0,
            bytes: 1500,
            sojourn_ns: Some(sojourn_ms * 1_000_000),
            flow: Some(flow.into()),
            ecn: wire::Ecn::NotEct,
            cause: None,
        }
    }

    fn summary(rpm: f64, probes: Vec<ProbeRecord>) -> ProbeSummary {
        ProbeSummary {
            rpm: Some(rpm),
            tcp_ms: None,
            tls_ms: None,
            http_ms: None,
            in_window: probes.len(),
            total: probes.len(),
            probes,
        }
    }

    /// A path of 10 ms each way with 180 ms in the down queue and 0 up: every round trip is
    /// 200 ms, of which 90 % queue and 10 % base.
    #[test]
    fn queue_and_base_shares_add_up_to_the_loaded_round_trip() {
        let foreign = probe(0, 600, true, 40000);
        let selfp = probe(100, 300, false, 40001);
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        let up_f = "tcp 10.77.1.1:40000 > 10.77.2.1:4043";
        let down_s = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        let up_s = "tcp 10.77.1.1:40001 > 10.77.2.1:4043";
        let down = vec![
            line(190, 180, down_f),
            line(390, 180, down_f),
            line(200, 180, down_s),
            line(250, 180, down_s),
            // Before the probe: not counted.
            line(50, 900, down_s),
        ];
        let up = vec![line(10, 0, up_f), line(110, 0, up_s)];
        let r = RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            rpm: Some(300.0),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(300.0, vec![foreign]),
            self_probes: summary(300.0, vec![selfp]),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        };
        let links = [
            LinkLog {
                link: "path",
                side: "up",
                queue: "fifo limit 1000",
                delay_ms: 10.0,
                lines: &up,
            },
            LinkLog {
                link: "path",
                side: "down",
                queue: "fifo limit 1000",
                delay_ms: 10.0,
                lines: &down,
            },
        ];
        let a = attribute(&r, LAB0, &links).unwrap();
        assert!((a.loaded_rtt_ms - 200.0).abs() < 1e-9);
        assert!((a.queues[1].share - 0.9).abs() < 1e-9, "{a:?}");
        assert!(a.queues[0].share.abs() < 1e-9);
        assert!((a.base_share() - 0.1).abs() < 1e-9);
        assert!(a.hosts_ms.abs() < 1e-6);
        assert_eq!(
            a.line(),
            "RPM 300 (High confidence); loaded RTT 200 ms: 90 % in `path` down FIFO queue, 10 % base RTT, 0 % hosts"
        );
    }

    #[test]
    fn probes_without_packets_in_the_logs_give_no_attribution() {
        let r = RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            rpm: Some(300.0),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(300.0, vec![probe(0, 600, true, 40000)]),
            self_probes: summary(300.0, vec![probe(0, 200, false, 40001)]),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        };
        assert!(attribute(&r, LAB0, &[]).is_none());
    }
}

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
//! A probe that lost a packet in the path (a drop of its flow's, while it was in flight)
//! waited for TCP to recover it: what its queues and base RTT do not explain is counted as
//! loss recovery; for the other probes it is the hosts'.
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

/// One kind of probe's round trip (its trimmed mean), taken apart the same way.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KindAttribution {
    pub round_trip_ms: f64,
    /// Per link direction, in the order of the links given.
    pub queues_ms: Vec<f64>,
    pub base_rtt_ms: f64,
    /// Waiting for TCP to recover packets the path dropped.
    pub loss_recovery_ms: f64,
    pub hosts_ms: f64,
    pub probes: usize,
}

impl KindAttribution {
    /// The share of the round trip the path explains: its queues, its drops' recovery and
    /// the base RTT.
    pub fn network_share(&self) -> f64 {
        (self.queues_ms.iter().sum::<f64>() + self.base_rtt_ms + self.loss_recovery_ms)
            / self.round_trip_ms
    }
}

/// The loaded round trip `60000 / RPM`, taken apart.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Attribution {
    pub rpm: f64,
    pub confidence: String,
    pub loaded_rtt_ms: f64,
    pub queues: Vec<QueuePart>,
    pub base_rtt_ms: f64,
    /// Probes that lost a packet in the path waited this long for its recovery.
    pub loss_recovery_ms: f64,
    /// What the path does not explain (negative when it over-explains).
    pub hosts_ms: f64,
    /// The foreign and the self probes' round trips apart.
    pub foreign: KindAttribution,
    #[serde(rename = "self")]
    pub self_probes: KindAttribution,
}

impl Attribution {
    pub fn base_share(&self) -> f64 {
        self.base_rtt_ms / self.loaded_rtt_ms
    }
    pub fn hosts_share(&self) -> f64 {
        self.hosts_ms / self.loaded_rtt_ms
    }
    pub fn loss_share(&self) -> f64 {
        self.loss_recovery_ms / self.loaded_rtt_ms
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
        if self.loss_recovery_ms > 0.0 {
            parts.push(format!("{:.0} % loss recovery", self.loss_share() * 100.0));
        }
        parts.push(format!("{:.0} % hosts", self.hosts_share() * 100.0));
        format!(
            "RPM {:.0} ({} confidence); loaded RTT {:.0} ms: {}",
            self.rpm,
            self.confidence,
            self.loaded_rtt_ms,
            parts.join(", ")
        )
    }

    /// "foreign probes' round trip 485 ms: 97 % the path's; self probes' 980 ms: 49 %"
    pub fn kinds_line(&self) -> String {
        format!(
            "foreign probes' round trip {:.0} ms: {:.0} % the path's (queues, base RTT, loss recovery); self probes' {:.0} ms: {:.0} %",
            self.foreign.round_trip_ms,
            self.foreign.network_share() * 100.0,
            self.self_probes.round_trip_ms,
            self.self_probes.network_share() * 100.0
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

/// Dequeues (time ns, `Some(sojourn ns)`) and drops (time ns, `None`) of one link direction
/// by flow, in time order.
type ByFlow<'a> = HashMap<&'a str, Vec<(u64, Option<u64>)>>;

fn index(lines: &[LogLine]) -> ByFlow<'_> {
    let mut m: ByFlow = HashMap::new();
    for l in lines {
        let Some(f) = &l.flow else { continue };
        match (l.event, l.sojourn_ns) {
            (EventKind::Dequeue, Some(s)) => {
                m.entry(f.as_str()).or_default().push((l.time_ns, Some(s)))
            }
            (EventKind::Drop, _) => m.entry(f.as_str()).or_default().push((l.time_ns, None)),
            _ => {}
        }
    }
    for v in m.values_mut() {
        v.sort_unstable();
    }
    m
}

/// A probe's shares of its round trip: per queue, the base RTT, and whether the path dropped
/// one of its packets.
struct Shares {
    queues: Vec<f64>,
    base: f64,
    dropped: bool,
}

/// This probe's time in each queue and in the base RTT as shares of its round trip, or `None`
/// when the probe left no packet in any log.
fn probe_shares(
    p: &ProbeRecord,
    lab_start_ns: u64,
    links: &[(&LinkLog, ByFlow)],
) -> Option<Shares> {
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
    let mut dropped = false;
    for (l, by_flow) in links {
        let mut sum_ns = 0u128;
        let mut n = 0u64;
        for f in &flows {
            if let Some(v) = by_flow.get(f.as_str()) {
                let lo = v.partition_point(|(t, _)| *t < from);
                for (_, s) in v[lo..].iter().take_while(|(t, _)| *t <= to) {
                    match s {
                        Some(s) => {
                            sum_ns += u128::from(*s);
                            n += 1;
                        }
                        None => dropped = true,
                    }
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
    seen.then_some(Shares {
        queues,
        base: base_ms / rt,
        dropped,
    })
}

/// Takes the report's loaded round trip apart over `links`; `None` without an RPM or when
/// no probe of a kind left packets in the logs.
pub fn attribute(r: &RpmReport, lab_start_mono_ns: u64, links: &[LinkLog]) -> Option<Attribution> {
    let rpm = r.rpm?;
    let r_f = 60_000.0 / r.foreign.rpm?;
    let r_s = 60_000.0 / r.self_probes.rpm?;
    let indexed: Vec<(&LinkLog, ByFlow)> = links.iter().map(|l| (l, index(l.lines))).collect();
    // Mean shares of one kind of probe: per queue, of the base RTT, of loss recovery (what a
    // probe that lost a packet spent beyond its queues and base RTT).
    let kind = |probes: &[ProbeRecord]| -> Option<(Vec<f64>, f64, f64, usize)> {
        let mut q = vec![0.0; links.len()];
        let mut b = 0.0;
        let mut loss = 0.0;
        let mut n = 0usize;
        for p in probes.iter().filter(|p| p.in_window) {
            if let Some(sh) = probe_shares(p, lab_start_mono_ns, &indexed) {
                let explained = sh.queues.iter().sum::<f64>() + sh.base;
                if sh.dropped {
                    loss += (1.0 - explained).max(0.0);
                }
                for (acc, x) in q.iter_mut().zip(sh.queues) {
                    *acc += x;
                }
                b += sh.base;
                n += 1;
            }
        }
        let mean = |x: f64| x / n as f64;
        (n > 0).then(|| (q.iter().map(|x| mean(*x)).collect(), mean(b), mean(loss), n))
    };
    let (q_f, b_f, l_f, n_f) = kind(&r.foreign.probes)?;
    let (q_s, b_s, l_s, n_s) = kind(&r.self_probes.probes)?;
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
    let loss = w_f * l_f * r_f + w_s * l_s * r_s;
    let hosts = loaded - base - loss - queues.iter().map(|q| q.ms).sum::<f64>();
    let kind_parts = |rt: f64, q: &[f64], b: f64, l: f64, n: usize| {
        let queues_ms: Vec<f64> = q.iter().map(|x| x * rt).collect();
        let base_rtt_ms = b * rt;
        let loss_recovery_ms = l * rt;
        KindAttribution {
            round_trip_ms: rt,
            hosts_ms: rt - base_rtt_ms - loss_recovery_ms - queues_ms.iter().sum::<f64>(),
            queues_ms,
            base_rtt_ms,
            loss_recovery_ms,
            probes: n,
        }
    };
    Some(Attribution {
        rpm,
        confidence: r.rpm_confidence.name().to_string(),
        loaded_rtt_ms: loaded,
        queues,
        base_rtt_ms: base,
        loss_recovery_ms: loss,
        hosts_ms: hosts,
        foreign: kind_parts(r_f, &q_f, b_f, l_f, n_f),
        self_probes: kind_parts(r_s, &q_s, b_s, l_s, n_s),
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
        assert!((a.foreign.network_share() - 1.0).abs() < 1e-9);
        assert!((a.self_probes.queues_ms[1] - 180.0).abs() < 1e-9);
        assert_eq!(
            a.line(),
            "RPM 300 (High confidence); loaded RTT 200 ms: 90 % in `path` down FIFO queue, 10 % base RTT, 0 % hosts"
        );
    }

    #[test]
    fn a_probe_that_lost_a_packet_spent_its_unexplained_time_in_loss_recovery() {
        // The foreign probe's round trip is 300 ms: 180 ms queued down, 20 ms base RTT, and a
        // drop of its flow's: the other 100 ms were TCP recovering it. The self probe's is
        // 200 ms, all queue and base.
        let foreign = probe(0, 900, true, 40000);
        let selfp = probe(100, 300, false, 40001);
        let down_f = "tcp 10.77.2.1:4043 > 10.77.1.1:40000";
        let down_s = "tcp 10.77.2.1:4043 > 10.77.1.1:40001";
        let mut drop = line(200, 0, down_f);
        drop.event = EventKind::Drop;
        drop.sojourn_ns = None;
        let down = vec![line(190, 180, down_f), drop, line(250, 180, down_s)];
        let up = vec![
            line(10, 0, "tcp 10.77.1.1:40000 > 10.77.2.1:4043"),
            line(110, 0, "tcp 10.77.1.1:40001 > 10.77.2.1:4043"),
        ];
        let mut r = report(250.0, 200.0, vec![foreign], 300.0, vec![selfp]);
        r.rpm_confidence = Confidence::Medium;
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
        assert!((a.foreign.loss_recovery_ms - 100.0).abs() < 1e-6, "{a:?}");
        assert!((a.foreign.network_share() - 1.0).abs() < 1e-9);
        assert_eq!(a.self_probes.loss_recovery_ms, 0.0);
        // Loaded round trip 60000 / 250 = 240 ms, of which the foreign probes' weight
        // (200 / 500) times their 100 ms is loss recovery.
        assert!((a.loss_recovery_ms - 40.0).abs() < 1e-6, "{a:?}");
        assert!(a.hosts_ms.abs() < 1e-6, "{a:?}");
        assert!(
            a.line().contains("17 % loss recovery, 0 % hosts"),
            "{}",
            a.line()
        );
    }

    fn report(
        rpm: f64,
        f_rpm: f64,
        f: Vec<ProbeRecord>,
        s_rpm: f64,
        s: Vec<ProbeRecord>,
    ) -> RpmReport {
        RpmReport {
            config_url: String::new(),
            protocol: "h2".into(),
            rpm: Some(rpm),
            rpm_confidence: Confidence::High,
            down_bps: 0.0,
            up_bps: 0.0,
            goodput_confidence: Confidence::High,
            flows_down: 1,
            flows_up: 1,
            duration_s: 1.0,
            foreign: summary(f_rpm, f),
            self_probes: summary(s_rpm, s),
            failed_probes: 0,
            failed_flows: 0,
            start_mono_ns: LAB0,
            intervals: vec![],
        }
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

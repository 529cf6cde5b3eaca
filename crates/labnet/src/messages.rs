//! What a lab says on stderr, as lines: the lab's description when it comes up, and at its end
//! each link's figures and the warnings a reader of the results must see (the engine was late,
//! or stalled). The shell prints them; here they are tested.

use std::collections::BTreeMap;
use std::path::Path;

use crate::lifecycle::STALL_WORTH_SAYING;
use crate::run_dir::{DelaySummary, Summary};
use crate::spec::LabConfig;
use crate::Setting;

/// The line said when the lab added `cc` to the machine's allowed congestion controls.
pub fn cc_allowed(cc: &str) -> String {
    format!("latencylab: added {cc} to net.ipv4.tcp_allowed_congestion_control so that lab hosts may use it")
}

/// The line said after removing the namespaces earlier labs left behind, if there were any.
pub fn leftovers_removed(namespaces: &[String]) -> Option<String> {
    (!namespaces.is_empty()).then(|| {
        format!(
            "latencylab: removed what an earlier lab left behind: {}",
            namespaces.join(", ")
        )
    })
}

/// The lab's hosts with their addresses, the NAT64, and each link direction's settings.
pub fn lab_up(cfg: &LabConfig) -> Vec<String> {
    let mut s = String::from("latencylab: lab up:");
    for h in &cfg.hosts {
        let addrs: Vec<String> = h
            .interfaces
            .iter()
            .map(|i| {
                if h.has_ipv4() {
                    format!("{}.{} {}", h.name, i.name, i.ipv4)
                } else {
                    format!("{}.{} {} (IPv6 only)", h.name, i.name, i.ipv6)
                }
            })
            .collect();
        s.push_str(&format!(" [{}]", addrs.join(", ")));
    }
    let mut lines = vec![s];
    if let Some(n) = &cfg.nat64 {
        lines.push(format!(
            "latencylab:   NAT64 {} (IPv4 {}) and DNS64 {} at {}",
            n.prefix, n.pool4, n.dns, n.at
        ));
    }
    if let Ok(Some(p)) = crate::clat::ClatPlan::of(cfg) {
        for c in &p.hosts {
            lines.push(format!(
                "latencylab:   CLAT on {}: {}/{} ↔ {}, prefix {} ({})",
                cfg.hosts[c.host].name,
                c.ipv4,
                nat64::clat::HOST_PREFIX_LEN,
                c.ipv6,
                p.prefix,
                p.source.describe()
            ));
        }
    }
    for l in &cfg.links {
        for (name, d) in [("up", &l.up), ("down", &l.down)] {
            let s = |x: Setting| x.to_string();
            let p = &d.params;
            lines.push(format!(
                "latencylab:   {} {name}: {} {} delay, loss {}, queue {}",
                l.name,
                s(Setting::Capacity(p.capacity.clone())),
                s(Setting::Delay(p.delay)),
                s(Setting::Loss(p.loss)),
                d.queue
            ));
        }
    }
    lines
}

/// The warnings of a run's end about the engine itself: late deliveries, a stall, packets the
/// hosts' kernels dropped. When the engine was the bottleneck, saying so keeps anybody from
/// blaming the emulated link.
pub fn engine_warnings(summary: &Summary) -> Vec<String> {
    let late = &summary.engine.delivery_lateness_ms;
    let mut lines = Vec::new();
    if late.p99 > 1.0 + summary.engine.precision_ms {
        lines.push(format!(
            "latencylab: warning: the emulator delivered packets {:.1} ms late at the 99th \
             percentile (the machine was too busy for these settings): delays and rates above \
             include its own",
            late.p99
        ));
    }
    lines.extend(stall_warning(
        summary.engine.longest_stall_ms,
        summary.engine.longest_stall_at_s,
    ));
    lines.extend(host_drops_warning(&summary.engine.host_tx_dropped));
    lines
}

/// The end of a run: every link direction that carried packets, the engine's own lateness and
/// stalls when they were worth saying, the NAT64's counters, and where the files are.
pub fn run_summary(summary: &Summary, out_dir: Option<&Path>) -> Vec<String> {
    let mut lines = Vec::new();
    for l in &summary.links {
        if l.packets_in == 0 {
            continue;
        }
        let drops: u64 = l.drops.values().sum();
        lines.push(format!(
            "latencylab: {}-{}: {} packets, {:.2} Mbit/s, queue delay p50 {:.1} ms p99 {:.1} ms, {} dropped, {} CE-marked",
            l.name,
            l.direction,
            l.packets_out,
            l.throughput_bps / 1e6,
            l.queue_delay_ms.p50,
            l.queue_delay_ms.p99,
            drops,
            l.ce_marks
        ));
        lines.push(format!("latencylab:   {}", l.check_line));
    }
    let late = &summary.engine.delivery_lateness_ms;
    let precision_ms = summary.engine.precision_ms;
    lines.extend(precision_line(precision_ms, late));
    lines.extend(engine_warnings(summary));
    for c in summary.nat64.iter().flat_map(|n| &n.clat) {
        lines.push(format!(
            "latencylab: clat on {}.{}: {} ↔ {} with prefix {} ({}); {} packets 4→6, {} 6→4",
            c.host,
            c.iface,
            c.ipv4,
            c.ipv6,
            c.prefix,
            c.prefix_source,
            c.translated_4to6,
            c.translated_6to4
        ));
    }
    lines.extend(summary.nat64.as_ref().map(nat64_line));
    if let Some(d) = out_dir {
        lines.push(format!(
            "latencylab: captures, link logs and summary.json are in {}",
            d.display()
        ));
    }
    lines
}

/// The precision asked for (`--precision`, in ms) and what the deliveries kept of it, when one
/// was asked for.
pub fn precision_line(precision_ms: f64, late: &DelaySummary) -> Option<String> {
    (precision_ms > 0.0).then(|| {
        format!(
            "latencylab: engine precision {precision_ms} ms: packets delivered within {:.3} ms \
             of their time at the 99th percentile ({:.3} ms at most), early ones included",
            late.p99, late.max
        )
    })
}

/// The engine's longest stall in plain words, when it was over [`STALL_WORTH_SAYING`].
pub fn stall_warning(stall_ms: f64, at_s: f64) -> Option<String> {
    (stall_ms > STALL_WORTH_SAYING.as_secs_f64() * 1e3).then(|| {
        format!(
            "latencylab: warning: the emulator stalled for {stall_ms:.1} ms at {at_s:.2} s (the \
             lab's process was stopped or not scheduled, or busy in one loop turn): packets \
             waited that long in the hosts' queues, on top of the delays above"
        )
    })
}

/// Packets hosts' kernels dropped before the engine read them, in plain words, when any were.
pub fn host_drops_warning(drops: &BTreeMap<String, u64>) -> Option<String> {
    let total: u64 = drops.values().sum();
    let (worst, n) = drops.iter().max_by_key(|d| *d.1)?;
    Some(format!(
        "latencylab: warning: {total} packets were dropped by the hosts' own kernels before \
         the emulator read them (the TUN device's transmit queue was full; most at {worst}: \
         {n}): they never reached the emulated links"
    ))
}

/// The NAT64's line: packets each way, drops, and the DNS64's answers over UDP and TCP.
fn nat64_line(n: &crate::run_dir::Nat64Summary) -> String {
    let drops: Vec<String> = n.drops.iter().map(|(k, v)| format!("{v} {k}")).collect();
    format!(
        "latencylab: nat64: {} packets 6→4, {} 4→6, dropped: {}; dns64: {} answers{}",
        n.translated_6to4,
        n.translated_4to6,
        if drops.is_empty() {
            "none".to_string()
        } else {
            drops.join(", ")
        },
        n.dns.answered + n.dns.answered_tcp,
        match n.dns.answered_tcp {
            0 => String::new(),
            t => format!(" ({t} over TCP)"),
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setting::no_files;
    use crate::shell::{shell_config, ShellOptions};

    #[test]
    fn leftovers_are_named_only_when_there_were_some() {
        assert_eq!(leftovers_removed(&[]), None);
        assert_eq!(
            leftovers_removed(&["ll-7-a".into(), "ll-7-b".into()]).unwrap(),
            "latencylab: removed what an earlier lab left behind: ll-7-a, ll-7-b"
        );
        assert!(cc_allowed("cubic").contains("added cubic to net.ipv4.tcp_allowed"));
    }

    #[test]
    fn the_lab_up_line_names_every_interface_and_each_link_direction_follows() {
        let cfg = shell_config(&ShellOptions::default(), &no_files).unwrap();
        let lines = lab_up(&cfg);
        assert_eq!(
            lines[0],
            "latencylab: lab up: [client.eth0 10.77.1.1] [server.eth0 10.77.2.1]"
        );
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[1].contains(" up: "), "{lines:?}");
    }

    #[test]
    fn a_stall_over_a_millisecond_is_said_and_a_shorter_one_is_not() {
        assert_eq!(stall_warning(0.9, 1.0), None);
        let line = stall_warning(195.0, 1.25).unwrap();
        assert!(line.contains("stalled for 195.0 ms at 1.25 s"), "{line}");
    }

    #[test]
    fn the_precision_and_the_error_kept_are_said_only_when_a_precision_was_asked() {
        let late = DelaySummary {
            p99: 0.9134,
            max: 1.2,
            ..Default::default()
        };
        assert_eq!(precision_line(0.0, &late), None);
        assert_eq!(
            precision_line(1.0, &late).unwrap(),
            "latencylab: engine precision 1 ms: packets delivered within 0.913 ms of their time \
             at the 99th percentile (1.200 ms at most), early ones included"
        );
    }

    #[test]
    fn drops_in_the_hosts_own_queues_are_said_with_the_worst_host() {
        assert_eq!(host_drops_warning(&BTreeMap::new()), None);
        let drops = BTreeMap::from([("srv".to_string(), 111), ("c1".to_string(), 2)]);
        let line = host_drops_warning(&drops).unwrap();
        assert!(line.contains("113 packets"), "{line}");
        assert!(line.contains("most at srv: 111"), "{line}");
    }

    #[test]
    fn the_dns64_count_includes_answers_over_tcp() {
        let mut n = crate::run_dir::Nat64Summary::default();
        n.dns.answered_tcp = 1;
        let line = nat64_line(&n);
        assert!(line.ends_with("dns64: 1 answers (1 over TCP)"), "{line}");
        n.dns.answered = 2;
        n.dns.answered_tcp = 0;
        assert!(nat64_line(&n).ends_with("dns64: 2 answers"));
    }
}

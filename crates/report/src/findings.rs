//! What the analyzer named, as a page's findings block: one line per diagnosis of each
//! analysis, labelled with its run and the diagnosis kind, and a run with none said to have
//! none. Many lines of one label fold into the first and a count, so a run of a hundred short
//! connections reads as one line. The diagnoses themselves are `analyze`'s; this module only
//! words and groups them.

use analyze::Analysis;

use crate::html::Block;

/// More lines of one label (run and diagnosis kind) than a reader scans.
const FINDINGS_PER_LABEL: usize = 3;

/// What the analyzer named in each run (`runs`: its label and its analysis), one line per
/// diagnosis ("nothing" for a run without any), as a findings block.
pub fn analyzer_findings<'a>(runs: impl IntoIterator<Item = (&'a str, &'a Analysis)>) -> Block {
    let mut findings = Vec::new();
    for (label, analysis) in runs {
        let mut any = false;
        for c in &analysis.connections {
            // With several captures one connection can be in more than one, each seen from
            // its own place: say which.
            let seen = match analysis.captures.get(c.vantage.capture) {
                Some(f) if analysis.captures.len() > 1 => {
                    let file = std::path::Path::new(&f.name).file_name();
                    format!(
                        " (in {})",
                        file.map_or(f.name.clone(), |n| n.to_string_lossy().into())
                    )
                }
                _ => String::new(),
            };
            for d in &c.diagnoses {
                findings.push((
                    format!("{label}: {}", d.kind.name()),
                    format!("{} → {}{seen}: {}", c.a, c.b, d.summary),
                ));
                any = true;
            }
        }
        if !any {
            findings.push((
                format!("{label}: nothing"),
                "the analyzer named no cause of delay".into(),
            ));
        }
    }
    Block::Findings(grouped_findings(findings))
}

/// The findings with each label's lines beyond [`FINDINGS_PER_LABEL`] folded into one: a run
/// of a hundred short connections that all went to round trips reads as the first of them and
/// a count, not as a hundred nearly equal lines. Labels keep the order of their first line.
pub fn grouped_findings(findings: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for (label, text) in findings {
        match groups.iter_mut().find(|(l, _)| *l == label) {
            Some((_, texts)) => texts.push(text),
            None => groups.push((label, vec![text])),
        }
    }
    let mut out = Vec::new();
    for (label, texts) in groups {
        if texts.len() <= FINDINGS_PER_LABEL {
            out.extend(texts.into_iter().map(|t| (label.clone(), t)));
        } else {
            let n = texts.len();
            out.push((
                format!("{label} ×{n}"),
                format!(
                    "{} (and the same diagnosis on {} more connections: `latencylab analyze` on \
                     the capture lists each)",
                    texts[0],
                    n - 1
                ),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixture as common;

    #[test]
    fn findings_of_one_label_beyond_three_fold_into_the_first_and_a_count() {
        let f = |l: &str, t: &str| (l.to_string(), t.to_string());
        let mut many = vec![f("a: app_limited", "once")];
        for i in 0..5 {
            many.push(f("a: path_delay", &format!("conn {i}")));
        }
        many.push(f("b: nothing", "none"));
        many.push(f("a: app_limited", "twice"));
        let g = grouped_findings(many);
        assert_eq!(
            g,
            vec![
                f("a: app_limited", "once"),
                f("a: app_limited", "twice"),
                f(
                    "a: path_delay ×5",
                    "conn 0 (and the same diagnosis on 4 more connections: `latencylab analyze` on \
                     the capture lists each)"
                ),
                f("b: nothing", "none"),
            ]
        );
        let three: Vec<_> = (0..3).map(|i| f("x", &i.to_string())).collect();
        assert_eq!(grouped_findings(three.clone()), three);
    }

    #[test]
    fn each_diagnosis_is_a_line_under_its_run_and_kind_and_a_run_without_any_says_nothing() {
        let a = common::bulk_download();
        let mut quiet = common::bulk_download();
        for c in &mut quiet.connections {
            c.diagnoses.clear();
        }
        let Block::Findings(lines) = analyzer_findings([("fifo", &a), ("codel", &quiet)]) else {
            panic!("not a findings block");
        };
        let labels: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(
            labels,
            ["fifo: bufferbloat", "fifo: loss_burst", "codel: nothing"]
        );
        assert!(
            lines[0]
                .1
                .ends_with(": RTT 150 ms above its 20 ms minimum for 0.4 s: a standing queue."),
            "{}",
            lines[0].1
        );
        assert!(lines[0].1.contains(" → "), "{}", lines[0].1);
        // One capture: no need to say which.
        assert!(!lines[0].1.contains(" (in "), "{}", lines[0].1);
    }

    #[test]
    fn with_several_captures_each_line_names_the_capture_it_was_seen_in() {
        let mut a = common::bulk_download();
        let mut server = a.captures[0].clone();
        server.name = "out/run1/captures/server-eth0.pcap".into();
        a.captures.push(server);
        for c in &mut a.connections {
            c.vantage.capture = 1;
        }
        let Block::Findings(lines) = analyzer_findings([("run", &a)]) else {
            panic!("not a findings block");
        };
        assert!(
            lines[0].1.contains(" (in server-eth0.pcap): RTT 150 ms"),
            "{}",
            lines[0].1
        );
    }
}

//! The analyzer and the report together on a synthetic capture: a 1 MB bulk transfer with
//! two losses (one repaired only by a timeout) and ECN marks above a queue threshold, made by
//! the analyzer's own traffic model and written as a pcap, then analysed with series kept and
//! drawn. Checks the files each output promises and that the pictures carry what the capture
//! holds (a retransmission, CE marks).

use analyze::synth::{pcap, Bulk, Vantage};
use analyze::{analyze_bytes, Options};
use std::path::PathBuf;

fn lossy_ecn_transfer(vantage: Vantage) -> analyze::Analysis {
    let mut b = Bulk::new(
        "10.0.0.1:40000".parse().unwrap(),
        "10.0.0.2:5201".parse().unwrap(),
    );
    b.drop_first_tx = [100, 300].into_iter().collect();
    b.drop_second_tx = [300].into_iter().collect();
    b.ecn = true;
    b.ce_threshold_segments = 12;
    b.vantage = vantage;
    let bytes = pcap(b.run());
    analyze_bytes(
        "synthetic.pcap",
        &bytes,
        Options {
            keep_series: true,
            ..Options::default()
        },
    )
    .unwrap()
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("report-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn synthetic_lossy_ecn_capture_yields_plots_xplot_and_page_with_its_marks() {
    // At the sender, where retransmissions are seen (losses happen after it).
    let a = lossy_ecn_transfer(Vantage::Sender);
    assert_eq!(a.connections.len(), 1);
    let c = &a.connections[0];
    assert!(c.a2b.stats.retransmitted_packets >= 2, "{:?}", c.a2b.stats);

    let dir = scratch_dir("e2e");
    let plots = report::analysis::write_plots(&a, &dir.join("plots"), Default::default()).unwrap();
    let names: Vec<String> = plots
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for n in [
        "a2b_tsg.png",
        "a2b_tsg.svg",
        "a2b_rtt.png",
        "handshake_cdf.png",
    ] {
        assert!(names.iter().any(|x| x == n), "missing {n}: {names:?}");
    }
    let svg = std::fs::read_to_string(dir.join("plots/a2b_tsg.svg")).unwrap();
    for text in [
        "retransmission",
        "congestion echoed, on ACK",
        "relative sequence number (bytes)",
    ] {
        assert!(svg.contains(text), "time-sequence svg lacks {text:?}");
    }

    let xpl = report::analysis::write_xplot(&a, &dir.join("xpl")).unwrap();
    assert!(xpl.iter().any(|p| p.ends_with("a2b_tsg.xpl")));
    let tsg = std::fs::read_to_string(dir.join("xpl/a2b_tsg.xpl")).unwrap();
    assert!(tsg.starts_with("timeval unsigned\n"));
    assert!(
        tsg.contains("\nred\n"),
        "no red retransmission in the xplot file"
    );
    assert!(tsg.ends_with("go\n"));

    let page = dir.join("page.html");
    report::analysis::write_html(&a, &page, Default::default()).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"conn1-a2b-tsg\""));
    if std::env::var_os("REPORT_TEST_KEEP").is_none() {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn receiver_side_capture_shows_ce_marks_and_out_of_order_repairs() {
    // At the receiver CE arrives on data, and a retransmission fills a hole (out of order).
    let a = lossy_ecn_transfer(Vantage::Receiver);
    let st = &a.connections[0].a2b.stats;
    assert!(st.ce > 0 && st.out_of_order_packets > 0, "{st:?}");
    let svg = report::analysis::time_sequence(&a, &a.connections[0], analyze::Dir::AtoB)
        .chart()
        .to_svg()
        .unwrap();
    for text in ["congestion experienced, on data", "out-of-order data"] {
        assert!(svg.contains(text), "time-sequence svg lacks {text:?}");
    }
}

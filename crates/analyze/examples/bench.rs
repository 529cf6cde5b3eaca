//! Analyzes a capture through the library path of `latencylab analyze --json` and reports
//! packets per second (wall time of the whole analysis, JSON serialisation included).
//!
//!     cargo run --release -p analyze --example bench -- FILE [--series]
//!
//! Peak memory: run it under `/usr/bin/time -v` (see docs/PERFORMANCE.md).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args.get(1).expect("usage: bench FILE [--series]");
    let keep_series = args.iter().any(|a| a == "--series");
    let file = std::fs::File::open(path).expect("open capture");
    // The example reads the clock to time itself; the library never does.
    let start = std::time::Instant::now();
    let mut an = analyze::Analyzer::new(analyze::Options {
        keep_series,
        ..analyze::Options::default()
    });
    an.add_capture(path, file).expect("read capture");
    let a = an.finish();
    let json = serde_json::to_vec(&a.json_report()).expect("json");
    let secs = start.elapsed().as_secs_f64();
    let packets: u64 = a.captures.iter().map(|c| c.packets).sum();
    println!(
        "{packets} packets, {} connections, {} json bytes in {secs:.2} s: {:.0} packets/s",
        a.connections.len(),
        json.len(),
        packets as f64 / secs
    );
}

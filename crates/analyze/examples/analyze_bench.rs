//! Analyzes a capture through the library path of `latencylab analyze --json` and reports
//! packets per second (wall time of the whole analysis, JSON serialisation included).
//!
//!     cargo run --release -p analyze --example analyze_bench -- FILE [--series] [--stream] [--json OUT] [--debug OUT]
//!
//! The file is read into memory first and analysed in place, as the CLI does with a mapped
//! file (`--stream`: through the streaming reader instead). `--json OUT` writes the report as
//! `latencylab analyze --json` prints it, and `--debug OUT` the whole analysis (series
//! included with `--series`) as Rust's `{:#?}`, to compare outputs before and after a change.
//! Peak memory: run it under `/usr/bin/time -v` (see docs/PERFORMANCE.md).

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .expect("usage: bench FILE [--series] [--stream] [--json OUT]");
    let keep_series = args.iter().any(|a| a == "--series");
    let stream = args.iter().any(|a| a == "--stream");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
    };
    let (json_out, debug_out) = (value("--json"), value("--debug"));
    let bytes = if stream {
        Vec::new()
    } else {
        std::fs::read(path).expect("read capture")
    };
    // The example reads the clock to time itself; the library never does.
    let start = std::time::Instant::now();
    let mut an = analyze::Analyzer::new(analyze::Options {
        keep_series,
        ..analyze::Options::default()
    });
    if stream {
        let file = std::fs::File::open(path).expect("open capture");
        an.add_capture(path, file).expect("read capture");
    } else {
        an.add_capture_bytes(path, &bytes).expect("read capture");
    }
    let a = an.finish();
    let json = serde_json::to_vec_pretty(&a.json_report()).expect("json");
    let secs = start.elapsed().as_secs_f64();
    let packets: u64 = a.captures.iter().map(|c| c.packets).sum();
    println!(
        "{packets} packets, {} connections, {} json bytes in {secs:.2} s: {:.0} packets/s",
        a.connections.len(),
        json.len(),
        packets as f64 / secs
    );
    if let Some(out) = json_out {
        let mut json = json;
        json.push(b'\n');
        std::fs::write(out, json).expect("write json");
    }
    if let Some(out) = debug_out {
        std::fs::write(out, format!("{a:#?}\n")).expect("write debug");
    }
}

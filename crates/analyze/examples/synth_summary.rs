//! Prints the analysis of a synthetic lossy transfer (a quick look while developing).
use analyze::synth::{pcap, Bulk};

fn main() {
    let mut b = Bulk::new(
        "10.0.0.1:40000".parse().unwrap(),
        "10.0.0.2:5201".parse().unwrap(),
    );
    b.drop_first_tx = [100u64, 101, 102, 103, 300].into_iter().collect();
    b.drop_second_tx = [300u64].into_iter().collect();
    b.window_segments = 60;
    let bytes = pcap(b.run());
    std::fs::write("/tmp/synth.pcap", &bytes).unwrap();
    let a = analyze::analyze_bytes("synth", &bytes, analyze::Options::default()).unwrap();
    print!("{}", analyze::text::summary(&a));
}

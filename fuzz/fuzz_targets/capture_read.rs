//! Any bytes as a capture file: the readers, link layers, TCP reconstruction and diagnoses must
//! never panic. The same entry point runs on stable in
//! `analyze::analyzer::tests::no_capture_bytes_make_the_analyzer_panic`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = analyze::Options {
        keep_series: true,
        ..analyze::Options::default()
    };
    if let Ok(a) = analyze::analyze_bytes("fuzz", data, opts) {
        let _ = analyze::text::summary(&a);
        let _ = analyze::text::warnings(&a);
    }
});

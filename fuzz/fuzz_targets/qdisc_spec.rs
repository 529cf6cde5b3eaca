#![no_main]
//! Any text through the queue-spec parser: an error or a spec that prints and parses back.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(spec) = qdisc::parse_spec(s) {
            let again = qdisc::parse_spec(&spec.to_string()).expect("a printed spec parses");
            assert_eq!(again, spec);
        }
    }
});

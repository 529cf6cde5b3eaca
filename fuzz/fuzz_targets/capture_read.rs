//! Any bytes as a capture file: the readers (in place, as a mapped file is read), link
//! layers, TCP reconstruction and diagnoses must never panic, and splitting the packets over
//! two shards must give the same analysis. The same entry point runs on stable in
//! `analyze::analyzer::tests::no_capture_bytes_make_the_analyzer_panic`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = analyze::Options {
        keep_series: true,
        ..analyze::Options::default()
    };
    if let Ok(a) = analyze::analyze_bytes("fuzz", data, opts.clone()) {
        let _ = analyze::text::summary(&a);
        let _ = analyze::text::warnings(&a);
        let mut front = analyze::Splitter::new(&opts, 2);
        let mut queues: Vec<Vec<analyze::Item<'_>>> = vec![Vec::new(), Vec::new()];
        let split = front.add_capture(
            "fuzz",
            data,
            &mut |s, item| queues[s as usize].push(item),
            &mut |_| {},
        );
        if split.is_ok() {
            let parts = queues
                .into_iter()
                .map(|q| {
                    let mut shard = analyze::ShardAnalyzer::new(&opts);
                    q.into_iter().for_each(|item| shard.handle(item));
                    shard.finish()
                })
                .collect();
            let json = |a: &analyze::Analysis| serde_json::to_string(&a.json_report()).ok();
            assert!(json(&front.finish(parts)) == json(&a), "split differs");
        }
    }
});

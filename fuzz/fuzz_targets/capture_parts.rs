//! Any bytes as a pcap read in parts (the smallest parts, 4 KiB, so that a few kilobytes make
//! several): finding each part's first record, walking it and renumbering its records must
//! never panic, and unless a part is refused (it did not start where the one before ended),
//! the analysis is the one of a single reader. The same check runs on stable in
//! `analyze::analyzer::tests::no_capture_bytes_make_the_analyzer_panic`.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let opts = analyze::Options {
        part_bytes: 4096,
        ..analyze::Options::default()
    };
    let Ok(Some(c)) = analyze::ChunkedCapture::new("fuzz", 0, data, &opts) else {
        return;
    };
    let chunks: Vec<analyze::Chunk<'_>> = (0..c.chunks()).map(|k| c.read_chunk(k, 2)).collect();
    let mut consumers = vec![
        analyze::ChunkConsumer::new(&opts),
        analyze::ChunkConsumer::new(&opts),
    ];
    let mut metas = Vec::new();
    for ch in chunks {
        for (con, items) in consumers.iter_mut().zip(ch.items) {
            con.chunk(&ch.meta, items);
        }
        metas.push(ch.meta);
    }
    if consumers.iter().any(analyze::ChunkConsumer::failed) {
        return;
    }
    let parts = consumers.into_iter().map(|c| c.finish()).collect();
    let refs: Vec<&analyze::ChunkMeta> = metas.iter().collect();
    let a = analyze::finish_chunked(&opts, &[c], &refs, parts);
    let whole = analyze::analyze_bytes("fuzz", data, opts).expect("the header was read once");
    let json = |a: &analyze::Analysis| serde_json::to_string(&a.json_report()).ok();
    assert!(json(&a) == json(&whole), "parts differ from the whole");
});

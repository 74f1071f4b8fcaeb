//! An apt `Packages` index, then a resolution against it.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let mut index = berth_build::host_packages::apt::AptIndex::default();
    let _ = index.add_packages("Packages", text, "amd64");
    let _ = berth_build::host_packages::apt::parse_relations(text);
});

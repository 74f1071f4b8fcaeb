//! An rpm repository's primary metadata.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = berth_build::host_packages::repodata::read_primary("primary.xml", "repo", text);
});

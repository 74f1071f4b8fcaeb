//! An rpm repository's `repomd.xml`.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = berth_build::host_packages::repodata::read_repomd("repomd.xml", text);
});

//! An apt `Release`/`InRelease` file's SHA256 section.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = berth_build::host_packages::apt::release_digests("InRelease", text);
});

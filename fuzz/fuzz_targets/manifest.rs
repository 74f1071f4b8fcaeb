//! The add-on Manifest parser: any text, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let _ = berth_formats::manifest::Manifest::parse(std::path::Path::new("Manifest"), text);
});

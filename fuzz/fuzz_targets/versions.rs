//! `versions.json`, and resolving versions against what it offers.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    if let Ok(versions) = berth_formats::versions::VersionsFile::parse("versions.json", bytes) {
        for addon in &versions.addons {
            for requested in ["latest", "1.2.x", "1.0.0"] {
                let _ = versions.resolve(&addon.name, requested, None);
                let _ = versions.resolve(&addon.name, requested, Some("1.27.3"));
            }
        }
    }
});

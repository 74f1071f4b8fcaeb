//! `package.json`, as read from a package: names and versions must come out plain.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    if let Ok(index) = berth_formats::package_index::PackageIndex::from_bytes(bytes) {
        assert!(berth_formats::name::check_plain("name", &index.name).is_ok());
        assert!(berth_formats::name::check_plain("version", &index.version).is_ok());
    }
});

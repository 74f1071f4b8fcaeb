//! The Installer spec parser, and the id and variables of what it accepts.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let path = std::path::Path::new("installer.yaml");
    if let Ok(spec) = berth_formats::spec::InstallerSpec::parse(path, text) {
        let _ = spec.id();
        for (name, addon) in &spec.addons {
            let _ = berth_formats::spec::config_environment(name, &addon.config);
        }
    }
});

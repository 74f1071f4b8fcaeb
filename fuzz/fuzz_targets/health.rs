//! An add-on's health.yaml, read and checked, and each component's values rendered as the node
//! renders them before it probes (with a spec's fields), bounded in work and checked again.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let Ok(health) = berth_formats::health::HealthFile::parse("health.yaml", text) else {
        return;
    };
    let variables = serde_json::json!({
        "port": 8080,
        "host": "127.0.0.1",
        "name": "demo",
        "version": "1.0.0",
        "berth": {"root": "/", "dir": "/var/lib/berth"},
    });
    for component in &health.components {
        let _ = berth::health::render_component(component, &variables);
    }
});

//! A host-preflight file as an add-on ships it: `{{kurl …}}` rendered against a join's
//! context (bounded in output), then read as troubleshoot's HostPreflight.
#![no_main]
libfuzzer_sys::fuzz_target!(|text: &str| {
    let context = berth_preflight::TemplateContext {
        role: berth_preflight::Role {
            primary: false,
            join: true,
            upgrade: false,
        },
        primary_hosts: vec!["10.0.0.1".into(), "10.0.0.2".into()],
        secondary_hosts: vec!["10.0.0.3".into()],
        installer_name: "fuzz".into(),
        ..Default::default()
    };
    let origin = berth_preflight::Origin::new("host-preflight.yaml", None);
    let _ = berth_preflight::load_text(origin, text, &context);
});

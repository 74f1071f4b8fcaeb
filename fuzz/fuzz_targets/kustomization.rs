//! The kustomization editor the insert_* helpers call, on any kustomization.yaml.
#![no_main]
libfuzzer_sys::fuzz_target!(|bytes: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kustomization.yaml");
    std::fs::write(&path, bytes).unwrap();
    let item = serde_norway::Value::String("patch.yaml".into());
    let _ = berth::kustomization::insert(&path, "patchesStrategicMerge", item);
});

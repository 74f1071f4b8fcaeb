//! Names a release is published under, which the builder writes, `serve` passes through and
//! the rendered scripts download: the node binaries and the checksum beside every file.

/// The architectures a release carries node binaries for.
pub const ARCHES: [&str; 2] = ["amd64", "arm64"];

/// `berth-linux-<arch>`: the node binary's name in a release.
pub fn berth_binary_name(arch: &str) -> String {
    format!("berth-linux-{arch}")
}

/// `bin/berth-linux-<arch>`: where the node binary for `arch` is, relative to the release.
pub fn berth_binary_file(arch: &str) -> String {
    format!("bin/{}", berth_binary_name(arch))
}

/// What a checksum file's name adds to the name of the file it checks.
pub const CHECKSUM_SUFFIX: &str = ".sha256";
/// The suffix of a package's bill of materials beside it (CycloneDX JSON).
pub const BOM_SUFFIX: &str = ".cdx.json";
/// The bill of materials' path inside a package.
pub const BOM_FILE: &str = "sbom.cdx.json";
/// The suffix of a package's provenance beside it (an in-toto statement in a DSSE envelope).
pub const PROVENANCE_SUFFIX: &str = ".intoto.json";

/// `<file>.sha256`: the checksum file beside a published file, in `sha256sum` format.
pub fn checksum_file(file: &str) -> String {
    format!("{file}{CHECKSUM_SUFFIX}")
}

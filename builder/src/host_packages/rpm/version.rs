//! rpm's version order: `[epoch:]version[-release]`, compared as rpm compares them, with a
//! missing release matching any.

use std::cmp::Ordering;
use std::fmt;

/// An rpm version: `[epoch:]version[-release]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Evr {
    pub epoch: String,
    pub version: String,
    pub release: String,
}

impl Evr {
    /// Reads `[epoch:]version[-release]`.
    pub fn parse(text: &str) -> Self {
        let (epoch, version, release) = rpm_version::Evr::parse_values(text);
        Self {
            epoch: epoch.to_string(),
            version: version.to_string(),
            release: release.to_string(),
        }
    }

    fn as_rpm(&self, release: bool) -> rpm_version::Evr<'_> {
        let epoch = if self.epoch.is_empty() {
            "0"
        } else {
            &self.epoch
        };
        let release = if release { self.release.as_str() } else { "" };
        rpm_version::Evr::new(epoch, self.version.as_str(), release)
    }

    /// How this version orders against a wanted one; a wanted version without a release
    /// (`>= 1.2`) matches every release of its version, as rpm has it.
    pub(super) fn against(&self, wanted: &Evr) -> Ordering {
        let release = !wanted.release.is_empty() && !self.release.is_empty();
        self.as_rpm(release).cmp(&wanted.as_rpm(release))
    }
}

impl Ord for Evr {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_rpm(true).cmp(&other.as_rpm(true))
    }
}

impl PartialOrd for Evr {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Evr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.epoch.is_empty() && self.epoch != "0" {
            write!(f, "{}:", self.epoch)?;
        }
        f.write_str(&self.version)?;
        if !self.release.is_empty() {
            write!(f, "-{}", self.release)?;
        }
        Ok(())
    }
}

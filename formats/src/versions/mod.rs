//! `versions.json`: the add-on versions a dist offers, and how a spec's version resolves.
//!
//! Add-ons are listed in install order; each add-on's versions newest first, each with an
//! optional `kubernetesVersion` semver range (as kops channels do). `latest` is the first
//! entry, `X.Y.x` the highest patch of X.Y in kURL's version [`order`] (a repackaged
//! `2.6.5-20221025` above `2.6.5`); when the spec pins Kubernetes, only versions whose range
//! matches it are candidates.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::compression::Compression;

pub mod order;

pub use order::compare_versions;
use order::matches_request;

/// The file name in a dist.
pub const VERSIONS_FILE: &str = "versions.json";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct VersionsFile {
    /// Which release of the dist this is, when it is signed: see [`ReleaseStamp`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<ReleaseStamp>,
    /// Add-ons in install order.
    pub addons: Vec<AddonVersions>,
}

/// The freshness of a signed `versions.json`, as TUF's timestamp and snapshot roles give it: a
/// counter that grows with every signing, and a time after which the release is not current.
/// Both are under the signature, so a mirror serving an older release's signed files is told
/// apart (a node keeps the highest counter it has seen of each key), and one serving a release
/// long replaced is told by its expiry. A dist signed before these existed has neither: it
/// counts as release 0 and never expires, until signed again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReleaseStamp {
    pub counter: u64,
    /// RFC 3339, UTC (`2027-11-27T12:00:00Z`).
    pub expires: String,
}

/// Why a signed release is not current.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreshnessError {
    #[error(
        "{location} is release {counter}, older than release {highest} that this node has seen signed by {key}: a mirror may be serving an older release\nhint: point the node at a current copy of the dist"
    )]
    Older {
        location: String,
        counter: u64,
        highest: u64,
        key: String,
    },
    #[error(
        "{location} expired at {expires}: the release is no longer current (a mirror may be serving one long replaced)\nhint: the vendor signs the dist again (`berth-build sign`) to renew it"
    )]
    Expired { location: String, expires: String },
    #[error("{location}'s release stamp is not valid: {problem}")]
    Invalid { location: String, problem: String },
}

impl ReleaseStamp {
    /// The stamp of a signing at `now`: a counter above `previous` and at least `now` in
    /// seconds (so it grows across machines and lost files alike), expiring `valid_for` later.
    pub fn next(
        previous: Option<&ReleaseStamp>,
        now: std::time::SystemTime,
        valid_for: std::time::Duration,
    ) -> Self {
        let seconds = now
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let counter = previous
            .map_or(0, |stamp| stamp.counter.saturating_add(1))
            .max(seconds);
        let expires = crate::time::rfc3339(now + valid_for);
        Self { counter, expires }
    }

    /// The counter of a release (0 without a stamp), checked against the highest seen and,
    /// when it has one, its expiry at `now`.
    pub fn check(
        stamp: Option<&ReleaseStamp>,
        location: &str,
        highest: Option<(u64, &str)>,
        now: std::time::SystemTime,
    ) -> Result<u64, FreshnessError> {
        let counter = stamp.map_or(0, |stamp| stamp.counter);
        if let Some((highest, key)) = highest
            && counter < highest
        {
            return Err(FreshnessError::Older {
                location: location.to_string(),
                counter,
                highest,
                key: key.to_string(),
            });
        }
        if let Some(stamp) = stamp {
            let expires = humantime::parse_rfc3339(&stamp.expires).map_err(|error| {
                FreshnessError::Invalid {
                    location: location.to_string(),
                    problem: format!("expires `{}`: {error}", stamp.expires),
                }
            })?;
            if expires < now {
                return Err(FreshnessError::Expired {
                    location: location.to_string(),
                    expires: stamp.expires.clone(),
                });
            }
        }
        Ok(counter)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddonVersions {
    #[serde(deserialize_with = "crate::name::plain_name")]
    pub name: String,
    /// The first is what `latest` means: the newest, or the one the vendor listed first.
    pub versions: Vec<VersionEntry>,
    /// How the list is kept when versions.json is made again.
    #[serde(default, skip_serializing_if = "VersionOrder::is_newest_first")]
    pub order: VersionOrder,
}

/// How an add-on's versions are ordered, which decides what `latest` means (kURL's "first
/// version of each is latest").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VersionOrder {
    /// Newest first: `latest` is the newest.
    #[default]
    NewestFirst,
    /// As the vendor listed them: `latest` is the first listed, which may pin an older one.
    Listed,
}

impl VersionOrder {
    fn is_newest_first(&self) -> bool {
        *self == VersionOrder::NewestFirst
    }
}

/// Where an add-on's order came from when versions.json was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderRule {
    /// Newest first (no list said otherwise).
    NewestFirst,
    /// The order the existing versions.json lists (marked `"order": "listed"`, or not newest
    /// first), new versions after it.
    KeptAsListed,
    /// The order kURL's layout lists (`web/src/installers/versions.js`), other versions after.
    KurlList,
}

impl std::fmt::Display for OrderRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OrderRule::NewestFirst => "newest first",
            OrderRule::KeptAsListed => "kept as versions.json lists it",
            OrderRule::KurlList => "as kURL's web/src/installers/versions.js lists it",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionEntry {
    #[serde(deserialize_with = "crate::name::plain_version")]
    pub version: String,
    /// The Kubernetes versions this add-on version works with, as a semver range (`>=1.24, <1.29`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The spec fields this version declares (its `fields.yaml`), when it declares them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fields: Option<Vec<crate::fields::FieldDeclaration>>,
    /// How the published package is compressed, which names its file; gzip when absent.
    #[serde(default, skip_serializing_if = "Compression::is_gzip")]
    pub compression: Compression,
}

/// Spec keys kURL installs with its own scripts rather than as add-ons: a dist offers them
/// only as add-ons of its own.
pub const KURL_CORE: [&str; 4] = ["kubernetes", "docker", "rke2", "k3s"];

/// kURL's install order of its add-ons (`kubeadm_addon_for_each`, the container runtime
/// first, then Kubernetes, which kURL's install.sh sets up before the other add-ons' install
/// hooks): where a generated `versions.json` puts a kURL add-on that had no place before.
pub const KURL_ADDON_ORDER: [&str; 24] = [
    "containerd",
    "kubernetes",
    "aws",
    "nodeless",
    "calico",
    "weave",
    "flannel",
    "antrea",
    "rook",
    "ekco",
    "openebs",
    "longhorn",
    "minio",
    "contour",
    "registry",
    "prometheus",
    "kotsadm",
    "velero",
    "fluentd",
    "collectd",
    "cert-manager",
    "metrics-server",
    "sonobuoy",
    "goldpinger",
];

#[derive(Debug, thiserror::Error)]
pub enum VersionsError {
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error(transparent)]
    Fields(#[from] crate::fields::FieldRefused),
    #[error(
        "unknown add-on `{name}`; {VERSIONS_FILE} offers: {}{}",
        offered.join(", "),
        if KURL_CORE.contains(&name.as_str()) {
            format!("\nhint: kURL installs {name} with its own scripts, which Berth does not run; publish a `{name}` add-on, or remove spec.{name}")
        } else {
            String::new()
        }
    )]
    UnknownAddon { name: String, offered: Vec<String> },
    #[error("{name} has no version `{requested}`; {VERSIONS_FILE} offers: {}", offered.join(", "))]
    UnknownVersion {
        name: String,
        requested: String,
        offered: Vec<String>,
    },
    #[error("{name} `{requested}`: no version works with Kubernetes {kubernetes}; {VERSIONS_FILE} offers: {}", offered.join(", "))]
    NoneForKubernetes {
        name: String,
        requested: String,
        kubernetes: String,
        offered: Vec<String>,
    },
    #[error("{name} {version}: kubernetesVersion `{range}` is not a semver range: {message}")]
    BadRange {
        name: String,
        version: String,
        range: String,
        message: String,
    },
}

/// One add-on of a spec, resolved against `versions.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAddon {
    pub name: String,
    pub version: String,
    /// Its place in install order.
    pub position: usize,
    /// How its package is compressed.
    pub compression: Compression,
}

impl AddonVersions {
    /// Whether the vendor ordered the list: marked so, or not newest first.
    pub fn is_listed(&self) -> bool {
        self.order == VersionOrder::Listed
            || self
                .versions
                .windows(2)
                .any(|pair| compare_versions(&pair[0].version, &pair[1].version).is_lt())
    }
}

impl VersionsFile {
    /// Parses `text`, the contents of `origin` (a path or URL, named in errors).
    pub fn parse(origin: &str, text: &[u8]) -> Result<Self, VersionsError> {
        let file: Self = serde_json::from_slice(text).map_err(|error| VersionsError::Parse {
            path: origin.to_string(),
            message: format!(
                "line {}: {error}; expected {{\"addons\": [{{\"name\": …, \"versions\": [{{\"version\": …}}]}}]}}",
                error.line()
            ),
        })?;
        for addon in &file.addons {
            for entry in &addon.versions {
                if let Some(fields) = &entry.fields {
                    let what = format!("the fields of {} {}", addon.name, entry.version);
                    crate::fields::check(&what, fields).map_err(|message| {
                        VersionsError::Parse {
                            path: origin.to_string(),
                            message,
                        }
                    })?;
                }
            }
        }
        Ok(file)
    }

    /// Checks add-on `name`'s fields in a spec against what its version `version` declares,
    /// filling in the declared defaults; a version that declares nothing takes any fields.
    pub fn apply_fields(
        &self,
        name: &str,
        version: &str,
        config: &mut serde_json::Map<String, serde_json::Value>,
    ) -> Result<(), VersionsError> {
        let declared = self
            .entry(name, version)
            .and_then(|entry| entry.fields.as_deref());
        match declared {
            Some(declared) => {
                crate::fields::apply(name, declared, config).map_err(VersionsError::Fields)
            }
            None => Ok(()),
        }
    }

    pub fn load(path: &Path) -> Result<Self, VersionsError> {
        let bytes = fs_err::read(path).map_err(|error| VersionsError::Parse {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
        Self::parse(&path.display().to_string(), &bytes)
    }

    pub fn addon(&self, name: &str) -> Option<&AddonVersions> {
        self.addons.iter().find(|addon| addon.name == name)
    }

    /// Add-on `name`'s entry for `version`.
    pub fn entry(&self, name: &str, version: &str) -> Option<&VersionEntry> {
        self.addon(name)?
            .versions
            .iter()
            .find(|entry| entry.version == version)
    }

    pub fn entry_mut(&mut self, name: &str, version: &str) -> Option<&mut VersionEntry> {
        self.addons
            .iter_mut()
            .find(|addon| addon.name == name)?
            .versions
            .iter_mut()
            .find(|entry| entry.version == version)
    }

    /// Where `name` stands in install order.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.addons.iter().position(|addon| addon.name == name)
    }

    /// [`Self::position`], or the error naming the add-ons there are.
    pub fn position_of(&self, name: &str) -> Result<usize, VersionsError> {
        self.position(name)
            .ok_or_else(|| VersionsError::UnknownAddon {
                name: name.to_string(),
                offered: self.addons.iter().map(|a| a.name.clone()).collect(),
            })
    }

    /// Every requested add-on (`name`, requested version) at its exact version, in install
    /// order: what an Installer spec resolves to. Kubernetes is resolved first, since its
    /// version filters the others' `kubernetesVersion` ranges.
    pub fn resolve_all<'a>(
        &self,
        requested: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Vec<ResolvedAddon>, VersionsError> {
        let requested: Vec<(&str, &str)> = requested.into_iter().collect();
        let kubernetes = match requested.iter().find(|(name, _)| *name == "kubernetes") {
            Some((_, version)) => Some(self.resolve("kubernetes", version, None)?),
            None => None,
        };
        let mut resolved = Vec::with_capacity(requested.len());
        for (name, version) in requested {
            let version = self.resolve(name, version, kubernetes.as_deref())?;
            resolved.push(ResolvedAddon {
                position: self.position_of(name)?,
                compression: self
                    .entry(name, &version)
                    .map(|entry| entry.compression)
                    .unwrap_or_default(),
                version,
                name: name.to_string(),
            });
        }
        resolved.sort_by_key(|addon| addon.position);
        Ok(resolved)
    }

    /// The exact version `requested` (`latest`, `X.Y.x`, or exact) names for add-on `name`;
    /// with `kubernetes`, only versions whose range admits it are candidates.
    pub fn resolve(
        &self,
        name: &str,
        requested: &str,
        kubernetes: Option<&str>,
    ) -> Result<String, VersionsError> {
        let addon = self
            .addon(name)
            .ok_or_else(|| VersionsError::UnknownAddon {
                name: name.to_string(),
                offered: self.addons.iter().map(|a| a.name.clone()).collect(),
            })?;
        let offered = || addon.versions.iter().map(|v| v.version.clone()).collect();
        let matching: Vec<&VersionEntry> = addon
            .versions
            .iter()
            .filter(|entry| matches_request(&entry.version, requested))
            .collect();
        if matching.is_empty() {
            return Err(VersionsError::UnknownVersion {
                name: name.to_string(),
                requested: requested.to_string(),
                offered: offered(),
            });
        }
        let mut candidates = Vec::new();
        for entry in matching {
            if let (Some(kubernetes), Some(range)) = (kubernetes, &entry.kubernetes_version) {
                let requirement =
                    semver::VersionReq::parse(range).map_err(|error| VersionsError::BadRange {
                        name: name.to_string(),
                        version: entry.version.clone(),
                        range: range.clone(),
                        message: error.to_string(),
                    })?;
                if !lenient_semver(kubernetes).is_some_and(|v| requirement.matches(&v)) {
                    continue;
                }
            }
            candidates.push(entry);
        }
        // `latest` is the first entry; `X.Y.x` the highest patch, wherever it is listed.
        let chosen = if requested == "latest" {
            candidates.first().copied()
        } else {
            candidates
                .into_iter()
                .max_by(|a, b| compare_versions(&a.version, &b.version))
        };
        chosen
            .map(|entry| entry.version.clone())
            .ok_or_else(|| VersionsError::NoneForKubernetes {
                name: name.to_string(),
                requested: requested.to_string(),
                kubernetes: kubernetes.unwrap_or_default().to_string(),
                offered: offered(),
            })
    }
}

impl VersionsFile {
    /// The versions.json for the add-on versions `found`: add-ons in the order `existing`
    /// gives them (others after, by name), versions newest first unless a list orders them
    /// (see [`Self::generate_ordered`]), each keeping the `kubernetesVersion` range `existing`
    /// has for it.
    pub fn generate(existing: Option<&VersionsFile>, found: &[(String, String)]) -> Self {
        Self::generate_ordered(existing, found, &std::collections::BTreeMap::new()).0
    }

    /// [`Self::generate`], with kURL's lists of versions by add-on (`kurl_lists`, from
    /// `web/src/installers/versions.js`), and the rule that ordered each add-on. An add-on's
    /// versions go in the order of its kURL list; else, when `existing` lists them in an order
    /// of its own (marked `"order": "listed"`, or not newest first), in that order; else newest
    /// first. Versions no list names go after the listed ones, newest first.
    pub fn generate_ordered(
        existing: Option<&VersionsFile>,
        found: &[(String, String)],
        kurl_lists: &std::collections::BTreeMap<String, Vec<String>>,
    ) -> (Self, Vec<(String, OrderRule)>) {
        let mut file = Self::generate_newest_first(existing, found);
        let mut rules = Vec::new();
        for addon in &mut file.addons {
            let listed_before = existing.and_then(|file| file.addon(&addon.name));
            let (rule, list): (OrderRule, Vec<String>) =
                match (kurl_lists.get(&addon.name), listed_before) {
                    (Some(list), _) => (OrderRule::KurlList, list.clone()),
                    (None, Some(before)) if before.is_listed() => (
                        OrderRule::KeptAsListed,
                        before
                            .versions
                            .iter()
                            .map(|entry| entry.version.clone())
                            .collect(),
                    ),
                    _ => (OrderRule::NewestFirst, Vec::new()),
                };
            if rule != OrderRule::NewestFirst {
                // Listed versions first, in the list's order; the rest stay newest first.
                let place = |version: &str| {
                    list.iter()
                        .position(|listed| listed == version)
                        .unwrap_or(usize::MAX)
                };
                addon.versions.sort_by_key(|entry| place(&entry.version));
                addon.order = VersionOrder::Listed;
            }
            rules.push((addon.name.clone(), rule));
        }
        (file, rules)
    }

    fn generate_newest_first(existing: Option<&VersionsFile>, found: &[(String, String)]) -> Self {
        let mut names: Vec<&str> = found.iter().map(|(name, _)| name.as_str()).collect();
        names.sort();
        names.dedup();
        // Add-ons keep their place; a new one goes after them, kURL's in kURL's order, then
        // the others by name.
        let rank = |name: &str| {
            let kurl = KURL_ADDON_ORDER.iter().position(|known| *known == name);
            match existing.and_then(|file| file.position(name)) {
                Some(position) => (0, position),
                None => (1, kurl.unwrap_or(usize::MAX)),
            }
        };
        names.sort_by_key(|name| rank(name));
        let addons = names
            .into_iter()
            .map(|name| {
                let mut versions: Vec<VersionEntry> = found
                    .iter()
                    .filter(|(found_name, _)| found_name == name)
                    .map(|(_, version)| {
                        let before = existing.and_then(|file| file.entry(name, version));
                        VersionEntry {
                            version: version.clone(),
                            kubernetes_version: before
                                .and_then(|entry| entry.kubernetes_version.clone()),
                            fields: None,
                            compression: before.map(|entry| entry.compression).unwrap_or_default(),
                        }
                    })
                    .collect();
                versions.sort_by(|a, b| compare_versions(&b.version, &a.version));
                AddonVersions {
                    name: name.to_string(),
                    versions,
                    order: VersionOrder::NewestFirst,
                }
            })
            .collect();
        VersionsFile {
            release: None,
            addons,
        }
    }

    /// Pretty JSON with a final newline.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec_pretty(self).expect("versions serialize");
        bytes.push(b'\n');
        bytes
    }
}

/// `1.27` → 1.27.0, `v1.27.3` → 1.27.3; build metadata and pre-releases as semver reads them.
fn lenient_semver(text: &str) -> Option<semver::Version> {
    let text = text.trim().trim_start_matches('v');
    semver::Version::parse(text).ok().or_else(|| {
        let dots = text.matches('.').count();
        let padded = format!("{text}{}", ".0".repeat(2usize.saturating_sub(dots)));
        semver::Version::parse(&padded).ok()
    })
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;

    use super::*;

    fn file() -> VersionsFile {
        VersionsFile::parse(
            "versions.json",
            br#"{"addons": [
                {"name": "containerd", "versions": [
                    {"version": "1.7.2"}, {"version": "1.6.21"}, {"version": "1.6.9"}]},
                {"name": "kubernetes", "versions": [
                    {"version": "1.28.4"}, {"version": "1.27.8"}]},
                {"name": "flannel", "versions": [
                    {"version": "0.24.0", "kubernetesVersion": ">=1.28"},
                    {"version": "0.23.1", "kubernetesVersion": ">=1.26, <1.28"},
                    {"version": "0.23.0"}]}
            ]}"#,
        )
        .unwrap()
    }

    #[test]
    fn a_spec_resolves_in_install_order_with_kubernetes_filtering_the_rest() {
        let resolved = file()
            .resolve_all([
                ("flannel", "latest"),
                ("kubernetes", "1.27.x"),
                ("containerd", "1.6.x"),
            ])
            .unwrap();
        let shown: Vec<(&str, &str, usize)> = resolved
            .iter()
            .map(|addon| (addon.name.as_str(), addon.version.as_str(), addon.position))
            .collect();
        assert_eq!(
            shown,
            [
                ("containerd", "1.6.21", 0),
                ("kubernetes", "1.27.8", 1),
                ("flannel", "0.23.1", 2)
            ]
        );
        let unknown = file().resolve_all([("weave", "latest")]).unwrap_err();
        assert!(
            matches!(unknown, VersionsError::UnknownAddon { ref name, .. } if name == "weave"),
            "{unknown}"
        );
    }

    #[test]
    fn a_minor_wildcard_takes_kurls_repackaged_version_over_its_release() {
        let versions = VersionsFile::parse(
            "versions.json",
            br#"{"addons": [{"name": "weave", "versions": [
                {"version": "2.6.5"}, {"version": "2.6.5-20221025"}, {"version": "2.6.4"}]},
                {"name": "docker", "versions": [
                {"version": "19.03.4"}, {"version": "19.03.15"}, {"version": "19.03.10"}]}]}"#,
        )
        .unwrap();
        assert_eq!(
            versions.resolve("weave", "2.6.x", None).unwrap(),
            "2.6.5-20221025"
        );
        assert_eq!(
            versions.resolve("docker", "19.03.x", None).unwrap(),
            "19.03.15"
        );
        // `latest` stays the first entry, as the list's author put it.
        assert_eq!(versions.resolve("weave", "latest", None).unwrap(), "2.6.5");
    }

    #[test]
    fn latest_is_the_first_entry() {
        assert_eq!(
            file().resolve("containerd", "latest", None).unwrap(),
            "1.7.2"
        );
    }

    #[test]
    fn minor_wildcard_takes_the_highest_patch_numerically() {
        assert_eq!(
            file().resolve("containerd", "1.6.x", None).unwrap(),
            "1.6.21"
        );
        assert_eq!(
            file().resolve("containerd", "1.7.x", None).unwrap(),
            "1.7.2"
        );
    }

    #[test]
    fn exact_versions_resolve_to_themselves() {
        assert_eq!(
            file().resolve("containerd", "1.6.9", None).unwrap(),
            "1.6.9"
        );
    }

    #[test]
    fn kubernetes_ranges_filter_candidates() {
        let versions = file();
        assert_eq!(
            versions
                .resolve("flannel", "latest", Some("1.27.8"))
                .unwrap(),
            "0.23.1"
        );
        assert_eq!(
            versions
                .resolve("flannel", "latest", Some("1.28.4"))
                .unwrap(),
            "0.24.0"
        );
        // A version without a range suits every Kubernetes.
        assert_eq!(
            versions
                .resolve("flannel", "0.23.x", Some("1.20.1"))
                .unwrap(),
            "0.23.0"
        );
        let error = versions
            .resolve("flannel", "0.24.0", Some("1.27.8"))
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("no version works with Kubernetes 1.27.8"),
            "{error}"
        );
    }

    #[test]
    fn unknown_versions_list_what_is_offered() {
        let error = file().resolve("containerd", "1.5.x", None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "containerd has no version `1.5.x`; versions.json offers: 1.7.2, 1.6.21, 1.6.9"
        );
        let error = file().resolve("weave", "latest", None).unwrap_err();
        assert_eq!(
            error.to_string(),
            "unknown add-on `weave`; versions.json offers: containerd, kubernetes, flannel"
        );
    }

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(compare_versions("1.10.0", "1.9.3"), Ordering::Greater);
        assert_eq!(compare_versions("1.2.3", "1.2.3"), Ordering::Equal);
        assert_eq!(compare_versions("0.26.5-r1", "0.26.5-r2"), Ordering::Less);
        assert_eq!(compare_versions("2.0", "10.0"), Ordering::Less);
        assert_eq!(compare_versions("1.0.0-rc.1", "1.0.0"), Ordering::Less);
    }

    #[test]
    fn generated_files_keep_install_order_and_ranges() {
        let found = [
            ("flannel", "0.24.0"),
            ("zebra", "1.0.0"),
            ("containerd", "1.6.21"),
            ("containerd", "1.10.0"),
            ("flannel", "0.23.1"),
        ]
        .map(|(name, version)| (name.to_string(), version.to_string()));
        let generated = VersionsFile::generate(Some(&file()), &found);
        let names: Vec<&str> = generated.addons.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["containerd", "flannel", "zebra"]);
        // With no file before it, kURL's add-ons go in kURL's order, others after by name.
        let kurls = [
            "zebra",
            "collectd",
            "registry",
            "ekco",
            "flannel",
            "containerd",
            "apple",
        ]
        .map(|name| (name.to_string(), "1.0.0".to_string()));
        let fresh = VersionsFile::generate(None, &kurls);
        let fresh: Vec<&str> = fresh.addons.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            fresh,
            [
                "containerd",
                "flannel",
                "ekco",
                "registry",
                "collectd",
                "apple",
                "zebra"
            ]
        );
        let containerd: Vec<&str> = generated.addons[0]
            .versions
            .iter()
            .map(|v| v.version.as_str())
            .collect();
        assert_eq!(containerd, ["1.10.0", "1.6.21"]);
        assert_eq!(
            generated.addons[1].versions[1]
                .kubernetes_version
                .as_deref(),
            Some(">=1.26, <1.28")
        );
    }

    /// kURL's "first version of each is latest": a list in an order of its own keeps it when
    /// the file is made again, new versions going after it; kURL's lists win over it.
    #[test]
    fn a_vendors_order_is_kept_and_says_what_latest_is() {
        let existing = VersionsFile::parse(
            "versions.json",
            br#"{"addons": [
                {"name": "kubernetes", "versions": [{"version": "1.19.16"}, {"version": "1.29.1"}]},
                {"name": "flannel", "versions": [{"version": "0.24.0"}, {"version": "0.23.1"}]}]}"#,
        )
        .unwrap();
        let found = [
            ("kubernetes", "1.29.1"),
            ("kubernetes", "1.19.16"),
            ("kubernetes", "1.30.0"),
            ("flannel", "0.23.1"),
            ("flannel", "0.24.0"),
            ("flannel", "0.25.0"),
        ]
        .map(|(name, version)| (name.to_string(), version.to_string()));
        let none = std::collections::BTreeMap::new();
        let (file, rules) = VersionsFile::generate_ordered(Some(&existing), &found, &none);
        let listed = |file: &VersionsFile, name: &str| -> Vec<String> {
            file.addon(name)
                .unwrap()
                .versions
                .iter()
                .map(|entry| entry.version.clone())
                .collect()
        };
        assert_eq!(listed(&file, "kubernetes"), ["1.19.16", "1.29.1", "1.30.0"]);
        assert_eq!(
            file.resolve("kubernetes", "latest", None).unwrap(),
            "1.19.16"
        );
        assert_eq!(listed(&file, "flannel"), ["0.25.0", "0.24.0", "0.23.1"]);
        assert_eq!(
            rules,
            [
                ("kubernetes".to_string(), OrderRule::KeptAsListed),
                ("flannel".to_string(), OrderRule::NewestFirst)
            ]
        );
        // Written and read back, the mark keeps the order even where it is newest first.
        let again = VersionsFile::parse("versions.json", &file.to_bytes()).unwrap();
        assert_eq!(
            again.addon("kubernetes").unwrap().order,
            VersionOrder::Listed
        );
        let kurl = std::collections::BTreeMap::from([(
            "flannel".to_string(),
            vec!["0.23.1".to_string(), "0.24.0".to_string()],
        )]);
        let (file, rules) = VersionsFile::generate_ordered(Some(&again), &found, &kurl);
        assert_eq!(listed(&file, "flannel"), ["0.23.1", "0.24.0", "0.25.0"]);
        assert_eq!(rules[1].1, OrderRule::KurlList);
        assert_eq!(file.resolve("flannel", "0.25.x", None).unwrap(), "0.25.0");
    }

    #[test]
    fn bad_json_names_the_line() {
        let error =
            VersionsFile::parse("dist/versions.json", b"{\n \"addons\": [\n oops").unwrap_err();
        assert!(
            error.to_string().starts_with("dist/versions.json: line 3:"),
            "{error}"
        );
    }

    #[test]
    fn a_release_stamp_grows_expires_and_refuses_an_older_release() {
        use std::time::{Duration, UNIX_EPOCH};
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let year = Duration::from_secs(365 * 86_400);
        let first = ReleaseStamp::next(None, now, year);
        assert_eq!(first.counter, 1_800_000_000);
        assert_eq!(first.expires, "2028-01-15T08:00:00Z");
        // Signed again in the same second, or with a clock gone back: still above.
        let second = ReleaseStamp::next(Some(&first), now - Duration::from_secs(60), year);
        assert_eq!(second.counter, first.counter + 1);
        // Current, and at least the highest seen.
        assert_eq!(
            ReleaseStamp::check(Some(&second), "v", Some((first.counter, "k")), now),
            Ok(second.counter)
        );
        // An older release names both counters and the key.
        let error = ReleaseStamp::check(Some(&first), "v", Some((second.counter, "sha256:k")), now)
            .unwrap_err();
        let said = error.to_string();
        assert!(
            said.contains(&format!(
                "release {}, older than release {}",
                first.counter, second.counter
            )) && said.contains("sha256:k"),
            "{said}"
        );
        // A release signed before stamps existed is release 0: fine until a stamped one is seen.
        assert_eq!(ReleaseStamp::check(None, "v", None, now), Ok(0));
        assert!(matches!(
            ReleaseStamp::check(None, "v", Some((first.counter, "k")), now),
            Err(FreshnessError::Older { counter: 0, .. })
        ));
        // Expired.
        assert!(matches!(
            ReleaseStamp::check(Some(&first), "v", None, now + year + Duration::from_secs(1)),
            Err(FreshnessError::Expired { .. })
        ));
        // What is signed carries it, and a file without one reads as before.
        let mut file = VersionsFile::parse("v", br#"{"addons": []}"#).unwrap();
        assert_eq!(file.release, None);
        file.release = Some(first.clone());
        let again = VersionsFile::parse("v", &file.to_bytes()).unwrap();
        assert_eq!(again.release, Some(first));
    }
}

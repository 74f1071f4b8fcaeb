//! The order of add-on versions, as kURL orders them, and which versions `X.Y.x` names.
//!
//! kURL's versions are semver with a few forms of its own:
//! - a repackaged version carries a numeric suffix: `2.6.5-20221025` (a rebuild dated
//!   2022-10-25), `3.7.0-5.5.0` or `0.87.1-80.14.4` (the chart version it packages). kURL ranks
//!   these above the plain version and each other by their numbers, where semver would take them
//!   for pre-releases below it (kURL's own table made `2.6.5` into `2.6.5-0.0.0` for that);
//! - docker's `19.03.10` is `19.3.10`;
//! - a pre-release with letters (`1.0.0-rc.1`, `0.26.5-r1`) stays below its release;
//! - anything else (`2020-01-25T02-50-51Z`, `v5`, `10to14`) is compared part by part, numbers
//!   as numbers.

use std::cmp::Ordering;

/// A version as kURL reads it for ordering: `v` dropped, docker's `.0N.` minor made `.N.`.
fn parse(text: &str) -> Option<semver::Version> {
    let text = text.trim().trim_start_matches('v');
    let cleaned = match text.split_once('.') {
        Some((major, rest)) => match rest.split_once('.') {
            Some((minor, patch)) if minor.len() == 2 && minor.starts_with('0') => {
                format!("{major}.{}.{patch}", &minor[1..])
            }
            _ => text.to_string(),
        },
        None => text.to_string(),
    };
    semver::Version::parse(&cleaned).ok()
}

/// Where a version stands among those with its major, minor and patch: a pre-release below
/// the release, a repackaging above it.
fn stage(version: &semver::Version) -> u8 {
    let pre = version.pre.as_str();
    if pre.is_empty() {
        1
    } else if pre
        .split('.')
        .all(|part| !part.is_empty() && part.bytes().all(|byte| byte.is_ascii_digit()))
    {
        2
    } else {
        0
    }
}

/// Orders two add-on versions as kURL does (see the module's doc), oldest first.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    if let (Some(a), Some(b)) = (parse(a), parse(b)) {
        return (a.major, a.minor, a.patch)
            .cmp(&(b.major, b.minor, b.patch))
            .then_with(|| stage(&a).cmp(&stage(&b)))
            // Numeric identifiers compare as numbers, as semver says.
            .then_with(|| a.pre.cmp(&b.pre))
            .then_with(|| a.build.cmp(&b.build));
    }
    let segments = |text: &str| -> Vec<String> {
        text.trim_start_matches('v')
            .split(['.', '-', '+', '_'])
            .map(str::to_string)
            .collect()
    };
    let (left, right) = (segments(a), segments(b));
    for (x, y) in left.iter().zip(&right) {
        let ordering = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => x.cmp(y),
        };
        if ordering != Ordering::Equal {
            return ordering;
        }
    }
    left.len().cmp(&right.len())
}

/// Whether `version` is one `requested` names: `latest` names every version, `X.Y.x` every
/// version of major X and minor Y (`19.03.x` and `19.3.x` alike, as kURL reads docker's), and
/// anything else itself alone.
pub(super) fn matches_request(version: &str, requested: &str) -> bool {
    if requested == "latest" {
        return true;
    }
    let Some(prefix) = requested.strip_suffix(".x") else {
        return version == requested;
    };
    if version
        .strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with('.'))
    {
        return true;
    }
    match (parse(&format!("{prefix}.0")), parse(version)) {
        (Some(wanted), Some(version)) => {
            (wanted.major, wanted.minor) == (version.major, version.minor) && wanted.pre.is_empty()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every version form of kURL's fixtures (Manifests, add-on folders, Installer specs), in
    /// the order kURL puts them, oldest first, with rows of other forms around them.
    #[test]
    fn versions_order_as_kurl_orders_them() {
        let rows: &[&[&str]] = &[
            // A repackaging ranks above its release; dates and chart versions by their numbers.
            &[
                "2.6.4",
                "2.6.5",
                "2.6.5-20221025",
                "2.6.5-20230101",
                "2.7.1",
            ],
            &["3.7.0", "3.7.0-5.5.0", "3.7.0-6.0.1", "3.8.0"],
            &["0.87.1", "0.87.1-80.14.4", "0.87.1-80.14.10", "0.88.0"],
            &["3.2.0", "3.2.0-4.2.1", "3.3.0"],
            &["0.53.1", "0.53.1-30.1.0", "0.53.2"],
            // A pre-release with letters stays below its release.
            &["1.0.0-alpha", "1.0.0-rc.1", "1.0.0", "1.0.0-1"],
            &["0.26.5-r1", "0.26.5-r2", "0.26.5"],
            // Docker's zero-padded minor.
            &["19.03.4", "19.03.10", "19.03.15", "20.10.5"],
            // Numbers as numbers.
            &["1.9.3", "1.10.0", "1.10.1", "1.102.0"],
            &["0.6.2", "0.27.2", "0.28.14", "0.56.15"],
            // Dated and named versions, part by part.
            &[
                "2020-01-25T02-50-51Z",
                "2022-10-20T00-55-09Z",
                "2023-04-13T03-08-07Z",
            ],
            &["v4", "v5", "v10"],
        ];
        for row in rows {
            for (i, older) in row.iter().enumerate() {
                assert_eq!(compare_versions(older, older), Ordering::Equal, "{older}");
                for newer in &row[i + 1..] {
                    assert_eq!(
                        compare_versions(older, newer),
                        Ordering::Less,
                        "{older} comes before {newer}"
                    );
                    assert_eq!(compare_versions(newer, older), Ordering::Greater);
                }
            }
        }
    }

    #[test]
    fn x_names_the_minor_docker_pads_too() {
        for (version, requested, named) in [
            ("2.6.5-20221025", "2.6.x", true),
            ("2.6.5", "2.6.x", true),
            ("2.60.1", "2.6.x", false),
            ("19.03.10", "19.03.x", true),
            ("19.03.10", "19.3.x", true),
            ("19.3.10", "19.03.x", true),
            ("1.10.1", "1.1.x", false),
            ("1.1.0-rc.1", "1.1.x", true),
            ("0.53.1-30.1.0", "0.53.x", true),
            ("2022-10-20T00-55-09Z", "2022.x", false),
            ("1.2.3", "1.2.3", true),
            ("1.2.3", "1.2", false),
            ("anything", "latest", true),
        ] {
            assert_eq!(
                matches_request(version, requested),
                named,
                "{requested} names {version}: {named}"
            );
        }
    }
}

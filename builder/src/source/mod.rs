//! The first stage: an add-on repository as the vendor wrote it. [`repository`] finds its
//! package folders, kURL's layout included; [`addon`] reads one folder and its Manifest and
//! digests its inputs; [`check`] lints a whole repository without fetching;
//! [`kurl_version_lists`] reads the version lists of kURL's layout, which say what `latest` is.

pub mod addon;
pub mod check;
pub mod error;
pub mod kurl_version_lists;
pub mod repository;

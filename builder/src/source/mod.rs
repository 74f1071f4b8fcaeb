//! The first stage: an add-on repository as the vendor wrote it. [`repository`] finds its
//! package folders, kURL's layout included; [`addon`] reads one folder and its Manifest and
//! digests its inputs; [`check`] lints a whole repository without fetching.

pub mod addon;
pub mod check;
pub mod repository;

//! Host packages for the Manifest's `apt` directives: dependency closures resolved natively
//! from a distro's repository indices, on any build host, with no container per distro.
//!
//! [`control`] reads Debian's deb822 files (Release, Packages); [`apt`] checks the indices
//! against their Release and resolves a closure as apt would, leaving out what every host of
//! the distro already has.

pub mod apt;
pub mod control;
pub mod distros;
pub mod fetch;

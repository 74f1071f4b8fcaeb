//! What Berth keeps on a node: where everything lives ([`layout`]), the one [`lock`] that
//! lets a single run change the node, what it applied ([`state`]), the installer it ran last
//! ([`last_installer`]), and the [`status`] document made from them.

pub mod last_installer;
pub mod layout;
pub mod lock;
pub mod state;
pub mod status;

//! The fourth stage: a built dist folder signed ([`sign`]) and published to a [`store`]
//! ([`upload`]), and a release read back from a store with the node binaries it serves
//! ([`release`]).

pub mod release;
pub mod sign;
pub mod store;
pub mod upload;

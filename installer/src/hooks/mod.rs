//! Running add-ons' bash hooks as kURL runs them: the one [`session`] every hook of a run
//! shares, the variables it starts with ([`environment`]), the [`helpers`] library it
//! sources, kURL's utility programs hooks call ([`kurl_programs`]), and what Berth answers for
//! them: the YAML edits of the `insert_*` helpers ([`kustomization`]) and `kurl netutil`'s
//! interfaces ([`network_interfaces`]).

pub mod environment;
pub mod helpers;
pub mod kurl_programs;
pub mod kustomization;
pub mod network_interfaces;
pub mod session;

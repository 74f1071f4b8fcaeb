//! What Berth does with the cluster itself: kubeadm's configuration as kURL renders it
//! ([`kubeadm_config`]), what a new node needs to join and its command ([`join`]), bounded
//! [`kubectl`] calls, and each add-on's state published as an Addon resource
//! ([`addon_resource`]).

pub mod addon_resource;
pub mod join;
pub mod kubeadm_config;
pub mod kubectl;

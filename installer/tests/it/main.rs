//! The node binary's integration tests, one test binary (each module was one binary before, each
//! linking everything): `berth` run for real against real parts on this host, on machines of
//! their own (network namespaces) and on real Kubernetes. `support` is their shared harness,
//! on `berth-testkit`.

mod support;

mod airgap;
mod backup;
mod bad_input;
mod cluster;
mod examples;
mod first_steps;
mod fleet;
mod fleet_flood;
mod health;
mod health_kubernetes;
mod hooks;
mod host_packages;
mod host_preflights;
mod hostile;
mod kubernetes;
mod kubernetes_follow;
mod kubernetes_helpers;
mod kubernetes_restore;
mod kurl_addons;
mod kurl_environment;
mod kurl_helpers;
mod kurl_host_preflights;
mod kurl_kubeadm;
mod kurl_programs;
mod kurl_runs;
mod lifecycle;
mod portable;
mod rollout;
mod signatures;
mod support_bundle;
mod web_page;

//! `berth restore`: a backup brought back on a fresh node: checked through, its certificate
//! authorities, Berth's records and etcd snapshot put in place, then the installer it records
//! installed as on the first node, etcd's data made from the snapshot before `kubeadm init`.

use std::path::PathBuf;
use std::process::ExitCode;

use berth::backup::store::Place;
use berth::backup::{other_nodes, restore};
use berth::kubernetes::join::{JoinStore, join_command};
use berth::node::layout::Layout;

use crate::commands::RootArgs;
use crate::commands::backup::{S3Args, UnlockArgs};

#[derive(clap::Args)]
pub struct RestoreArgs {
    /// The backup: a file, or s3://BUCKET/KEY.
    #[arg(value_name = "FILE|S3")]
    backup: String,
    /// The backup must be signed by one of these keys (public, PEM).
    #[arg(long = "trust-key", value_name = "FILE")]
    trust_keys: Vec<PathBuf>,
    /// Where to fetch the installer's packages, instead of the dist the backup records.
    #[arg(long, value_name = "DIR|URL")]
    dist: Option<String>,
    #[command(flatten)]
    unlock: UnlockArgs,
    #[command(flatten)]
    s3: S3Args,
    #[command(flatten)]
    hook_timeout: crate::commands::HookTimeout,
    #[command(flatten)]
    root: RootArgs,
}

pub fn run(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    let root = args.root.existing()?.to_path_buf();
    let layout = Layout::new(&root);
    let keys = crate::commands::backup::read_public_keys(&args.trust_keys)?;
    let place = Place::parse(&args.backup)?;
    let (archive, _scratch) = crate::commands::backup::fetched(&layout, &place, &args.s3)?;
    let prepared = restore::prepare(&layout, &archive, &keys, &args.unlock.keys()?)?;
    let manifest = &prepared.verified.manifest;
    say!(
        "berth: restoring the backup of {} made at {} (cluster CA {})",
        manifest.node,
        manifest.created,
        manifest.cluster.ca_sha256
    );
    let installer = &prepared.installer;
    let dist = args.dist.clone().unwrap_or_else(|| installer.dist.clone());
    let mut install = std::process::Command::new(std::env::current_exe()?);
    install
        .arg("install")
        .arg("--root")
        .arg(&root)
        .arg("--spec")
        .arg(&installer.spec)
        .arg("--dist")
        .arg(&dist);
    if let Some(lock) = &installer.lock {
        install.arg("--lock").arg(lock);
    }
    if let Some(url) = &prepared.scripts_url {
        install.arg("--scripts-url").arg(url);
    }
    for key in &args.trust_keys {
        install.arg("--trust-key").arg(key);
    }
    say!(
        "berth: installing installer {} again, from {dist}",
        installer.id
    );
    let status = install.status()?;
    if !status.success() {
        anyhow::bail!(
            "the install did not finish (above); run the same berth restore again to continue"
        );
    }
    restore::keep_binary(&layout)?;
    let with_data = prepared.verified.manifest.addons_with_data();
    if !with_data.is_empty() {
        berth::backup::addon_data::restore(
            &layout,
            &with_data,
            args.hook_timeout.duration(),
            &crate::commands::Stderr,
        )
        .map_err(|error| {
            anyhow::anyhow!(
                "{error}\nhint: the cluster is restored but an add-on's data is not; fix its restore hook, then run the same berth restore again to continue"
            )
        })?;
    }
    // Where the cluster's API moved, kube-proxy's pods take the address kubeadm wrote for
    // them; done before the restore ends, so that a failure here is continued by running it
    // again.
    let admin = root.join("etc/kubernetes/admin.conf");
    // The join parameters the restored install published: where the API is now, and the
    // command a new node joins with.
    let joins = JoinStore::new(layout.join_file()).load().ok();
    let now = joins.as_ref().and_then(other_nodes::api_address);
    let address = other_nodes::ApiAddress::compare(prepared.api_address.as_deref(), now.as_deref());
    if let other_nodes::ApiAddress::Moved { old, new } = address {
        say!("berth: the cluster's API was at {old} and is at {new} now");
        if other_nodes::restart_kube_proxy(&admin).map_err(|error| {
            anyhow::anyhow!("{error}\nhint: run the same berth restore again to continue")
        })? {
            say!("berth: kube-proxy restarted, its pods to reach the API at {new}");
        }
    }
    restore::finish(&layout)?;
    say!("berth: restored");
    let this = nix::unistd::gethostname()
        .map(|name| name.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    match other_nodes::other_nodes(&admin, &this, &manifest.node) {
        Ok(others) => {
            for line in other_nodes::advice(&others, address) {
                say!("berth: {line}");
            }
        }
        Err(error) => say!("berth: warning: the other nodes could not be listed: {error}"),
    }
    if let Some(Ok(command)) = joins
        .as_ref()
        .map(|joins| join_command(joins, Default::default()))
    {
        say!("berth: a new node joins with (`berth join-command` prints it again):\n{command}");
    }
    Ok(ExitCode::SUCCESS)
}

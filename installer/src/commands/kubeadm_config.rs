//! `berth kubeadm-config init|join`: kubeadm's configuration as kURL renders it, from the
//! variables of the hook session that runs it (Kubernetes' install and join hooks).

use std::process::ExitCode;

use berth::kubernetes::kubeadm_config::{Role, render};

#[derive(clap::Args)]
pub struct KubeadmConfigArgs {
    /// `init` for the first primary, `join` for a joining node.
    #[arg(value_enum)]
    role: Role,
}

pub fn run(args: KubeadmConfigArgs) -> anyhow::Result<ExitCode> {
    let text = render(args.role, |name| std::env::var(name).unwrap_or_default())?;
    show!("{}", text.trim_end());
    Ok(ExitCode::SUCCESS)
}

use std::path::PathBuf;
use std::process::ExitCode;

use berth::hooks::kustomization::{insert, json6902_entry};

#[derive(clap::Subcommand)]
pub enum KustomizationCommand {
    /// Append ITEM to the list FIELD (resources, bases, patchesStrategicMerge, …).
    Add {
        /// The kustomization.yaml to edit.
        file: PathBuf,
        /// The list to append to.
        #[arg(long)]
        field: String,
        /// The entry to append (a path, or a resource's YAML).
        item: String,
    },
    /// Append a patchesJson6902 entry: a patch file and the resource it targets.
    #[command(name = "add-json6902")]
    AddJson6902 {
        /// The kustomization.yaml to edit.
        file: PathBuf,
        /// The JSON 6902 patch file, as the kustomization names it.
        #[arg(long)]
        path: String,
        /// The target's API group (empty for the core group).
        #[arg(long, default_value = "")]
        group: String,
        /// The target's API version.
        #[arg(long)]
        version: String,
        /// The target's kind.
        #[arg(long)]
        kind: String,
        /// The target's name.
        #[arg(long)]
        name: String,
        /// The target's namespace (empty for none).
        #[arg(long, default_value = "")]
        namespace: String,
    },
}

pub fn run(command: KustomizationCommand) -> anyhow::Result<ExitCode> {
    match command {
        KustomizationCommand::Add { file, field, item } => insert(&file, &field, item.into())?,
        KustomizationCommand::AddJson6902 {
            file,
            path,
            group,
            version,
            kind,
            name,
            namespace,
        } => insert(
            &file,
            "patchesJson6902",
            json6902_entry(&path, &group, &version, &kind, &name, &namespace),
        )?,
    }
    Ok(ExitCode::SUCCESS)
}

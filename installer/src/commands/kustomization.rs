use std::path::PathBuf;
use std::process::ExitCode;

use berth::kustomization::{insert, json6902_entry};

#[derive(clap::Subcommand)]
pub enum KustomizationCommand {
    /// Append ITEM to the list FIELD (resources, bases, patchesStrategicMerge, …).
    Add {
        file: PathBuf,
        #[arg(long)]
        field: String,
        item: String,
    },
    /// Append a patchesJson6902 entry: a patch file and the resource it targets.
    #[command(name = "add-json6902")]
    AddJson6902 {
        file: PathBuf,
        #[arg(long)]
        path: String,
        #[arg(long, default_value = "")]
        group: String,
        #[arg(long)]
        version: String,
        #[arg(long)]
        kind: String,
        #[arg(long)]
        name: String,
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

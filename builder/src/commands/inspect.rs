use std::path::PathBuf;
use std::process::ExitCode;

use berth_formats::table::{self, Align};
use clap::Args;

#[derive(Args)]
pub struct InspectArgs {
    /// A `<name>-<version>.tar.gz` package.
    package: PathBuf,
    // `-o json|yaml`: the package index (`package.json`) as the package holds it.
    #[command(flatten)]
    output: berth_formats::output::OutputArgs,
    /// Print the package's software bill of materials (CycloneDX 1.5 JSON).
    #[arg(long, conflicts_with_all = ["output", "json"])]
    sbom: bool,
}

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    if args.sbom {
        let bom = berth_build::package::sbom::package_sbom(&args.package)?;
        show_text!("{}\n", serde_json::to_string_pretty(&bom)?);
        return Ok(ExitCode::SUCCESS);
    }
    let index = berth_build::package::inspect::read_index(&args.package)?;
    match args.output.format() {
        // The index's own bytes, as the package holds them.
        berth_formats::output::Format::Json => {
            show_text!("{}", String::from_utf8_lossy(&index.to_bytes()));
            return Ok(ExitCode::SUCCESS);
        }
        format @ berth_formats::output::Format::Yaml => {
            let _ = berth_formats::output::write_document(format, &index, &mut std::io::stdout());
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    show!("{} {} ({})", index.name, index.version, index.arch);
    show!("inputs {}", index.inputs_digest);
    show!();
    let images: Vec<[String; 4]> = index
        .images
        .iter()
        .map(|image| {
            [
                image.name.clone(),
                image.reference.clone(),
                super::human_size(image.size),
                image.manifest_digest.to_string(),
            ]
        })
        .collect();
    section(
        "IMAGES",
        ["IMAGE", "REFERENCE", "SIZE", "DIGEST"],
        [Align::Left, Align::Left, Align::Right, Align::Left],
        &images,
    );
    show!();
    let files: Vec<[String; 3]> = index
        .files
        .iter()
        .map(|file| {
            [
                file.path.clone(),
                super::human_size(file.size),
                file.sha256.hex().to_string(),
            ]
        })
        .collect();
    section(
        "FILES",
        ["FILE", "SIZE", "SHA256"],
        [Align::Left, Align::Right, Align::Left],
        &files,
    );
    show!();
    let host_packages: Vec<[String; 2]> = index
        .host_packages
        .iter()
        .map(|(distro, packages)| [distro.clone(), packages.join(" ")])
        .collect();
    section(
        "HOST PACKAGES",
        ["DISTRO", "PACKAGES"],
        [Align::Left, Align::Left],
        &host_packages,
    );
    Ok(ExitCode::SUCCESS)
}

/// A part of the package as a table, or `<TITLE>  none`: no header over nothing.
fn section<const N: usize>(
    title: &str,
    header: [&str; N],
    align: [Align; N],
    rows: &[[String; N]],
) {
    if rows.is_empty() {
        show!("{title}  none");
    } else {
        show_text!("{}", table::render(header, align, rows));
    }
}

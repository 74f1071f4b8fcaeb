use std::process::ExitCode;

use berth_formats::table::{self, Align};

use crate::InspectArgs;

pub fn run(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let index = berth_build::package::inspect::read_index(&args.package)?;
    if args.json {
        print!("{}", String::from_utf8_lossy(&index.to_bytes()));
        return Ok(ExitCode::SUCCESS);
    }
    println!("{} {} ({})", index.name, index.version, index.arch);
    println!("inputs {}", index.inputs_digest);
    println!();
    // Every part says so when it is empty rather than print a header over nothing.
    if index.images.is_empty() {
        println!("IMAGES  none");
    } else {
        let rows: Vec<[String; 4]> = index
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
        print!(
            "{}",
            table::render(
                ["IMAGE", "REFERENCE", "SIZE", "DIGEST"],
                [Align::Left, Align::Left, Align::Right, Align::Left],
                &rows
            )
        );
    }
    println!();
    if index.files.is_empty() {
        println!("FILES  none");
    } else {
        let rows: Vec<[String; 3]> = index
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
        print!(
            "{}",
            table::render(
                ["FILE", "SIZE", "SHA256"],
                [Align::Left, Align::Right, Align::Left],
                &rows
            )
        );
    }
    println!();
    if index.host_packages.is_empty() {
        println!("HOST PACKAGES  none");
    } else {
        let rows: Vec<[String; 2]> = index
            .host_packages
            .iter()
            .map(|(distro, packages)| [distro.clone(), packages.join(" ")])
            .collect();
        print!(
            "{}",
            table::render(["DISTRO", "PACKAGES"], [Align::Left, Align::Left], &rows)
        );
    }
    Ok(ExitCode::SUCCESS)
}

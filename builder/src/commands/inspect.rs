use std::process::ExitCode;

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
    println!("{:<20} {:<56} {:>10}  DIGEST", "IMAGE", "REFERENCE", "SIZE");
    for image in &index.images {
        println!(
            "{:<20} {:<56} {:>10}  {}",
            image.name,
            image.reference,
            super::human_size(image.size),
            image.manifest_digest
        );
    }
    println!();
    println!("{:<64} {:>10}  SHA256", "FILE", "SIZE");
    for file in &index.files {
        println!(
            "{:<64} {:>10}  {}",
            file.path,
            super::human_size(file.size),
            &file.sha256.hex()[..16]
        );
    }
    println!();
    if index.host_packages.is_empty() {
        println!("HOST PACKAGES  none");
    } else {
        println!("{:<16} PACKAGES", "DISTRO");
        for (distro, packages) in &index.host_packages {
            println!("{:<16} {}", distro, packages.join(" "));
        }
    }
    Ok(ExitCode::SUCCESS)
}

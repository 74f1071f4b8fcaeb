//! `berth-testgrid`: runs a vendor's kURL testgrid specs on real machines and reports them.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, bail};
use berth_testgrid::grid::cell::{self, Provider, Timeouts};
use berth_testgrid::grid::qemu::Qemu;
use berth_testgrid::grid::server::Server;
use berth_testgrid::grid::{hosts, report, specs};
use clap::Parser as _;

/// Runs kURL testgrid specs (tests × OSes) on VMs booted here or on hosts over SSH, and
/// writes a JUnit XML file and an HTML grid of the results.
#[derive(clap::Parser)]
#[command(name = "berth-testgrid", version)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(clap::Subcommand)]
enum Commands {
    /// Run every test of the GRID files on every OS of the OS spec (less each test's
    /// `unsupportedOSIDs`); exit 1 when a cell fails.
    #[command(
        after_help = "Output: a line per cell as it ends; the report (index.html, junit.xml, each cell's result.json and logs) in --out.\nExit status: 0 when every cell passed; 1 when a cell failed; 2 when the grid could not run (its files, the machines)."
    )]
    Run(RunArgs),
    /// Join the reports of several shards into one.
    Merge {
        /// The shards' report folders.
        #[arg(required = true)]
        shards: Vec<PathBuf>,
        /// Where the joined report goes.
        #[arg(long, value_name = "DIR", default_value = "testgrid-report")]
        out: PathBuf,
    },
    /// Build kURL's add-ons from the shared fixtures into a dist for the grid, through
    /// loopback stand-ins for the registries, GitHub and Debian's mirror (see
    /// `testkit/src/kurl_dist.rs`); needs docker-registry, skopeo, runc and dpkg-dev.
    KurlDist {
        /// The dist folder to write.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// How the packages are compressed (berth-build's `--compression`).
        #[arg(long, default_value = "gzip", value_name = "gzip|zstd")]
        compression: String,
    },
    /// Build real Kubernetes v1.20.2 (kURL's `packages/kubernetes/1.20.2/Manifest` less what
    /// cannot be built here) with Berth's containerd, pod-network and demo add-ons into a dist
    /// for the grid, from what `scripts/kubernetes.sh` built (see
    /// `testkit/src/kubernetes_dist.rs`); needs docker-registry and skopeo.
    KubernetesDist {
        /// The dist folder to write.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// What `scripts/kubernetes.sh` printed.
        #[arg(long, value_name = "DIR", env = "BERTH_KUBERNETES_ARTEFACTS")]
        artefacts: PathBuf,
        /// How the packages are compressed (berth-build's `--compression`).
        #[arg(long, default_value = "gzip", value_name = "gzip|zstd")]
        compression: String,
        /// Also kURL's registry add-on from the fixtures' folder (3.1.1, its image Debian's
        /// Distribution registry under kURL's name) and `local-volume`, the storage its
        /// claim binds.
        #[arg(long)]
        kurl_registry: bool,
    },
    /// Boot VMs of one OS with the qemu provider and keep them until Ctrl-C, writing a hosts
    /// file the ssh provider reads.
    Boot {
        #[command(flatten)]
        machines: QemuArgs,
        /// The OS spec file.
        #[arg(long, value_name = "FILE")]
        os_spec: PathBuf,
        /// The id of the OS to boot.
        #[arg(long)]
        os: String,
        /// How many VMs.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
        count: u32,
        /// The hosts file to write.
        #[arg(long, value_name = "FILE")]
        hosts_out: PathBuf,
        /// Where the VMs' overlays and consoles go.
        #[arg(long, value_name = "DIR", default_value = "testgrid-vms")]
        dir: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Test spec files, as kURL's testgrid writes them.
    #[arg(required = true, value_name = "GRID")]
    grids: Vec<PathBuf>,
    /// The OS spec file (kURL's `os-*.yaml`, with Berth's `debootstrap` and `packages`).
    #[arg(long, value_name = "FILE")]
    os_spec: PathBuf,
    /// The dist folder the installers are served from (`berth-build build … --out DIST`).
    #[arg(long, value_name = "DIR")]
    dist: PathBuf,
    /// The node binary the installers download: one that runs on every OS of the grid
    /// (scripts/portable.sh builds it) [default: the portable build, else `berth` beside
    /// this program].
    #[arg(long, value_name = "FILE")]
    berth: Option<PathBuf>,
    /// Where the machines come from: `qemu` boots VMs here; `ssh` uses --hosts; `netns` makes
    /// namespaces of this host (its own OS only, no reboot: quick runs).
    #[arg(long, default_value = "qemu", value_parser = ["qemu", "ssh", "netns"])]
    provider: String,
    /// The hosts file of the ssh provider.
    #[arg(long, value_name = "FILE", required_if_eq("provider", "ssh"))]
    hosts: Option<PathBuf>,
    /// Run only shard K of N (cells dealt in turn), for a CI matrix; `merge` joins them.
    #[arg(long, value_name = "K/N", value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Where the report goes.
    #[arg(long, value_name = "DIR", default_value = "testgrid-report")]
    out: PathBuf,
    /// The most one step may take.
    #[arg(long, value_name = "DURATION", default_value = "20m", value_parser = berth_formats::duration::a_second_to_a_day)]
    step_timeout: Duration,
    /// Cells run side by side with the qemu provider [default: as many as the machine's cores
    /// and memory hold, each cell's VMs taking --cpus and --memory each; the ssh provider runs
    /// one at a time].
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=64))]
    jobs: Option<u16>,
    #[command(flatten)]
    machines: QemuArgs,
}

/// Cells the machine holds at once: a cell of two VMs takes 2 × --cpus cores (a software
/// emulated VM keeps its cores busy) and 2 × --memory.
fn default_jobs(machines: &QemuArgs) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let by_cores = cores / (2 * machines.cpus as usize).max(1);
    let memory_mib = fs_err::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemAvailable:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(0, |kib| kib / 1024);
    let by_memory = (memory_mib / (2 * u64::from(machines.memory)).max(1)) as usize;
    by_cores.min(by_memory).max(1)
}

#[derive(clap::Args)]
struct QemuArgs {
    /// Where OS images and the runner's SSH key are kept.
    #[arg(long, value_name = "DIR", default_value = ".vm-cache/testgrid")]
    cache: PathBuf,
    /// The most the cached images may take (`20GiB`); the least recently used go first.
    #[arg(long, default_value = "20GiB", value_parser = parse_size)]
    cache_limit: u64,
    /// The Debian mirror images are built from.
    #[arg(
        long,
        env = "BERTH_DEBIAN_MIRROR",
        default_value = "http://deb.debian.org/debian"
    )]
    mirror: String,
    /// QEMU's accelerator: `kvm` where /dev/kvm works, `tcg` (software emulation) anywhere.
    #[arg(long, default_value = "tcg", value_parser = ["tcg", "kvm"])]
    accel: String,
    /// CPUs of each VM.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    cpus: u32,
    /// Memory of each VM, in MiB (Berth's built-in host preflights ask for 4 GiB and more).
    #[arg(long, default_value_t = 4608, value_parser = clap::value_parser!(u32).range(256..=262_144))]
    memory: u32,
    /// Each VM's disk (its root filesystem grows to it at boot; at least 8GiB). Sparse: it
    /// takes on this machine only what the VM writes.
    #[arg(long, default_value = "50GiB", value_parser = parse_size)]
    disk: u64,
    /// The most a VM may take to answer over SSH after it starts or reboots.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = berth_formats::duration::a_second_to_a_day)]
    boot_timeout: Duration,
}

impl QemuArgs {
    fn qemu(&self) -> Qemu {
        Qemu {
            // Absolute: an overlay names its image, which qemu-img resolves from the overlay's
            // own folder.
            cache: std::path::absolute(&self.cache).unwrap_or_else(|_| self.cache.clone()),
            cache_limit: self.cache_limit,
            mirror: self.mirror.clone(),
            accel: self.accel.clone(),
            cpus: self.cpus,
            memory_mib: self.memory,
            disk_bytes: self.disk,
            boot_timeout: self.boot_timeout,
        }
    }
}

fn parse_shard(text: &str) -> Result<(usize, usize), String> {
    let (k, n) = text.split_once('/').ok_or("a shard is K/N, as 2/4")?;
    let k: usize = k.parse().map_err(|_| format!("`{k}` is not a number"))?;
    let n: usize = n.parse().map_err(|_| format!("`{n}` is not a number"))?;
    if n == 0 || k == 0 || k > n || n > 1000 {
        return Err(format!("shard {k}/{n}: K is 1 to N, N at most 1000"));
    }
    Ok((k, n))
}

fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (number, unit) = text
        .find(|c: char| !c.is_ascii_digit())
        .map_or((text, ""), |at| text.split_at(at));
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a size (20GiB)"))?;
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        other => return Err(format!("`{other}`: sizes are in B, KiB, MiB, GiB or TiB")),
    };
    number
        .checked_mul(factor)
        .ok_or_else(|| format!("`{text}` is too large"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Err(error) = berth_testgrid::grid::watch_interrupts() {
        eprintln!("berth-testgrid: cannot watch for Ctrl-C: {error}");
        return ExitCode::from(2);
    }
    // A grid that cannot run exits 2, apart from 1, a cell that failed; the other commands
    // exit 1 on failure, as berth's and berth-build's do.
    let failure = match cli.command {
        Commands::Run(_) => ExitCode::from(2),
        _ => ExitCode::FAILURE,
    };
    let result = match cli.command {
        Commands::Run(args) => run(args),
        Commands::Merge { shards, out } => merge(&shards, &out),
        Commands::KurlDist { out, compression } => kurl_dist(&out, &compression),
        Commands::KubernetesDist {
            out,
            artefacts,
            compression,
            kurl_registry,
        } => kubernetes_dist(&out, &artefacts, &compression, kurl_registry),
        Commands::Boot {
            machines,
            os_spec,
            os,
            count,
            hosts_out,
            dir,
        } => boot(&machines, &os_spec, &os, count, &hosts_out, &dir),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("berth-testgrid: {error:#}");
            failure
        }
    }
}

/// The portable node binary when it was built, else `berth` beside this program.
fn default_berth() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?;
    [
        target.join("x86_64-unknown-linux-gnu/release/berth"),
        exe.with_file_name("berth"),
    ]
    .into_iter()
    .find(|path| path.is_file())
}

/// Says so when the node binary chosen by default is older than the `berth` beside this
/// program: the portable build is made apart (scripts/portable.sh) and is easily left behind
/// the source, and a grid would then test an older Berth without a word.
fn warn_if_stale(chosen: &Path) {
    let modified = |path: &Path| fs_err::metadata(path).and_then(|m| m.modified()).ok();
    let Some(beside) = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("berth"))
    else {
        return;
    };
    if beside != chosen
        && let (Some(chosen_time), Some(beside_time)) = (modified(chosen), modified(&beside))
        && chosen_time < beside_time
    {
        eprintln!(
            "berth-testgrid: warning: the nodes get {}, which is older than {}; run scripts/portable.sh again, or give --berth",
            chosen.display(),
            beside.display()
        );
    }
}

fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let oses = specs::read_oses(&args.os_spec)?;
    let mut tests = Vec::new();
    for grid in &args.grids {
        for test in specs::read_tests(grid)? {
            for field in test.ignored_fields() {
                eprintln!(
                    "berth-testgrid: warning: {}: test `{}`: `{field}` is not a field kURL's or Berth's testgrid reads; it is ignored",
                    grid.display(),
                    test.name
                );
            }
            tests.push(test);
        }
    }
    // The cells, in order: each test on each OS it supports.
    let mut cells = Vec::new();
    for test in &tests {
        for os in &oses {
            if !test.unsupported_os_ids.contains(&os.id) {
                cells.push((test, os));
            }
        }
    }
    if let Some((k, n)) = args.shard {
        cells = cells
            .into_iter()
            .enumerate()
            .filter(|(index, _)| index % n == k - 1)
            .map(|(_, cell)| cell)
            .collect();
    }
    if !args.dist.is_dir() {
        bail!(
            "{} is not a dist folder; build one with `berth-build build addons --out {}`",
            args.dist.display(),
            args.dist.display()
        );
    }
    let berth = args
        .berth
        .clone()
        .or_else(default_berth)
        .context("no node binary: build it with scripts/portable.sh, or give --berth")?;
    if args.berth.is_none() {
        warn_if_stale(&berth);
    }
    let provider = match args.provider.as_str() {
        "ssh" => Provider::Hosts(hosts::read(
            args.hosts.as_deref().expect("required by clap"),
        )?),
        "netns" => Provider::Namespaces,
        _ => Provider::Qemu(args.machines.qemu()),
    };
    fs_err::create_dir_all(&args.out)?;
    let _ = fs_err::remove_dir_all(args.out.join("cells"));
    // The server pins each installer to the packages it first served: a run over a rebuilt
    // dist would be refused its own specs (409) by the installers of the last run.
    let _ = fs_err::remove_dir_all(args.out.join("installers"));
    let server = Server::start(&berth_build()?, &args.dist, &berth, &args.out)?;
    let timeouts = Timeouts {
        step: args.step_timeout,
        reboot: args.machines.boot_timeout,
    };
    eprintln!(
        "berth-testgrid: {} cells ({} tests × {} OSes{}), provider {}",
        cells.len(),
        tests.len(),
        oses.len(),
        args.shard
            .map(|(k, n)| format!(", shard {k}/{n}"))
            .unwrap_or_default(),
        provider.name()
    );
    // Every image the cells need, made before any cell boots: cells side by side must not
    // build the same one.
    if let Provider::Qemu(qemu) = &provider {
        let mut prepared = std::collections::BTreeSet::new();
        for (_, os) in &cells {
            if prepared.insert(os.id.as_str()) {
                eprintln!("berth-testgrid: the image of {}", os.title());
                let log = args.out.join(format!("image-{}.log", os.id));
                if let Err(error) = qemu.image(os, &log) {
                    // Its cells fail at their boot step, saying so.
                    eprintln!("berth-testgrid: {}: {error:#}", os.id);
                }
            }
        }
    }
    // The ssh provider's hosts serve one cell at a time.
    let jobs = match provider {
        Provider::Qemu(_) => args
            .jobs
            .map_or_else(|| default_jobs(&args.machines), usize::from),
        Provider::Hosts(_) | Provider::Namespaces => 1,
    };
    let queue = std::sync::Mutex::new(cells.into_iter().enumerate().collect::<Vec<_>>());
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    if berth_testgrid::grid::interrupted() {
                        break;
                    }
                    let next = {
                        let mut queue = queue.lock().expect("no cell thread panics");
                        (!queue.is_empty()).then(|| queue.remove(0))
                    };
                    let Some((index, (test, os))) = next else {
                        break;
                    };
                    let result = cell::run(test, os, &provider, &server, &args.out, timeouts);
                    eprintln!(
                        "berth-testgrid: {} on {}: {} in {:.0}s",
                        result.test,
                        result.os_id,
                        if result.passed { "PASS" } else { "FAIL" },
                        result.seconds
                    );
                    let mut done = done.lock().expect("no cell thread panics");
                    done.push((index, result));
                    done.sort_by_key(|(index, _)| *index);
                    let results: Vec<_> = done.iter().map(|(_, result)| result.clone()).collect();
                    if let Err(error) = report::write(&args.out, &results) {
                        eprintln!("berth-testgrid: cannot write the report: {error}");
                    }
                }
            });
        }
    });
    let results: Vec<_> = done
        .into_inner()
        .expect("no cell thread panics")
        .into_iter()
        .map(|(_, result)| result)
        .collect();
    report::write(&args.out, &results)?;
    let failed = results.iter().filter(|result| !result.passed).count();
    println!(
        "{} of {} cells passed; report: {}",
        results.len() - failed,
        results.len(),
        args.out.join("index.html").display()
    );
    if berth_testgrid::grid::interrupted() {
        bail!("interrupted; the report has the cells that ran");
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn kurl_dist(out: &Path, compression: &str) -> anyhow::Result<ExitCode> {
    let builder = berth_build()?;
    let cache = tempfile::tempdir()?;
    berth_testkit::kurl_dist::build_with(
        &builder,
        out,
        cache.path(),
        &["--compression", compression],
    )
    .map_err(anyhow::Error::msg)?;
    println!("kURL's fixture add-ons are in {}", out.display());
    Ok(ExitCode::SUCCESS)
}

fn kubernetes_dist(
    out: &Path,
    artefacts: &Path,
    compression: &str,
    kurl_registry: bool,
) -> anyhow::Result<ExitCode> {
    use berth_testkit::kubernetes_dist::Extra;
    let builder = berth_build()?;
    let artefacts =
        berth_testkit::kubernetes_dist::checked_artefacts(artefacts).map_err(anyhow::Error::msg)?;
    let cache = tempfile::tempdir()?;
    berth_testkit::kubernetes_dist::build(
        &builder,
        &artefacts,
        out,
        cache.path(),
        &["--compression", compression],
        if kurl_registry {
            Extra::KurlRegistry
        } else {
            Extra::None
        },
    )
    .map_err(anyhow::Error::msg)?;
    println!(
        "Kubernetes {} is in {}",
        berth_testkit::kubernetes_dist::KUBERNETES_VERSION,
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `berth-build`, beside this program or on the PATH.
fn berth_build() -> anyhow::Result<PathBuf> {
    let beside = std::env::current_exe()?.with_file_name("berth-build");
    if beside.is_file() {
        return Ok(beside);
    }
    which::which("berth-build")
        .context("berth-build is neither beside berth-testgrid nor on the PATH")
}

fn merge(shards: &[PathBuf], out: &Path) -> anyhow::Result<ExitCode> {
    // Links are never followed and a cell is never overwritten by another: see `report::merge`.
    let merged = report::merge(shards, out)?;
    for skipped in &merged.skipped {
        eprintln!("berth-testgrid: warning: {skipped}");
    }
    let results = merged.results;
    let failed = results.iter().filter(|result| !result.passed).count();
    println!(
        "{} of {} cells passed; report: {}",
        results.len() - failed,
        results.len(),
        out.join("index.html").display()
    );
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn boot(
    machines: &QemuArgs,
    os_spec: &Path,
    os: &str,
    count: u32,
    hosts_out: &Path,
    dir: &Path,
) -> anyhow::Result<ExitCode> {
    let oses = specs::read_oses(os_spec)?;
    let os = oses
        .iter()
        .find(|candidate| candidate.id == os)
        .with_context(|| {
            format!(
                "{} has no OS `{os}`; it has: {}",
                os_spec.display(),
                oses.iter()
                    .map(|os| os.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?;
    let qemu = machines.qemu();
    fs_err::create_dir_all(dir)?;
    let log = dir.join("boot.log");
    let image = qemu.image(os, &log)?;
    let names: Vec<String> = (1..=count).map(|n| format!("{}-{n}", os.id)).collect();
    let vms = qemu.boot(&image, &names, dir, None, &log)?;
    let file = hosts::HostsFile {
        hosts: vms
            .iter()
            .map(|vm| hosts::HostEntry {
                address: vm.node.address.clone(),
                port: vm.node.port,
                user: vm.node.user.clone(),
                key: Some(std::path::absolute(&vm.node.key).unwrap_or(vm.node.key.clone())),
                os: os.id.clone(),
            })
            .collect(),
    };
    fs_err::write(hosts_out, serde_norway::to_string(&file)?)?;
    println!(
        "{count} VM(s) of {} answer over SSH; hosts file: {}. Ctrl-C stops them.",
        os.title(),
        hosts_out.display()
    );
    while !berth_testgrid::grid::interrupted() {
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(vms);
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod help_tests {
    use clap::CommandFactory as _;

    use super::*;

    /// Every argument of every command, to the deepest subcommand, says what it is.
    #[test]
    fn every_argument_has_help() {
        let missing = berth_testkit::undocumented(&Cli::command());
        assert!(missing.is_empty(), "without help: {missing:#?}");
    }

    /// docs/cli/ holds this program's reference as its definitions say it.
    #[test]
    fn the_reference_is_the_command_lines_own() {
        berth_testkit::cli_docs::assert_reference(&Cli::command(), env!("CARGO_MANIFEST_DIR"));
    }
}

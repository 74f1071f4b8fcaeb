//! The node binary `serve`, `bundle`, `script` and `upload` ship: which one by default, and
//! whether it starts on the oldest system Berth installs on.
//!
//! `cargo build` links `berth` against the build host's glibc, so it asks the dynamic loader
//! for that glibc's newest symbol versions (`GLIBC_2.34` from Debian 12's) and does not start
//! on older systems. `scripts/portable.sh` builds one linked against glibc 2.17. Whether a
//! binary starts is read from its ELF file, without running it: the `GLIBC_x.y` versions its
//! `.gnu.version_r` section names.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use berth_formats::report::with_hint;

/// The command that builds the portable node binary.
pub const PORTABLE_COMMAND: &str = "scripts/portable.sh";

/// The oldest glibc a node binary must start on: the oldest of [`DISTRO_GLIBC`].
///
/// A spec does not name the OS its nodes run (an installer runs on whatever machine fetches
/// it), and a dist does not record the distros it was built for, so neither narrows it: it is
/// the oldest glibc among the target distros Berth knows (`builder/distros.yaml`), Oracle
/// Linux 7's 2.17 (CentOS/RHEL 7 have the same), which `scripts/portable.sh` links against.
pub const OLDEST_GLIBC: Glibc = oldest(&DISTRO_GLIBC);

/// The glibc of each target distro of `builder/distros.yaml` (a test keeps them in step).
const DISTRO_GLIBC: [(&str, Glibc); 9] = [
    ("ubuntu-20.04", Glibc(2, 31)),
    ("ubuntu-22.04", Glibc(2, 35)),
    ("ubuntu-24.04", Glibc(2, 39)),
    ("debian-11", Glibc(2, 31)),
    ("debian-12", Glibc(2, 36)),
    ("rhel-8", Glibc(2, 28)),
    ("rhel-9", Glibc(2, 34)),
    ("amazon-2023", Glibc(2, 34)),
    ("ol-7", Glibc(2, 17)),
];

const fn oldest(table: &[(&str, Glibc)]) -> Glibc {
    let mut oldest = table[0].1;
    let mut index = 1;
    while index < table.len() {
        let glibc = table[index].1;
        if glibc.0 < oldest.0 || (glibc.0 == oldest.0 && glibc.1 < oldest.1) {
            oldest = glibc;
        }
        index += 1;
    }
    oldest
}

/// A glibc version, `2.17` as `Glibc(2, 17)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Glibc(pub u32, pub u32);

impl std::fmt::Display for Glibc {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "{}.{}", self.0, self.1)
    }
}

impl Glibc {
    /// The glibc a symbol version names: `GLIBC_2.34` (a patch level such as `GLIBC_2.2.5`'s
    /// is left out), and `GLIBC_ABI_DT_RELR`, which glibc 2.36 introduced. None for any other
    /// (`GLIBC_PRIVATE`, `GCC_3.0`).
    fn of_version_name(name: &str) -> Option<Self> {
        if name == "GLIBC_ABI_DT_RELR" {
            return Some(Glibc(2, 36));
        }
        let mut parts = name.strip_prefix("GLIBC_")?.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(Glibc(major, minor))
    }
}

/// Where the shipped node binary came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `--berth FILE`.
    Named,
    /// The portable build beside this program's target folder.
    Portable,
    /// `berth` beside this program.
    Beside,
}

/// The node binary to ship, and what to tell the user about it.
#[derive(Debug)]
pub struct Chosen {
    pub path: PathBuf,
    pub warnings: Vec<String>,
}

/// The node binary to ship: `named` (`--berth FILE`), else [`default_in`] for this program.
/// A default that asks for a glibc newer than [`OLDEST_GLIBC`] is refused, naming the
/// command that builds the portable one, unless `allow_new_glibc`; a named one only warns,
/// since whoever named it chose it (tests and benches serve the host's build to nodes that
/// are this very host). Warnings are printed.
pub fn choose(named: Option<PathBuf>, allow_new_glibc: bool) -> anyhow::Result<Option<PathBuf>> {
    let exe = std::env::current_exe().ok();
    let chosen = choose_in(exe.as_deref(), named, allow_new_glibc)?;
    Ok(chosen.map(|chosen| {
        for warning in &chosen.warnings {
            eprintln!("warning: {warning}");
        }
        chosen.path
    }))
}

/// [`choose`] for the program `exe`, warnings returned rather than printed.
pub fn choose_in(
    exe: Option<&Path>,
    named: Option<PathBuf>,
    allow_new_glibc: bool,
) -> anyhow::Result<Option<Chosen>> {
    let (path, origin) = match named {
        Some(path) => (path, Origin::Named),
        None => match exe.and_then(default_in) {
            Some(found) => found,
            None => return Ok(None),
        },
    };
    let mut warnings = Vec::new();
    if origin == Origin::Portable
        && let Some(beside) = exe.map(|exe| exe.with_file_name("berth"))
        && modified(&beside) > modified(&path)
    {
        warnings.push(format!(
            "{} (the portable build) is older than {}; run `{PORTABLE_COMMAND}` to build it again",
            path.display(),
            beside.display()
        ));
    }
    if !allow_new_glibc
        && let Some((name, glibc)) = newest_glibc(&path)?
        && glibc > OLDEST_GLIBC
    {
        let what = match origin {
            Origin::Named => "",
            Origin::Portable => " (the portable build)",
            Origin::Beside => " (the `berth` beside berth-build, built against this host's glibc)",
        };
        let older: Vec<String> = DISTRO_GLIBC
            .iter()
            .filter(|(_, distro)| *distro < glibc)
            .map(|(distro, its)| format!("{distro} (glibc {its})"))
            .collect();
        let problem = format!(
            "{}{what} asks for {name}, so it would not start on {}",
            path.display(),
            older.join(", ")
        );
        if origin == Origin::Named {
            warnings.push(format!(
                "{problem}; `{PORTABLE_COMMAND}` builds one that does (--allow-new-glibc: no warning)"
            ));
        } else {
            anyhow::bail!(with_hint(
                format!("{problem}: refused as the node binary shipped by default"),
                format!(
                    "build the portable one with `{PORTABLE_COMMAND}` (it is then shipped by default), or give --allow-new-glibc to ship this one all the same"
                )
            ));
        }
    }
    Ok(Some(Chosen { path, warnings }))
}

/// The node binary shipped when none is named, for the program `exe`: the portable build,
/// which `scripts/portable.sh` leaves at `<target>/<arch>-unknown-linux-gnu/release/berth`
/// (`<target>` holding `exe`'s own profile folder, `target/release/berth-build`), when it
/// exists; else `berth` beside `exe`, when it exists.
pub fn default_in(exe: &Path) -> Option<(PathBuf, Origin)> {
    let triple = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let portable = exe
        .parent()
        .and_then(Path::parent)
        .map(|target| target.join(triple).join("release/berth"));
    [
        (portable, Origin::Portable),
        (Some(exe.with_file_name("berth")), Origin::Beside),
    ]
    .into_iter()
    .find_map(|(path, origin)| {
        path.filter(|path| path.is_file())
            .map(|path| (path, origin))
    })
}

fn modified(path: &Path) -> Option<std::time::SystemTime> {
    fs_err::metadata(path).ok()?.modified().ok()
}

/// The newest glibc `path` asks the dynamic loader for, with the version's name
/// (`GLIBC_2.34`): the highest among the versions its `.gnu.version_r` section needs. None
/// for a file that needs none: not ELF (a script), or an ELF file linked statically or against
/// another C library.
pub fn newest_glibc(path: &Path) -> anyhow::Result<Option<(String, Glibc)>> {
    let file = fs_err::File::open(path)?;
    let elf = Elf::open(file.file())
        .with_context(|| format!("failed to read {} as an ELF file", path.display()))?;
    let Some(elf) = elf else {
        return Ok(None);
    };
    let names = elf
        .needed_versions()
        .with_context(|| format!("failed to read {}'s symbol versions", path.display()))?;
    Ok(names
        .into_iter()
        .filter_map(|name| Glibc::of_version_name(&name).map(|glibc| (name, glibc)))
        .max_by_key(|(_, glibc)| *glibc))
}

/// `SHT_GNU_verneed`: the section of the versions a file needs (`.gnu.version_r`).
const SHT_GNU_VERNEED: u32 = 0x6fff_fffe;
/// The most a section read here may hold: version needs and their names take kilobytes.
const SECTION_LIMIT: u64 = 16 << 20;

/// An ELF file's section headers, read from its header; 32- or 64-bit, either byte order.
struct Elf<'a> {
    file: &'a std::fs::File,
    length: u64,
    wide: bool,
    little: bool,
    sections: Vec<Section>,
}

#[derive(Clone, Copy)]
struct Section {
    kind: u32,
    offset: u64,
    size: u64,
    link: u32,
    info: u32,
}

fn malformed(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl<'a> Elf<'a> {
    /// The file's section headers; None if it is not an ELF file.
    fn open(file: &'a std::fs::File) -> io::Result<Option<Self>> {
        let length = file.metadata()?.len();
        let mut ident = [0; 64];
        let read = read_at_most(file, &mut ident)?;
        if read < 16 || ident[..4] != *b"\x7fELF" {
            return Ok(None);
        }
        let wide = match ident[4] {
            1 => false,
            2 => true,
            other => return Err(malformed(format!("unknown ELF class {other}"))),
        };
        let little = match ident[5] {
            1 => true,
            2 => false,
            other => return Err(malformed(format!("unknown ELF byte order {other}"))),
        };
        if read < if wide { 64 } else { 52 } {
            return Err(malformed("the ELF header is cut short"));
        }
        let mut elf = Elf {
            file,
            length,
            wide,
            little,
            sections: Vec::new(),
        };
        let header = &ident[..read];
        let (offset, entry_size, count) = if wide {
            (
                elf.u64(header, 0x28)?,
                elf.u16(header, 0x3a)?,
                elf.u16(header, 0x3c)?,
            )
        } else {
            (
                u64::from(elf.u32(header, 0x20)?),
                elf.u16(header, 0x2e)?,
                elf.u16(header, 0x30)?,
            )
        };
        if offset == 0 {
            return Ok(Some(elf));
        }
        let minimum = if wide { 64 } else { 40 };
        if usize::from(entry_size) < minimum {
            return Err(malformed(format!("section headers of {entry_size} bytes")));
        }
        let entry = |elf: &Elf, index: u64| -> io::Result<Section> {
            let bytes = elf.read(offset + index * u64::from(entry_size), minimum as u64)?;
            elf.section(&bytes)
        };
        // Past 0xff00 sections, the first header holds the count.
        let count = match count {
            0 => entry(&elf, 0)?.size,
            count => u64::from(count),
        };
        if count * u64::from(entry_size) > SECTION_LIMIT {
            return Err(malformed(format!("{count} sections")));
        }
        let table = elf.read(offset, count * u64::from(entry_size))?;
        elf.sections = table
            .chunks_exact(usize::from(entry_size))
            .map(|bytes| elf.section(bytes))
            .collect::<io::Result<_>>()?;
        Ok(Some(elf))
    }

    fn section(&self, bytes: &[u8]) -> io::Result<Section> {
        Ok(if self.wide {
            Section {
                kind: self.u32(bytes, 4)?,
                offset: self.u64(bytes, 24)?,
                size: self.u64(bytes, 32)?,
                link: self.u32(bytes, 40)?,
                info: self.u32(bytes, 44)?,
            }
        } else {
            Section {
                kind: self.u32(bytes, 4)?,
                offset: u64::from(self.u32(bytes, 16)?),
                size: u64::from(self.u32(bytes, 20)?),
                link: self.u32(bytes, 24)?,
                info: self.u32(bytes, 28)?,
            }
        })
    }

    /// The names of the versions the file needs, of every library (`GLIBC_2.17`, …).
    fn needed_versions(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for needs in self.sections.iter().filter(|s| s.kind == SHT_GNU_VERNEED) {
            let strings = self
                .sections
                .get(needs.link as usize)
                .ok_or_else(|| malformed("the version needs name no string table"))?;
            let strings = self.contents(strings)?;
            let bytes = self.contents(needs)?;
            let name = |offset: u32| -> io::Result<String> {
                let rest = strings
                    .get(offset as usize..)
                    .ok_or_else(|| malformed("a version name past its string table"))?;
                let end = rest
                    .iter()
                    .position(|byte| *byte == 0)
                    .ok_or_else(|| malformed("a version name without its end"))?;
                Ok(String::from_utf8_lossy(&rest[..end]).into_owned())
            };
            // Elf_Verneed: vn_version, vn_cnt (u16), vn_file, vn_aux, vn_next (u32).
            // Elf_Vernaux: vna_hash (u32), vna_flags, vna_other (u16), vna_name, vna_next (u32).
            let mut at = 0usize;
            for _ in 0..needs.info {
                let count = self.u16(&bytes, at + 2)?;
                let mut aux = at.checked_add(self.u32(&bytes, at + 8)? as usize);
                for _ in 0..count {
                    let here = aux.ok_or_else(|| malformed("a version need past its section"))?;
                    names.push(name(self.u32(&bytes, here + 8)?)?);
                    match self.u32(&bytes, here + 12)? {
                        0 => break,
                        next => aux = here.checked_add(next as usize),
                    }
                }
                match self.u32(&bytes, at + 12)? {
                    0 => break,
                    next => at = at.saturating_add(next as usize),
                }
            }
        }
        Ok(names)
    }

    fn contents(&self, section: &Section) -> io::Result<Vec<u8>> {
        if section.size > SECTION_LIMIT {
            return Err(malformed(format!("a section of {} bytes", section.size)));
        }
        self.read(section.offset, section.size)
    }

    fn read(&self, offset: u64, size: u64) -> io::Result<Vec<u8>> {
        if offset.checked_add(size).is_none_or(|end| end > self.length) {
            return Err(malformed(format!(
                "{size} bytes at {offset} are past the file's end ({} bytes)",
                self.length
            )));
        }
        let mut bytes = vec![0; size as usize];
        std::os::unix::fs::FileExt::read_exact_at(self.file, &mut bytes, offset)?;
        Ok(bytes)
    }

    fn field<const N: usize>(bytes: &[u8], at: usize) -> io::Result<[u8; N]> {
        at.checked_add(N)
            .and_then(|end| bytes.get(at..end))
            .and_then(|field| field.try_into().ok())
            .ok_or_else(|| malformed("a field past its structure's end"))
    }

    fn u16(&self, bytes: &[u8], at: usize) -> io::Result<u16> {
        let field = Self::field(bytes, at)?;
        Ok(if self.little {
            u16::from_le_bytes(field)
        } else {
            u16::from_be_bytes(field)
        })
    }

    fn u32(&self, bytes: &[u8], at: usize) -> io::Result<u32> {
        let field = Self::field(bytes, at)?;
        Ok(if self.little {
            u32::from_le_bytes(field)
        } else {
            u32::from_be_bytes(field)
        })
    }

    fn u64(&self, bytes: &[u8], at: usize) -> io::Result<u64> {
        let field = Self::field(bytes, at)?;
        Ok(if self.little {
            u64::from_le_bytes(field)
        } else {
            u64::from_be_bytes(field)
        })
    }
}

/// Fills as much of `buffer` as the file holds.
fn read_at_most(file: &std::fs::File, buffer: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match std::os::unix::fs::FileExt::read_at(file, &mut buffer[filled..], filled as u64) {
            Ok(0) => break,
            Ok(read) => filled += read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests;

//! Compressed tar archives (gzip or zstd): written reproducibly, read safely.
//!
//! Writing: entries are sorted by path, every parent folder is listed, owners are 0 with no
//! user or group names, modes are 0755 (folders and executables) or 0644, mtimes come from
//! `SOURCE_DATE_EPOCH` (default 0), the gzip header carries no name and no time, and zstd runs
//! in its mode whose output does not depend on the number of threads. The same
//! inputs therefore give the same bytes on any machine.
//!
//! Reading: every gzip member or zstd frame is read, and nothing but zeros may follow the tar's
//! end, so what is read is what `tar` extracts; an entry not owned by root, or with a setuid,
//! setgid, sticky or group- or world-writable mode, is refused. An entry with an absolute path or `..`, a link that points outside the destination,
//! a path through a link, or a device node is refused before anything is written for it.
//!
//! A symbolic link's target is judged by what it resolves to, not by its text alone: a target
//! may climb (`../`) only at its start, and no higher than the link's own folder is deep, and
//! then only descend. Folders in the destination are real folders (an entry never passes
//! through a link, and a folder is never replaced), so a link climbs through real folders and
//! descends into the destination; a link it descends through obeys the same rule, so no chain of
//! links leads out (`x -> ../../..`, then `z -> d1/d2/x/../../..`, is refused at `z`). A hard
//! link's source must be a file reached through real folders alone.

mod extract;
mod read;
mod write;

pub use extract::{
    ExtractError, ExtractLimits, create_parents_within, extract, extract_within, read_entry,
    read_entry_within,
};
pub use read::{Counted, TarReader, finish, open, unsafe_entry};
pub use write::{ReproducibleArchive, Source, TarWriter, WriteError, source_date_epoch};

use std::path::{Component, Path};

/// Normalises an archive path: `/`-separated, relative, no `.` or `..`, no trailing `/`.
fn clean_archive_path(path: &str) -> Option<String> {
    let mut parts = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests;

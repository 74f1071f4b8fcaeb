//! Opening a compressed tar so that what Berth reads is what `tar xzf` extracts.
//!
//! gzip and tar each read past where a first reading might stop: `gzip -d` decodes every member
//! of a file (so a second member appended to a signed bundle is decoded too), and GNU tar reads
//! on past a lone zero block. A reader that stopped at the first member, or at the first zero
//! block, would check one archive while `tar` extracts another. So every gzip member and zstd
//! frame is decoded, and after the tar's end only zeros may follow (its end blocks and record
//! padding); anything else is refused with its offset.
//!
//! Each entry's header is held to what Berth writes (owner root, no names but root's, no
//! setuid, setgid or sticky bit, nothing writable by group or others): `tar` run as root keeps
//! an archive's owners and modes, so a crafted mode would give a local user a root program.

use std::io::{self, Read};

use crate::compression::decompress;

/// Zeros tolerated after the tar's end: GNU tar pads to its record (10 KiB by default, 1 MiB
/// with the largest blocking factor anyone uses); more is not padding.
const MAX_TRAILING_ZEROS: u64 = 1 << 20;

/// A decompressed stream, counting the bytes read from it (to name where trailing data is).
pub struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let count = self.inner.read(buffer)?;
        self.read += count as u64;
        Ok(count)
    }
}

/// A compressed tar opened by [`open`].
pub type TarReader<'a> = tar::Archive<Counted<Box<dyn Read + 'a>>>;

/// Opens a compressed tar (gzip or zstd, told by its first bytes) to read every member or
/// frame of it. Read its entries, then call [`finish`].
pub fn open<'a>(reader: impl Read + 'a) -> io::Result<TarReader<'a>> {
    Ok(tar::Archive::new(Counted {
        inner: decompress(reader)?,
        read: 0,
    }))
}

/// Ends the reading of an archive whose entries have all been read: what follows the last
/// entry must be zeros (the end blocks and padding) up to the end of the compressed stream.
pub fn finish(archive: TarReader<'_>) -> io::Result<()> {
    let mut rest = archive.into_inner();
    let start = rest.read;
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        let count = match rest.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(count) => count,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(error) => return Err(error),
        };
        let at = rest.read - count as u64;
        if let Some(position) = buffer[..count].iter().position(|byte| *byte != 0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "data follows the end of the tar, at byte {} of the uncompressed stream; `tar` would read it, so the archive is refused",
                    at + position as u64
                ),
            ));
        }
        if rest.read - start > MAX_TRAILING_ZEROS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "more than {MAX_TRAILING_ZEROS} bytes of zeros follow the end of the tar (at byte {start} of the uncompressed stream), more than any tar's padding"
                ),
            ));
        }
    }
}

/// Why an entry is not one Berth writes, or `None` when it is: owned by root with no other
/// user or group name (in its header or its pax records), and (a link's mode aside) no setuid,
/// setgid or sticky bit and nothing writable by group or others. A global pax header, which
/// would change the entries after it for `tar` and which Berth never writes, is refused too.
pub fn unsafe_entry<R: Read>(entry: &mut tar::Entry<'_, R>) -> Option<&'static str> {
    const FOREIGN_OWNER: &str =
        "owned by a user or group other than root (`tar` run as root would keep it)";
    let header = entry.header();
    if header.entry_type() == tar::EntryType::XGlobalHeader {
        return Some("a global pax header, which would change the entries after it");
    }
    if header.as_gnu().is_none() && header.as_ustar().is_none() {
        // `tar` and this reader disagree on what some old-style headers mean.
        return Some("an old-style tar header (neither ustar nor GNU)");
    }
    let Ok(extensions) = entry.pax_extensions() else {
        return Some("its pax records cannot be read");
    };
    for extension in extensions.into_iter().flatten() {
        let Ok(extension) = extension else {
            return Some("its pax records cannot be read");
        };
        let value = extension.value_bytes();
        let foreign = match extension.key_bytes() {
            b"uid" | b"gid" => value != b"0",
            b"uname" | b"gname" => !value.is_empty() && value != b"root",
            _ => false,
        };
        if foreign {
            return Some(FOREIGN_OWNER);
        }
    }
    let header = entry.header();
    let owner_is_root = header.uid().ok() == Some(0) && header.gid().ok() == Some(0);
    let names_are_root = [header.username_bytes(), header.groupname_bytes()]
        .into_iter()
        .flatten()
        .all(|name| name.is_empty() || name == b"root");
    if !owner_is_root || !names_are_root {
        return Some(FOREIGN_OWNER);
    }
    if header.entry_type() == tar::EntryType::Symlink {
        // A link's own mode is never used.
        return None;
    }
    let Ok(mode) = header.mode() else {
        return Some("its mode cannot be read");
    };
    if mode & 0o7000 != 0 {
        return Some("a setuid, setgid or sticky mode");
    }
    if mode & 0o022 != 0 {
        return Some("a mode that lets group or others write it");
    }
    None
}

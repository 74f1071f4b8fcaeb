//! A backup encrypted with age (age-encryption.org/v1): to the recipients given (`age1…`
//! public keys, whose identities open it) or with a passphrase (scrypt). The whole archive is
//! the age payload, so nothing of it (not even the manifest) is readable without the key.

use std::io::{self, BufRead, Read, Write};
use std::path::{Path, PathBuf};

use age::secrecy::SecretString;

/// How a backup is encrypted, when it is.
pub enum Protection {
    None,
    Recipients(Vec<age::x25519::Recipient>),
    Passphrase(SecretString),
}

/// What opens encrypted backups: identities (from age identity files) and a passphrase.
#[derive(Default)]
pub struct Keys {
    identities: Vec<Box<dyn age::Identity + Send + Sync>>,
    passphrase: Option<SecretString>,
}

/// The magic every age file starts with.
const AGE_MAGIC: &[u8] = b"age-encryption.org/";

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("`{0}` is not an age recipient (an X25519 public key, age1…)")]
    BadRecipient(String),
    #[error("failed to read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} holds no age identity (AGE-SECRET-KEY-…): {message}")]
    BadIdentity { path: PathBuf, message: String },
    #[error("{path} is empty: a passphrase file holds the passphrase on its first line")]
    EmptyPassphrase { path: PathBuf },
}

/// Reads a passphrase: the first line of `path`.
pub fn passphrase(path: &Path) -> Result<SecretString, SealError> {
    let text = berth_formats::files::read_to_string_at_most(path, 4096).map_err(|source| {
        SealError::Read {
            path: path.to_path_buf(),
            source,
        }
    })?;
    let line = text.lines().next().unwrap_or_default();
    if line.is_empty() {
        return Err(SealError::EmptyPassphrase {
            path: path.to_path_buf(),
        });
    }
    Ok(SecretString::from(line.to_string()))
}

pub fn recipients(texts: &[String]) -> Result<Vec<age::x25519::Recipient>, SealError> {
    texts
        .iter()
        .map(|text| {
            text.trim()
                .parse()
                .map_err(|_| SealError::BadRecipient(text.clone()))
        })
        .collect()
}

impl Keys {
    pub fn new(
        identity_files: &[PathBuf],
        passphrase: Option<SecretString>,
    ) -> Result<Self, SealError> {
        let mut identities = Vec::new();
        for path in identity_files {
            let text = berth_formats::files::read_to_string_at_most(path, 64 * 1024).map_err(
                |source| SealError::Read {
                    path: path.clone(),
                    source,
                },
            )?;
            let bad = |message: String| SealError::BadIdentity {
                path: path.clone(),
                message,
            };
            let file = age::IdentityFile::from_buffer(text.as_bytes())
                .map_err(|error| bad(error.to_string()))?;
            let found = file
                .into_identities()
                .map_err(|error| bad(error.to_string()))?;
            if found.is_empty() {
                return Err(bad("no key in it".into()));
            }
            identities.extend(found);
        }
        Ok(Self {
            identities,
            passphrase,
        })
    }

    /// `reader`'s plaintext: itself when it is not an age file, else decrypted with these
    /// keys. An error says what is missing or wrong.
    pub fn open<'a>(&self, mut reader: impl BufRead + 'a) -> Result<Box<dyn Read + 'a>, String> {
        let head = reader.fill_buf().map_err(|error| error.to_string())?;
        if !head.starts_with(AGE_MAGIC) {
            return Ok(Box::new(reader));
        }
        let decryptor = age::Decryptor::new_buffered(reader)
            .map_err(|error| format!("its age header: {error}"))?;
        let scrypt;
        let identities: Vec<&dyn age::Identity> = if decryptor.is_scrypt() {
            let Some(passphrase) = &self.passphrase else {
                return Err(
                    "it is encrypted with a passphrase: give --passphrase-file FILE".to_string(),
                );
            };
            scrypt = age::scrypt::Identity::new(passphrase.clone());
            vec![&scrypt]
        } else {
            if self.identities.is_empty() {
                return Err(
                    "it is encrypted to age recipients: give --identity FILE (the recipient's AGE-SECRET-KEY-…)"
                        .to_string(),
                );
            }
            self.identities
                .iter()
                .map(|identity| identity.as_ref() as &dyn age::Identity)
                .collect()
        };
        let plain = decryptor
            .decrypt(identities.into_iter())
            .map_err(|error| format!("it could not be decrypted: {error}"))?;
        Ok(Box::new(plain))
    }
}

/// A writer that encrypts as `protection` says, or passes the bytes through.
pub enum Sealed<W: Write> {
    Plain(W),
    Age(age::stream::StreamWriter<W>),
}

impl<W: Write> Sealed<W> {
    pub fn new(out: W, protection: &Protection) -> io::Result<Self> {
        let encryptor = match protection {
            Protection::None => return Ok(Sealed::Plain(out)),
            Protection::Passphrase(passphrase) => {
                age::Encryptor::with_user_passphrase(passphrase.clone())
            }
            Protection::Recipients(recipients) => age::Encryptor::with_recipients(
                recipients
                    .iter()
                    .map(|recipient| recipient as &dyn age::Recipient),
            )
            .map_err(io::Error::other)?,
        };
        Ok(Sealed::Age(encryptor.wrap_output(out)?))
    }

    /// Ends the encrypted stream (its last chunk) and hands back the output.
    pub fn finish(self) -> io::Result<W> {
        match self {
            Sealed::Plain(out) => Ok(out),
            Sealed::Age(writer) => writer.finish(),
        }
    }
}

impl<W: Write> Write for Sealed<W> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Sealed::Plain(out) => out.write(bytes),
            Sealed::Age(writer) => writer.write(bytes),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sealed::Plain(out) => out.flush(),
            Sealed::Age(writer) => writer.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bytes_open_with_the_key_and_not_without() {
        let identity = age::x25519::Identity::generate();
        let mut sealed = Sealed::new(
            Vec::new(),
            &Protection::Recipients(vec![identity.to_public()]),
        )
        .unwrap();
        sealed.write_all(b"the cluster's keys").unwrap();
        let bytes = sealed.finish().unwrap();
        assert!(bytes.starts_with(AGE_MAGIC));

        let none = Keys::default();
        let error = none.open(&bytes[..]).err().unwrap();
        assert!(error.contains("give --identity FILE"), "{error}");
        let keys = Keys {
            identities: vec![Box::new(identity)],
            passphrase: None,
        };
        let mut plain = String::new();
        keys.open(&bytes[..])
            .unwrap()
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, "the cluster's keys");
        let other = Keys {
            identities: vec![Box::new(age::x25519::Identity::generate())],
            passphrase: None,
        };
        let error = other.open(&bytes[..]).err().unwrap();
        assert!(error.contains("could not be decrypted"), "{error}");

        let mut plain = String::new();
        none.open(&b"not sealed"[..])
            .unwrap()
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, "not sealed");
    }
}

//! Signatures: what a vendor's key says about a dist's small files — `versions.json`, each
//! package's `.sha256` (which binds the package's bytes by their digest, as Zarf's signed
//! `zarf.yaml` binds its files) and each installer's lock. Each is signed in cosign's keyed
//! blob format: a detached `<file>.sig` holding the base64 of an ASN.1 ECDSA P-256 SHA-256
//! signature, the key a PEM SubjectPublicKeyInfo. So `cosign verify-blob --key KEY.pub
//! --signature FILE.sig FILE` and `openssl dgst -sha256 -verify KEY.pub` check Berth's
//! signatures as they check cosign's. The private key is PKCS#8 PEM, which `cosign
//! import-key-pair` takes.
//!
//! A key is named by its fingerprint alone (`sha256:` and the first 16 hex digits of the
//! SHA-256 of its public key's DER), never by its bytes.

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use sha2::{Digest as _, Sha256};

/// The suffix of a signature beside the file it signs.
pub const SIGNATURE_SUFFIX: &str = ".sig";
/// The most bytes a signature file or a key file may be.
pub const MAX_KEY_FILE_BYTES: u64 = 64 * 1024;

/// The DER prefix of a P-256 public key's SubjectPublicKeyInfo (id-ecPublicKey, prime256v1,
/// an uncompressed point of 65 bytes follows).
const SPKI_P256_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("{what} is not a PEM {expected}: {message}")]
    BadKey {
        what: String,
        expected: &'static str,
        message: String,
    },
    #[error("{file}: its signature {signature} is not base64")]
    BadSignature { file: String, signature: String },
    #[error(
        "{file} is not signed by a trusted key (its signature {signature} does not verify with {keys})\nhint: the file changed after it was signed, or another key signed it; take the dist from its vendor again, or trust the key it was signed with"
    )]
    Untrusted {
        file: String,
        signature: String,
        keys: String,
    },
    #[error(
        "{file} is not signed ({signature} is missing), and this node trusts only what keys {keys} signed\nhint: sign the dist with `berth-build sign`, or take it from its vendor again"
    )]
    Unsigned {
        file: String,
        signature: String,
        keys: String,
    },
    #[error("failed to make a signing key")]
    Generate,
    #[error("failed to sign {file}")]
    Sign { file: String },
}

/// A public key a node trusts.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point.
    point: Vec<u8>,
}

impl std::fmt::Debug for PublicKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// A PEM `PUBLIC KEY` (P-256), as `cosign generate-key-pair` and Berth write it.
    pub fn from_pem(what: &str, text: &str) -> Result<Self, SignatureError> {
        let bad = |message: &str| SignatureError::BadKey {
            what: what.to_string(),
            expected: "PUBLIC KEY (ECDSA P-256)",
            message: message.to_string(),
        };
        let der = pem_body(text, "PUBLIC KEY").ok_or_else(|| bad("no PUBLIC KEY block"))?;
        let point = der
            .strip_prefix(&SPKI_P256_PREFIX[..])
            .filter(|point| point.len() == 65 && point[0] == 4)
            .ok_or_else(|| bad("not an ECDSA P-256 key"))?;
        Ok(Self {
            point: point.to_vec(),
        })
    }

    fn der(&self) -> Vec<u8> {
        let mut der = SPKI_P256_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        der
    }

    pub fn to_pem(&self) -> String {
        pem("PUBLIC KEY", &self.der())
    }

    /// `sha256:` and the first 16 hex digits of the SHA-256 of the key's DER.
    pub fn fingerprint(&self) -> String {
        let digest = hex::encode(Sha256::digest(self.der()));
        format!("sha256:{}", &digest[..16])
    }

    /// Whether `signature` (DER) is this key's over `message`.
    pub fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

/// A vendor's signing key.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    /// The same key for signing: ring's signatures are randomised, p256's deterministic.
    signer: p256::ecdsa::SigningKey,
    pkcs8: Vec<u8>,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(formatter, "SigningKey({})", self.public().fingerprint())
    }
}

impl SigningKey {
    pub fn generate() -> Result<Self, SignatureError> {
        let random = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &random)
            .map_err(|_| SignatureError::Generate)?;
        Self::from_pkcs8("a new key", pkcs8.as_ref())
    }

    fn from_pkcs8(what: &str, der: &[u8]) -> Result<Self, SignatureError> {
        use p256::pkcs8::DecodePrivateKey as _;
        let bad = |message: String| SignatureError::BadKey {
            what: what.to_string(),
            expected: "PRIVATE KEY (PKCS#8, ECDSA P-256)",
            message,
        };
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der, &SystemRandom::new())
                .map_err(|error| bad(error.to_string()))?;
        let signer =
            p256::ecdsa::SigningKey::from_pkcs8_der(der).map_err(|error| bad(error.to_string()))?;
        Ok(Self {
            pair,
            signer,
            pkcs8: der.to_vec(),
        })
    }

    /// A PEM `PRIVATE KEY` (PKCS#8, P-256). `what` names it in errors; the key's bytes never
    /// appear in one.
    pub fn from_pem(what: &str, text: &str) -> Result<Self, SignatureError> {
        let der = pem_body(text, "PRIVATE KEY").ok_or_else(|| SignatureError::BadKey {
            what: what.to_string(),
            expected: "PRIVATE KEY (PKCS#8, ECDSA P-256)",
            message: "no PRIVATE KEY block (an encrypted cosign key must be exported first)".into(),
        })?;
        Self::from_pkcs8(what, &der)
    }

    pub fn to_pem(&self) -> String {
        pem("PRIVATE KEY", &self.pkcs8)
    }

    pub fn public(&self) -> PublicKey {
        PublicKey {
            point: self.pair.public_key().as_ref().to_vec(),
        }
    }

    /// The signature file's text for `message`: base64 of the DER signature. Deterministic
    /// (RFC 6979): the same key signs the same bytes into the same signature, so a signed
    /// release or bundle is as reproducible as an unsigned one.
    pub fn sign(&self, file: &str, message: &[u8]) -> Result<String, SignatureError> {
        use p256::ecdsa::signature::Signer as _;
        let signature: p256::ecdsa::Signature =
            self.signer
                .try_sign(message)
                .map_err(|_| SignatureError::Sign {
                    file: file.to_string(),
                })?;
        Ok(base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes()))
    }
}

/// The fingerprints of `keys`, for messages.
pub fn fingerprints(keys: &[PublicKey]) -> String {
    keys.iter()
        .map(PublicKey::fingerprint)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Checks that `signature_text` (a `.sig` file's text) over `message` is one of `keys`'.
/// `file` and `signature` name them in the error, which names the keys by fingerprint.
pub fn verify(
    keys: &[PublicKey],
    file: &str,
    message: &[u8],
    signature: &str,
    signature_text: &str,
) -> Result<PublicKey, SignatureError> {
    // Wrapped as `base64` and `openssl base64` wrap it, or not.
    let compact: String = signature_text
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|_| SignatureError::BadSignature {
            file: file.to_string(),
            signature: signature.to_string(),
        })?;
    keys.iter()
        .find(|key| key.verifies(message, &der))
        .cloned()
        .ok_or_else(|| SignatureError::Untrusted {
            file: file.to_string(),
            signature: signature.to_string(),
            keys: fingerprints(keys),
        })
}

fn pem(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The DER of the first `label` block of a PEM text.
fn pem_body(text: &str, label: &str) -> Option<Vec<u8>> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)? + begin.len();
    let stop = start + text[start..].find(&end)?;
    let body: String = text[start..stop]
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same key signs the same bytes into the same signature (what makes a signed bundle
    /// reproducible), which verifies; other bytes get another.
    #[test]
    fn signatures_are_deterministic_and_verify() {
        let key = SigningKey::generate().unwrap();
        let first = key.sign("versions.json", b"{\"a\": 1}").unwrap();
        let reloaded = SigningKey::from_pem("key", &key.to_pem()).unwrap();
        assert_eq!(
            reloaded.sign("versions.json", b"{\"a\": 1}").unwrap(),
            first
        );
        assert_ne!(key.sign("versions.json", b"{\"a\": 2}").unwrap(), first);
        assert!(
            verify(
                &[key.public()],
                "versions.json",
                b"{\"a\": 1}",
                "versions.json.sig",
                &first
            )
            .is_ok()
        );
    }

    #[test]
    fn a_signature_verifies_with_its_key_alone_and_keys_read_back() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let signature = key.sign("versions.json", b"{}").unwrap();
        let public = PublicKey::from_pem("key.pub", &key.public().to_pem()).unwrap();
        assert_eq!(public, key.public());
        let again = SigningKey::from_pem("key", &key.to_pem()).unwrap();
        assert_eq!(again.public(), key.public());
        assert!(
            verify(
                std::slice::from_ref(&public),
                "f",
                b"{}",
                "f.sig",
                &signature
            )
            .is_ok()
        );
        let error = verify(&[other.public()], "f", b"{}", "f.sig", &signature).unwrap_err();
        assert!(
            error.to_string().contains(&other.public().fingerprint()),
            "{error}"
        );
        assert!(
            verify(
                std::slice::from_ref(&public),
                "f",
                b"{ }",
                "f.sig",
                &signature
            )
            .is_err()
        );
        assert!(verify(&[public], "f", b"{}", "f.sig", "not base64!").is_err());
        // A key's bytes never appear in what is said of it.
        let shown = format!("{key:?} {:?}", key.public());
        assert!(
            !shown.contains("BEGIN") && shown.contains("sha256:"),
            "{shown}"
        );
        assert!(
            PublicKey::from_pem(
                "x",
                "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
            )
            .is_err()
        );
        assert!(SigningKey::from_pem("x", "nothing").is_err());
    }
}

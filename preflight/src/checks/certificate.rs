//! A certificate and its private key: present, in their right files, readable, unencrypted,
//! and a pair (the key's public half is the certificate's), as Go's `tls.LoadX509KeyPair`
//! judges them for troubleshoot.

use serde_json::{Map, Value};
use x509_parser::pem::Pem;

use super::{Collected, Kind, Limits, Matched, first_match, text_field};
use crate::document::Item;
use crate::support_bundle::paths::ResultFile;

pub const CERTIFICATE: Kind = Kind::new(
    "certificate",
    "Certificate Key Pair",
    ResultFile::named("certificate", "certificate"),
    collect_certificate,
    analyze_certificate,
);

/// Certificate and key files Berth reads at most.
const MAX_PEM_BYTES: u64 = 1 << 20;

fn collect_certificate(fields: &Map<String, Value>, _: &Limits) -> Collected {
    let status = key_pair_status(
        text_field(fields, "certificatePath"),
        text_field(fields, "keyPath"),
    );
    Ok(Value::String(status.to_string()))
}

fn read(path: &str) -> Result<Vec<u8>, std::io::Error> {
    use std::io::Read;
    let mut bytes = Vec::new();
    fs_err::File::open(path)?
        .take(MAX_PEM_BYTES)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

fn blocks(bytes: &[u8]) -> Vec<Pem> {
    Pem::iter_from_buffer(bytes).map_while(Result::ok).collect()
}

fn key_pair_status(certificate_path: &str, key_path: &str) -> &'static str {
    let (certificate, key) = match (read(certificate_path), read(key_path)) {
        (Ok(certificate), Ok(key)) => (certificate, key),
        (Err(error), _) | (_, Err(error)) if error.kind() == std::io::ErrorKind::NotFound => {
            return "key-pair-missing";
        }
        _ => return "key-pair-invalid",
    };
    let certificate_blocks = blocks(&certificate);
    let key_blocks = blocks(&key);
    let is_key = |pem: &Pem| pem.label == "PRIVATE KEY" || pem.label.ends_with(" PRIVATE KEY");
    let Some(certificate_block) = certificate_blocks
        .iter()
        .find(|pem| pem.label == "CERTIFICATE")
    else {
        return if certificate_blocks.iter().any(is_key) {
            "key-pair-switched"
        } else {
            "key-pair-invalid"
        };
    };
    let Some(key_block) = key_blocks.iter().find(|pem| is_key(pem)) else {
        return if key_blocks.iter().any(|pem| pem.label == "CERTIFICATE") {
            "key-pair-switched"
        } else if String::from_utf8_lossy(&key).contains("ENCRYPTED") {
            "key-pair-encrypted"
        } else {
            "key-pair-invalid"
        };
    };
    let Ok((_, parsed)) = x509_parser::parse_x509_certificate(&certificate_block.contents) else {
        return "key-pair-invalid";
    };
    let certificate_public = parsed.public_key().subject_public_key.data.to_vec();
    match public_half(key_block) {
        Some(public) if public == certificate_public => "key-pair-valid",
        Some(_) => "key-pair-mismatch",
        None if key_block.label.contains("ENCRYPTED")
            || String::from_utf8_lossy(&key).contains("ENCRYPTED") =>
        {
            "key-pair-encrypted"
        }
        None => "key-pair-invalid",
    }
}

/// The public half of a private key, as the certificate's SubjectPublicKeyInfo holds it.
fn public_half(pem: &Pem) -> Option<Vec<u8>> {
    use ring::signature::{self, KeyPair};
    let der = pem.contents.as_slice();
    match pem.label.as_str() {
        "RSA PRIVATE KEY" => signature::RsaKeyPair::from_der(der)
            .ok()
            .map(|pair| pair.public_key().as_ref().to_vec()),
        "PRIVATE KEY" => {
            if let Ok(pair) = signature::RsaKeyPair::from_pkcs8(der) {
                return Some(pair.public_key().as_ref().to_vec());
            }
            let random = ring::rand::SystemRandom::new();
            for algorithm in [
                &signature::ECDSA_P256_SHA256_ASN1_SIGNING,
                &signature::ECDSA_P384_SHA384_ASN1_SIGNING,
            ] {
                if let Ok(pair) = signature::EcdsaKeyPair::from_pkcs8(algorithm, der, &random) {
                    return Some(pair.public_key().as_ref().to_vec());
                }
            }
            signature::Ed25519KeyPair::from_pkcs8_maybe_unchecked(der)
                .ok()
                .map(|pair| pair.public_key().as_ref().to_vec())
        }
        // SEC 1 (`EC PRIVATE KEY`): the public key it carries ([1] BIT STRING).
        "EC PRIVATE KEY" => sec1_public_key(der),
        _ => None,
    }
}

fn sec1_public_key(der: &[u8]) -> Option<Vec<u8>> {
    use x509_parser::der_parser::ber::BerObjectContent;
    use x509_parser::der_parser::parse_der;
    let (_, object) = parse_der(der).ok()?;
    let BerObjectContent::Sequence(items) = object.content else {
        return None;
    };
    items.iter().find_map(|item| {
        (item.header.raw_tag() == Some(&[0xa1])).then_some(())?;
        let (_, inner) = parse_der(item.as_slice().ok()?).ok()?;
        match inner.content {
            BerObjectContent::BitString(_, bits) => Some(bits.data.to_vec()),
            _ => None,
        }
    })
}

fn analyze_certificate(item: &Item, data: &Value) -> Result<Vec<Matched>, String> {
    let status = data.as_str().unwrap_or_default().trim().to_string();
    first_match(item, |when| Ok(when == status))
}

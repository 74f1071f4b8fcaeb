//! DSSE envelopes (in-toto's signing envelope): a payload, its type, and signatures over
//! DSSE's pre-authentication encoding of both. Berth seals its provenance statements in them,
//! signed with the same vendor key as its `.sig` files.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::signature::{PublicKey, SignatureError, SigningKey, verify};

/// DSSE's payload type for in-toto statements.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// Why an envelope does not open.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    #[error("{at}: its payloadType is not {IN_TOTO_PAYLOAD_TYPE}")]
    PayloadType { at: String },
    #[error("{at}: its payload is not base64 JSON")]
    Payload { at: String },
    #[error("{at} carries no signature")]
    Unsigned { at: String },
    #[error(transparent)]
    Signature(#[from] SignatureError),
}

/// DSSE's pre-authentication encoding: what a signature covers.
fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// An in-toto `statement` in an envelope signed with `key`.
pub fn seal(statement: &Value, key: &SigningKey) -> Result<Value, SignatureError> {
    let payload = serde_json::to_vec(statement).expect("a JSON value serializes");
    let signature = key.sign(
        "the provenance statement",
        &pae(IN_TOTO_PAYLOAD_TYPE, &payload),
    )?;
    Ok(json!({
        "payloadType": IN_TOTO_PAYLOAD_TYPE,
        "payload": base64::engine::general_purpose::STANDARD.encode(&payload),
        "signatures": [{"keyid": key.public().fingerprint(), "sig": signature}],
    }))
}

/// An envelope's payload bytes and the statement they hold, its signatures not checked.
fn decode(at: &str, envelope: &Value) -> Result<(Vec<u8>, Value), EnvelopeError> {
    if envelope["payloadType"] != IN_TOTO_PAYLOAD_TYPE {
        return Err(EnvelopeError::PayloadType { at: at.into() });
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap_or_default())
        .map_err(|_| EnvelopeError::Payload { at: at.into() })?;
    let statement: Value =
        serde_json::from_slice(&payload).map_err(|_| EnvelopeError::Payload { at: at.into() })?;
    Ok((payload, statement))
}

/// The statement of an envelope (read from `at`) one of `keys` signed.
pub fn open(at: &str, envelope: &Value, keys: &[PublicKey]) -> Result<Value, EnvelopeError> {
    let (payload, statement) = decode(at, envelope)?;
    let message = pae(IN_TOTO_PAYLOAD_TYPE, &payload);
    let mut last = None;
    for signature in envelope["signatures"].as_array().into_iter().flatten() {
        let text = signature["sig"].as_str().unwrap_or_default();
        match verify(keys, at, &message, at, text) {
            Ok(_) => return Ok(statement),
            Err(error) => last = Some(error),
        }
    }
    Err(last.map_or_else(
        || EnvelopeError::Unsigned { at: at.into() },
        EnvelopeError::from,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_opens_with_its_key_alone_and_not_once_changed() {
        let key = SigningKey::generate().unwrap();
        let other = SigningKey::generate().unwrap();
        let statement = json!({"_type": "https://in-toto.io/Statement/v1", "subject": []});
        let sealed = seal(&statement, &key).unwrap();
        assert_eq!(open("p", &sealed, &[key.public()]).unwrap(), statement);
        assert!(open("p", &sealed, &[other.public()]).is_err());
        let mut changed = sealed.clone();
        changed["payload"] =
            json!(base64::engine::general_purpose::STANDARD.encode(br#"{"subject":[1]}"#));
        assert!(open("p", &changed, &[key.public()]).is_err());
        // DSSE's PAE, as its specification spells it out.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
        );
    }
}

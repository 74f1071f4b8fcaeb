//! How the registry client gets in: each repository's answer is remembered (anonymous, or the
//! authorization learned from its challenge); a `WWW-Authenticate` challenge is answered with
//! basic credentials or a bearer token from the registry's token service, using credentials
//! from the docker config (`~/.docker/config.json` or `$DOCKER_CONFIG`, credential helpers
//! included).

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine as _;
use oci_spec::distribution::Reference;
use reqwest::Client;
use reqwest::header::HeaderValue;

use super::RegistryError;

/// What each `registry/repository` asked for once it answered: an authorization header
/// learned from its challenge, or `None` when it serves anonymously.
#[derive(Default)]
pub(super) struct Authorizations(Mutex<HashMap<String, Option<HeaderValue>>>);

impl Authorizations {
    fn key(reference: &Reference) -> String {
        format!("{}/{}", reference.registry(), reference.repository())
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Option<HeaderValue>>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The header to send to `reference`'s repository, if it asked for one.
    pub fn get(&self, reference: &Reference) -> Option<HeaderValue> {
        self.map().get(&Self::key(reference)).cloned().flatten()
    }

    /// Whether the repository has answered a request, so its authorization is known.
    pub fn known(&self, reference: &Reference) -> bool {
        self.map().contains_key(&Self::key(reference))
    }

    pub fn learned(&self, reference: &Reference, authorization: HeaderValue) {
        self.map().insert(Self::key(reference), Some(authorization));
    }

    /// The repository answered without a challenge (unless one was learned before).
    pub fn anonymous(&self, reference: &Reference) {
        self.map().entry(Self::key(reference)).or_insert(None);
    }
}

/// Answers a `WWW-Authenticate` challenge with basic credentials or a bearer token.
/// `host` is the registry actually asked (a mirror's, when one stands in for the
/// reference's): its credentials answer, never those of the registry the mirror stands for.
pub(super) async fn answer(
    http: &Client,
    reference: &Reference,
    host: &str,
    challenge: &str,
) -> Result<HeaderValue, RegistryError> {
    let (scheme, parameters) = parse_challenge(challenge);
    let credentials = credentials_for(host);
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => {
            let (user, password) = credentials.ok_or_else(|| {
                unauthorized(
                    reference,
                    "it asks for a user name and password and none is configured",
                )
            })?;
            Ok(basic_header(&user, &password))
        }
        "bearer" => {
            let realm = parameters.get("realm").ok_or_else(|| {
                unauthorized(reference, "its bearer challenge names no token service")
            })?;
            let mut url = url::Url::parse(realm)
                .map_err(|_| unauthorized(reference, "its token service URL is not valid"))?;
            {
                let mut query = url.query_pairs_mut();
                if let Some(service) = parameters.get("service") {
                    query.append_pair("service", service);
                }
                query.append_pair(
                    "scope",
                    &format!("repository:{}:pull", reference.repository()),
                );
            }
            let mut request = http.get(url.as_str());
            if let Some((user, password)) = &credentials {
                request = request.basic_auth(user, Some(password));
            }
            let response = request
                .send()
                .await
                .map_err(|source| RegistryError::Unreachable {
                    registry: url.host_str().unwrap_or(realm).to_string(),
                    attempts: 1,
                    source,
                })?;
            if !response.status().is_success() {
                return Err(unauthorized(
                    reference,
                    &format!("its token service answered {}", response.status()),
                ));
            }
            #[derive(serde::Deserialize)]
            struct TokenResponse {
                token: Option<String>,
                access_token: Option<String>,
            }
            let bytes = response
                .bytes()
                .await
                .map_err(|_| unauthorized(reference, "its token service sent no token"))?;
            let body: TokenResponse = serde_json::from_slice(&bytes)
                .map_err(|_| unauthorized(reference, "its token service sent no token"))?;
            let token = body
                .token
                .or(body.access_token)
                .ok_or_else(|| unauthorized(reference, "its token service sent no token"))?;
            HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| unauthorized(reference, "its token is not a valid header"))
        }
        _ => Err(unauthorized(
            reference,
            &format!("it asks for an unsupported authentication scheme `{scheme}`"),
        )),
    }
}

pub(super) fn unauthorized(reference: &Reference, reason: &str) -> RegistryError {
    RegistryError::Unauthorized {
        registry: reference.registry().to_string(),
        repository: reference.repository().to_string(),
        reason: reason.to_string(),
    }
}

fn basic_header(user: &str, password: &str) -> HeaderValue {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a valid header")
}

/// User name and password for `registry` from the docker config, if any.
fn credentials_for(registry: &str) -> Option<(String, String)> {
    let server = match registry {
        "docker.io" | "index.docker.io" => "https://index.docker.io/v1/",
        other => other,
    };
    match docker_credential::get_credential(server) {
        Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
            Some((user, password))
        }
        Ok(docker_credential::DockerCredential::IdentityToken(_)) => {
            tracing::warn!(
                "docker config holds an identity token for {registry}; only user names and passwords are used"
            );
            None
        }
        Err(error) => {
            tracing::debug!("no docker credentials for {registry}: {error}");
            None
        }
    }
}

/// Splits `Bearer realm="…",service="…"` into its scheme and parameters.
fn parse_challenge(challenge: &str) -> (String, HashMap<String, String>) {
    let challenge = challenge.trim();
    let (scheme, rest) = challenge.split_once(' ').unwrap_or((challenge, ""));
    let mut parameters = HashMap::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.next_if(|c| *c == ',' || c.is_whitespace()).is_some() {}
        let key: String = std::iter::from_fn(|| chars.next_if(|c| *c != '=')).collect();
        if key.is_empty() || chars.next().is_none() {
            break;
        }
        let value: String = if chars.next_if_eq(&'"').is_some() {
            let mut value = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '"' => break,
                    '\\' => value.extend(chars.next()),
                    other => value.push(other),
                }
            }
            value
        } else {
            std::iter::from_fn(|| chars.next_if(|c| *c != ',')).collect()
        };
        parameters.insert(key.trim().to_ascii_lowercase(), value);
    }
    (scheme.to_string(), parameters)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenge_parameters_keep_commas_inside_quotes() {
        let (scheme, parameters) = parse_challenge(
            r#"Bearer realm="https://auth.example/token",service="registry.example",scope="repository:a/b:pull,push""#,
        );
        assert_eq!(scheme, "Bearer");
        assert_eq!(parameters["realm"], "https://auth.example/token");
        assert_eq!(parameters["service"], "registry.example");
        assert_eq!(parameters["scope"], "repository:a/b:pull,push");
    }
}

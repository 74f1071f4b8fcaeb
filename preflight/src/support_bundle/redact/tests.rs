use super::*;

fn redacted(redactor: &Redactor, text: &str) -> String {
    String::from_utf8(redactor.redact("host-collectors/x.txt", text.as_bytes()).0).unwrap()
}

#[test]
fn every_default_redactor_compiles() {
    assert_eq!(
        Redactor::defaults().len(),
        DEFAULT_SINGLE_LINE.len() + DEFAULT_MULTI_LINE.len()
    );
}

#[test]
fn the_defaults_hide_what_troubleshoots_hide() {
    let redactor = Redactor::defaults();
    // troubleshoot's own example (pkg/preflight/collect_test.go).
    assert_eq!(
        redacted(
            &redactor,
            "HTTPS_PROXY=http://alice:sw0rdfish@proxy.example.com:3128"
        ),
        "HTTPS_PROXY=http://***HIDDEN***:***HIDDEN***@proxy.example.com:3128"
    );
    assert_eq!(
        redacted(
            &redactor,
            "Server=db;Database=app;User ID=sa;Password=hunter22;"
        ),
        "Server=***HIDDEN***;Database=***HIDDEN***;User ID=***HIDDEN***;Password=***HIDDEN***;"
    );
    let env = "[\n  {\n    \"name\": \"DB_PASSWORD\",\n    \"value\": \"hunter22\"\n  }\n]";
    let out = redacted(&redactor, env);
    assert!(out.contains("\"value\": \"***HIDDEN***\""), "{out}");
    assert!(!out.contains("hunter22"));
    let inline = r#"{\"name\":\"AWS_SECRET_ACCESS_KEY\",\"value\":\"abc/def\"}"#;
    assert!(!redacted(&redactor, inline).contains("abc/def"));
    // Text that holds no secret is left as it is.
    let plain = "kernel 6.1.0 loaded module overlay\n";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn redactor_documents_hide_values_regexes_and_yaml_paths_in_the_files_they_select() {
    let mut redactor = Redactor::default();
    let added = redactor
        .add_documents(
            "r.yaml",
            "apiVersion: troubleshoot.sh/v1beta2\nkind: Redactor\nspec:\n  redactors:\n  - name: mine\n    fileSelector:\n      files: [\"host-collectors/**/*.yaml\"]\n    removals:\n      values: [\"s3cr3t-value\"]\n      regex:\n      - redactor: '(apikey=)(?P<mask>\\w+)'\n      yamlPath: [\"auth.*.password\"]\n",
        )
        .unwrap();
    assert_eq!(added, 3);
    let file = "host-collectors/berth/spec.yaml";
    let text = "note: apikey=abcd\nkey: s3cr3t-value\nauth:\n  one:\n    password: p1p1p1\n";
    let (out, redactions) = redactor.redact(file, text.as_bytes());
    let out = String::from_utf8(out).unwrap();
    assert!(
        !out.contains("abcd") && !out.contains("s3cr3t-value") && !out.contains("p1p1p1"),
        "{out}"
    );
    assert_eq!(redactions.len(), 3);
    // Another file is not selected.
    let (same, none) = redactor.redact("host-collectors/other.txt", text.as_bytes());
    assert_eq!(same, text.as_bytes());
    assert!(none.is_empty());
    for bad in [
        "kind: Pod\n",
        "apiVersion: troubleshoot.sh/v1beta2\nkind: Redactor\nspec:\n  redactors:\n  - removals:\n      regex:\n      - redactor: '(unclosed'\n",
    ] {
        assert!(
            Redactor::default().add_documents("bad.yaml", bad).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn berths_rules_hide_secret_variables_and_keys_in_one_line() {
    let mut redactor = Redactor::default();
    redactor.add_berth_rules();
    assert_eq!(
        redacted(
            &redactor,
            r#""env": ["PATH=/bin", "DB_PASSWORD=hunter22", "API_TOKEN=xyz"]"#
        ),
        r#""env": ["PATH=/bin", "DB_PASSWORD=***HIDDEN***", "API_TOKEN=***HIDDEN***"]"#
    );
    assert_eq!(
        redacted(&redactor, "KEEPER_ADMIN_PASSWORD=s3cret"),
        "KEEPER_ADMIN_PASSWORD=***HIDDEN***"
    );
    assert_eq!(redacted(&redactor, "MONKEY=banana"), "MONKEY=banana");
    let inline =
        r#"{"key": "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----"}"#;
    let out = redacted(&redactor, inline);
    assert!(!out.contains("MHcCAQEE"), "{out}");
    assert!(
        out.contains("-----BEGIN EC PRIVATE KEY-----***HIDDEN***-----END"),
        "{out}"
    );
}

#[test]
fn private_key_blocks_are_hidden_line_by_line() {
    let mut redactor = Redactor::default();
    redactor.add_berth_rules();
    let key = "x\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\nkqhkiG9w0BAQEF\n-----END PRIVATE KEY-----\ny";
    assert_eq!(
        redacted(&redactor, key),
        "x\n-----BEGIN PRIVATE KEY-----\n***HIDDEN***\n***HIDDEN***\n-----END PRIVATE KEY-----\ny"
    );
}

#[test]
fn secret_values_are_hidden_whole_and_short_ones_left() {
    let mut redactor = Redactor::default();
    assert!(redactor.hide_value("token", "abcdef").unwrap());
    assert!(redactor.hide_value("token", "abcdefgh").unwrap());
    assert!(!redactor.hide_value("short", "abcde").unwrap());
    assert_eq!(
        redacted(&redactor, "t=abcdefgh u=abcdef v=abcde"),
        "t=***HIDDEN*** u=***HIDDEN*** v=abcde"
    );
    // Its other forms: JSON-escaped, base64, each line of a value of several.
    assert!(
        redactor
            .hide_value("key", "line-one-x\nline\"two\"")
            .unwrap()
    );
    let text = "a: \"line-one-x\\nline\\\"two\\\"\"\nb: bGluZS1vbmUteApsaW5lInR3byI=\nline-one-x";
    let out = redacted(&redactor, text);
    assert!(
        !out.contains("line-one-x") && !out.contains("bGluZS1v"),
        "{out}"
    );
}

fn knowing(value: &str) -> Redactor {
    let mut redactor = Redactor::default();
    assert!(redactor.hide_value("registry password", value).unwrap());
    redactor
}

fn berths() -> Redactor {
    let mut redactor = Redactor::default();
    redactor.add_berth_rules();
    redactor
}

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn known_secrets_are_hidden_as_go_escapes_json() {
    let redactor = knowing("pa&ss<wo>rd\"1");
    // Go's encoding/json (ctr, kubectl) writes `&` `<` `>` as \u escapes.
    assert_eq!(
        redacted(
            &redactor,
            r#"{"data":"pa\u0026ss\u003cwo\u003erd\"1","other":"kept"}"#
        ),
        r#"{"data":"***HIDDEN***","other":"kept"}"#
    );
    // And that JSON inside a JSON string (kubectl's last-applied-configuration).
    let nested = r#"{"last":"{\"data\":\"pa\\u0026ss\\u003cwo\\u003erd\\\"1\"}"}"#;
    assert_eq!(
        redacted(&redactor, nested),
        r#"{"last":"{\"data\":\"***HIDDEN***\"}"}"#
    );
}

#[test]
fn known_secrets_are_hidden_percent_encoded() {
    let redactor = knowing("p@ss w&rd/1");
    for (text, expected) in [
        (
            "GET /login?pw=p%40ss+w%26rd%2F1&next=%2Fhome",
            "GET /login?pw=***HIDDEN***&next=%2Fhome",
        ),
        ("p%40ss%20w%26rd%2f1", "***HIDDEN***"),
        ("url p%40ss%20w&rd/1 end", "url ***HIDDEN*** end"),
    ] {
        assert_eq!(redacted(&redactor, text), expected, "{text}");
    }
    // A `%` that is no escape, and `+` with no secret holding a space, are left.
    let plain = "100% done, 1+1=2";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn known_secrets_are_hidden_as_base64_with_echos_newline() {
    let redactor = knowing("hunter22secret");
    // `echo hunter22secret | base64`
    let text = format!("value: {}", b64(b"hunter22secret\n"));
    assert_eq!(redacted(&redactor, &text), "value: ***HIDDEN***");
}

#[test]
fn known_secrets_are_hidden_inside_basic_auth_and_base64_runs() {
    let redactor = knowing("hunter22secret");
    let basic = b64(b"admin:hunter22secret");
    assert_eq!(
        redacted(&redactor, &format!("Authorization: Basic {basic}")),
        "Authorization: Basic ***HIDDEN***"
    );
    // A docker config's `auth` (base64 of user:password) in a Secret's base64.
    let config = format!(r#"{{"auths":{{"registry.example":{{"auth":"{basic}"}}}}}}"#);
    let secret = format!("  .dockerconfigjson: {}", b64(config.as_bytes()));
    assert_eq!(
        redacted(&redactor, &secret),
        "  .dockerconfigjson: ***HIDDEN***"
    );
    // gzip within base64 (a Helm release as its Secret holds it).
    let release = b64(b64(&gzip(br#"{"config":{"password":"hunter22secret"}}"#)).as_bytes());
    assert_eq!(
        redacted(&redactor, &format!("release: {release}")),
        "release: ***HIDDEN***"
    );
    // Base64 that holds no secret is kept.
    let other = format!("ca: {}", b64(b"just a certificate, nothing more"));
    assert_eq!(redacted(&redactor, &other), other);
}

#[test]
fn known_secrets_are_hidden_in_base64_wrapped_over_lines() {
    let redactor = knowing("hunter22secret");
    // The secret straddles the first wrap (57 bytes a 76-column line).
    let data = format!("{}hunter22secret{}", "x".repeat(50), "y".repeat(80));
    let encoded = b64(data.as_bytes());
    let wrapped: Vec<&str> = encoded
        .as_bytes()
        .chunks(76)
        .map(|chunk| std::str::from_utf8(chunk).unwrap())
        .collect();
    let text = format!("data:\n  {}\nend", wrapped.join("\n  "));
    let out = redacted(&redactor, &text);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"data:"));
    assert_eq!(lines.last(), Some(&"end"));
    for line in &lines[1..lines.len() - 1] {
        assert_eq!(*line, "  ***HIDDEN***", "{out}");
    }
}

#[test]
fn known_secrets_are_hidden_as_hex() {
    let redactor = knowing("hunter22secret");
    let lower: String = b"hunter22secret"
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let text = format!("dump {lower} and {}", lower.to_uppercase());
    assert_eq!(
        redacted(&redactor, &text),
        "dump ***HIDDEN*** and ***HIDDEN***"
    );
}

#[test]
fn known_secrets_split_over_two_lines_are_hidden_in_both() {
    let redactor = knowing("hunter22secret");
    assert_eq!(
        redacted(&redactor, "login with hunter22se\ncret then go\r\nnext"),
        "login with ***HIDDEN***\n***HIDDEN*** then go\r\nnext"
    );
    // Continued on an indented line.
    assert_eq!(
        redacted(&redactor, "pw: hunter\r\n    22secret\nnext"),
        "pw: ***HIDDEN***\r\n    ***HIDDEN***\nnext"
    );
    // Two lines that do not make it are kept.
    let plain = "hunter22\nsomething";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn known_secrets_are_hidden_in_a_files_name() {
    let redactor = knowing("hunter22secret");
    let file = "host-collectors/copy/backup-hunter22secret.log";
    assert_eq!(
        redactor.redact_name(file),
        "host-collectors/copy/backup-___HIDDEN___.log"
    );
    // And in what redactions.json says of the file.
    let (out, redactions) = redactor.redact(file, b"pw hunter22secret");
    assert_eq!(out, b"pw ***HIDDEN***");
    assert_eq!(
        redactions[0].file,
        "host-collectors/copy/backup-___HIDDEN___.log"
    );
    // A name is written in its safe characters: a secret's others become `_`.
    let redactor = knowing("p@ss/w0rd!x");
    assert_eq!(
        redactor.redact_name("host-collectors/copy/p_ss_w0rd_x.txt"),
        "host-collectors/copy/___HIDDEN___.txt"
    );
    assert_eq!(redactor.redact_name("a/plain.txt"), "a/plain.txt");
}

#[test]
fn gzip_content_is_told_by_its_bytes_and_checked() {
    let mut redactor = knowing("hunter22secret");
    redactor.add_berth_rules();
    let file = "host-collectors/copy/app.log";
    let text = b"started\nregistry password hunter22secret\nDB_PASSWORD=s3cr3t-db\n";
    let (out, redactions) = redactor.redact(file, &gzip(text));
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with("[Berth: this file held gzip-compressed data with secrets in it"),
        "{out}"
    );
    assert!(
        out.ends_with("\nstarted\nregistry password ***HIDDEN***\nDB_PASSWORD=***HIDDEN***\n"),
        "{out}"
    );
    // Lines counted in what is written, after the note.
    assert!(redactions.iter().any(|redaction| redaction.line == 3));
    assert!(redactions.iter().any(|redaction| redaction.line == 0));
    // gzip that holds no secret is kept as it is.
    let clean = gzip(b"started\nall well\n");
    let (out, redactions) = redactor.redact(file, &clean);
    assert_eq!(out, clean);
    assert!(redactions.is_empty());
    // gzip broken, and compression Berth cannot read, are left out, and said so.
    let mut broken = gzip(text);
    broken.truncate(broken.len() / 2);
    let zstd = [&[0x28, 0xb5, 0x2f, 0xfd][..], b"hunter22secret"].concat();
    for (bytes, kind) in [(broken, "gzip"), (zstd, "zstd")] {
        let (out, redactions) = redactor.redact(file, &bytes);
        let out = String::from_utf8(out).unwrap();
        assert!(
            out.starts_with(&format!("[Berth: this file held {kind}-compressed data")),
            "{out}"
        );
        assert!(!out.contains("hunter22secret") && redactions.len() == 1);
    }
}

#[test]
fn quoted_values_of_secret_variables_are_hidden_whole() {
    assert_eq!(
        redacted(
            &berths(),
            r#"DB_PASSWORD="hunter 22" API_TOKEN='a b c' next"#
        ),
        r#"DB_PASSWORD="***HIDDEN***" API_TOKEN='***HIDDEN***' next"#
    );
    assert_eq!(
        redacted(&berths(), r#"export SECRET="with \"quote\" inside""#),
        r#"export SECRET="***HIDDEN***""#
    );
}

#[test]
fn names_ending_in_key_are_secret_as_the_installers_fields_are() {
    assert_eq!(
        redacted(
            &berths(),
            "ENCRYPTION_KEY=abc123 licenseKey=xyz signing.key=k1k1 --tls-key=k2k2"
        ),
        "ENCRYPTION_KEY=***HIDDEN*** licenseKey=***HIDDEN*** signing.key=***HIDDEN*** --tls-key=***HIDDEN***"
    );
    let plain = "MONKEY=banana PUBLIC_KEY=ssh-ed25519 KEYS=a,b";
    assert_eq!(redacted(&berths(), plain), plain);
    for name in [
        "secretAccessKey",
        "DB_PASSWORD",
        "fleet-token",
        "bootstrapToken",
        "AWS_ACCESS_KEY_ID",
        "apiKey",
        "registryAuth",
        "client-key-data",
        "STRIPE_KEY",
    ] {
        assert!(is_secret_name(name), "{name}");
    }
    for name in ["version", "port", "PATH", "publicKey", "keys", "monkey"] {
        assert!(!is_secret_name(name), "{name}");
    }
}

#[test]
fn yaml_and_json_values_under_secret_keys_are_hidden() {
    let text = "password: hunter22\n  token: \"abc def\"  # the API's\n- client-key-data: LS0tLS1CRUdJTi\nstringData:\n  db.password: 'p w'\n{\"user\":\"bob\",\"password\":\"hunter22\",\"tokenTTL\":3600}";
    assert_eq!(
        redacted(&berths(), text),
        "password: ***HIDDEN***\n  token: \"***HIDDEN***\"  # the API's\n- client-key-data: ***HIDDEN***\nstringData:\n  db.password: '***HIDDEN***'\n{\"user\":\"bob\",\"password\":\"***HIDDEN***\",\"tokenTTL\":3600}"
    );
    // A block under a secret key, to the key's indent.
    let block = "tls.key: |\n  MIIEvQIBADANBg\n\n  kqhkiG9w0BAQEF\nother: kept\n";
    assert_eq!(
        redacted(&berths(), block),
        "tls.key: |\n  ***HIDDEN***\n\n  ***HIDDEN***\nother: kept\n"
    );
    assert_eq!(
        redacted(&berths(), "- password: >-\r\n    a b\r\n  next: 1\r\n"),
        "- password: >-\r\n    ***HIDDEN***\r\n  next: 1\r\n"
    );
    // What names or describes a secret, and Kubernetes' `key`s, are kept.
    let plain = "secretName: registry-creds\ntokenTTL: 86400\nautomountServiceAccountToken: false\n- key: node-role.kubernetes.io/control-plane\n  certificate-authority-data: LS0tCERT\nsecretKeyRef:\n  key: password\n\"secretExists\": true,\npassword: ${DB_PASSWORD}\nauthor: Jane";
    assert_eq!(redacted(&berths(), plain), plain);
}

#[test]
fn bearer_and_authorization_credentials_are_hidden() {
    let redactor = berths();
    for (text, expected) in [
        (
            r#"curl -H "Authorization: Bearer eyJhbGciOiJSUzI1NiJ9.e30.sig" https://x"#,
            r#"curl -H "Authorization: Bearer ***HIDDEN***" https://x"#,
        ),
        (
            "Authorization: Basic YWRtaW46aHVudGVyMjI=",
            "Authorization: Basic ***HIDDEN***",
        ),
        (
            "headers map[Authorization:[Bearer abcdefghijklmnop1234]]",
            "headers map[Authorization:[Bearer ***HIDDEN***]]",
        ),
        (
            "token sent as bearer abcdefghijklmnop1234 to the API",
            "token sent as bearer ***HIDDEN*** to the API",
        ),
    ] {
        assert_eq!(redacted(&redactor, text), expected, "{text}");
    }
    let plain = "using bearer token authentication\n--authorization-mode=Node,RBAC";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn passwords_in_urls_are_hidden_and_the_rest_kept() {
    let redactor = berths();
    for (text, expected) in [
        (
            "REDIS=redis://:hunter22@redis:6379/0",
            "REDIS=redis://:***HIDDEN***@redis:6379/0",
        ),
        (
            "cloning https://alice:pw123456@git.example/repo.git",
            "cloning https://alice:***HIDDEN***@git.example/repo.git",
        ),
        ("amqp://bob:s3cret@mq", "amqp://bob:***HIDDEN***@mq"),
    ] {
        assert_eq!(redacted(&redactor, text), expected, "{text}");
    }
    let plain = "imageID: docker-pullable://nginx:1.25@sha256:0123abcd\nhttp://host:8080/path";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn ini_and_toml_values_with_spaces_around_the_equals_are_hidden() {
    let text = "[default]\nregion = us-east-1\naws_secret_access_key = abc/def\npassword = hunter 22 ; old\ntoken = \"t0k3n\"\ntimeout = 30\ntoken_ttl = 30";
    assert_eq!(
        redacted(&berths(), text),
        "[default]\nregion = us-east-1\naws_secret_access_key = ***HIDDEN***\npassword = ***HIDDEN*** ; old\ntoken = \"***HIDDEN***\"\ntimeout = 30\ntoken_ttl = 30"
    );
}

#[test]
fn mysql_style_dash_p_passwords_are_hidden() {
    let redactor = berths();
    assert_eq!(
        redacted(&redactor, "mysql -u root -phunter22 -P3306 app"),
        "mysql -u root -p***HIDDEN*** -P3306 app"
    );
    assert_eq!(
        redacted(&redactor, "/usr/bin/mysqldump -p'a b' db"),
        "/usr/bin/mysqldump -p'***HIDDEN***' db"
    );
    let plain = "mkdir -p /var/lib/x\nnetstat -plnt\nssh -p22 host\nmysql -p app";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn ordinary_text_is_left_as_it_is() {
    let mut redactor = Redactor::defaults();
    redactor.add_berth_rules();
    redactor
        .hide_value("registry password", "hunter22secret")
        .unwrap();
    let plain = "kube-apiserver --authorization-mode=Node,RBAC --service-account-key-file=/etc/kubernetes/pki/sa.pub\n\
                 level=info msg=\"token refreshed\" took=3ms\n\
                 Failed to get token: connection refused\n\
                 TOKEN=$TOKEN\n\
                 Kubernetes containerd overlay 100% (6.1.0+deb12) 2024-01-02T03:04:05+00:00\n\
                 sha256:0f3e9a1b2c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f\n\
                 keyExists: true\n";
    assert_eq!(redacted(&redactor, plain), plain);
}

#[test]
fn no_input_makes_redaction_panic() {
    let mut redactor = Redactor::defaults();
    redactor.add_berth_rules();
    redactor.hide_value("secret", "hunter22 secret").unwrap();
    redactor.hide_value("long", &"x".repeat(10_000)).unwrap();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random = |len: usize| -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    };
    let mut inputs: Vec<Vec<u8>> = (0..50).map(|len| random(len * 37)).collect();
    inputs.extend([
        Vec::new(),
        b"%".to_vec(),
        b"%4".to_vec(),
        b"a=%zz+%".to_vec(),
        b"=".to_vec(),
        b"PASSWORD=\"".to_vec(),
        b"password: |\n".to_vec(),
        b"\n\n\r\n".to_vec(),
        GZIP_MAGIC.to_vec(),
        [GZIP_MAGIC, &random(100)].concat(),
        b"BZh91AY&SY".to_vec(),
        "==========\n====\n".as_bytes().to_vec(),
        "aGVsbG8=\naGVsbG8=\n".as_bytes().to_vec(),
        "é=ü password: ñ \u{2028}".as_bytes().to_vec(),
        vec![b'A'; 3 * MAX_BASE64_RUN],
    ]);
    for input in inputs {
        let _ = redactor.redact("host-collectors/x.log", &input);
        let _ = redactor.redact_name(&String::from_utf8_lossy(&input));
    }
}

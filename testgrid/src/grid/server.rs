//! The installer server a grid run posts its specs to: `berth-build serve` over the run's
//! dist, on a loopback port, which nodes reach as their own `127.0.0.1:<port>` (through their
//! SSH connection, or a netns machine's forwarder).

use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

/// `berth-build serve` for a run, on a loopback port, and a client of it; stopped when
/// dropped.
pub struct Server {
    pub port: u16,
    child: Child,
    client: reqwest::blocking::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Serves `dist`, offering `berth` as the node binary, keeping its installers and log
    /// under `out`; returns once it listens.
    pub fn start(builder: &Path, dist: &Path, berth: &Path, out: &Path) -> anyhow::Result<Server> {
        let port = berth_testkit::free_port();
        let log = fs_err::File::create(out.join("serve.log"))?;
        let child = Command::new(builder)
            .arg("serve")
            .arg("--dist")
            .arg(dist)
            .arg("--berth")
            .arg(berth)
            .arg("--installers")
            .arg(out.join("installers"))
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .stdin(Stdio::null())
            .stdout(log.file().try_clone()?)
            .stderr(log.into_parts().0)
            .spawn()
            .context("cannot start berth-build serve")?;
        let mut server = Server {
            port,
            child,
            client: reqwest::blocking::Client::builder()
                .timeout(Duration::from_secs(600))
                .build()
                .context("no HTTP client")?,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                bail!(
                    "berth-build serve exited ({status}); see {}",
                    out.join("serve.log").display()
                );
            }
            if Instant::now() > deadline {
                bail!("berth-build serve did not listen within 30s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(server)
    }

    /// Posts an Installer spec; its URL, or the server's reason for refusing it.
    pub fn post(&self, spec: &str) -> anyhow::Result<String> {
        let response = self
            .client
            .post(format!("http://127.0.0.1:{}/installer", self.port))
            .body(spec.to_string())
            .send()
            .context("the installer server did not answer")?;
        let status = response.status();
        let text = response.text().unwrap_or_default();
        if !status.is_success() {
            bail!(
                "the installer server refused the spec ({status}): {}",
                text.trim()
            );
        }
        Ok(text.trim().to_string())
    }

    /// Downloads an installer's airgap bundle to `path`.
    pub fn bundle(&self, url: &str, path: &Path) -> anyhow::Result<()> {
        let id = url.rsplit('/').next().unwrap_or_default();
        let mut response = self
            .client
            .get(format!("http://127.0.0.1:{}/bundle/{id}.tar.gz", self.port))
            .send()
            .context("the installer server did not answer")?;
        if !response.status().is_success() {
            bail!(
                "the bundle of {id}: {} {}",
                response.status(),
                response.text().unwrap_or_default()
            );
        }
        let mut file = fs_err::File::create(path)?;
        response.copy_to(&mut file)?;
        Ok(())
    }
}

//! The `qemu` provider: Debian VMs booted here. Each OS is built once with debootstrap into a
//! cached qcow2 image (with its kernel and initrd beside it, booted directly), and each VM
//! runs on an overlay of it, deleted with the VM.
//!
//! A VM has two links: QEMU's user network, restricted (no route out), through which the
//! runner reaches its sshd on a forwarded loopback port; and a private network its cell's
//! VMs share (a multicast socket on loopback), where each has a static address. It learns
//! its address and name from the kernel command line; the image's key lets the runner in.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use anyhow::{Context as _, bail};
use sha2::Digest as _;

use super::node::{SshNode, run_bounded};
use super::specs::OsSpec;

/// What every image has, besides the OS spec's packages: systemd, sshd, and what Berth's
/// scripts use (curl, sudo, tar, sha256sum) and the grid's own boot units (e2fsprogs).
const BASE_PACKAGES: &str = "systemd-sysv,udev,dbus,openssh-server,iproute2,linux-image-cloud-amd64,initramfs-tools,sudo,curl,ca-certificates,e2fsprogs";

/// Bumped whenever the way an image is made changes, so cached images are made again.
const RECIPE: &str = "berth-testgrid image 3";

/// The private network's first three octets; VM N is `.10+N`.
const SUBNET: &str = "10.77.0";

/// How the provider runs VMs.
#[derive(Debug, Clone)]
pub struct Qemu {
    /// Where images and the runner's SSH key are kept.
    pub cache: PathBuf,
    /// The most the cached images may take; the least recently used go first.
    pub cache_limit: u64,
    pub mirror: String,
    /// `kvm` where /dev/kvm works, `tcg` (software emulation) anywhere.
    pub accel: String,
    pub cpus: u32,
    pub memory_mib: u32,
    /// The size of each VM's disk, whose root filesystem grows to it at boot (at least the
    /// image's, [`IMAGE_BYTES`]).
    pub disk_bytes: u64,
    pub boot_timeout: Duration,
}

/// The size of an image's root filesystem, which a VM's disk may only exceed.
pub const IMAGE_BYTES: u64 = 8 << 30;

/// A cached image: a disk, and the kernel and initrd that boot it.
#[derive(Debug, Clone)]
pub struct Image {
    pub disk: PathBuf,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
}

/// A running VM: stopped (and its overlay deleted) when dropped.
pub struct Vm {
    pub node: SshNode,
    pub address: String,
    child: Child,
    overlay: PathBuf,
}

impl Drop for Vm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs_err::remove_file(&self.overlay);
    }
}

impl Vm {
    /// Whether QEMU still runs: a VM that exited will not answer.
    fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!(
                "{}: QEMU exited ({status}) before the VM answered",
                self.node.name
            );
        }
        Ok(())
    }
}

fn tool(program: &str, package: &str) -> anyhow::Result<PathBuf> {
    which::which(program).with_context(|| {
        format!(
            "`{program}` is not installed: apt-get install {package} (the qemu provider needs it)"
        )
    })
}

impl Qemu {
    /// The runner's SSH key, made once per cache.
    pub fn key(&self) -> anyhow::Result<PathBuf> {
        let key = self.cache.join("ssh/id_ed25519");
        if !key.exists() {
            fs_err::create_dir_all(key.parent().unwrap())?;
            let _ = fs_err::remove_file(key.with_extension("pub"));
            let status = Command::new(tool("ssh-keygen", "openssh-client")?)
                .args([
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    "berth-testgrid",
                    "-f",
                ])
                .arg(&key)
                .status()?;
            if !status.success() {
                bail!("ssh-keygen could not make {}", key.display());
            }
        }
        Ok(key)
    }

    /// The OS's image, from the cache or built now.
    pub fn image(&self, os: &OsSpec, log: &Path) -> anyhow::Result<Image> {
        let Some(suite) = os.debootstrap.as_deref() else {
            bail!(
                "OS `{}`: the qemu provider builds Debian images with debootstrap; give the OS a `debootstrap: <suite>` (bullseye, bookworm, trixie). Cloud images (vmimageuri) are not booted yet; run those OSes with the ssh provider",
                os.id
            );
        };
        if !super::specs::is_plain_id(suite) {
            bail!("OS `{}`: `{suite}` is not a suite name", os.id);
        }
        for package in &os.packages {
            if !package
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+'))
            {
                bail!("OS `{}`: `{package}` is not a Debian package name", os.id);
            }
        }
        let key = self.key()?;
        let public = fs_err::read_to_string(key.with_extension("pub"))?;
        let mut hasher = sha2::Sha256::new();
        for part in [RECIPE, suite, &self.mirror, &os.packages.join(","), &public] {
            hasher.update(part.as_bytes());
            hasher.update([0]);
        }
        let digest = hex::encode(hasher.finalize());
        let dir = self
            .cache
            .join("images")
            .join(format!("{}-{}", os.id, &digest[..12]));
        let image = Image {
            disk: dir.join("disk.qcow2"),
            kernel: dir.join("vmlinuz"),
            initrd: dir.join("initrd.img"),
        };
        let ready = dir.join("ready");
        if ready.exists() {
            // Its use, for the cache's least-recently-used order.
            fs_err::File::open(&ready)?.set_modified(SystemTime::now())?;
            return Ok(image);
        }
        unmount_below(&dir)?;
        let _ = fs_err::remove_dir_all(&dir);
        fs_err::create_dir_all(&dir)?;
        let result = self.build(suite, os, &public, &dir, &image, log);
        if result.is_err() {
            // debootstrap cut short leaves /proc and /sys mounted in its root.
            unmount_below(&dir)?;
            let _ = fs_err::remove_dir_all(&dir);
        }
        result?;
        fs_err::write(&ready, format!("{RECIPE}\n{suite}\n"))?;
        self.trim_cache(&dir)?;
        Ok(image)
    }

    fn build(
        &self,
        suite: &str,
        os: &OsSpec,
        public_key: &str,
        dir: &Path,
        image: &Image,
        log: &Path,
    ) -> anyhow::Result<()> {
        let root = dir.join("root");
        let mut include = BASE_PACKAGES.to_string();
        for package in &os.packages {
            include.push(',');
            include.push_str(package);
        }
        let mut debootstrap = Command::new(tool("debootstrap", "debootstrap")?);
        debootstrap
            .args(["--variant=minbase", &format!("--include={include}"), suite])
            .arg(&root)
            .arg(&self.mirror);
        let outcome = run_bounded(
            &mut debootstrap,
            std::io::empty(),
            Duration::from_secs(1800),
            log,
        )?;
        if !outcome.success {
            bail!(
                "debootstrap could not make a {suite} root from {} ({}); its log: {}",
                self.mirror,
                outcome.status,
                log.display()
            );
        }
        configure_root(&root, public_key)?;
        let kernel = newest(&root.join("boot"), "vmlinuz-")?;
        let initrd = newest(&root.join("boot"), "initrd.img-")?;
        fs_err::copy(kernel, &image.kernel)?;
        fs_err::copy(initrd, &image.initrd)?;
        let raw = dir.join("disk.raw");
        let mut mkfs = Command::new(tool("mkfs.ext4", "e2fsprogs")?);
        mkfs.args(["-q", "-L", "berth-root", "-d"])
            .arg(&root)
            .arg(&raw)
            .arg(format!("{}K", IMAGE_BYTES >> 10));
        let outcome = run_bounded(&mut mkfs, std::io::empty(), Duration::from_secs(600), log)?;
        if !outcome.success {
            bail!(
                "mkfs.ext4 could not make the disk ({}): {}",
                outcome.status,
                log.display()
            );
        }
        let mut convert = Command::new(tool("qemu-img", "qemu-utils")?);
        convert
            .args(["convert", "-O", "qcow2"])
            .arg(&raw)
            .arg(&image.disk);
        let outcome = run_bounded(
            &mut convert,
            std::io::empty(),
            Duration::from_secs(600),
            log,
        )?;
        if !outcome.success {
            bail!(
                "qemu-img could not convert the disk ({}): {}",
                outcome.status,
                log.display()
            );
        }
        fs_err::remove_file(&raw)?;
        fs_err::remove_dir_all(&root)?;
        Ok(())
    }

    /// Removes the least recently used images until the cache is within its limit; `keep`
    /// (the one just made) stays.
    fn trim_cache(&self, keep: &Path) -> anyhow::Result<()> {
        let images = self.cache.join("images");
        let mut entries = Vec::new();
        for entry in fs_err::read_dir(&images)? {
            let path = entry?.path();
            let used = fs_err::metadata(path.join("ready"))
                .and_then(|meta| meta.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            entries.push((used, berth_testkit::size_below(&path), path));
        }
        entries.sort();
        let mut total: u64 = entries.iter().map(|(_, size, _)| size).sum();
        for (_, size, path) in entries {
            if total <= self.cache_limit {
                break;
            }
            if path != keep {
                fs_err::remove_dir_all(&path)?;
                total -= size;
            }
        }
        Ok(())
    }

    /// Boots one VM per name on a private network of their own, and waits until each answers
    /// over SSH. Their consoles and overlays go to `dir`.
    pub fn boot(
        &self,
        image: &Image,
        names: &[String],
        dir: &Path,
        forward: Option<u16>,
        log: &Path,
    ) -> anyhow::Result<Vec<Vm>> {
        let qemu = tool("qemu-system-x86_64", "qemu-system-x86")?;
        let qemu_img = tool("qemu-img", "qemu-utils")?;
        let setpriv = tool("setpriv", "util-linux")?;
        let key = self.key()?;
        let dir = &std::path::absolute(dir)?;
        let network_port = berth_testkit::free_port();
        let mut vms = Vec::new();
        for (index, name) in names.iter().enumerate() {
            let overlay = dir.join(format!("{name}.qcow2"));
            let mut create = Command::new(&qemu_img);
            create
                .args(["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b"])
                .arg(&image.disk)
                .arg(&overlay)
                .arg(self.disk_bytes.max(IMAGE_BYTES).to_string());
            let outcome = run_bounded(&mut create, std::io::empty(), Duration::from_secs(60), log)?;
            if !outcome.success {
                bail!(
                    "qemu-img could not make {} ({})",
                    overlay.display(),
                    outcome.status
                );
            }
            let ssh_port = berth_testkit::free_port();
            let address = format!("{SUBNET}.{}", 11 + index);
            let console = dir.join(format!("{name}.console.log"));
            let mut command = Command::new(&setpriv);
            // The VM ends with the runner, however the runner ends.
            command
                .args(["--pdeathsig", "KILL", "--"])
                .arg(&qemu)
                .args(["-accel", &self.accel, "-M", "pc", "-cpu", "max"])
                .args(["-smp", &self.cpus.to_string(), "-m", &self.memory_mib.to_string()])
                .args(["-display", "none", "-monitor", "none", "-serial"])
                .arg(format!("file:{}", console.display()))
                .arg("-kernel")
                .arg(&image.kernel)
                .arg("-initrd")
                .arg(&image.initrd)
                .arg("-append")
                .arg(format!(
                    "root=/dev/vda rw console=ttyS0 net.ifnames=0 systemd.hostname={name} berth.address={address}/24"
                ))
                .arg("-drive")
                .arg(format!(
                    "file={},if=virtio,format=qcow2,cache=unsafe",
                    overlay.display()
                ))
                .arg("-netdev")
                .arg(format!(
                    "user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:{ssh_port}-:22"
                ))
                .args(["-device", &format!("virtio-net-pci,netdev=n0,mac=52:54:00:00:01:{:02x}", index + 1)])
                .arg("-netdev")
                .arg(format!(
                    "socket,id=n1,mcast=239.192.77.1:{network_port},localaddr=127.0.0.1"
                ))
                .args(["-device", &format!("virtio-net-pci,netdev=n1,mac=52:54:00:77:00:{:02x}", index + 1)])
                .stdin(Stdio::null())
                .stdout(fs_err::File::create(dir.join(format!("{name}.qemu.log")))?.into_parts().0)
                .stderr(Stdio::from(
                    fs_err::OpenOptions::new()
                        .append(true)
                        .open(dir.join(format!("{name}.qemu.log")))?
                        .into_parts()
                        .0,
                ));
            let child = command.spawn().context("cannot start QEMU")?;
            vms.push(Vm {
                node: SshNode {
                    name: name.clone(),
                    address: "127.0.0.1".to_string(),
                    port: ssh_port,
                    user: "root".to_string(),
                    key: key.clone(),
                    known_hosts: dir.join("known_hosts"),
                    forward,
                    console: Some(console),
                },
                address,
                child,
                overlay,
            });
        }
        for vm in &mut vms {
            let node = vm.node.clone();
            node.wait_until_up(self.boot_timeout, log, || vm.check_alive())?;
        }
        Ok(vms)
    }
}

/// Unmounts whatever is mounted below `dir`, deepest first, so that removing it removes only
/// its own files.
fn unmount_below(dir: &Path) -> anyhow::Result<()> {
    let Ok(dir) = fs_err::canonicalize(dir) else {
        return Ok(());
    };
    let mounts = fs_err::read_to_string("/proc/self/mounts")?;
    let mut below: Vec<&str> = mounts
        .lines()
        .filter_map(|line| line.split(' ').nth(1))
        .filter(|point| Path::new(point).starts_with(&dir))
        .collect();
    below.sort_by_key(|point| std::cmp::Reverse(point.len()));
    for point in below {
        let status = Command::new("umount").args(["--lazy", point]).status()?;
        if !status.success() {
            bail!(
                "cannot unmount {point}, below the image folder {}",
                dir.display()
            );
        }
    }
    Ok(())
}

/// The newest `prefix*` file in `dir` (the kernel a root's /boot has).
fn newest(dir: &Path, prefix: &str) -> anyhow::Result<PathBuf> {
    let mut found: Vec<PathBuf> = fs_err::read_dir(dir)?
        .filter_map(|entry| entry.ok().map(|entry| entry.path()))
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with(prefix))
        })
        .collect();
    found.sort();
    found
        .pop()
        .with_context(|| format!("no {prefix}* in {}", dir.display()))
}

/// Makes a debootstrap root bootable as a grid VM: its disk mounted as root (and grown to the
/// VM's disk), a machine id of its own made at first boot, the runner's key for root, and its
/// addresses from the kernel command line.
fn configure_root(root: &Path, public_key: &str) -> anyhow::Result<()> {
    let write = |relative: &str, text: &str| -> anyhow::Result<()> {
        let path = root.join(relative);
        fs_err::create_dir_all(path.parent().unwrap())?;
        fs_err::write(&path, text)?;
        Ok(())
    };
    write("etc/fstab", "LABEL=berth-root / ext4 rw 0 1\n")?;
    write("etc/machine-id", "")?;
    let _ = fs_err::remove_file(root.join("var/lib/dbus/machine-id"));
    fs_err::os::unix::fs::symlink(
        "/dev/null",
        root.join("etc/systemd/system/systemd-firstboot.service"),
    )
    .or_else(|error| {
        if error.kind() == std::io::ErrorKind::AlreadyExists {
            Ok(())
        } else {
            Err(error)
        }
    })?;
    write("root/.ssh/authorized_keys", public_key)?;
    fs_err::set_permissions(
        root.join("root/.ssh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )?;
    let unit = |name: &str, script: &str, unit: &str| -> anyhow::Result<()> {
        write(&format!("usr/local/sbin/{name}"), script)?;
        fs_err::set_permissions(
            root.join(format!("usr/local/sbin/{name}")),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )?;
        write(&format!("etc/systemd/system/{name}.service"), unit)?;
        let wants = root.join("etc/systemd/system/multi-user.target.wants");
        fs_err::create_dir_all(&wants)?;
        let link = wants.join(format!("{name}.service"));
        if !link.exists() {
            fs_err::os::unix::fs::symlink(format!("/etc/systemd/system/{name}.service"), link)?;
        }
        Ok(())
    };
    unit(
        "berth-grid-network",
        "#!/bin/sh\n# The grid's addresses: eth0 is QEMU's user network (sshd, forwarded), eth1 the cell's\n# private network, with the default route, as a node's own network would have it.\nset -e\naddress=$(tr ' ' '\\n' </proc/cmdline | sed -n 's/^berth.address=//p')\nip link set lo up\n# The name resolves, as Debian's installer and cloud-init have it (collectd asks).\ngrep -qw \"$(hostname)\" /etc/hosts || echo \"127.0.1.1 $(hostname)\" >>/etc/hosts\nip link set eth0 up\nip address add 10.0.2.15/24 dev eth0\nip link set eth1 up\nif [ -n \"$address\" ]; then\n    ip address add \"$address\" dev eth1\n    ip route add default via 10.77.0.1 dev eth1 onlink\nfi\n",
        "[Unit]\nDescription=The grid's network addresses, from the kernel command line\nDefaultDependencies=no\nAfter=systemd-udev-settle.service sys-subsystem-net-devices-eth1.device\nWants=sys-subsystem-net-devices-eth1.device\nBefore=network.target ssh.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/berth-grid-network\n\n[Install]\nWantedBy=multi-user.target\n",
    )?;
    unit(
        "berth-grid-disk",
        "#!/bin/sh\n# The root filesystem fills the disk the grid gave the VM, as a cloud image grows to its\n# volume (Kubernetes' host preflights ask for 30 GiB and more).\nexec resize2fs /dev/vda\n",
        "[Unit]\nDescription=The root filesystem grown to the VM's disk\nAfter=systemd-remount-fs.service\nBefore=ssh.service\n\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/usr/local/sbin/berth-grid-disk\n\n[Install]\nWantedBy=multi-user.target\n",
    )?;
    // The name comes from the kernel command line; /etc/hosts resolves it.
    write("etc/hostname", "berth-grid\n")?;
    write("etc/hosts", "127.0.0.1 localhost\n")?;
    Ok(())
}

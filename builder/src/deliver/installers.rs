//! The installers `serve` has been given: each posted spec is kept as `<id>.yaml` in a folder
//! of its own, so the server's URLs outlive a restart, and a bounded number of them is held
//! parsed in memory.
//!
//! An id is a prefix of the canonical spec's sha256, long enough that no other spec can be
//! made to share it; and once an id is bound to a spec it is never bound to another, so a URL a
//! user was handed always serves what they posted. Its lock (every package's digest) is fixed
//! when it is created and kept beside it as `<id>.lock.json`: whoever can write the store later
//! cannot change what an installer URL already handed out installs.

use std::collections::{HashMap, VecDeque};
use std::io::Read as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use berth_formats::lock::Lock;
use berth_formats::spec::{ID_LENGTH, InstallerSpec, MAX_SPEC_BYTES};

/// How many parsed installers are kept in memory at most.
const CACHE_ENTRIES: usize = 1024;
/// How much memory the parsed installers kept may take, as estimated from their specs' size
/// (a parsed spec takes about a dozen times its text).
const CACHE_BYTES: usize = 64 << 20;
/// New installers one client address may create in an hour, unless told otherwise.
pub const DEFAULT_SHARE: usize = 100;
/// How long an installer must have gone unused before a full store lets a new one take its
/// place, unless told otherwise.
pub const DEFAULT_IDLE: Duration = Duration::from_secs(30 * 24 * 3600);
/// How often an installer's last use is written down, at most.
const TOUCH_EVERY: Duration = Duration::from_secs(3600);

/// One installer: the spec as posted and as parsed, and its lock as fixed at creation
/// (`None` for an installer kept before locks were kept: the server fixes it at first use).
#[derive(Debug)]
pub struct Installer {
    pub yaml: String,
    pub spec: InstallerSpec,
    pub lock: Option<Lock>,
}

/// What an insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    New,
    /// The same spec was posted before.
    Existing,
}

#[derive(Debug, thiserror::Error)]
pub enum InstallerError {
    #[error(
        "this server holds {limit} installers, its limit, and none has gone unused long enough to make room; no more are taken"
    )]
    Full { limit: usize },
    #[error(
        "{client} created {share} installers within the hour, its share; try again in {} minutes",
        retry_after.as_secs().div_ceil(60)
    )]
    ShareUsed {
        client: IpAddr,
        share: usize,
        retry_after: Duration,
    },
    #[error("installer {id} is already bound to another spec")]
    Conflict { id: String },
    #[error("the stored installer {id} is damaged: {message}")]
    Damaged { id: String, message: String },
    #[error("failed to keep installer {id}")]
    Io {
        id: String,
        #[source]
        source: std::io::Error,
    },
}

/// The installers of one server, kept in `dir`.
pub struct InstallerStore {
    dir: PathBuf,
    limit: usize,
    share: usize,
    idle: Duration,
    state: Mutex<StoreState>,
}

struct StoreState {
    count: usize,
    cache: HashMap<String, Arc<Installer>>,
    /// The estimated memory of `cache`.
    cache_bytes: usize,
    /// When each client created its installers of the last hour.
    created: HashMap<IpAddr, VecDeque<Instant>>,
    /// When each installer's last use was last written down.
    touched: HashMap<String, Instant>,
}

impl InstallerStore {
    /// Opens (creating) `dir`, which holds at most `limit` installers.
    pub fn open(dir: &Path, limit: usize) -> std::io::Result<Self> {
        fs_err::create_dir_all(dir)?;
        let count = fs_err::read_dir(dir)?
            .filter_map(Result::ok)
            .filter(|entry| is_id_file(&entry.file_name().to_string_lossy()))
            .count();
        Ok(Self {
            dir: dir.to_path_buf(),
            limit,
            share: DEFAULT_SHARE,
            idle: DEFAULT_IDLE,
            state: Mutex::new(StoreState {
                count,
                cache: HashMap::new(),
                cache_bytes: 0,
                created: HashMap::new(),
                touched: HashMap::new(),
            }),
        })
    }

    /// How many installers one client address may create in an hour.
    pub fn with_share(mut self, share: usize) -> Self {
        self.share = share;
        self
    }

    /// How long an installer must go unused before a full store lets another take its place.
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// Notes that installer `id` was used now: its file's time says so (written at most once
    /// an hour), and the least used gives way first when the store is full.
    pub fn touch(&self, id: &str) {
        let mut state = self.state();
        if state
            .touched
            .get(id)
            .is_some_and(|at| at.elapsed() < TOUCH_EVERY)
        {
            return;
        }
        if state.touched.len() >= self.limit.max(CACHE_ENTRIES) {
            state.touched.clear();
        }
        state.touched.insert(id.to_string(), Instant::now());
        drop(state);
        if let Ok(file) = fs_err::OpenOptions::new().append(true).open(self.path(id)) {
            let _ = file.file().set_modified(SystemTime::now());
        }
    }

    /// Counts a new installer against `client`'s share of the hour.
    fn take_share(&self, state: &mut StoreState, client: IpAddr) -> Result<(), InstallerError> {
        let hour = Duration::from_secs(3600);
        state.created.retain(|_, times| {
            while times.front().is_some_and(|at| at.elapsed() >= hour) {
                times.pop_front();
            }
            !times.is_empty()
        });
        let times = state.created.entry(client).or_default();
        if times.len() >= self.share {
            let retry_after = hour.saturating_sub(times.front().map_or(hour, |at| at.elapsed()));
            return Err(InstallerError::ShareUsed {
                client,
                share: self.share,
                retry_after,
            });
        }
        times.push_back(Instant::now());
        Ok(())
    }

    /// Makes room for one installer in a full store: the one unused longest goes, if it has
    /// gone unused for the idle time. `false` when none has.
    fn evict_one(&self) -> Result<bool, InstallerError> {
        let io = |source| InstallerError::Io {
            id: "?".into(),
            source,
        };
        let mut oldest: Option<(SystemTime, String)> = None;
        for entry in fs_err::read_dir(&self.dir).map_err(io)? {
            let Ok(entry) = entry else { continue };
            let name = entry.file_name().to_string_lossy().to_string();
            let Some(id) = name.strip_suffix(".yaml").filter(|id| is_id(id)) else {
                continue;
            };
            let Ok(used) = entry.metadata().and_then(|metadata| metadata.modified()) else {
                continue;
            };
            if oldest.as_ref().is_none_or(|(time, _)| used < *time) {
                oldest = Some((used, id.to_string()));
            }
        }
        let Some((used, id)) = oldest else {
            return Ok(false);
        };
        let idle = SystemTime::now().duration_since(used).unwrap_or_default();
        if idle < self.idle {
            return Ok(false);
        }
        match fs_err::remove_file(self.path(&id)) {
            Ok(()) => {}
            // Another post made room with it first.
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(true),
            Err(source) => return Err(InstallerError::Io { id, source }),
        }
        let _ = fs_err::remove_file(self.lock_path(&id));
        let mut state = self.state();
        state.count = state.count.saturating_sub(1);
        if let Some(evicted) = state.cache.remove(&id) {
            state.cache_bytes = state.cache_bytes.saturating_sub(estimate(&evicted));
        }
        state.touched.remove(&id);
        tracing::info!(
            "installer {id} unused for {}s: evicted to make room",
            idle.as_secs()
        );
        Ok(true)
    }

    pub fn len(&self) -> usize {
        self.state().count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn state(&self) -> std::sync::MutexGuard<'_, StoreState> {
        // A panic while the lock was held leaves a cache that is still whole.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.yaml"))
    }

    fn lock_path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.lock.json"))
    }

    /// The lock kept for `id`, if one was.
    fn read_lock(&self, id: &str) -> Result<Option<Lock>, InstallerError> {
        let path = self.lock_path(id);
        let bytes = match fs_err::read(&path) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(InstallerError::Io {
                    id: id.to_string(),
                    source,
                });
            }
        };
        let lock = Lock::parse(&path.display().to_string(), &bytes).map_err(|error| {
            InstallerError::Damaged {
                id: id.to_string(),
                message: error.to_string(),
            }
        })?;
        if lock.id != id {
            return Err(InstallerError::Damaged {
                id: id.to_string(),
                message: format!("its lock is installer {}'s", lock.id),
            });
        }
        Ok(Some(lock))
    }

    /// Writes `bytes` to `path` unless it exists, synced; `false` when it existed.
    fn write_new(&self, path: &Path, bytes: &[u8]) -> std::io::Result<bool> {
        let mut temporary = tempfile::NamedTempFile::new_in(&self.dir)?;
        std::io::Write::write_all(&mut temporary, bytes)?;
        temporary.as_file().sync_all()?;
        match temporary.persist_noclobber(path) {
            Ok(_) => {}
            Err(error) if error.error.kind() == std::io::ErrorKind::AlreadyExists => {
                return Ok(false);
            }
            Err(error) => return Err(error.error),
        }
        fs_err::File::open(&self.dir)?.sync_all()?;
        Ok(true)
    }

    /// Fixes the lock of an installer kept without one (the first time it is used); the lock
    /// kept first wins. Returns the installer with its lock.
    pub fn fix_lock(
        &self,
        installer: &Installer,
        lock: Lock,
    ) -> Result<Arc<Installer>, InstallerError> {
        let id = installer.spec.id();
        let bytes = lock.to_bytes();
        self.write_new(&self.lock_path(&id), &bytes)
            .map_err(|source| InstallerError::Io {
                id: id.clone(),
                source,
            })?;
        let lock = self.read_lock(&id)?;
        let fixed = Arc::new(Installer {
            yaml: installer.yaml.clone(),
            spec: installer.spec.clone(),
            lock,
        });
        self.remember(&id, &fixed);
        Ok(fixed)
    }

    /// The installer `id` if it is held parsed in memory: no disk, no parsing.
    pub fn cached(&self, id: &str) -> Option<Arc<Installer>> {
        self.state().cache.get(id).cloned()
    }

    /// The installer `id`, or `None` when there is none (or `id` is not an id). Blocks: reads
    /// and parses the stored spec the first time.
    pub fn get(&self, id: &str) -> Result<Option<Arc<Installer>>, InstallerError> {
        if !is_id(id) {
            return Ok(None);
        }
        if let Some(found) = self.state().cache.get(id) {
            return Ok(Some(Arc::clone(found)));
        }
        let path = self.path(id);
        let mut yaml = String::new();
        match fs_err::File::open(&path) {
            Ok(file) => {
                file.take(MAX_SPEC_BYTES as u64 + 1)
                    .read_to_string(&mut yaml)
                    .map_err(|source| InstallerError::Io {
                        id: id.to_string(),
                        source,
                    })?;
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(InstallerError::Io {
                    id: id.to_string(),
                    source,
                });
            }
        }
        let spec =
            InstallerSpec::parse(Path::new(&format!("{id}.yaml")), &yaml).map_err(|error| {
                InstallerError::Damaged {
                    id: id.to_string(),
                    message: error.to_string(),
                }
            })?;
        if spec.id() != id {
            return Err(InstallerError::Damaged {
                id: id.to_string(),
                message: format!("it holds installer {}", spec.id()),
            });
        }
        let lock = self.read_lock(id)?;
        let installer = Arc::new(Installer { yaml, spec, lock });
        self.remember(id, &installer);
        Ok(Some(installer))
    }

    /// Keeps `spec` (posted as `yaml`) under its id, with `lock`, the lock it was resolved to
    /// now. A spec posted before keeps the lock it was given then. Blocks: writes the files
    /// and syncs them.
    pub fn insert(
        &self,
        yaml: String,
        spec: InstallerSpec,
        lock: Lock,
    ) -> Result<(Arc<Installer>, Inserted), InstallerError> {
        self.insert_for(None, yaml, spec, lock)
    }

    /// [`Self::insert`] for a client at `client`, whose new installers count against its
    /// share of the hour; a full store evicts the installer unused longest if it is idle.
    pub fn insert_for(
        &self,
        client: Option<IpAddr>,
        yaml: String,
        spec: InstallerSpec,
        lock: Lock,
    ) -> Result<(Arc<Installer>, Inserted), InstallerError> {
        let id = spec.id();
        if let Some(existing) = self.get(&id)? {
            if existing.spec.canonical_json() != spec.canonical_json() {
                return Err(InstallerError::Conflict { id });
            }
            return Ok((existing, Inserted::Existing));
        }
        let io = |source| InstallerError::Io {
            id: id.clone(),
            source,
        };
        loop {
            let mut state = self.state();
            if state.count < self.limit {
                if let Some(client) = client {
                    self.take_share(&mut state, client)?;
                }
                // Counted before the write, so concurrent posts cannot pass the limit together.
                state.count += 1;
                break;
            }
            drop(state);
            if !self.evict_one()? {
                return Err(InstallerError::Full { limit: self.limit });
            }
        }
        // The lock first: once the spec's file exists, its id is bound, lock and all.
        let written = self
            .write_new(&self.lock_path(&id), &lock.to_bytes())
            .and_then(|_| self.write_new(&self.path(&id), yaml.as_bytes()));
        match written {
            Ok(true) => {}
            // A concurrent post of the same spec won.
            Ok(false) => {
                self.state().count -= 1;
                return self.insert_for(client, yaml, spec, lock);
            }
            Err(error) => {
                self.state().count -= 1;
                return Err(io(error));
            }
        }
        let lock = self.read_lock(&id)?;
        let installer = Arc::new(Installer { yaml, spec, lock });
        self.remember(&id, &installer);
        Ok((installer, Inserted::New))
    }

    fn remember(&self, id: &str, installer: &Arc<Installer>) {
        let mut state = self.state();
        let size = estimate(installer);
        if let Some(old) = state.cache.remove(id) {
            state.cache_bytes = state.cache_bytes.saturating_sub(estimate(&old));
        }
        // Any entries will do: the evicted ones are read again from disk when asked for.
        while !state.cache.is_empty()
            && (state.cache.len() >= CACHE_ENTRIES || state.cache_bytes + size > CACHE_BYTES)
        {
            let evicted = state.cache.keys().next().cloned().expect("not empty");
            if let Some(old) = state.cache.remove(&evicted) {
                state.cache_bytes = state.cache_bytes.saturating_sub(estimate(&old));
            }
        }
        state.cache_bytes += size;
        state.cache.insert(id.to_string(), Arc::clone(installer));
    }

    /// The estimated memory the parsed installers held take now.
    pub fn cached_bytes(&self) -> usize {
        self.state().cache_bytes
    }
}

/// About how much memory a parsed installer takes: its text, and a dozen times it parsed.
fn estimate(installer: &Installer) -> usize {
    installer.yaml.len() * 16 + 4096
}

/// Whether `text` has the form of an installer id: [`ID_LENGTH`] lowercase hex digits.
pub fn is_id(text: &str) -> bool {
    text.len() == ID_LENGTH
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte))
}

fn is_id_file(name: &str) -> bool {
    name.strip_suffix(".yaml").is_some_and(is_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lock_of(spec: &InstallerSpec) -> Lock {
        Lock {
            schema_version: berth_formats::lock::LOCK_SCHEMA_VERSION,
            id: spec.id(),
            addons: Vec::new(),
        }
    }

    fn spec(port: u32) -> (String, InstallerSpec) {
        let yaml = format!(
            "apiVersion: cluster.kurl.sh/v1beta1\nkind: Installer\nspec:\n  demo:\n    version: 1.0.0\n    port: {port}\n"
        );
        let spec = InstallerSpec::parse(Path::new("x.yaml"), &yaml).unwrap();
        (yaml, spec)
    }

    #[test]
    fn installers_outlive_the_store_and_the_limit_holds() {
        let dir = tempfile::tempdir().unwrap();
        let store = InstallerStore::open(dir.path(), 2).unwrap();
        let (yaml, first) = spec(1);
        let id = first.id();
        assert_eq!(
            store
                .insert(yaml.clone(), first.clone(), lock_of(&first))
                .unwrap()
                .1,
            Inserted::New
        );
        let lock = lock_of(&first);
        assert_eq!(
            store.insert(yaml, first, lock).unwrap().1,
            Inserted::Existing
        );
        let (yaml, second) = spec(2);
        let lock = lock_of(&second);
        store.insert(yaml, second, lock).unwrap();
        let (yaml, third) = spec(3);
        assert!(matches!(
            store.insert(yaml, third.clone(), lock_of(&third)),
            Err(InstallerError::Full { limit: 2 })
        ));
        drop(store);
        let reopened = InstallerStore::open(dir.path(), 2).unwrap();
        assert_eq!(reopened.len(), 2);
        assert_eq!(
            reopened.get(&id).unwrap().unwrap().spec.addons["demo"].config["port"],
            1
        );
        assert!(reopened.get("../../etc/passwd").unwrap().is_none());
    }

    #[test]
    fn an_id_is_never_bound_to_another_spec() {
        let dir = tempfile::tempdir().unwrap();
        let (yaml, first) = spec(1);
        let id = first.id();
        // Another spec stored under the first one's id, as a collision would.
        let (other_yaml, _) = spec(2);
        fs_err::write(dir.path().join(format!("{id}.yaml")), &other_yaml).unwrap();
        let reopened = InstallerStore::open(dir.path(), 10).unwrap();
        assert!(matches!(
            reopened.insert(yaml, first.clone(), lock_of(&first)),
            Err(InstallerError::Damaged { .. })
        ));
        assert_eq!(
            fs_err::read_to_string(dir.path().join(format!("{id}.yaml"))).unwrap(),
            other_yaml
        );
    }

    #[test]
    fn the_parsed_installers_kept_are_bounded_by_their_size() {
        let dir = tempfile::tempdir().unwrap();
        let store = InstallerStore::open(dir.path(), 1000).unwrap();
        // Specs of about 400 KiB each: a few fill the cache's budget.
        let padding = format!("# {}\n", "x".repeat(400 * 1024));
        for port in 0..20 {
            let (yaml, spec) = spec(port);
            let yaml = format!("{padding}{yaml}");
            let lock = lock_of(&spec);
            store.insert(yaml, spec, lock).unwrap();
            assert!(
                store.cached_bytes() <= CACHE_BYTES,
                "{}",
                store.cached_bytes()
            );
        }
        assert!(store.cached_bytes() > CACHE_BYTES / 2);
    }
}

//! SQLite's WAL index header, read without a query: the known version of a store that
//! opened its file, so that exact mode's cached reads wait for no version check while
//! nothing was committed.
//!
//! In WAL mode every commit, whoever makes it, rewrites the header at the start of the
//! `-shm` file through which connections that may commit share the index (its frame
//! count, checksums and salts; sqlite.org/walformat.html, "The WAL-Index Header"), and
//! that rewrite is what makes the commit visible to readers. So when the header reads
//! as it did before a check's query, nothing was committed since, and the version that
//! check read is the version now: exactly, not within a bound. A header that moved, or
//! one caught half written (its two copies differ), sends the read to a check as before.
//!
//! The header is trusted only while it is the live one:
//! - The database file says WAL (its header's bytes 18 and 19 are 2), before the check's
//!   query and after it.
//! - The `-shm` beside the database's resolved path (links followed, as SQLite names
//!   it) is the file the header was read from. SQLite deletes it when the last
//!   connection closes, and a later connection makes a new one; the check's own
//!   connection stays open between checks, and while one connection is open nobody can
//!   delete the file or take the database out of WAL mode. Each check starts by
//!   forgetting what it trusted (so does dropping its connection) and looks again after
//!   its query, when its connection is open.
//! - `pread` sees what other processes write through their mappings of the file: so on
//!   Linux's local file systems, which share one page cache. Where it does not (a FUSE
//!   or network file system), the header stands still while the version moves; a check
//!   that sees that turns the index off for the store's life and logs a warning.
//!
//! Files opened here stay open until the process ends: closing any descriptor of a file
//! drops every POSIX lock the process holds on it, SQLite's own included
//! (sqlite.org/howtocorrupt.html, section 2.2). That is two descriptors per database
//! file, and one more each time its `-shm` is made again.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockWriteGuard};

use books_core::store::Version;

/// The header's size; two copies of it start the `-shm` file.
const HEADER: usize = 48;

/// Byte 12 of the header: whether SQLite has initialized it.
const IS_INIT: usize = 12;

/// A header as read.
type Header = [u8; HEADER];

/// The WAL index of one database file, and the version a check read while its header
/// stood still.
#[derive(Debug)]
pub(crate) struct WalIndex {
    database: PathBuf,
    index: PathBuf,
    state: RwLock<State>,
}

#[derive(Debug, Default)]
struct State {
    /// What `known` answers from.
    trusted: Option<Trusted>,
    /// The last check's header (unmoved through its query) and version.
    last: Option<(Header, Version)>,
    /// The header stood still while the version moved: `pread` does not see this file's
    /// writes (a network or FUSE file system), and nothing is trusted again.
    blind: bool,
}

/// A check's version, and the header it was read under.
#[derive(Debug)]
struct Trusted {
    file: Arc<File>,
    header: Header,
    version: Version,
}

/// The header as it stood before a check's query.
pub(crate) struct Seen {
    file: Arc<File>,
    header: Header,
}

impl WalIndex {
    /// The index of the database at `database` (`<database>-shm`, named after the path
    /// with its links resolved, as SQLite names it), if the path resolves.
    pub(crate) fn new(database: &Path) -> Option<Self> {
        let database = std::fs::canonicalize(database).ok()?;
        let mut index = database.as_os_str().to_owned();
        index.push("-shm");
        Some(Self {
            database,
            index: index.into(),
            state: RwLock::default(),
        })
    }

    /// The version the last check read, if nothing was committed since.
    pub(crate) fn known(&self) -> Option<Version> {
        let state = self.state.read().unwrap_or_else(PoisonError::into_inner);
        let trusted = state.trusted.as_ref()?;
        (header(&trusted.file)? == trusted.header).then_some(trusted.version)
    }

    /// Trusts nothing until the next check (its connection was dropped).
    pub(crate) fn forget(&self) {
        self.state().trusted = None;
    }

    /// Before a check's query: forgets what was trusted and reads the header.
    pub(crate) fn before_check(&self) -> Option<Seen> {
        let mut state = self.state();
        state.trusted = None;
        if state.blind || !self.in_wal_mode() {
            return None;
        }
        let file = kept(&self.index)?;
        let header = header(&file)?;
        Some(Seen { file, header })
    }

    /// After a check's query read `version`: trusts it while the header stays as `seen`,
    /// if that header is the live one and did not move during the query.
    pub(crate) fn after_check(&self, seen: Seen, version: Version) {
        let live = kept(&self.index).is_some_and(|now| Arc::ptr_eq(&now, &seen.file));
        if !(live && self.in_wal_mode() && header(&seen.file) == Some(seen.header)) {
            return;
        }
        let mut state = self.state();
        if state
            .last
            .is_some_and(|(header, last)| header == seen.header && last != version)
        {
            state.blind = true;
            tracing::warn!(
                index = %self.index.display(),
                "SQLite's WAL index did not move with a commit; every cached read asks the database"
            );
            return;
        }
        state.last = Some((seen.header, version));
        state.trusted = Some(Trusted {
            file: seen.file,
            header: seen.header,
            version,
        });
    }

    fn state(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the database file says WAL (its header's bytes 18 and 19, the read and
    /// write versions, are 2).
    fn in_wal_mode(&self) -> bool {
        let mut versions = [0; 2];
        kept(&self.database)
            .is_some_and(|file| file.read_exact_at(&mut versions, 18).is_ok() && versions == [2, 2])
    }
}

/// The header, if its two copies agree and SQLite initialized it.
fn header(file: &File) -> Option<Header> {
    let mut both = [0; 2 * HEADER];
    file.read_exact_at(&mut both, 0).ok()?;
    let (first, second) = both.split_at(HEADER);
    if first != second || first[IS_INIT] != 1 {
        return None;
    }
    first.try_into().ok()
}

/// The file at `path`, opened read-only once per file (device and inode) and kept open
/// until the process ends (see the module's doc).
fn kept(path: &Path) -> Option<Arc<File>> {
    static KEPT: Mutex<BTreeMap<(u64, u64), Arc<File>>> = Mutex::new(BTreeMap::new());
    let identity = |meta: std::fs::Metadata| (meta.dev(), meta.ino());
    let at = identity(std::fs::metadata(path).ok()?);
    let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(file) = kept.get(&at) {
        return Some(Arc::clone(file));
    }
    let file = Arc::new(File::open(path).ok()?);
    match file.metadata().map(identity) {
        // Kept under the file's own identity, even if the path changed files in between.
        Ok(opened) if !kept.contains_key(&opened) => {
            kept.insert(opened, Arc::clone(&file));
            (opened == at).then_some(file)
        }
        // A second descriptor of a kept file, or one that cannot tell which it is: open
        // for good all the same, unused.
        _ => {
            std::mem::forget(file);
            None
        }
    }
}

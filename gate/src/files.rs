//! Opening files from an untrusted directory: the one place the gate touches the file system for a
//! package's contents.
//!
//! Every reader (the draft package, a target, the manifest, a checkpoint) comes here, so the rules
//! hold once for all of them:
//!
//! - **Regular files only.** A path is opened non-blocking and the *opened handle* is checked with
//!   `fstat`, so a FIFO, socket or device is refused without ever blocking on it, and a symlink counts
//!   only if what it resolves to is a regular file (there is no window between the check and the open).
//! - **The size is taken at open and never read past.** An endless file (a `/proc` file, a file still
//!   being appended to) yields at most the bytes it had when opened; a file found shorter than that
//!   while reading is [`FileError::Changed`], not a short read passed on as data.
//! - **Small files are read, large ones mapped** ([`Bytes`]): everyone sees one `&[u8]`.
//! - **A map never kills the process.** A file truncated while mapped would raise `SIGBUS` on the next
//!   read of a vanished page; a guard (`sigbus.rs`) turns that page into zeros and marks the map, and
//!   [`Bytes::unchanged`] then reports [`FileError::Changed`], so the zeros are never judged.
//! - **A file read is the file its name names, until the verdict.** A file is known by its identity at
//!   open (device, inode, size, modification and change time); [`RegularFile::unchanged`] proves both
//!   that the handle still has it and that the path still names that same file, so a file rewritten, or
//!   another renamed into its place, while the gate ran is [`FileError::Changed`]. A reader that needs a
//!   file's bytes twice (the checks, then the manifest's hash) takes them from the handle it opened,
//!   never from the path again.
//! - **A link is followed only where the package is** ([`Inside`]): for the manifest and every file
//!   it lists, a symbolic link counts only when it resolves inside the package directory, or, for a
//!   Hugging Face hub cache snapshot (`<cache>/snapshots/<rev>/`, whose files link into
//!   `<cache>/blobs/`), inside that cache's `blobs`. Anything else is [`FileError::Outside`], refused
//!   before it is opened and named with where it points (escaped), never with what it holds.
//! - **Errors name the path and keep kinds apart**: not found, not a regular file, too large,
//!   unreadable, changed while read, a link out of the package. No error quotes a file's contents:
//!   a file that fails to parse is named by line and byte, so a link to a credentials file cannot
//!   print the secret into a log.
//!
//! ```no_run
//! use dflash_gate::__private::files;
//! # fn main() -> Result<(), dflash_gate::FileError> {
//! let file = files::open(std::path::Path::new("pkg/model.q4nx"))?;
//! let mut prefix = [0u8; 8];
//! file.read_exact_at(0, &mut prefix)?; // a header prefix, by position
//! let bytes = file.into_bytes()?; // the whole file as one slice, mapped when large
//! let _header_len = u64::from_le_bytes(prefix);
//! assert_eq!(bytes.as_slice().len() as u64, bytes.len());
//! # Ok(()) }
//! ```

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

mod sigbus;
pub use sigbus::set_never_map;

/// The config file every package (draft or target) has, next to its weights.
pub const CONFIG_FILE: &str = "config.json";
/// The weight file a package names when it has several candidates.
pub const WEIGHT_FILE: &str = "model.q4nx";
/// What any other Q4NX weight file's name ends in.
pub const WEIGHT_EXTENSION: &str = "q4nx";

/// A name with the Q4NX extension.
pub fn is_weight_file(name: &OsStr) -> bool {
    Path::new(name)
        .extension()
        .is_some_and(|e| e == WEIGHT_EXTENSION)
}

/// Which of a directory's entries is its Q4NX weight file: `model.q4nx`, else the single `*.q4nx`.
/// The one rule for a draft package and a target alike; each words none and several its own way.
#[derive(Debug, PartialEq, Eq)]
pub enum WeightFile {
    /// Its name as the file system spells it, so a name that is not UTF-8 still opens.
    One(OsString),
    None,
    /// Several `*.q4nx` and no `model.q4nx`, in the order given: the gate does not guess.
    Many(Vec<OsString>),
}

/// Finds the weight file among `names` (a directory's entries).
pub fn weight_file(names: &[OsString]) -> WeightFile {
    if names.iter().any(|n| n == WEIGHT_FILE) {
        return WeightFile::One(WEIGHT_FILE.into());
    }
    let mut candidates: Vec<OsString> = names
        .iter()
        .filter(|n| is_weight_file(n))
        .cloned()
        .collect();
    match candidates.len() {
        0 => WeightFile::None,
        1 => WeightFile::One(candidates.remove(0)),
        _ => WeightFile::Many(candidates),
    }
}

/// Why a file from an untrusted directory could not be used. Every variant names the path.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileError {
    /// Nothing at the path (a dangling symlink too).
    NotFound { path: PathBuf },
    /// Something is there, but it is not a regular file (after following symlinks): `what` is "a
    /// directory", "a FIFO", "a socket", "a character device" or "a block device".
    NotRegular { path: PathBuf, what: &'static str },
    /// A regular file larger than the caller's cap: refused before any of it is read.
    TooLarge { path: PathBuf, len: u64, cap: u64 },
    /// The file exists but could not be opened or read (permissions, I/O error, a loop of symlinks).
    Unreadable { path: PathBuf, source: io::Error },
    /// The file changed while it was read: it became shorter than its size at open, or its size or
    /// modification time differ afterwards.
    Changed { path: PathBuf, why: String },
    /// A symbolic link that leads out of the package ([`Inside`]): `to` is where it points, as stored.
    Outside { path: PathBuf, to: PathBuf },
}

impl FileError {
    /// The path the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::NotFound { path }
            | FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::Unreadable { path, .. }
            | FileError::Changed { path, .. }
            | FileError::Outside { path, .. } => path,
        }
    }

    fn unreadable(path: &Path) -> impl FnOnce(io::Error) -> FileError + '_ {
        move |source| FileError::Unreadable {
            path: path.to_owned(),
            source,
        }
    }
}

impl FileError {
    /// What went wrong, without the path (for messages that name the file themselves).
    pub fn reason(&self) -> String {
        match self {
            FileError::NotFound { .. } => "no such file".to_owned(),
            FileError::NotRegular { what, .. } => {
                format!("is {what}, not a regular file: not read")
            }
            FileError::TooLarge { len, cap, .. } => {
                format!("{len} bytes, larger than the {cap}-byte limit: refused unread")
            }
            FileError::Unreadable { source, .. } => format!("cannot read: {source}"),
            FileError::Changed { why, .. } => format!("the file changed while it was read ({why})"),
            FileError::Outside { to, .. } => format!(
                "is a symbolic link to {}, which leads out of the package: not read (copy the file into the package, or gate the directory it points into)",
                crate::escape::os(to.as_os_str())
            ),
        }
    }
}

impl fmt::Display for FileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}",
            crate::escape::name(self.path().as_os_str()),
            self.reason()
        )
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Unreadable { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An open regular file and what `fstat` said of it at open. Reads never go past [`RegularFile::len`].
#[derive(Debug)]
pub struct RegularFile {
    file: File,
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    identity: Identity,
}

/// What tells one file from another, and a file from itself rewritten: the inode and the times the
/// kernel moves on every write (modification) and on every change of the inode (change time: a
/// `chmod`, a link, a rename of the file itself).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Opens `path` for reading if, and only if, it is a regular file (symlinks followed).
///
/// The open is non-blocking, so a FIFO with no writer cannot hang it, and the type is checked on the
/// opened handle, so nothing can be swapped in between a check and the open.
pub fn open(path: &Path) -> Result<RegularFile, FileError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => FileError::NotFound {
                path: path.to_owned(),
            },
            // Opening a socket fails with ENXIO; a directory opens read-only and is caught below.
            _ if e.raw_os_error() == Some(libc::ENXIO) => FileError::NotRegular {
                path: path.to_owned(),
                what: "a socket or a device with no driver",
            },
            _ => FileError::Unreadable {
                path: path.to_owned(),
                source: e,
            },
        })?;
    let meta = file.metadata().map_err(FileError::unreadable(path))?;
    if let Some(what) = not_regular(meta.file_type()) {
        return Err(FileError::NotRegular {
            path: path.to_owned(),
            what,
        });
    }
    Ok(RegularFile {
        file,
        path: path.to_owned(),
        len: meta.len(),
        modified: meta.modified().ok(),
        identity: Identity::of(&meta),
    })
}

/// What a file that is not a regular file is, for a message ("a directory", "a FIFO", ...): `None`
/// for a regular file. Every reader that refuses one by kind names it through here.
pub fn not_regular(kind: std::fs::FileType) -> Option<&'static str> {
    if kind.is_file() {
        return None;
    }
    Some(if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "not a file"
    })
}

/// A file read and closed: its path and its identity at open (see [`RegularFile::seen`]).
#[derive(Clone, Debug)]
pub struct Seen {
    path: PathBuf,
    identity: Identity,
}

impl Seen {
    /// Whether the path still names the file that was read, as it was read (device, inode, size,
    /// modification and change time): another file renamed into its place, or the file rewritten or
    /// removed, is [`FileError::Changed`].
    pub fn unchanged(&self) -> Result<(), FileError> {
        let changed = |why: String| FileError::Changed {
            path: self.path.clone(),
            why,
        };
        let named = match std::fs::metadata(&self.path) {
            Ok(now) => now,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(changed("it was removed while it was read".to_owned()))
            }
            Err(e) => return Err(FileError::unreadable(&self.path)(e)),
        };
        if (named.dev(), named.ino()) != (self.identity.dev, self.identity.ino) {
            return Err(changed(format!(
                "another file was put in its place while it was read (inode {} at open, {} now)",
                self.identity.ino,
                named.ino()
            )));
        }
        if Identity::of(&named) != self.identity {
            return Err(changed("modified since it was opened".to_owned()));
        }
        Ok(())
    }
}

/// The directories a package's symbolic links may lead into: the package directory, and for a hub
/// cache snapshot `<cache>/snapshots/<rev>/` also `<cache>/blobs/` (where the hub client keeps every
/// file, named by digest, and links each snapshot's names to). A link anywhere else (an absolute path,
/// `../` out of the package, into another snapshot's directory or another cache) is refused: the
/// package is what the directory holds, not whatever its links reach.
#[derive(Debug)]
pub struct Inside {
    roots: Vec<PathBuf>,
}

impl Inside {
    /// The roots for package directory `dir` (resolved: a package reached through a link is judged
    /// where it is). For a hub cache snapshot, every step from its repository to the snapshot and to
    /// `blobs` must stay inside the repository ([`stays_in`]): a `blobs` (or `snapshots`, or snapshot)
    /// that is a link out of it is refused here, before any file is opened, where its links would
    /// otherwise each resolve into a root that is not the repository's.
    pub fn package(dir: &Path) -> Result<Inside, FileError> {
        let root = std::fs::canonicalize(dir).map_err(FileError::unreadable(dir))?;
        let mut roots = vec![root.clone()];
        let in_snapshots = |p: &Path| -> Option<PathBuf> {
            p.parent()
                .filter(|snapshots| snapshots.file_name().is_some_and(|n| n == "snapshots"))
                .and_then(Path::parent)
                .map(Path::to_owned)
        };
        // The repository as the path names it, else as the resolved snapshot lies in one.
        let Some(repo) = in_snapshots(dir).or_else(|| in_snapshots(&root)) else {
            return Ok(Inside { roots });
        };
        let home = std::fs::canonicalize(&repo).map_err(FileError::unreadable(&repo))?;
        stays_in(&home, &repo.join("snapshots"))?;
        stays_in(&home, dir)?;
        let blobs = repo.join("blobs");
        stays_in(&home, &blobs)?;
        if let Ok(blobs) = std::fs::canonicalize(&blobs) {
            roots.push(blobs);
        }
        Ok(Inside { roots })
    }

    /// Refuses a link at `path` that resolves outside the roots, before anything is opened. A plain
    /// name passes; so does a link that leads to nothing (opening it then says "no such file").
    fn check(&self, path: &Path) -> Result<Option<PathBuf>, FileError> {
        let is_link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            return Ok(None);
        }
        let target = match std::fs::canonicalize(path) {
            Ok(target) => target,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(FileError::unreadable(path)(e)),
        };
        if self.roots.iter().any(|root| target.starts_with(root)) {
            return Ok(Some(target));
        }
        Err(FileError::Outside {
            path: path.to_owned(),
            to: std::fs::read_link(path).unwrap_or(target),
        })
    }

    /// Whether `path` (a directory or file named in the package, links on the way followed) resolves
    /// inside the roots: where a reader may look at what it holds.
    pub fn holds(&self, path: &Path) -> bool {
        std::fs::canonicalize(path)
            .is_ok_and(|real| self.roots.iter().any(|root| real.starts_with(root)))
    }

    /// Opens `path` (a name in the package) under the link rule: see [`Inside::admits`].
    pub fn open(&self, path: &Path) -> Result<RegularFile, FileError> {
        self.check(path)?;
        let file = open(path)?;
        self.admits(&file)?;
        Ok(file)
    }

    /// Whether `file`, opened by a name in the package, is allowed by the link rule: its name resolves
    /// inside the roots, to the very file the handle has (a link repointed between the check and the
    /// open is [`FileError::Changed`]).
    pub fn admits(&self, file: &RegularFile) -> Result<(), FileError> {
        let Some(target) = self.check(&file.path)? else {
            return Ok(());
        };
        match std::fs::metadata(&target) {
            Ok(m) if (m.dev(), m.ino()) == (file.identity.dev, file.identity.ino) => Ok(()),
            _ => Err(file.changed("the link was repointed while it was opened".to_owned())),
        }
    }
}

/// Whether `step`, a path under the directory whose resolved path is `home` (a hub cache
/// repository), resolves inside it: a link on the way that leads out is [`FileError::Outside`],
/// refused before anything it reaches is read. Callers hold each step of a path in turn (`refs`, then
/// `refs/main`), so the step refused is the link that leaves. A step that is not there passes: its
/// reader then says what is missing.
pub fn stays_in(home: &Path, step: &Path) -> Result<(), FileError> {
    match std::fs::canonicalize(step) {
        Ok(real) if real.starts_with(home) => Ok(()),
        Ok(real) => Err(FileError::Outside {
            path: step.to_owned(),
            to: std::fs::read_link(step).unwrap_or(real),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(FileError::unreadable(step)(e)),
    }
}

/// Reads a whole regular file of at most `cap` bytes; a larger one is [`FileError::TooLarge`], unread.
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, FileError> {
    open(path)?.read_all(cap)
}

/// How many maps the `SIGBUS` guard can hold at once, for the whole process: past them,
/// [`RegularFile::into_bytes`] reads a large file into memory instead of mapping it. Readers that hold
/// several maps at once (a checkpoint's shards) bound their number by this.
pub const GUARDED_MAPS: usize = sigbus::SLOTS;

/// Files smaller than this are read into memory rather than mapped (a zero-length file cannot be
/// mapped, and a page or two is cheaper to copy than to map).
pub const READ_BELOW: u64 = 1 << 16;

impl RegularFile {
    /// The size `fstat` gave at open: nothing past it is ever read.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file was empty at open.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn changed(&self, why: String) -> FileError {
        FileError::Changed {
            path: self.path.clone(),
            why,
        }
    }

    /// Fills `buf` from byte `offset` (a positioned read: the handle has no cursor to share). A range
    /// past the size at open is refused without reading; a file that ended early is
    /// [`FileError::Changed`].
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), FileError> {
        let end = offset.checked_add(buf.len() as u64);
        if end.is_none_or(|end| end > self.len) {
            return Err(FileError::Unreadable {
                path: self.path.clone(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "bytes {offset}..+{} are past the end of the {}-byte file",
                        buf.len(),
                        self.len
                    ),
                ),
            });
        }
        self.file.read_exact_at(buf, offset).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                self.changed(format!(
                    "it ended before byte {}",
                    offset + buf.len() as u64
                ))
            } else {
                FileError::unreadable(&self.path)(e)
            }
        })
    }

    /// Reads the whole file (exactly its size at open) if that is at most `cap` bytes.
    pub fn read_all(&self, cap: u64) -> Result<Vec<u8>, FileError> {
        if self.len > cap {
            return Err(FileError::TooLarge {
                path: self.path.clone(),
                len: self.len,
                cap,
            });
        }
        self.read_whole()
    }

    /// Streams the whole file (exactly its size at open) through `buffer`, handing each chunk to
    /// `sink`; returns the bytes read. For hashing files of any size in constant memory. Reads are
    /// positioned, so a handle already read (the checks' own) streams from its first byte again.
    pub fn read_chunks(
        &self,
        buffer: &mut [u8],
        mut sink: impl FnMut(&[u8]),
    ) -> Result<u64, FileError> {
        let mut total = 0u64;
        while total < self.len {
            let want = buffer
                .len()
                .min(usize::try_from(self.len - total).unwrap_or(usize::MAX));
            let n = match self.file.read_at(&mut buffer[..want], total) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(FileError::unreadable(&self.path)(e)),
            };
            if n == 0 {
                break;
            }
            sink(&buffer[..n]);
            total += n as u64;
        }
        if total < self.len {
            return Err(self.changed(format!("{} bytes at open, {total} read", self.len)));
        }
        Ok(total)
    }

    /// Whether the file is still the one opened, as it was: the handle has its size, modification and
    /// change time at open, and the path still names that same file (device and inode). Call it after
    /// reading, so a file rewritten, or another renamed into its place, meanwhile is reported rather
    /// than judged: what was read must be what the name holds when the verdict is given.
    pub fn unchanged(&self) -> Result<(), FileError> {
        let meta = self
            .file
            .metadata()
            .map_err(FileError::unreadable(&self.path))?;
        if meta.len() != self.len {
            return Err(self.changed(format!("{} bytes at open, {} now", self.len, meta.len())));
        }
        // The name first: a file replaced by a rename also has its change time moved (it lost a link).
        self.seen().unchanged()?;
        if meta.modified().ok() != self.modified || Identity::of(&meta) != self.identity {
            return Err(self.changed("modified since it was opened".to_owned()));
        }
        Ok(())
    }

    /// What tells this file apart, kept after the handle is closed: a reader that reads many files
    /// and holds none (a target's shard headers) proves with [`Seen::unchanged`], once it has read
    /// them all, that they were all there together as read.
    pub fn seen(&self) -> Seen {
        Seen {
            path: self.path.clone(),
            identity: self.identity,
        }
    }

    /// The whole file as one slice: read when smaller than [`READ_BELOW`], mapped (under the
    /// `SIGBUS` guard) otherwise. Should the guard be unavailable, the file is read instead: a map
    /// that could kill the process is never handed out.
    pub fn into_bytes(self) -> Result<Bytes, FileError> {
        if self.len < READ_BELOW {
            let held = Held::Read(self.read_whole()?);
            return Ok(Bytes { held, file: self });
        }
        let map = map(&self.file).map_err(FileError::unreadable(&self.path))?;
        if map.len() as u64 != self.len {
            return Err(self.changed(format!("{} bytes at open, {} mapped", self.len, map.len())));
        }
        let held = match sigbus::register(map.as_ptr(), map.len()) {
            Some(registration) => Held::Mapped(Guarded { registration, map }),
            None => {
                drop(map);
                Held::Read(self.read_whole()?)
            }
        };
        Ok(Bytes { held, file: self })
    }

    /// Reads exactly the size at open; callers bound that size first (a cap, or [`READ_BELOW`]).
    fn read_whole(&self) -> Result<Vec<u8>, FileError> {
        let mut bytes = Vec::with_capacity(self.len as usize);
        (&self.file)
            .take(self.len)
            .read_to_end(&mut bytes)
            .map_err(FileError::unreadable(&self.path))?;
        if (bytes.len() as u64) < self.len {
            return Err(self.changed(format!("{} bytes at open, {} read", self.len, bytes.len())));
        }
        Ok(bytes)
    }
}

/// A whole file's bytes, mapped when large and read when small, with the handle they came from (so
/// the caller can ask, after using them, whether the file changed meanwhile).
pub struct Bytes {
    held: Held,
    file: RegularFile,
}

enum Held {
    Mapped(Guarded),
    Read(Vec<u8>),
}

/// A map and its registration with the `SIGBUS` guard. Fields drop in order: the registration is
/// withdrawn before the map is unmapped.
struct Guarded {
    registration: sigbus::Registration,
    map: memmap2::Mmap,
}

/// Opens `path` as a regular file and holds its bytes: [`open`] then [`RegularFile::into_bytes`].
pub fn bytes(path: &Path) -> Result<Bytes, FileError> {
    open(path)?.into_bytes()
}

impl Bytes {
    pub fn as_slice(&self) -> &[u8] {
        match &self.held {
            Held::Mapped(g) => &g.map,
            Held::Read(v) => v,
        }
    }

    /// The size at open, which is the slice's length.
    pub fn len(&self) -> u64 {
        self.file.len
    }

    pub fn is_empty(&self) -> bool {
        self.file.len == 0
    }

    /// The open file they came from.
    pub fn file(&self) -> &RegularFile {
        &self.file
    }

    /// Whether these bytes are still the file's: no read of the map met a truncated page, and the
    /// file has its size and modification time at open (see [`RegularFile::unchanged`]). Call it after
    /// using the bytes and before trusting any conclusion drawn from them.
    pub fn unchanged(&self) -> Result<(), FileError> {
        if let Held::Mapped(g) = &self.held {
            if g.registration.faulted() {
                return Err(self.file.changed(
                    "it was truncated while mapped: the pages past its new end read as zeros"
                        .to_owned(),
                ));
            }
        }
        self.file.unchanged()
    }
}

/// The one memory map of the gate.
fn map(file: &File) -> io::Result<memmap2::Mmap> {
    // SAFETY: the map is read-only, of a regular file, and lives no longer than its `Bytes`. Its
    // contents may change under us if another process writes the file: the gate then judges bytes that
    // are not the file's, which `Bytes::unchanged` (size, modification time, faulted pages) reports
    // afterwards. A truncation makes pages past the new end fault with SIGBUS: the map is registered
    // with the guard in `sigbus.rs` before any read, which turns such a page into zeros. Every offset
    // is checked against the length taken at map time, so no read leaves the mapping.
    unsafe { memmap2::Mmap::map(file) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_weight_file_is_model_q4nx_else_the_only_q4nx() {
        let names = |n: &[&str]| n.iter().map(OsString::from).collect::<Vec<_>>();
        let one = |n: &str| WeightFile::One(n.into());
        let both = names(&["a.q4nx", "config.json", "model.q4nx"]);
        assert_eq!(weight_file(&both), one("model.q4nx"));
        assert_eq!(weight_file(&names(&["b.q4nx", "x.json"])), one("b.q4nx"));
        assert_eq!(
            weight_file(&names(&["q4nx", "a.q4nx.bak"])),
            WeightFile::None
        );
        let many = names(&["a.q4nx", "b.q4nx"]);
        assert_eq!(weight_file(&many), WeightFile::Many(many.clone()));
    }

    fn temp() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn reads_small_and_maps_large_files_as_one_slice() {
        let dir = temp();
        for len in [0usize, 5, READ_BELOW as usize + 3] {
            let path = dir.path().join(format!("f{len}"));
            let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
            std::fs::write(&path, &data).unwrap();
            let bytes = bytes(&path).unwrap();
            assert_eq!(bytes.as_slice(), &data[..]);
            assert_eq!(bytes.len(), len as u64);
            bytes.unchanged().unwrap();
        }
    }

    #[test]
    fn refuses_what_is_not_a_regular_file_by_kind() {
        let dir = temp();
        let missing = dir.path().join("missing");
        assert!(matches!(open(&missing), Err(FileError::NotFound { .. })));
        let sub = dir.path().join("sub");
        std::fs::create_dir(&sub).unwrap();
        let e = open(&sub).unwrap_err();
        assert!(
            matches!(
                e,
                FileError::NotRegular {
                    what: "a directory",
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("sub: is a directory"), "{e}");
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open(&fifo).unwrap_err();
        assert!(
            matches!(e, FileError::NotRegular { what: "a FIFO", .. }),
            "{e}"
        );
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&fifo, &link).unwrap();
        assert!(matches!(
            open(&link),
            Err(FileError::NotRegular { what: "a FIFO", .. })
        ));
        let dangling = dir.path().join("dangling");
        std::os::unix::fs::symlink(&missing, &dangling).unwrap();
        assert!(matches!(open(&dangling), Err(FileError::NotFound { .. })));
        assert!(matches!(
            open(Path::new("/dev/null")),
            Err(FileError::NotRegular {
                what: "a character device",
                ..
            })
        ));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn never_reads_past_the_size_at_open() {
        // /proc files say they are empty and then produce bytes: the size at open wins.
        let file = open(Path::new("/proc/self/status")).unwrap();
        assert_eq!(file.len(), 0);
        assert_eq!(file.read_all(1 << 20).unwrap(), Vec::<u8>::new());
        let file = open(Path::new("/proc/self/status")).unwrap();
        let mut seen = 0;
        file.read_chunks(&mut [0u8; 64], |c| seen += c.len())
            .unwrap();
        assert_eq!(seen, 0);
    }

    #[test]
    fn a_map_truncated_under_the_reader_reads_zeros_and_is_changed_not_a_signal() {
        let dir = temp();
        for (len, cut) in [(READ_BELOW as usize * 4, 0u64), (3 << 20, 4097)] {
            let path = dir.path().join(format!("big{len}"));
            std::fs::write(&path, vec![0xa5u8; len]).unwrap();
            let bytes = bytes(&path).unwrap();
            assert!(matches!(bytes.held, Held::Mapped(_)));
            bytes.unchanged().unwrap();
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(cut)
                .unwrap();
            // Without the guard this loop dies by SIGBUS at the first page past `cut`.
            let sum: u64 = bytes.as_slice().iter().map(|&b| u64::from(b)).sum();
            assert!(sum < 0xa5 * len as u64, "pages past the cut read as zeros");
            let e = bytes.unchanged().unwrap_err();
            assert!(e.to_string().contains("truncated while mapped"), "{e}");
        }
        // The slot is free again, and the guard is not left armed for a later map of the same range.
        let path = dir.path().join("again");
        std::fs::write(&path, vec![1u8; READ_BELOW as usize]).unwrap();
        bytes(&path).unwrap().unchanged().unwrap();
    }

    #[test]
    fn a_file_read_is_the_file_its_name_holds_until_it_is_asked() {
        let dir = temp();
        let path = dir.path().join("f");
        std::fs::write(&path, b"read").unwrap();
        let file = open(&path).unwrap();
        let seen = file.seen();
        file.unchanged().unwrap();
        seen.unchanged().unwrap();
        // Another file renamed into its place: the handle still reads the first, the name does not.
        let other = dir.path().join("other");
        std::fs::write(&other, b"read").unwrap();
        std::fs::rename(&other, &path).unwrap();
        for e in [file.unchanged().unwrap_err(), seen.unchanged().unwrap_err()] {
            assert!(
                e.to_string()
                    .contains("changed while it was read (another file was put in its place"),
                "{e}"
            );
        }
        std::fs::remove_file(&path).unwrap();
        let e = seen.unchanged().unwrap_err();
        assert!(e.to_string().contains("removed while it was read"), "{e}");
        // Rewritten in place, same size: the times moved.
        std::fs::write(&path, b"read").unwrap();
        let file = open(&path).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"READ").unwrap();
        let e = file.unchanged().unwrap_err();
        assert!(
            e.to_string().contains("modified since it was opened"),
            "{e}"
        );
    }

    /// Set in the child process [`the_guard_is_never_trusted_once_gone`] starts.
    const GUARD_CHILD: &str = "DFLASH_GATE_SIGBUS_GUARD_CHILD";
    static HOST_SIGNALS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    /// A host's `SIGBUS` handler: it counts a signal sent to it and ends the process, with the status
    /// `code` names, at a fault (which only an unguarded map would let reach it).
    extern "C" fn host(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
        if unsafe { (*info).si_code } > 0 {
            // SAFETY: _exit is async-signal-safe.
            unsafe { libc::_exit(42) };
        }
        HOST_SIGNALS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// Another host's handler, installed over the guard: a fault reaching it ends the process with 43.
    extern "C" fn other_host(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: _exit is async-signal-safe.
        unsafe { libc::_exit(43) };
    }

    fn install_host(handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void)) {
        // SAFETY: a zeroed sigaction filled in with an SA_SIGINFO handler of that signature.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = handler as *const () as usize;
            action.sa_flags = libc::SA_SIGINFO;
            libc::sigemptyset(&mut action.sa_mask);
            assert_eq!(
                libc::sigaction(libc::SIGBUS, &action, std::ptr::null_mut()),
                0
            );
        }
    }

    /// Maps a large file, truncates it, reads every byte: alive afterwards, and told it changed.
    fn truncate_while_held(dir: &Path, name: &str) -> Bytes {
        let path = dir.join(name);
        std::fs::write(&path, vec![0xa5u8; READ_BELOW as usize * 4]).unwrap();
        let bytes = bytes(&path).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(0)
            .unwrap();
        std::hint::black_box(bytes.as_slice().iter().map(|&b| u64::from(b)).sum::<u64>());
        let e = bytes.unchanged().unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        bytes
    }

    /// Runs in a process of its own (it changes the process's `SIGBUS` action): the guard put aside by
    /// a signal that was not its own is installed again for the next map, and a guard a host's
    /// handler replaced is not trusted (the file is read instead).
    #[test]
    #[ignore = "run by the_guard_is_never_trusted_once_gone, in a process of its own"]
    fn guard_child() {
        assert!(
            std::env::var_os(GUARD_CHILD).is_some(),
            "run it through its parent test"
        );
        let dir = temp();
        install_host(host);
        assert!(matches!(
            truncate_while_held(dir.path(), "first").held,
            Held::Mapped(_)
        ));
        // A signal that is not the guard's goes to the host, and the guard steps aside for it.
        // SAFETY: raise has no preconditions; the host's handler returns.
        assert_eq!(unsafe { libc::raise(libc::SIGBUS) }, 0);
        assert_eq!(HOST_SIGNALS.load(std::sync::atomic::Ordering::SeqCst), 1);
        // The next map is guarded again (without the guard, the host's handler ends the process).
        assert!(matches!(
            truncate_while_held(dir.path(), "second").held,
            Held::Mapped(_)
        ));
        // A host that installs its own handler over the guard keeps it: the file is read, not mapped.
        install_host(other_host);
        assert!(matches!(
            truncate_while_held(dir.path(), "third").held,
            Held::Read(_)
        ));
    }

    #[test]
    fn the_guard_is_never_trusted_once_gone() {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--ignored",
                "--exact",
                "files::tests::guard_child",
                "--test-threads=1",
            ])
            .env(GUARD_CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "the child ended with {:?}: a map was read unguarded (42, 43: a host's handler saw the fault)\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn a_cap_refuses_unread_and_a_shrunk_file_is_changed() {
        let dir = temp();
        let path = dir.path().join("f");
        std::fs::write(&path, [7u8; 100]).unwrap();
        let e = read_capped(&path, 99).unwrap_err();
        assert!(
            matches!(
                e,
                FileError::TooLarge {
                    len: 100,
                    cap: 99,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(read_capped(&path, 100).unwrap().len(), 100);
        let file = open(&path).unwrap();
        let mut buf = [0u8; 8];
        file.read_exact_at(92, &mut buf).unwrap();
        assert!(file.read_exact_at(93, &mut buf).is_err());
        assert!(file.read_exact_at(u64::MAX, &mut buf).is_err());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(50)
            .unwrap();
        let e = file.read_exact_at(60, &mut buf).unwrap_err();
        assert!(matches!(e, FileError::Changed { .. }), "{e}");
        assert!(matches!(file.unchanged(), Err(FileError::Changed { .. })));
        let e = file.read_all(1000).unwrap_err();
        assert!(e.to_string().contains("changed while it was read"), "{e}");
    }
}

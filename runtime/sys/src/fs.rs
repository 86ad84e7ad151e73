//! Replacing a file whole: the new contents go to a temporary file beside it, which is renamed
//! over it, so a reader sees the old contents or the new, never half of either.
//!
//! The one implementation for objects, repos, the pool and the kernel's own files; they differ
//! only in whether the write must survive a power cut ([`Durability`]). Also [`private_dir`]:
//! the directories under a shared `/tmp` that only their user may touch.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Makes `path` a directory only this user may enter (mode 0700), or checks that the one there
/// is: a directory (not a link) that this user owns. One that another user owns is refused; in
/// a shared `/tmp` whoever makes it first would otherwise choose what the kernel loads and
/// where its output goes. A directory of ours with a wider mode (an older version made it
/// 0755) is narrowed. The parent must exist.
pub fn private_dir(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = std::fs::symlink_metadata(path)?;
    let uid = unsafe { libc::getuid() };
    if !meta.is_dir() || meta.uid() != uid {
        let what = if meta.is_dir() { format!("owned by uid {}", meta.uid()) } else { "not a directory".into() };
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} is {what}, not a private directory of uid {uid}: refusing to use it (remove it)",
                path.display()
            ),
        ));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Whether a write must be on disk when it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// fsync the file before the rename and its directory after: objects and repos, which must
    /// outlive a crash of the machine.
    Fsync,
    /// Rename only: files that matter while their processes live (the pool, kernel scratch
    /// files), where an fsync would cost milliseconds for nothing.
    NoFsync,
}

/// Replaces `path` with `bytes`: readers see the old contents or the new, never half of either.
/// The temporary file is removed when anything fails; the directory must exist.
pub fn write_atomic(path: &Path, bytes: &[u8], durability: Durability) -> io::Result<()> {
    let durable = durability == Durability::Fsync;
    Staged::new(path, bytes, durable)?.commit()?;
    if durable {
        sync_dir(path)?;
    }
    Ok(())
}

/// A file written beside its target but not yet renamed over it, for callers that write many
/// files and then sync once (`Repo::add_many`). Dropped before [`Staged::commit`], it is removed.
#[derive(Debug)]
pub struct Staged {
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl Staged {
    /// Writes `bytes` to a new temporary file in `path`'s directory; with `fsync`, syncs it
    /// before closing (the descriptor is not kept, so staging many files holds none open).
    pub fn new(path: &Path, bytes: &[u8], fsync: bool) -> io::Result<Staged> {
        let staged = Staged { tmp: tmp_name(path), target: path.to_path_buf(), committed: false };
        let mut f = std::fs::File::create(&staged.tmp)?;
        f.write_all(bytes)?;
        if fsync {
            f.sync_all()?;
        }
        Ok(staged)
    }

    /// The path the file will replace.
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Renames the file over its target.
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Syncs the directory that holds `path`, so a rename into it is on disk.
pub fn sync_dir(path: &Path) -> io::Result<()> {
    std::fs::File::open(parent(path))?.sync_all()
}

/// `path`'s directory (`.` for a bare name).
fn parent(path: &Path) -> &Path {
    path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."))
}

/// A hidden name beside `path` that no concurrent writer uses: the pid separates processes;
/// the thread id separates threads even across evcxr cells, each of which has its own copy of
/// this crate and so of the counter; the counter separates one thread's staged files.
fn tmp_name(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let tid = unsafe { libc::gettid() };
    parent(path).join(format!(".{name}.tmp-{}-{tid}-{n}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> PathBuf {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let d = std::env::temp_dir().join(format!("dryml-fs-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn private_dirs_are_made_owner_only_and_foreign_ones_refused() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let tmp = dir();
        let made = tmp.join("made");
        private_dir(&made).unwrap();
        assert_eq!(std::fs::metadata(&made).unwrap().mode() & 0o777, 0o700);
        // Ours but too open (an older version's 0755): narrowed.
        let open = tmp.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        private_dir(&open).unwrap();
        assert_eq!(std::fs::metadata(&open).unwrap().mode() & 0o777, 0o700);
        // A link to a directory is not the directory.
        let link = tmp.join("link");
        std::os::unix::fs::symlink(&made, &link).unwrap();
        let e = private_dir(&link).unwrap_err();
        assert!(e.to_string().contains("not a directory"), "{e}");
        // Another user's (only root can make one to test with).
        if unsafe { libc::getuid() } == 0 {
            let foreign = tmp.join("foreign");
            std::fs::create_dir(&foreign).unwrap();
            std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();
            let e = private_dir(&foreign).unwrap_err();
            assert!(e.to_string().contains("owned by uid 65534"), "{e}");
        }
    }

    #[test]
    fn replaces_whole_and_leaves_no_temporary_file() {
        let d = dir();
        let p = d.join("f");
        for durability in [Durability::Fsync, Durability::NoFsync] {
            write_atomic(&p, b"old", durability).unwrap();
            write_atomic(&p, b"new contents", durability).unwrap();
            assert_eq!(std::fs::read(&p).unwrap(), b"new contents");
            assert_eq!(names(&d), ["f"]);
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn readers_never_see_half_a_file() {
        let d = dir();
        let p = d.join("f");
        let (a, b) = (vec![b'a'; 1 << 20], vec![b'b'; 1 << 20]);
        write_atomic(&p, &a, Durability::NoFsync).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (p, a, b, stop) = (p.clone(), a.clone(), b.clone(), stop.clone());
            std::thread::spawn(move || {
                for i in 0..50 {
                    write_atomic(&p, if i % 2 == 0 { &b } else { &a }, Durability::NoFsync).unwrap();
                }
                stop.store(true, Ordering::SeqCst);
            })
        };
        while !stop.load(Ordering::SeqCst) {
            let got = std::fs::read(&p).unwrap();
            assert!(got == a || got == b, "a torn read of {} bytes", got.len());
        }
        writer.join().unwrap();
        assert_eq!(names(&d), ["f"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error_and_an_uncommitted_file_goes() {
        let d = dir();
        let e = write_atomic(&d.join("no").join("f"), b"x", Durability::Fsync).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        // A failed rename (onto a directory) keeps the target and removes the temporary file.
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub").join("x"), "").unwrap();
        assert!(write_atomic(&d.join("sub"), b"x", Durability::NoFsync).is_err());
        let staged = Staged::new(&d.join("g"), b"x", false).unwrap();
        assert_eq!(staged.target(), d.join("g"));
        assert_eq!(names(&d).len(), 2);
        drop(staged);
        assert_eq!(names(&d), ["sub"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn two_staged_files_for_one_target_do_not_share_a_name() {
        let d = dir();
        let (x, y) = (Staged::new(&d.join("f"), b"1", false).unwrap(), Staged::new(&d.join("f"), b"2", false).unwrap());
        assert_eq!(names(&d).len(), 2);
        x.commit().unwrap();
        y.commit().unwrap();
        assert_eq!(std::fs::read(d.join("f")).unwrap(), b"2");
        assert_eq!(names(&d), ["f"]);
        std::fs::remove_dir_all(&d).unwrap();
    }
}

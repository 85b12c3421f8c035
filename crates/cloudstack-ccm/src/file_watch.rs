//! Following files the controller manager reads again while it runs (the cloud-config and
//! its `ca-file`, the serving certificate and key): inotify on the directories that hold
//! them, so that a change is read at once and nothing wakes the process while nothing
//! changes, and a slow re-read besides, for what inotify cannot see.
//!
//! The directory is watched, not the file: kubelet updates a mounted Secret by swapping
//! the `..data` symlink in the mount's directory (a rename there), a rewrite in place is a
//! change of a file in it, and a file renamed over the path is a rename into it. A path
//! that is a symlink elsewhere has the directory of its target watched too. A directory
//! that is itself replaced, or a watch the system's limits refuse, is not seen by inotify:
//! [`SLOW_REREAD`] covers both. Where inotify cannot be set up at all, the files are read
//! at the fallback interval the caller gives, as before inotify.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures::StreamExt;
use inotify::{EventStream, Inotify, WatchMask};

/// How often the files are read besides inotify's events.
pub const SLOW_REREAD: Duration = Duration::from_secs(60);

/// The quiet time after an event before the files are read: a rewrite in place comes as
/// several events (truncate, writes, close), and a read in the middle of them would see
/// half a file.
const SETTLE: Duration = Duration::from_millis(50);

/// What a directory watch reports: any entry created, changed, renamed or removed.
const EVENTS: WatchMask = WatchMask::CREATE
    .union(WatchMask::MODIFY)
    .union(WatchMask::CLOSE_WRITE)
    .union(WatchMask::MOVED_TO)
    .union(WatchMask::MOVED_FROM)
    .union(WatchMask::DELETE)
    .union(WatchMask::ATTRIB);

/// The moments to read a set of files again: after a change inotify reported in one of
/// their directories, and at an interval.
pub struct FileChanges {
    events: Option<EventStream<[u8; 1024]>>,
    paths: Vec<PathBuf>,
    ticker: tokio::time::Interval,
    fallback: Duration,
}

impl FileChanges {
    /// Follows `paths`. With inotify the interval is [`SLOW_REREAD`]; without it (it
    /// cannot be set up: a log line says why) it is `fallback`. Must run inside the
    /// runtime.
    pub fn new(paths: Vec<PathBuf>, fallback: Duration) -> Self {
        let events = match Inotify::init().and_then(|inotify| inotify.into_event_stream([0; 1024]))
        {
            Ok(events) => Some(events),
            Err(error) => {
                tracing::info!(%error, "inotify is not available: files are read every {fallback:?}");
                None
            }
        };
        let period = if events.is_some() {
            SLOW_REREAD
        } else {
            fallback
        };
        let mut changes = FileChanges {
            events,
            paths: Vec::new(),
            ticker: ticker(period),
            fallback,
        };
        changes.follow(paths);
        changes
    }

    /// Follows `paths` from now on (a cloud-config may name another `ca-file`).
    pub fn follow(&mut self, paths: Vec<PathBuf>) {
        self.paths = paths;
        self.watch_directories();
    }

    /// Whether inotify reports the changes (else only the interval does).
    pub fn has_events(&self) -> bool {
        self.events.is_some()
    }

    /// Waits until the files should be read again: a change in one of their directories
    /// (once its events have settled), or the interval.
    pub async fn next(&mut self) {
        let Some(events) = self.events.as_mut() else {
            self.ticker.tick().await;
            return;
        };
        tokio::select! {
            _ = self.ticker.tick() => {}
            event = events.next() => {
                if let Err(error) = event.transpose().and_then(|event| {
                    event.ok_or_else(|| std::io::Error::other("the inotify descriptor ended"))
                }) {
                    self.without_events(&error);
                    return;
                }
                // Whatever else arrives before a quiet `SETTLE` belongs to this change.
                while let Ok(Some(Ok(_))) = tokio::time::timeout(SETTLE, events.next()).await {}
            }
        }
        // A swapped symlink may point into another directory now.
        self.watch_directories();
    }

    /// Goes on without inotify, reading the files at the fallback interval.
    fn without_events(&mut self, error: &std::io::Error) {
        tracing::warn!(%error, "inotify failed: files are read every {:?} from now on", self.fallback);
        self.events = None;
        self.ticker = ticker(self.fallback);
    }

    /// Adds a watch on each directory that holds a followed file or its symlink's target
    /// (adding one again is a no-op to inotify).
    fn watch_directories(&mut self) {
        let Some(events) = self.events.as_ref() else {
            return;
        };
        let mut watches = events.watches();
        for directory in directories(&self.paths) {
            if let Err(error) = watches.add(&directory, EVENTS) {
                tracing::debug!(%error, directory = %directory.display(), "cannot watch the directory; it is read every {SLOW_REREAD:?}");
            }
        }
    }
}

/// An interval of `period` whose first tick is one `period` from now.
fn ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker
}

/// The directories whose entries decide what `paths` read: each path's own directory, and
/// that of the file it resolves to when it is a symlink.
fn directories(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut directories: Vec<PathBuf> = Vec::new();
    for path in paths {
        let resolved = std::fs::canonicalize(path).ok();
        for file in std::iter::once(path.as_path()).chain(resolved.as_deref()) {
            let directory = parent(file);
            if !directories.contains(&directory) {
                directories.push(directory);
            }
        }
    }
    directories
}

/// The directory of `file` (`.` for a bare file name).
fn parent(file: &Path) -> PathBuf {
    match file.parent() {
        Some(directory) if !directory.as_os_str().is_empty() => directory.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// Long enough that only an inotify event can end a wait in these tests.
    const NEVER: Duration = Duration::from_secs(3600);
    /// How long a test waits for an event it expects.
    const EXPECTED_WITHIN: Duration = Duration::from_secs(10);

    async fn seen(changes: &mut FileChanges) -> bool {
        tokio::time::timeout(EXPECTED_WITHIN, changes.next())
            .await
            .is_ok()
    }

    async fn quiet(changes: &mut FileChanges) -> bool {
        tokio::time::timeout(Duration::from_millis(300), changes.next())
            .await
            .is_err()
    }

    #[tokio::test]
    async fn a_rewrite_in_place_and_a_rename_over_the_file_are_seen() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cloud-config");
        std::fs::write(&file, "[Global]\n").unwrap();
        let mut changes = FileChanges::new(vec![file.clone()], NEVER);
        assert!(changes.has_events(), "inotify is available on Linux");
        assert!(quiet(&mut changes).await, "nothing changed yet");

        std::fs::write(&file, "[Global]\napi-key = new\n").unwrap();
        assert!(seen(&mut changes).await, "a rewrite in place");
        assert!(quiet(&mut changes).await, "one change is one wake-up");

        let staged = dir.path().join(".cloud-config.tmp");
        std::fs::write(&staged, "[Global]\napi-key = newer\n").unwrap();
        std::fs::rename(&staged, &file).unwrap();
        assert!(seen(&mut changes).await, "a rename over the file");
    }

    #[tokio::test]
    async fn a_secret_volumes_data_swap_is_seen() {
        // kubelet's layout: <mount>/cloud-config -> ..data/cloud-config,
        // ..data -> ..<timestamp>; an update writes a new ..<timestamp> directory and
        // renames a new ..data symlink over the old one.
        let mount = tempfile::tempdir().unwrap();
        let first = mount.path().join("..2026_12_07_10_00_00.1");
        std::fs::create_dir(&first).unwrap();
        std::fs::write(first.join("cloud-config"), "[Global]\napi-key = old\n").unwrap();
        symlink("..2026_12_07_10_00_00.1", mount.path().join("..data")).unwrap();
        symlink("..data/cloud-config", mount.path().join("cloud-config")).unwrap();
        let path = mount.path().join("cloud-config");
        let mut changes = FileChanges::new(vec![path.clone()], NEVER);
        assert!(quiet(&mut changes).await);

        let second = mount.path().join("..2026_12_07_11_00_00.2");
        std::fs::create_dir(&second).unwrap();
        std::fs::write(second.join("cloud-config"), "[Global]\napi-key = new\n").unwrap();
        symlink("..2026_12_07_11_00_00.2", mount.path().join("..data_tmp")).unwrap();
        std::fs::rename(mount.path().join("..data_tmp"), mount.path().join("..data")).unwrap();
        std::fs::remove_dir_all(&first).unwrap();
        assert!(seen(&mut changes).await, "the ..data swap");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "[Global]\napi-key = new\n"
        );
    }

    #[tokio::test]
    async fn a_change_of_a_symlinks_target_in_another_directory_is_seen() {
        let target_dir = tempfile::tempdir().unwrap();
        let link_dir = tempfile::tempdir().unwrap();
        let target = target_dir.path().join("ca.pem");
        std::fs::write(&target, "old").unwrap();
        let link = link_dir.path().join("ca.pem");
        symlink(&target, &link).unwrap();
        let mut changes = FileChanges::new(vec![link], NEVER);
        assert!(quiet(&mut changes).await);
        std::fs::write(&target, "new").unwrap();
        assert!(
            seen(&mut changes).await,
            "the target's directory is watched"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_files_are_read_again_at_the_slow_interval_without_any_event() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cloud-config");
        std::fs::write(&file, "[Global]\n").unwrap();
        let mut changes = FileChanges::new(vec![file], Duration::from_secs(2));
        let started = tokio::time::Instant::now();
        changes.next().await;
        assert_eq!(started.elapsed(), SLOW_REREAD);
    }

    #[test]
    fn a_bare_file_name_is_in_the_working_directory() {
        assert_eq!(parent(Path::new("cloud-config")), PathBuf::from("."));
        assert_eq!(
            directories(&[
                PathBuf::from("/nonexistent/a"),
                PathBuf::from("/nonexistent/b")
            ]),
            vec![PathBuf::from("/nonexistent")]
        );
    }
}

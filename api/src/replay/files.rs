//! A scenario is untrusted input (D11): someone else's file may name any path, be a device
//! or a pipe, or be built to exhaust memory. Every file a run reads comes through here, and
//! every file it writes goes out through here.
//!
//! - A data file a scenario names resolves inside the scenario's own directory: no absolute
//!   path, no `..`, no symbolic link that leads out of it ([`resolve`]).
//! - Only regular files are read, opened without blocking (a pipe cannot hang the run), at
//!   most `max_file_bytes` of them, each line at most `max_record_bytes` ([`open`],
//!   [`Bounded`]). No refusal quotes what a file holds.
//! - Outputs are written under a temporary name created anew (never through a link someone
//!   planted) and renamed into place ([`write_new`]).

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

/// Bounds on what a scenario makes a run read and hold (each refusal names its flag).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the scenario file and of each file it names (`--max-file-bytes`).
    pub max_file_bytes: u64,
    /// Bytes of one line of a data file (`--max-record-bytes`).
    pub max_record_bytes: u64,
    /// Bytes of text the scenario holds once its aliases are expanded
    /// (`--max-expanded-bytes`).
    pub max_expanded_bytes: u64,
    /// Steps of the timeline: events and data-file rows together (`--max-steps`); about
    /// 120 bytes each (an order's) while the run holds its plan.
    pub max_steps: u64,
    /// Report samples times the customers and instruments each sample records
    /// (`--max-samples`).
    pub max_samples: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // A million orders in YAML is about 150 MiB.
            max_file_bytes: 256 << 20,
            max_record_bytes: 64 << 10,
            max_expanded_bytes: 512 << 20,
            max_steps: 5_000_000,
            max_samples: 5_000_000,
        }
    }
}

/// The path `name` (as a scenario writes it) names, inside the directory of `scenario`.
pub fn resolve(scenario: &Path, name: &str) -> Result<PathBuf, String> {
    let relative = Path::new(name);
    let plain = relative
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if name.is_empty() || !plain {
        return Err(format!(
            "{name:?} must be a path relative to the scenario's directory, without `..`"
        ));
    }
    let dir = directory_of(scenario)?;
    let found = dir
        .join(relative)
        .canonicalize()
        .map_err(|e| format!("cannot read {name:?}: {e}"))?;
    match found.starts_with(&dir) {
        true => Ok(found),
        false => Err(format!(
            "{name:?} leads out of the scenario's directory (a symbolic link)"
        )),
    }
}

/// The scenario's own directory, links resolved: where the files it names must be.
pub fn directory_of(scenario: &Path) -> Result<PathBuf, String> {
    scenario
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .canonicalize()
        .map_err(|e| format!("the scenario's directory: {e}"))
}

/// Opens `path` to read: a regular file of at most `max_bytes`, never a device or a pipe.
pub fn open(path: &Path, max_bytes: u64) -> Result<File, String> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        // A pipe opened to read blocks until a writer comes: never wait for one.
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("cannot open it: {e}"))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max_bytes {
        return Err(format!(
            "it is {} bytes; a file holds at most {max_bytes} (--max-file-bytes)",
            meta.len()
        ));
    }
    Ok(file)
}

/// The whole of `path`, within the bounds of [`open`] (a file that grows while it is read
/// is cut at the bound and refused).
pub fn read(path: &Path, max_bytes: u64) -> Result<Vec<u8>, String> {
    let file = open(path, max_bytes)?;
    let length = file.metadata().map_or(0, |m| m.len());
    // Room for the whole file at once (it is at most `max_bytes`), and one byte more to see
    // that it ends: a buffer grown by doubling copies and faults in the file three times over.
    let mut bytes = Vec::with_capacity(length as usize + 1);
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    match bytes.len() as u64 > max_bytes {
        true => Err(format!(
            "it grew past {max_bytes} bytes while read (--max-file-bytes)"
        )),
        false => Ok(bytes),
    }
}

/// The bytes of `path` handed to `block` in order, a block at a time, within the bounds of
/// [`open`]: what hashes a file reads it once and never holds it whole.
pub fn for_each_block(
    path: &Path,
    max_bytes: u64,
    mut block: impl FnMut(&[u8]),
) -> Result<(), String> {
    let mut file = open(path, max_bytes)?.take(max_bytes.saturating_add(1));
    let mut buffer = vec![0; 1 << 20];
    let mut seen = 0u64;
    loop {
        let n = match file.read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("cannot read it: {e}")),
        };
        seen += n as u64;
        if seen > max_bytes {
            return Err(format!(
                "it grew past {max_bytes} bytes while read (--max-file-bytes)"
            ));
        }
        block(&buffer[..n]);
    }
}

/// A reader that refuses a line longer than its bound and more bytes than the file's, so a
/// record with no end never makes the CSV reader grow its buffer without limit.
pub struct Bounded<R> {
    inner: R,
    line: u64,
    max_line: u64,
    left: u64,
}

impl<R: Read> Bounded<R> {
    pub fn new(inner: R, limits: &Limits) -> Self {
        Bounded {
            inner,
            line: 0,
            max_line: limits.max_record_bytes,
            left: limits.max_file_bytes,
        }
    }
}

/// The message of a line past its bound, as the CSV reader passes it on.
pub const LONG_LINE: &str = "a line is longer than --max-record-bytes";

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        // One byte past what is left, to see a file that grew; any bound, u64::MAX included.
        let left = usize::try_from(self.left).unwrap_or(usize::MAX);
        let want = buf.len().min(left.saturating_add(1));
        let n = self.inner.read(&mut buf[..want])?;
        if n as u64 > self.left {
            let message = "the file as read (inflated, if gzip) is longer than --max-file-bytes";
            return Err(io::Error::other(message));
        }
        self.left -= n as u64;
        // Each line's length, the newlines found by memchr (the reader's hot loop: a byte
        // at a time it was a sixth of reading a recorded file).
        let mut start = 0;
        for newline in memchr::memchr_iter(b'\n', &buf[..n]) {
            if self.line + (newline - start) as u64 > self.max_line {
                return Err(io::Error::other(LONG_LINE));
            }
            (self.line, start) = (0, newline + 1);
        }
        self.line += (n - start) as u64;
        if self.line > self.max_line {
            return Err(io::Error::other(LONG_LINE));
        }
        Ok(n)
    }
}

/// Writes `bytes` to `dir/name` through a temporary file created anew beside it and renamed
/// into place: a link planted at the name is replaced, never written through.
pub fn write_new(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), String> {
    let target = dir.join(name);
    let temporary = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&temporary)
        .and_then(|mut f| io::Write::write_all(&mut f, bytes));
    if let Err(e) = written.and_then(|()| std::fs::rename(&temporary, &target)) {
        let _ = std::fs::remove_file(&temporary);
        return Err(format!("{}: {e}", target.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 35 item 6: only paths inside the scenario's directory, only regular files, and
    /// no refusal quotes a file's content.
    #[test]
    fn a_scenario_reads_only_regular_files_inside_its_own_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("s");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(root.path().join("secret"), "SECRET_TOKEN_abc123").unwrap();
        std::fs::write(dir.join("prices.csv"), "time,index_price\n").unwrap();
        std::os::unix::fs::symlink(root.path().join("secret"), dir.join("out.csv")).unwrap();
        std::os::unix::fs::symlink(dir.join("prices.csv"), dir.join("in.csv")).unwrap();
        let scenario = dir.join("s.yaml");
        assert!(resolve(&scenario, "prices.csv").is_ok());
        assert!(
            resolve(&scenario, "./in.csv").is_ok(),
            "a link inside is followed"
        );
        for bad in ["../secret", "/etc/passwd", "out.csv", "", "a/../../secret"] {
            let refused = resolve(&scenario, bad).unwrap_err();
            assert!(!refused.contains("SECRET"), "{refused}");
        }
        assert_eq!(
            open(Path::new("/dev/zero"), 1 << 20).unwrap_err(),
            "not a regular file"
        );
        assert!(open(&dir, 1 << 20).is_err(), "a directory");
        let big = open(&dir.join("prices.csv"), 4).unwrap_err();
        assert!(big.contains("--max-file-bytes"), "{big}");
    }

    #[test]
    fn a_line_past_its_bound_is_refused_while_it_is_read() {
        let unbounded = Limits {
            max_file_bytes: u64::MAX,
            ..Limits::default()
        };
        let mut all = String::new();
        Bounded::new(&b"1,2\n"[..], &unbounded)
            .read_to_string(&mut all)
            .unwrap();
        assert_eq!(all, "1,2\n", "the largest bound reads the file whole");
        let limits = Limits {
            max_record_bytes: 8,
            ..Limits::default()
        };
        let mut ok = String::new();
        Bounded::new(&b"12345678\n1234\n"[..], &limits)
            .read_to_string(&mut ok)
            .unwrap();
        let mut long = String::new();
        let e = Bounded::new(&b"123456789\n"[..], &limits)
            .read_to_string(&mut long)
            .unwrap_err();
        assert_eq!(e.to_string(), LONG_LINE);
    }

    #[test]
    fn an_output_replaces_a_planted_link_and_never_writes_through_it() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, root.path().join("summary.json")).unwrap();
        write_new(root.path(), "summary.json", b"{}").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let written = root.path().join("summary.json");
        assert!(!written.symlink_metadata().unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(written).unwrap(), "{}");
    }
}

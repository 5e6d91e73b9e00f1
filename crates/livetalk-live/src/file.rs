//! Files named from outside (a config, credentials, a certificate bundle, a recording, a
//! scenario), read with bounds: regular files only, at most so many bytes for their kind, and
//! within a deadline. A path can name `/dev/zero`, a FIFO nobody writes to, a folder or a file
//! of gigabytes; each is one clear message naming the path, never a hang or an exhausted
//! memory.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// How long reading a file may take before it is given up: opening a file on a stalled network
/// mount, or a device that trickles, must not hang a command-line tool in silence.
pub const READ_DEADLINE: Duration = Duration::from_secs(5);

/// What a file is for, and so how large it may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileKind {
    /// What the file is, for messages ("config file").
    pub what: &'static str,
    /// The most bytes read.
    pub max_bytes: u64,
}

impl FileKind {
    /// livetalk's config file (TOML): 1 MiB.
    pub const CONFIG: FileKind = FileKind {
        what: "config file",
        max_bytes: 1 << 20,
    };
    /// A Google Cloud credentials file (JSON): 1 MiB.
    pub const CREDENTIALS: FileKind = FileKind {
        what: "credentials file",
        max_bytes: 1 << 20,
    };
    /// A bundle of trusted certificates (PEM): 16 MiB (the largest system bundles are about
    /// 1 MiB, so this leaves room for a company's additions).
    pub const CERTIFICATES: FileKind = FileKind {
        what: "certificate file",
        max_bytes: 16 << 20,
    };
    /// A recording's `session.jsonl`: 256 MiB (audio is kept apart in WAV files; an hour's
    /// session writes a few tens of MiB of lines).
    pub const RECORDING: FileKind = FileKind {
        what: "recording",
        max_bytes: 256 << 20,
    };
    /// A picture shown to the model (`/image`: PNG, JPEG or WebP): 20 MiB, more than a
    /// camera's photo, and it is sent scaled down anyway.
    pub const IMAGE: FileKind = FileKind {
        what: "picture",
        max_bytes: 20 << 20,
    };
    /// A mock fault scenario (TOML or JSON): 64 MiB, the largest frame a fault may send, since
    /// a scenario can carry a huge tool call's arguments inline.
    pub const SCENARIO: FileKind = FileKind {
        what: "scenario file",
        max_bytes: 64 << 20,
    };
}

/// Why a file could not be read. `Display` is one sentence naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// Nothing at the path.
    Missing {
        /// The file.
        path: PathBuf,
        /// What it was to be.
        kind: FileKind,
    },
    /// Something that is not a regular file (a folder, a FIFO, a device, a socket).
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it was to be.
        kind: FileKind,
        /// What it is instead ("a folder", "a FIFO (named pipe)", …).
        is: &'static str,
    },
    /// Larger than its kind allows.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What it was to be, with its limit.
        kind: FileKind,
    },
    /// Reading took longer than [`READ_DEADLINE`].
    TimedOut {
        /// The file.
        path: PathBuf,
        /// What it was to be.
        kind: FileKind,
    },
    /// Text was expected and the file is not UTF-8.
    NotText {
        /// The file.
        path: PathBuf,
        /// What it was to be.
        kind: FileKind,
    },
    /// The system refused to open or read it (permissions, say).
    Unreadable {
        /// The file.
        path: PathBuf,
        /// What it was to be.
        kind: FileKind,
        /// The system's reason.
        reason: String,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, path) = self.file();
        write!(f, "{what} {} {}", path.display(), self.problem())
    }
}

impl std::error::Error for FileError {}

impl FileError {
    /// What the file was to be, and its path.
    fn file(&self) -> (&'static str, &Path) {
        match self {
            FileError::Missing { path, kind }
            | FileError::NotAFile { path, kind, .. }
            | FileError::TooLarge { path, kind }
            | FileError::TimedOut { path, kind }
            | FileError::NotText { path, kind }
            | FileError::Unreadable { path, kind, .. } => (kind.what, path),
        }
    }

    /// Whether nothing is at the path (a default file that is simply not there).
    pub fn is_missing(&self) -> bool {
        matches!(self, FileError::Missing { .. })
    }

    /// What is wrong, after the file's name: "is a folder, not a file".
    pub fn problem(&self) -> String {
        match self {
            FileError::Missing { .. } => "does not exist".to_owned(),
            FileError::NotAFile { is, .. } => format!("is {is}, not a file"),
            FileError::TooLarge { kind, .. } => format!(
                "is larger than the {} livetalk reads of a {}",
                size(kind.max_bytes),
                kind.what
            ),
            FileError::TimedOut { .. } => format!(
                "could not be read within {} seconds",
                READ_DEADLINE.as_secs()
            ),
            FileError::NotText { .. } => "is not UTF-8 text".to_owned(),
            FileError::Unreadable { reason, .. } => format!("cannot be read: {reason}"),
        }
    }
}

fn size(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}

/// The bytes of the regular file at `path`, at most `kind.max_bytes` of them, read within
/// [`READ_DEADLINE`].
pub fn read_bounded(path: &Path, kind: FileKind) -> Result<Vec<u8>, FileError> {
    let owned = path.to_owned();
    let (tx, rx) = mpsc::sync_channel(1);
    // A thread of its own, so a read the kernel never finishes (a stalled mount) cannot hold
    // the caller past the deadline; the thread is left to the kernel.
    let spawned = std::thread::Builder::new()
        .name("livetalk-read-file".into())
        .spawn(move || {
            let _ = tx.send(read_now(&owned, kind));
        });
    if let Err(error) = spawned {
        return Err(FileError::Unreadable {
            path: path.to_owned(),
            kind,
            reason: error.to_string(),
        });
    }
    rx.recv_timeout(READ_DEADLINE).unwrap_or_else(|_| {
        Err(FileError::TimedOut {
            path: path.to_owned(),
            kind,
        })
    })
}

/// [`read_bounded`], as UTF-8 text.
pub fn read_text(path: &Path, kind: FileKind) -> Result<String, FileError> {
    String::from_utf8(read_bounded(path, kind)?).map_err(|_| FileError::NotText {
        path: path.to_owned(),
        kind,
    })
}

/// Opens `path` for reading if it is a regular file, without blocking on a FIFO or a device
/// on the way (the type is checked on the opened file, so it cannot change in between). For
/// files read as a stream (WAV audio), where the caller bounds what it reads.
pub fn open_regular(path: &Path, kind: FileKind) -> Result<std::fs::File, FileError> {
    let unreadable = |error: std::io::Error| match error.kind() {
        std::io::ErrorKind::NotFound => FileError::Missing {
            path: path.to_owned(),
            kind,
        },
        _ => FileError::Unreadable {
            path: path.to_owned(),
            kind,
            reason: io_reason(&error),
        },
    };
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        // Opening a FIFO for reading waits for a writer; non-blocking, it does not.
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    }
    let file = options.open(path).map_err(unreadable)?;
    let metadata = file.metadata().map_err(unreadable)?;
    if let Some(is) = not_a_file(&metadata) {
        return Err(FileError::NotAFile {
            path: path.to_owned(),
            kind,
            is,
        });
    }
    Ok(file)
}

/// Bytes a [`Streamed`] file's reader thread reads ahead of its consumer, in all.
const STREAM_CHUNK: usize = 64 << 10;
const STREAM_CHUNKS_AHEAD: usize = 2;

/// A regular file read as a stream, for files too large to hold (a recording's lines): at most
/// `kind.max_bytes` of it, a few chunks read ahead, and each chunk within [`READ_DEADLINE`] of
/// asking for it. A thread of its own reads, so a stalled mount cannot hold the reader.
pub struct Streamed {
    chunks: mpsc::Receiver<std::io::Result<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
    path: PathBuf,
    kind: FileKind,
    done: bool,
}

impl Streamed {
    /// Opens the regular file at `path` and starts reading it; refused as [`read_bounded`]
    /// would (missing, not a file, larger than its kind allows).
    pub fn open(path: &Path, kind: FileKind) -> Result<Streamed, FileError> {
        let file = open_regular(path, kind)?;
        let declared = file.metadata().map(|m| m.len()).unwrap_or(0);
        if declared > kind.max_bytes {
            return Err(FileError::TooLarge {
                path: path.to_owned(),
                kind,
            });
        }
        let (tx, rx) = mpsc::sync_channel(STREAM_CHUNKS_AHEAD);
        let spawned = std::thread::Builder::new()
            .name("livetalk-read-file".into())
            .spawn(move || {
                // At most what was there when it was opened: a file that grows meanwhile (a
                // session still recording) is read as it was.
                let mut file = file.take(declared);
                loop {
                    let mut chunk = vec![0; STREAM_CHUNK];
                    match file.read(&mut chunk) {
                        Ok(0) => break,
                        Ok(n) => {
                            chunk.truncate(n);
                            if tx.send(Ok(chunk)).is_err() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            break;
                        }
                    }
                }
            });
        if let Err(error) = spawned {
            return Err(FileError::Unreadable {
                path: path.to_owned(),
                kind,
                reason: error.to_string(),
            });
        }
        Ok(Streamed {
            chunks: rx,
            chunk: Vec::new(),
            at: 0,
            path: path.to_owned(),
            kind,
            done: false,
        })
    }

    /// The file's error for a failed read (a time-out, the system's reason).
    pub fn error(&self, error: &std::io::Error) -> FileError {
        match error.kind() {
            std::io::ErrorKind::TimedOut => FileError::TimedOut {
                path: self.path.clone(),
                kind: self.kind,
            },
            _ => FileError::Unreadable {
                path: self.path.clone(),
                kind: self.kind,
                reason: io_reason(error),
            },
        }
    }
}

impl std::io::Read for Streamed {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let available = std::io::BufRead::fill_buf(self)?;
        let n = available.len().min(buf.len());
        buf[..n].copy_from_slice(&available[..n]);
        std::io::BufRead::consume(self, n);
        Ok(n)
    }
}

impl std::io::BufRead for Streamed {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        while self.at == self.chunk.len() && !self.done {
            match self.chunks.recv_timeout(READ_DEADLINE) {
                Ok(Ok(chunk)) => {
                    self.chunk = chunk;
                    self.at = 0;
                }
                Ok(Err(error)) => {
                    self.done = true;
                    return Err(error);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => self.done = true,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    self.done = true;
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the file stopped answering",
                    ));
                }
            }
        }
        Ok(&self.chunk[self.at..])
    }

    fn consume(&mut self, amount: usize) {
        self.at = (self.at + amount).min(self.chunk.len());
    }
}

/// One line read by [`read_line_bounded`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineRead {
    /// The line is in the buffer (its newline left out).
    Line,
    /// The line was longer than the bound: this many bytes, none of them kept.
    TooLong(u64),
    /// The input has ended.
    End,
}

/// Reads the next line of `reader` into `line`, keeping at most `max` bytes of it: a longer
/// line is read past and discarded (its length said), so a file of one endless line costs
/// `max` bytes, not its size.
pub fn read_line_bounded(
    reader: &mut impl std::io::BufRead,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut length: u64 = 0;
    let mut read_any = false;
    loop {
        let available = reader.fill_buf()?;
        if available.is_empty() {
            break;
        }
        read_any = true;
        let (piece, ended) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (&available[..at], true),
            None => (available, false),
        };
        length += piece.len() as u64;
        if length <= max as u64 {
            line.extend_from_slice(piece);
        } else if !line.is_empty() {
            *line = Vec::new();
        }
        let used = piece.len() + usize::from(ended);
        reader.consume(used);
        if ended {
            break;
        }
    }
    Ok(match (read_any, length > max as u64) {
        (false, _) => LineRead::End,
        (true, true) => LineRead::TooLong(length),
        (true, false) => LineRead::Line,
    })
}

fn read_now(path: &Path, kind: FileKind) -> Result<Vec<u8>, FileError> {
    let file = open_regular(path, kind)?;
    let too_large = || FileError::TooLarge {
        path: path.to_owned(),
        kind,
    };
    let declared = file.metadata().map(|m| m.len()).unwrap_or(0);
    if declared > kind.max_bytes {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(declared).unwrap_or(0));
    // One byte past the limit tells a file that grew while read from one that fits exactly.
    file.take(kind.max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|error| FileError::Unreadable {
            path: path.to_owned(),
            kind,
            reason: io_reason(&error),
        })?;
    if bytes.len() as u64 > kind.max_bytes {
        return Err(too_large());
    }
    Ok(bytes)
}

/// What a path is when it is not a regular file.
fn not_a_file(metadata: &std::fs::Metadata) -> Option<&'static str> {
    let kind = metadata.file_type();
    if kind.is_file() {
        return None;
    }
    if kind.is_dir() {
        return Some("a folder");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return Some("a FIFO (named pipe)");
        }
        if kind.is_char_device() {
            return Some("a character device");
        }
        if kind.is_block_device() {
            return Some("a block device");
        }
        if kind.is_socket() {
            return Some("a socket");
        }
    }
    Some("not a regular file")
}

/// The system's reason, without the "(os error N)" tail people do not need.
pub fn io_reason(error: &std::io::Error) -> String {
    let text = error.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: FileKind = FileKind {
        what: "test file",
        max_bytes: 16,
    };

    #[test]
    fn regular_files_within_their_limit_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.toml");
        std::fs::write(&path, "0123456789abcdef").unwrap();
        assert_eq!(read_text(&path, SMALL).unwrap(), "0123456789abcdef");
        std::fs::write(&path, "0123456789abcdefX").unwrap();
        let error = read_bounded(&path, SMALL).unwrap_err();
        assert!(matches!(error, FileError::TooLarge { .. }), "{error}");
        assert_eq!(
            error.to_string(),
            format!(
                "test file {} is larger than the 16 bytes livetalk reads of a test file",
                path.display()
            )
        );
        std::fs::write(&path, [b'a', 0xff]).unwrap();
        assert!(matches!(
            read_text(&path, SMALL),
            Err(FileError::NotText { .. })
        ));
        let missing = read_bounded(&dir.path().join("nope"), SMALL).unwrap_err();
        assert!(missing.is_missing(), "{missing}");
    }

    #[test]
    fn a_streamed_file_reads_in_bounded_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lines");
        let long = "x".repeat(200_000);
        std::fs::write(&path, format!("one\n{long}\n\nlast")).unwrap();
        let mut file = Streamed::open(&path, FileKind::RECORDING).unwrap();
        let mut line = Vec::new();
        let mut read = Vec::new();
        loop {
            match read_line_bounded(&mut file, &mut line, 100_000).unwrap() {
                LineRead::End => break,
                LineRead::Line => read.push(String::from_utf8(line.clone()).unwrap()),
                LineRead::TooLong(n) => read.push(format!("too long: {n}")),
            }
        }
        assert_eq!(read, ["one", "too long: 200000", "", "last"]);
        assert!(line.capacity() <= 200_000, "{}", line.capacity());
        let too_large = FileKind {
            what: "test file",
            max_bytes: 3,
        };
        assert!(matches!(
            Streamed::open(&path, too_large),
            Err(FileError::TooLarge { .. })
        ));
    }

    #[test]
    fn folders_devices_and_fifos_are_refused_at_once_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let started = std::time::Instant::now();
        for (path, is) in [
            (dir.path().to_owned(), "a folder"),
            (PathBuf::from("/dev/zero"), "a character device"),
            (fifo, "a FIFO (named pipe)"),
        ] {
            let error = read_bounded(&path, FileKind::CONFIG).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!("config file {} is {is}, not a file", path.display())
            );
        }
        assert!(started.elapsed() < READ_DEADLINE);
    }
}

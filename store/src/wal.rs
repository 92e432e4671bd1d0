//! The write-ahead log: numbered segment files `wal/NNNNNNNNNNNNNNNNNNNN.wal`, each a sequence
//! of records `[len: u32 LE][crc32: u32 LE][payload: len bytes]` whose payload is one
//! LZ4-compressed Arrow IPC stream holding one `spans` batch ([`crate::segment::encode_record`];
//! records written by earlier versions, zstd-compressed, read alike).
//!
//! A request is acknowledged only after its record is written (and, by policy, fsynced — group
//! commit: one fsync covers every record of a group). On start every segment is replayed in
//! order; a torn or corrupt tail (a crash mid-write) ends that segment's replay and is counted.
//! Segments are deleted once every row they hold is in Parquet.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow::array::RecordBatch;
use bytes::Bytes;

/// Largest record accepted on replay (guards against a corrupt length).
const MAX_RECORD: u32 = 512 * 1024 * 1024;

/// An open WAL directory with one active segment.
pub struct Wal {
    dir: PathBuf,
    active_id: u64,
    active: BufWriter<File>,
    bytes_written: u64,
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:020}.wal"))
}

/// Lists segment ids in `dir`, ascending.
///
/// # Errors
/// I/O errors reading the directory.
pub fn list_segments(dir: &Path) -> io::Result<Vec<u64>> {
    let mut ids = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(id) = name
            .strip_suffix(".wal")
            .and_then(|n| n.parse::<u64>().ok())
        {
            ids.push(id);
        }
    }
    ids.sort_unstable();
    Ok(ids)
}

/// What replay found in one segment.
#[derive(Debug, Default)]
pub struct Replayed {
    /// Records in write order: the payload and the batch it holds.
    pub records: Vec<(Bytes, RecordBatch)>,
    /// True when the segment ended in a torn or corrupt record.
    pub torn_tail: bool,
}

/// Reads every intact record of segment `id`.
///
/// # Errors
/// I/O errors opening the file (a corrupt record is not an error: replay stops there).
pub fn replay_segment(dir: &Path, id: u64) -> io::Result<Replayed> {
    let mut reader = BufReader::new(File::open(segment_path(dir, id))?);
    let mut out = Replayed::default();
    let mut header = [0u8; 8];
    loop {
        match reader.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                // A partial header is a torn tail only when some bytes were there; read_exact
                // does not say how many, so check the position cheaply: treat as clean end.
                break;
            }
            Err(e) => return Err(e),
        }
        let len = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let crc = u32::from_le_bytes(header[4..].try_into().expect("4 bytes"));
        if len == 0 || len > MAX_RECORD {
            out.torn_tail = true;
            break;
        }
        let mut payload = vec![0u8; len as usize];
        if reader.read_exact(&mut payload).is_err() || crc32fast::hash(&payload) != crc {
            out.torn_tail = true;
            break;
        }
        match crate::segment::decode(&payload) {
            Ok(batch) => out.records.push((Bytes::from(payload), batch)),
            Err(_) => {
                out.torn_tail = true;
                break;
            }
        }
    }
    Ok(out)
}

impl Wal {
    /// Opens `dir` (created if missing) and starts a new segment after the existing ones.
    ///
    /// # Errors
    /// I/O errors.
    pub fn open(dir: &Path) -> io::Result<Self> {
        Self::open_after(dir, 0)
    }

    /// Opens `dir` as [`Wal::open`] does, its new segment numbered after `after` too (a
    /// segment id its owner has recorded elsewhere, so ids never go back to one that was).
    ///
    /// # Errors
    /// I/O errors.
    pub fn open_after(dir: &Path, after: u64) -> io::Result<Self> {
        fs::create_dir_all(dir)?;
        let next = list_segments(dir)?.last().copied().unwrap_or(0).max(after) + 1;
        let active = Self::create_segment(dir, next)?;
        Ok(Self {
            dir: dir.to_owned(),
            active_id: next,
            active,
            bytes_written: 0,
        })
    }

    fn create_segment(dir: &Path, id: u64) -> io::Result<BufWriter<File>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(segment_path(dir, id))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(BufWriter::with_capacity(1 << 20, file))
    }

    /// The id of the segment being written.
    pub fn active_id(&self) -> u64 {
        self.active_id
    }

    /// Total bytes appended since open.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Appends one record (an encoded segment; buffered: call [`Wal::commit`] to make it
    /// durable). Returns the bytes written.
    ///
    /// # Errors
    /// I/O errors; a payload over 4 GiB.
    pub fn append(&mut self, payload: &[u8]) -> io::Result<u64> {
        let len = u32::try_from(payload.len()).map_err(io::Error::other)?;
        self.active.write_all(&len.to_le_bytes())?;
        self.active
            .write_all(&crc32fast::hash(payload).to_le_bytes())?;
        self.active.write_all(payload)?;
        let n = 8 + payload.len() as u64;
        self.bytes_written += n;
        Ok(n)
    }

    /// Flushes buffered records to the OS, and fsyncs when `fsync`.
    ///
    /// # Errors
    /// I/O errors.
    pub fn commit(&mut self, fsync: bool) -> io::Result<()> {
        self.active.flush()?;
        if fsync {
            self.active.get_ref().sync_data()?;
        }
        Ok(())
    }

    /// Closes the active segment and starts the next; returns the closed segment's id.
    ///
    /// # Errors
    /// I/O errors.
    pub fn rotate(&mut self) -> io::Result<u64> {
        self.commit(true)?;
        let closed = self.active_id;
        self.active_id += 1;
        self.active = Self::create_segment(&self.dir, self.active_id)?;
        Ok(closed)
    }

    /// Deletes every segment with id ≤ `upto` (their rows are in Parquet).
    ///
    /// # Errors
    /// I/O errors.
    pub fn delete_through(dir: &Path, upto: u64) -> io::Result<()> {
        for id in list_segments(dir)? {
            if id <= upto {
                fs::remove_file(segment_path(dir, id))?;
            }
        }
        Ok(())
    }
}

//! An append-only log kept in fixed-size chunks, for history the engine appends to by the
//! million (the ledger's rows): growing it never moves what it holds. A `Vec` doubles by
//! copying, so the row that crosses its capacity pays for every row before it — 136 MB
//! copied in the middle of a midnight at a million positions, and a stall every request
//! waits behind once the history is large. Here a full chunk stays where it is and the next
//! one is allocated at its final size.
//!
//! Encoded as a sequence, exactly as a `Vec` of the same items.
//!
//! [`LogDigest`] is what the state hash reads of a history log instead of its rows: their
//! count and an order-free digest ([`RowsDigest`]), so the hash does not depend on which rows
//! the engine still holds and which only the journal's projection does. [`ProjectedLog`] is
//! such a log with the digest of the rows it let go: every history the projection takes is
//! one, so letting go, hashing and the snapshot's form are written once.
//!
//! `Log` is the append-only list the ledger's rows live in: fixed chunks of 2^16, so growing never
//! copies what it holds (a `Vec` doubling copied every row at the pass that crossed its capacity),
//! encoded exactly as a `Vec`. A log can hand out its whole chunks from the front (`Log::hand_out`:
//! moved, not copied), keeping the items its owner still changes, and reuses up to 16 chunks it let
//! go, emptied by whoever dropped their runs, for the next ones; such a log is encoded by its held
//! form (`Log::held`). `log::RowsDigest` is an order-free digest of rows (the wrapping sum of a
//! 128-bit rapidhash of each row's encoding), which the state hash reads instead of rows the engine
//! let go. `log::ProjectedLog` is every history the journal's projection takes (the ledger's
//! movements, the trade records, the public fills, the depreciation notices, the margin state
//! changes, the funding settlements): the log, the digest of what it let go, and what is still to
//! hand out (rows appended since, rows changed since), as `log::Handed` runs, gathered per tick in
//! `history::HandedHistory`. A whole chunk let go is a `log::Run` that owes its rows' digest, those
//! handed out before as copies included: the journal's writer computes it off the engine thread
//! (`Handed::settle`), and the log folds it in at its next hand-out; whatever needs the digest
//! first (the state hash, a snapshot) computes what is still owed itself, so the digest does not
//! depend on who computed it, or when.
//!
//! History stays in append-only logs in resources, as a journal is: trade records, public fills
//! and ledger movements: they are read by range or id and never updated, so they gain nothing
//! from being entities and would cost an `Entity` each. The read view holds none of the
//! movements, trade records, notices, margin state changes and funding settlements: the ticks
//! hand the rows they made or changed to the host (`TickOutput::history`, while
//! `Engine::set_projecting` is on), which writes them to the journal's projection, where the
//! transaction, trade, notification and funding-rate lists read them; the channels' events
//! carry their rows. While it does, the ledger lets go of every whole chunk of movements once
//! handed out (at the end of the tick), keeping only pending transfers, which change again: the
//! engine holds at most one chunk of movements (the history window, `--history-window`, 65 536
//! rows unless set: `Engine::set_history_window`) and the pending ones, and a funding pass
//! books into the chunks the last one emptied. The window is not state: a snapshot's held logs
//! name the first row they hold, so a restart in another window re-chunks what it restored,
//! once. The exchange lets go of its trade records likewise, all of them (a record never
//! changes). A replay hands its history out likewise, to the thread that writes its CSV files
//! and tallies its report (`replay/report/streamed`), and lets it go the same way.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, Index, IndexMut};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rapidhash::v3::{RapidSecrets, rapidhash_v3_seeded};
use serde::de::{Deserialize, Deserializer, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeSeq, Serializer};

/// An order-free digest of a set of rows: the wrapping sum of a 128-bit hash of each row's
/// postcard encoding (two seeds of rapidhash v3, a portable algorithm). A row names its own
/// sequence number, so the set pins every row at its place; a sum, unlike a chain, can take
/// rows in any order and at any time, so it is the same whether a row was summed when it left
/// the engine or when the hash was asked for. It guards against divergence (replay, recovery,
/// two runs of a scenario), not against a forger: the state hash over it is SHA-256.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RowsDigest(u128);

impl RowsDigest {
    const LOW: RapidSecrets = RapidSecrets::seed(0x7065_7270_7369_6d31);
    const HIGH: RapidSecrets = RapidSecrets::seed(0x7065_7270_7369_6d32);

    /// Adds `row`, encoded on the stack, or into `buf` (a scratch buffer the caller keeps
    /// between rows) if it is longer than 512 bytes.
    pub fn add(&mut self, row: &impl Serialize, buf: &mut Vec<u8>) {
        let mut stack = [0u8; 512];
        let bytes: &[u8] = match postcard::to_slice(row, &mut stack) {
            Ok(bytes) => bytes,
            Err(_) => {
                buf.clear();
                *buf = postcard::to_extend(row, std::mem::take(buf)).expect("rows encode");
                buf
            }
        };
        let low = rapidhash_v3_seeded(bytes, &Self::LOW) as u128;
        let high = rapidhash_v3_seeded(bytes, &Self::HIGH) as u128;
        self.0 = self.0.wrapping_add(high << 64 | low);
    }

    /// The digest of both sets of rows.
    pub fn and(self, other: RowsDigest) -> Self {
        RowsDigest(self.0.wrapping_add(other.0))
    }

    /// The digest of `rows`.
    pub fn of<'a, T: Serialize + 'a>(rows: impl IntoIterator<Item = &'a T>) -> Self {
        let mut digest = RowsDigest::default();
        let mut buf = Vec::new();
        rows.into_iter().for_each(|row| digest.add(row, &mut buf));
        digest
    }
}

/// What the state hash reads of a history log: how many rows it has had, and their digest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LogDigest {
    pub len: u64,
    pub rows: RowsDigest,
}

/// Items per chunk by default, as a power of two: 2^16, about 9 MB of ledger rows. A server
/// sets its own ([`ProjectedLog::set_window`]): how many rows of each history it holds at
/// most before they go, once the projection holds them.
pub const DEFAULT_WINDOW_BITS: u32 = 16;

/// The window's bounds, as powers of two: from 256 rows (a chunk a few ticks fill) to 16 Mi
/// rows (2.2 GB of ledger rows, the memory a server may spend on its most recent history).
pub const WINDOW_BITS: std::ops::RangeInclusive<u32> = 8..=24;

/// Emptied chunks a log keeps for the next ones, at most: a pass that books a million rows
/// (funding at a million positions) writes into memory already touched, not into fresh pages
/// the kernel must clear first.
const SPARE: usize = 16;

/// Chunks a log let go come back emptied here once whoever took them drops them ([`Run`]'s
/// drop, on that thread), for the log's next chunks: shared by the log and the runs it handed
/// out, at most [`SPARE`].
struct Spares<T>(Arc<Mutex<Vec<Vec<T>>>>);

impl<T> Spares<T> {
    fn take(&self) -> Option<Vec<T>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    /// Keeps `chunk`'s memory, emptied, unless [`SPARE`] are kept already.
    fn give(&self, mut chunk: Vec<T>) {
        chunk.clear();
        let mut spares = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if spares.len() < SPARE {
            spares.push(chunk);
        }
    }

    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }
}

impl<T> Default for Spares<T> {
    fn default() -> Self {
        Spares(Arc::default())
    }
}

impl<T> Clone for Spares<T> {
    fn clone(&self) -> Self {
        Spares(Arc::clone(&self.0))
    }
}

impl<T> fmt::Debug for Spares<T> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "Spares({})", self.len())
    }
}

/// Items the first chunk holds before it is given its whole size: below it a log grows as a
/// `Vec` does, so a small log (a test's, a quiet market's) stays small.
const SMALL: usize = 1 << 10;

pub struct Log<T> {
    /// Chunk `k` holds the items from `first + k × 2^bits`; the chunks before the last item's
    /// are full, those after it are empty (reserved). The first grows as a `Vec` does up to
    /// [`SMALL`] items (a small log stays small), then takes its whole size; every later one is
    /// allocated whole.
    chunks: VecDeque<Vec<T>>,
    /// Items per chunk, as a power of two.
    bits: u32,
    /// The first item the chunks hold: those before it were let go ([`Log::hand_out`]), a
    /// whole chunk at a time.
    first: usize,
    /// Items of let-go chunks still held, by index: those the owner keeps (a pending
    /// transfer, which changes again), so bounded by what it keeps.
    kept: BTreeMap<usize, T>,
    /// Emptied chunks for the next ones: those let go, once their runs are dropped.
    spare: Spares<T>,
    len: usize,
}

/// A copy keeps its own spares: a chunk comes back to the log that let it go.
impl<T: Clone> Clone for Log<T> {
    fn clone(&self) -> Self {
        Log {
            chunks: self.chunks.clone(),
            bits: self.bits,
            first: self.first,
            kept: self.kept.clone(),
            spare: Spares::default(),
            len: self.len,
        }
    }
}

impl<T> Default for Log<T> {
    fn default() -> Self {
        Log {
            chunks: VecDeque::new(),
            bits: DEFAULT_WINDOW_BITS,
            first: 0,
            kept: BTreeMap::new(),
            spare: Spares::default(),
            len: 0,
        }
    }
}

impl<T> Log<T> {
    /// Every item ever appended, let go or not.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first index still held in chunks: the items before it are let go, but for those
    /// kept.
    pub fn first_held(&self) -> usize {
        self.first
    }

    fn chunk_len(&self) -> usize {
        1 << self.bits
    }

    /// Which chunk holds item `index` (at or past [`Log::first_held`]), and where in it.
    fn locate(&self, index: usize) -> (usize, usize) {
        let at = index - self.first;
        (at >> self.bits, at & (self.chunk_len() - 1))
    }

    /// Items per chunk become `2^bits` (within [`WINDOW_BITS`]): the items held are moved
    /// into chunks of that size, once, and the spares left for chunks of the old size.
    pub fn set_window(&mut self, bits: u32) {
        assert!(WINDOW_BITS.contains(&bits), "a window within its bounds");
        if bits == self.bits {
            return;
        }
        let held: Vec<T> = std::mem::take(&mut self.chunks)
            .into_iter()
            .flatten()
            .collect();
        self.spare = Spares::default();
        self.bits = bits;
        self.len = self.first;
        held.into_iter().for_each(|item| self.push(item));
    }

    /// A chunk for the items from `len` on: a spare one if any.
    fn new_chunk(&mut self) -> Vec<T> {
        match self.spare.take() {
            Some(mut chunk) => {
                chunk.reserve(self.chunk_len());
                chunk
            }
            None if self.chunks.is_empty() && self.first == 0 => Vec::new(),
            None => Vec::with_capacity(self.chunk_len()),
        }
    }

    pub fn push(&mut self, item: T) {
        let at = (self.len - self.first) >> self.bits;
        if at == self.chunks.len() {
            let chunk = self.new_chunk();
            self.chunks.push_back(chunk);
        }
        let chunk_len = self.chunk_len();
        let chunk = &mut self.chunks[at];
        if chunk.len() == chunk.capacity() && chunk.len() >= SMALL {
            // Past a small log's size the first chunk takes its whole size at once: copied
            // once, not at each doubling on the way (a fresh venue's first fills paid that).
            chunk.reserve_exact(chunk_len - chunk.len());
        }
        chunk.push(item);
        self.len += 1;
    }

    /// Room for `additional` more items without allocating while they are appended: a pass
    /// that knows how many rows it writes takes its memory once, ahead.
    pub fn reserve(&mut self, additional: usize) {
        let (target, chunk) = (self.len + additional, self.chunk_len());
        if let Some(tail) = self.chunks.get_mut((self.len - self.first) >> self.bits) {
            let room = chunk - tail.len();
            tail.reserve(room.min(additional));
        }
        while self.first + (self.chunks.len() << self.bits) < target {
            let mut new = self.new_chunk();
            new.reserve(chunk);
            self.chunks.push_back(new);
        }
    }

    pub fn get(&self, index: usize) -> Option<&T> {
        if index < self.first {
            return self.kept.get(&index);
        }
        let (chunk, at) = self.locate(index);
        self.chunks.get(chunk)?.get(at)
    }

    /// Every item held, in the order appended: those kept, then the chunks'.
    pub fn iter(&self) -> Iter<'_, T> {
        self.into_iter()
    }

    /// The items from `start` (appended since a reader last looked) to the end; those let go
    /// before it are not there to read.
    pub fn iter_from(&self, start: usize) -> impl Iterator<Item = &T> + '_ {
        let (chunk, at) = self.locate(start.clamp(self.first, self.len));
        self.chunks.iter().skip(chunk).flatten().skip(at)
    }

    /// Lets go of every whole chunk into `out`, moved, not copied, owing the digest of its
    /// items `keep` does not hold ([`Run`]): its items from `from` on are handed out, those
    /// before (handed out before, as copies while the chunk filled) only digested, by whoever
    /// takes the run rather than on the engine thread. An item kept stays held (a copy) and is
    /// handed out all the same. Items kept before, which `keep` no longer holds, are passed to
    /// `gone` and let go. Then hands out copies of the items from `from` in the chunk still
    /// filling.
    pub fn hand_out(
        &mut self,
        from: usize,
        keep: fn(&T) -> bool,
        mut gone: impl FnMut(&T),
        out: &mut Handed<T>,
    ) where
        T: Clone,
    {
        self.kept
            .retain(|_, item| keep(item) || (gone(item), false).1);
        let len = self.chunk_len();
        while self.first + len <= self.len {
            let chunk = self.chunks.pop_front().expect("a full chunk");
            let start = self.first;
            for (k, item) in chunk.iter().enumerate().filter(|(_, item)| keep(item)) {
                self.kept.insert(start + k, item.clone());
            }
            self.first += len;
            let before = from.saturating_sub(start).min(len);
            let run = Run::let_go(chunk, before, keep, self.spare.clone());
            out.0.push(Arc::new(run));
        }
        let filling: Vec<T> = self.iter_from(from).cloned().collect();
        if !filling.is_empty() {
            out.0.push(Arc::new(Run::copied(filling)));
        }
    }

    fn at_mut(&mut self, index: usize) -> Option<&mut T> {
        if index < self.first {
            return self.kept.get_mut(&index);
        }
        let (chunk, at) = self.locate(index);
        self.chunks.get_mut(chunk)?.get_mut(at)
    }
}

impl<T> Index<usize> for Log<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        self.get(index).expect("an item held")
    }
}

impl<T> IndexMut<usize> for Log<T> {
    fn index_mut(&mut self, index: usize) -> &mut T {
        self.at_mut(index).expect("an item held")
    }
}

/// The items a log holds, in order: those kept, then the chunks'.
pub type Iter<'a, T> = std::iter::Chain<
    std::collections::btree_map::Values<'a, usize, T>,
    std::iter::Flatten<std::collections::vec_deque::Iter<'a, Vec<T>>>,
>;

impl<'a, T> IntoIterator for &'a Log<T> {
    type Item = &'a T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.kept.values().chain(self.chunks.iter().flatten())
    }
}

impl<T: PartialEq> PartialEq for Log<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.first == other.first
            && self.kept.keys().eq(other.kept.keys())
            && self.iter().eq(other.iter())
    }
}

impl<T: Eq> Eq for Log<T> {}

impl<T: fmt::Debug> fmt::Debug for Log<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Encoded as a sequence of every item: a log that let items go has no such form, and is
/// encoded by [`Log::held`] instead.
impl<T: Serialize> Serialize for Log<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.first > 0 {
            return Err(serde::ser::Error::custom(
                "a log that let items go is encoded by its held form",
            ));
        }
        let mut seq = s.serialize_seq(Some(self.len))?;
        self.iter()
            .try_for_each(|item| seq.serialize_element(item))?;
        seq.end()
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Log<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Items<T> {
            type Value = Log<T>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Log<T>, A::Error> {
                let mut log = Log::default();
                while let Some(item) = seq.next_element()? {
                    log.push(item);
                }
                Ok(log)
            }
        }
        d.deserialize_seq(Items(PhantomData))
    }
}

/// A log as a snapshot carries it once it may have let items go ([`Log::held`]): how many
/// items it has had, the first its chunks hold (those before were let go), the items kept
/// from those let go by index, and the items of the chunks held. Whatever the window it was
/// held in: a log restored in another window holds the same items.
#[derive(serde::Serialize)]
pub struct HeldRef<'a, T> {
    len: u64,
    first: u64,
    kept: &'a BTreeMap<usize, T>,
    window: Window<'a, T>,
}

struct Window<'a, T>(&'a VecDeque<Vec<T>>);

impl<T: Serialize> Serialize for Window<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // With its length: postcard writes it first.
        let mut seq = s.serialize_seq(Some(self.0.iter().map(Vec::len).sum()))?;
        self.0
            .iter()
            .flatten()
            .try_for_each(|item| seq.serialize_element(item))?;
        seq.end()
    }
}

/// [`HeldRef`] decoded, for [`Log::from_held`].
#[derive(serde::Deserialize)]
pub struct Held<T> {
    len: u64,
    first: u64,
    kept: BTreeMap<usize, T>,
    window: Vec<T>,
}

impl<T> Log<T> {
    /// The held form, which encodes what the log holds and where it stands.
    pub fn held(&self) -> HeldRef<'_, T> {
        HeldRef {
            len: self.len as u64,
            first: self.first as u64,
            kept: &self.kept,
            window: Window(&self.chunks),
        }
    }

    /// The log a held form describes, unless its parts contradict each other.
    pub fn from_held(held: Held<T>) -> Option<Self> {
        let first = usize::try_from(held.first).ok()?;
        let len = usize::try_from(held.len).ok()?;
        let whole = len.checked_sub(first)? == held.window.len();
        let kept_before = held.kept.keys().next_back().is_none_or(|&i| i < first);
        if !(whole && kept_before) {
            return None;
        }
        let mut log = Log {
            first,
            kept: held.kept,
            len: first,
            ..Log::default()
        };
        held.window.into_iter().for_each(|item| log.push(item));
        Some(log)
    }
}

/// A history log the journal's projection takes: the rows the engine still holds, and the
/// digest of those it let go once handed out ([`ProjectedLog::hand_out`]). Read as the
/// [`Log`] it holds; written only by appending or through [`ProjectedLog::row_mut`], so no
/// row leaves uncounted and no change goes unhanded.
///
/// The rows of a whole chunk let go are digested off the engine thread: the run handed out
/// owes its digest ([`Run`]), which the journal's writer computes once it has the rows
/// ([`Handed::settle`]); the log keeps the run until then, and folds its digest in at the
/// next hand-out. Whatever needs the digest before (the state hash, a snapshot) computes the
/// runs still owed itself, so the digest is the same whoever computed it, and when.
#[derive(Clone, Debug)]
pub struct ProjectedLog<T> {
    log: Log<T>,
    /// The digest of the rows let go, but for those of `owed`.
    gone: RowsDigest,
    /// Runs let go whose digest is not in `gone` yet, oldest first: at most [`MAX_OWED_ROWS`]
    /// rows, beyond which the engine computes the oldest itself.
    owed: VecDeque<Arc<Run<T>>>,
    /// While the projection takes the rows: the first not handed out yet (none else).
    handed: Option<usize>,
    /// Rows before `handed` changed since they were handed out, to hand out again: bounded
    /// by the changes of a tick, since every tick hands them out.
    changed: Vec<usize>,
}

impl<T> Default for ProjectedLog<T> {
    fn default() -> Self {
        ProjectedLog {
            log: Log::default(),
            gone: RowsDigest::default(),
            owed: VecDeque::new(),
            handed: None,
            changed: Vec::new(),
        }
    }
}

/// The rows and what was let go, not who takes them now.
impl<T: PartialEq + Serialize> PartialEq for ProjectedLog<T> {
    fn eq(&self, other: &Self) -> bool {
        self.log == other.log && self.gone() == other.gone()
    }
}

impl<T: Eq + Serialize> Eq for ProjectedLog<T> {}

impl<T> Deref for ProjectedLog<T> {
    type Target = Log<T>;

    fn deref(&self) -> &Log<T> {
        &self.log
    }
}

impl<T> Index<usize> for ProjectedLog<T> {
    type Output = T;

    fn index(&self, index: usize) -> &T {
        &self.log[index]
    }
}

impl<T> ProjectedLog<T> {
    pub fn push(&mut self, row: T) {
        self.log.push(row);
    }

    /// See [`Log::reserve`].
    pub fn reserve(&mut self, additional: usize) {
        self.log.reserve(additional);
    }

    /// See [`Log::set_window`]: what it holds and hands out does not change, only how many
    /// rows it holds before they go.
    pub fn set_window(&mut self, bits: u32) {
        self.log.set_window(bits);
    }

    /// The row at `index`, to change: handed out again if it was already.
    pub fn row_mut(&mut self, index: usize) -> &mut T {
        if self.handed.is_some_and(|handed| index < handed) {
            self.changed.push(index);
        }
        &mut self.log[index]
    }

    /// Hands the rows out from now on (every one, `from_start`), or stops; on again while on
    /// changes nothing.
    pub fn project(&mut self, on: bool, from_start: bool) {
        let from = if from_start { 0 } else { self.log.len() };
        self.handed = on.then(|| self.handed.unwrap_or(from));
        if !on {
            self.changed.clear();
        }
    }

    /// The held form a snapshot carries: the log's ([`Log::held`]) and the digest of the
    /// rows let go.
    pub fn held(&self) -> (HeldRef<'_, T>, RowsDigest)
    where
        T: Serialize,
    {
        (self.log.held(), self.gone())
    }

    /// The digest of the rows let go: computing what is still owed unless another did.
    fn gone(&self) -> RowsDigest
    where
        T: Serialize,
    {
        let owed = self.owed.iter().map(|run| run.settle());
        owed.fold(self.gone, RowsDigest::and)
    }

    /// Folds the runs settled into `gone`, oldest first, and settles the oldest itself while
    /// more than [`MAX_OWED_ROWS`] rows are owed (so a writer that falls behind does not
    /// make the engine hold rows without bound).
    fn fold_owed(&mut self)
    where
        T: Serialize,
    {
        let mut owed_rows: usize = self.owed.iter().map(|run| run.held()).sum();
        while let Some(run) = self.owed.front() {
            let digest = match run.settled() {
                Some(digest) => digest,
                None if owed_rows > MAX_OWED_ROWS => run.settle(),
                None => break,
            };
            owed_rows -= run.held();
            self.gone = self.gone.and(digest);
            self.owed.pop_front();
        }
        // Settled out of order (the writer settles as it goes, the engine from the front).
        self.owed.retain(|run| match run.settled() {
            Some(digest) => (self.gone = self.gone.and(digest), false).1,
            None => true,
        });
    }

    /// The log a held form describes, unless its parts contradict each other.
    pub fn from_held((held, gone): (Held<T>, RowsDigest)) -> Option<Self> {
        Some(ProjectedLog {
            log: Log::from_held(held)?,
            gone,
            ..ProjectedLog::default()
        })
    }
}

impl<T: Serialize + Clone> ProjectedLog<T> {
    /// What the state hash reads: the count of rows ever appended and the digest of them
    /// all, let go or held.
    pub fn digest(&self) -> LogDigest {
        LogDigest {
            len: self.log.len() as u64,
            rows: self.gone().and(RowsDigest::of(&self.log)),
        }
    }

    /// The rows appended or changed since the last call, as they stand now (none while
    /// nobody projects): the projection holds them from here, so every whole chunk is let
    /// go, all but the rows `keep` holds (which change again; `keep` must judge a row by its
    /// contents alone, since a run's digest applies it again). See [`Log::hand_out`]: a
    /// chunk's rows are moved out, not copied, and owe their digest ([`Run`]).
    pub fn hand_out(&mut self, keep: fn(&T) -> bool) -> Handed<T> {
        self.fold_owed();
        let mut out = Handed::default();
        let Some(from) = self.handed else {
            return out;
        };
        let mut changed = std::mem::take(&mut self.changed);
        changed.sort_unstable();
        changed.dedup();
        if !changed.is_empty() {
            let rows = changed.iter().map(|&i| self.log[i].clone()).collect();
            out.0.push(Arc::new(Run::copied(rows)));
        }
        let (gone, mut buf) = (&mut self.gone, Vec::new());
        let digest = |row: &T| gone.add(row, &mut buf);
        self.log.hand_out(from, keep, digest, &mut out);
        let owing = out.0.iter().filter(|run| run.owes.is_some());
        self.owed.extend(owing.cloned());
        self.handed = Some(self.log.len());
        changed.clear();
        self.changed = changed;
        out
    }
}

/// Rows owed to the digest at most, beyond which the engine computes the oldest run's itself:
/// four million, two midnights' at a million positions (about 600 MB of ledger rows, which
/// the journal's backlog holds meanwhile too, until it has projected them).
pub const MAX_OWED_ROWS: usize = 1 << 22;

/// A run of rows handed out of a log, in sequence order: a whole chunk the log let go (moved
/// out, not copied), which owes the digest of the rows let go (all but those `keep` held),
/// or copies, which owe none. A chunk's rows handed out before, as copies while it filled,
/// are not handed out again, but are in the digest: the engine thread pays for neither. The
/// digest is computed once, by whoever asks first: the journal's writer once it has the rows
/// ([`Run::settle`]), or the engine when it hashes its state before the writer did. A chunk
/// goes back to its log's spares, emptied, when its run is dropped.
#[derive(Debug)]
pub struct Run<T> {
    rows: Vec<T>,
    /// The rows at the front handed out before: in the digest, not handed out again.
    before: usize,
    owes: Option<Owes<T>>,
}

#[derive(Debug)]
struct Owes<T> {
    /// Which rows the log kept (so are not let go, nor in the digest).
    keep: fn(&T) -> bool,
    digest: OnceLock<RowsDigest>,
    /// Where the chunk goes once dropped.
    spare: Spares<T>,
}

impl<T> Run<T> {
    fn copied(rows: Vec<T>) -> Self {
        Run {
            rows,
            before: 0,
            owes: None,
        }
    }

    fn let_go(rows: Vec<T>, before: usize, keep: fn(&T) -> bool, spare: Spares<T>) -> Self {
        assert!(before <= rows.len(), "rows handed out before are the run's");
        let owes = Owes {
            keep,
            digest: OnceLock::new(),
            spare,
        };
        Run {
            rows,
            before,
            owes: Some(owes),
        }
    }

    /// The rows handed out.
    fn handed(&self) -> &[T] {
        &self.rows[self.before..]
    }

    fn len(&self) -> usize {
        self.handed().len()
    }

    /// The rows held, handed out or not: what the digest costs.
    fn held(&self) -> usize {
        self.rows.len()
    }

    /// The digest owed, if computed.
    fn settled(&self) -> Option<RowsDigest> {
        self.owes
            .as_ref()
            .map_or(Some(RowsDigest::default()), |o| o.digest.get().copied())
    }
}

impl<T: Serialize> Run<T> {
    /// The digest owed (of nothing for copies), computed now unless it was; a caller that
    /// finds another computing it waits for that.
    pub fn settle(&self) -> RowsDigest {
        let Some(owes) = &self.owes else {
            return RowsDigest::default();
        };
        let gone = self.rows.iter().filter(|row| !(owes.keep)(row));
        *owes.digest.get_or_init(|| RowsDigest::of(gone))
    }
}

impl<T> Drop for Run<T> {
    fn drop(&mut self) {
        if let Some(owes) = &self.owes {
            owes.spare.give(std::mem::take(&mut self.rows));
        }
    }
}

/// The rows handed out, not who computed what.
impl<T: PartialEq> PartialEq for Run<T> {
    fn eq(&self, other: &Self) -> bool {
        self.handed() == other.handed()
    }
}

impl<T: Eq> Eq for Run<T> {}

/// Rows handed out of a log, in runs ([`Run`]): whole chunks moved out of it, and copies. A
/// run is in sequence order; the first may be of rows changed after they were handed out
/// before. Whoever takes them settles the digests they owe ([`Handed::settle`]) off the
/// engine thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handed<T>(Vec<Arc<Run<T>>>);

impl<T> Default for Handed<T> {
    fn default() -> Self {
        Handed(Vec::new())
    }
}

/// The rows of a run.
type RunRows<'a, T> = fn(&'a Arc<Run<T>>) -> std::slice::Iter<'a, T>;

/// The rows handed out, in order.
pub type HandedIter<'a, T> =
    std::iter::FlatMap<std::slice::Iter<'a, Arc<Run<T>>>, std::slice::Iter<'a, T>, RunRows<'a, T>>;

impl<T> Handed<T> {
    pub fn len(&self) -> usize {
        self.0.iter().map(|run| run.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|run| run.handed().is_empty())
    }

    pub fn iter(&self) -> HandedIter<'_, T> {
        self.0.iter().flat_map(|run| run.handed().iter())
    }

    /// Moves `more`'s runs after these.
    pub fn append(&mut self, more: &mut Handed<T>) {
        self.0.append(&mut more.0);
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Rows in runs that still owe their digest, handed out or not.
    pub fn owing(&self) -> usize {
        let owing = self.0.iter().filter(|run| run.settled().is_none());
        owing.map(|run| run.held()).sum()
    }
}

impl<T: Serialize> Handed<T> {
    /// Computes the digests the runs owe (see [`Run`]) until `budget` rows are digested;
    /// the rows digested.
    pub fn settle(&self, budget: usize) -> usize {
        let mut spent = 0;
        for run in self.0.iter().filter(|run| run.settled().is_none()) {
            if spent >= budget {
                break;
            }
            run.settle();
            spent += run.held();
        }
        spent
    }
}

impl<T> From<Vec<T>> for Handed<T> {
    fn from(rows: Vec<T>) -> Self {
        Handed(vec![Arc::new(Run::copied(rows))])
    }
}

impl<'a, T> IntoIterator for &'a Handed<T> {
    type Item = &'a T;
    type IntoIter = HandedIter<'a, T>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHUNK: usize = 1 << DEFAULT_WINDOW_BITS;

    #[test]
    fn a_log_reads_back_what_was_appended_across_chunks_and_encodes_as_a_vec() {
        let n = 2 * CHUNK + 5;
        let mut log = Log::default();
        log.reserve(CHUNK + 3);
        (0..n as u64).for_each(|i| log.push(i));
        assert_eq!(
            (log.len(), log[CHUNK], log.get(n - 1)),
            (n, CHUNK as u64, Some(&(n as u64 - 1)))
        );
        assert!(log.iter().copied().eq(0..n as u64));
        assert!(
            log.iter_from(CHUNK - 1)
                .copied()
                .eq(CHUNK as u64 - 1..n as u64)
        );
        assert_eq!(log.iter_from(n + 7).count(), 0);
        assert_eq!(log.get(n), None);
        log[3] = 33;
        let as_vec: Vec<u64> = log.iter().copied().collect();
        let bytes = postcard::to_allocvec(&log).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&as_vec).expect("encodes"));
        let back: Log<u64> = postcard::from_bytes(&bytes).expect("decodes");
        assert!(back == log && back.iter().eq(as_vec.iter()));
    }

    #[test]
    fn a_small_log_grows_as_a_vec_and_past_small_its_first_chunk_takes_its_whole_size() {
        let mut log = Log::default();
        (0..SMALL as u64).for_each(|i| log.push(i));
        assert!(
            log.chunks[0].capacity() < 2 * SMALL,
            "a small log stays small"
        );
        log.push(SMALL as u64);
        assert_eq!(
            log.chunks[0].capacity(),
            CHUNK,
            "grown once, to its whole size"
        );
        (SMALL as u64 + 1..CHUNK as u64).for_each(|i| log.push(i));
        assert_eq!((log.chunks.len(), log.chunks[0].capacity()), (1, CHUNK));
        assert!(log.iter().copied().eq(0..CHUNK as u64));
    }

    #[test]
    fn a_log_hands_out_whole_chunks_by_moving_them_keeps_what_is_asked_and_reads_back_held() {
        let n = 2 * CHUNK + 5;
        let mut log = Log::default();
        (0..n as u64).for_each(|i| log.push(i));
        let (mut gone, mut out) = (Vec::new(), Handed::default());
        let keep = |i: &u64| *i == 7 || *i == CHUNK as u64 + 1;
        log.hand_out(10, keep, |i| gone.push(*i), &mut out);
        // Nothing digested on the spot: every row let go owes its digest to whoever takes
        // the runs, those before 10 (handed out before) too, but for the ones kept.
        assert_eq!((log.first_held(), log.len(), gone), (2 * CHUNK, n, vec![]));
        // Both whole chunks moved, the first's rows from 10 handed out; the filling one's
        // copied.
        assert!(out.iter().copied().eq(10..n as u64));
        assert_eq!(
            out.0.iter().map(|run| run.len()).collect::<Vec<_>>(),
            [CHUNK - 10, CHUNK, 5]
        );
        assert_eq!(out.owing(), 2 * CHUNK);
        let let_go = (0..2 * CHUNK as u64).filter(|i| !keep(i));
        let owed: Vec<u64> = let_go.collect();
        assert_eq!(out.settle(1), CHUNK, "a budget spent by a run");
        assert_eq!((out.settle(usize::MAX), out.owing()), (CHUNK, 0));
        let settled = out.0.iter().map(|run| run.settle());
        assert_eq!(
            settled.fold(RowsDigest::default(), RowsDigest::and),
            RowsDigest::of(&owed)
        );
        assert_eq!(
            (log.get(7), log.get(8), log[CHUNK + 1], log[2 * CHUNK]),
            (Some(&7), None, CHUNK as u64 + 1, 2 * CHUNK as u64)
        );
        assert!(log.iter_from(0).copied().eq(2 * CHUNK as u64..n as u64));
        assert_eq!(
            log.spare.len(),
            0,
            "a chunk let go is the runs' until dropped"
        );
        let copy = out.clone();
        drop(out);
        assert_eq!(log.spare.len(), 0, "a run still held keeps its chunk");
        drop(copy);
        assert_eq!(
            log.spare.len(),
            2,
            "emptied, the chunks serve those to come"
        );
        // Kept items let go once no longer kept; nothing new to hand out.
        let (mut gone, mut more) = (Vec::new(), Handed::default());
        log.hand_out(n, |i| *i == 7, |i| gone.push(*i), &mut more);
        assert_eq!((gone, more.len()), (vec![CHUNK as u64 + 1], 0));
        assert!(
            log.iter()
                .copied()
                .eq([7].into_iter().chain(2 * CHUNK as u64..n as u64))
        );
        assert!(
            postcard::to_allocvec(&log).is_err(),
            "only the held form encodes it"
        );
        let bytes = postcard::to_allocvec(&log.held()).expect("encodes");
        let back = Log::from_held(postcard::from_bytes::<Held<u64>>(&bytes).unwrap()).unwrap();
        assert!(back == log);
        (0..CHUNK as u64).for_each(|i| log.push(i));
        assert_eq!(
            (log.len(), log.spare.len()),
            (n + CHUNK, 1),
            "the next chunk a spare"
        );
        // A window shorter than the length and gone chunks say is refused.
        let mut lying: Held<u64> = postcard::from_bytes(&bytes).unwrap();
        lying.len += 1;
        assert!(Log::from_held(lying).is_none());
    }

    #[test]
    fn a_projected_log_hands_out_every_row_and_change_once_and_digests_as_one_that_holds() {
        let (mut holding, mut projected) = (ProjectedLog::default(), ProjectedLog::default());
        assert!(projected.hand_out(|_| false).is_empty(), "none while off");
        projected.project(true, true);
        let (mut seen, mut taken) = (BTreeMap::new(), 0);
        // Every other hand-out's digests computed by its taker (as the journal's writer
        // does), the others left to the log, which computes them when asked.
        let mut take = |rows: Handed<(u64, u64)>| {
            taken += 1;
            if taken % 2 == 0 {
                rows.settle(usize::MAX);
            }
            seen.extend(rows.iter().copied());
        };
        for i in 0..2 * CHUNK as u64 + 9 {
            holding.push((i, i));
            projected.push((i, i));
            if i % 1000 == 0 {
                take(projected.hand_out(|row| row.0 == 5));
            }
            if i == CHUNK as u64 + 3 {
                // A row handed out, and kept, changes.
                projected.row_mut(5).1 = 55;
                holding.row_mut(5).1 = 55;
            }
        }
        projected.row_mut(CHUNK + 1).1 = 1;
        holding.row_mut(CHUNK + 1).1 = 1;
        assert_eq!((projected.first_held(), holding.first_held()), (CHUNK, 0));
        assert_eq!(
            projected.get(5),
            Some(&(5, 55)),
            "a row kept stays readable"
        );
        assert_eq!(projected.digest(), holding.digest());
        take(projected.hand_out(|_| false));
        assert_eq!(projected.digest(), holding.digest());
        // The runs computed (by the taker or by the digest above) fold into the log's own.
        assert!(!projected.owed.is_empty());
        take(projected.hand_out(|_| false));
        assert!(projected.owed.is_empty() && projected.digest() == holding.digest());
        assert_eq!(projected.iter().count(), 9);
        // The projection saw every row as it stands, the later of a row's two replacing.
        assert!(seen.into_iter().eq(holding.iter().copied()));
        let bytes = postcard::to_allocvec(&projected.held()).unwrap();
        let back = ProjectedLog::from_held(postcard::from_bytes(&bytes).unwrap()).unwrap();
        assert!(back == projected && back.digest() == holding.digest());
    }

    #[test]
    fn a_log_in_a_smaller_window_lets_go_a_window_at_a_time_and_rewindowed_holds_the_same() {
        let (mut small, mut holding) = (ProjectedLog::default(), ProjectedLog::default());
        small.set_window(8);
        small.project(true, true);
        let mut seen = Vec::new();
        for i in 0..1_000u64 {
            small.push(i);
            holding.push(i);
            if i % 100 == 99 {
                seen.extend(small.hand_out(|row| *row == 3).iter().copied());
                assert_eq!(small.first_held(), (i as usize + 1) / 256 * 256);
                assert!(small.iter().count() <= 256 + 1, "a window and the row kept");
            }
        }
        assert!(seen.iter().copied().eq(0..1_000));
        assert_eq!(small.digest(), holding.digest());
        // Restored from its held form (in the default window), then in windows both ways.
        let bytes = postcard::to_allocvec(&small.held()).unwrap();
        let mut back = ProjectedLog::from_held(postcard::from_bytes(&bytes).unwrap()).unwrap();
        assert_eq!(back.first_held(), 768);
        for bits in [12, 8, 9] {
            back.set_window(bits);
            assert!(back.iter().eq(small.iter()) && back.digest() == holding.digest());
            assert_eq!(
                (back.get(3), back.get(767), back.get(999)),
                (Some(&3), None, Some(&999))
            );
        }
        back.project(true, false);
        (1_000..1_600u64).for_each(|i| back.push(i));
        back.hand_out(|_| false);
        assert_eq!(
            back.first_held(),
            768 + 512,
            "lets go in its new window, from where it was"
        );
    }

    #[test]
    fn a_rows_digest_is_the_same_in_any_order_and_for_rows_longer_than_the_stack() {
        let rows: Vec<Vec<u8>> = (0..40u8).map(|i| vec![i; 20 * i as usize]).collect();
        let forward = RowsDigest::of(&rows);
        assert_eq!(RowsDigest::of(rows.iter().rev()), forward);
        let split = RowsDigest::of(&rows[..25]).and(RowsDigest::of(&rows[25..]));
        assert_eq!(split, forward);
        assert_ne!(RowsDigest::of(&rows[1..]), forward);
        // The long rows' digests are of their encodings, as the short ones' are.
        let long = &rows[39];
        let bytes = postcard::to_allocvec(long).unwrap();
        assert!(bytes.len() > 512);
        let low = rapidhash_v3_seeded(&bytes, &RowsDigest::LOW) as u128;
        let high = rapidhash_v3_seeded(&bytes, &RowsDigest::HIGH) as u128;
        assert_eq!(RowsDigest::of([long]), RowsDigest(high << 64 | low));
    }
}

//! A connection's queue of frames, bounded in frames and in bytes (D9), between the hub
//! (which pushes without waiting) and the session (which writes them out).
//!
//! The bytes are counted as queued: a frame shared by many connections counts in full on
//! each, so the bound holds whatever the frames are. A frame on its own may exceed the byte
//! bound (a deep book's snapshot), so a connection whose queue is empty always takes the
//! next frame. The queue also counts what it has carried, so the hub can tell whether a
//! frame it queued is still waiting (a repeated subscribe is coalesced while its snapshot
//! waits, [`Outbox::waiting`]).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{AcqRel, Acquire};

use tokio::sync::mpsc;

use super::frames::Frame;

/// Why a frame was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The frame or byte bound is reached: a slow consumer.
    Full,
    /// The connection is gone.
    Closed,
}

#[derive(Default)]
struct Counts {
    /// Bytes queued and not yet taken.
    bytes: AtomicU64,
    /// Frames queued since the connection opened, and frames taken.
    pushed: AtomicU64,
    taken: AtomicU64,
}

/// The hub's end.
#[derive(Clone)]
pub struct Outbox {
    frames: mpsc::Sender<Frame>,
    counts: Arc<Counts>,
    max_bytes: u64,
}

/// The session's end.
pub struct Inbox {
    frames: mpsc::Receiver<Frame>,
    counts: Arc<Counts>,
}

/// A queue of at most `frames` frames and `bytes` bytes.
pub fn queue(frames: u32, bytes: u64) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::channel(frames as usize);
    let counts = Arc::new(Counts::default());
    let outbox = Outbox {
        frames: tx,
        counts: counts.clone(),
        max_bytes: bytes,
    };
    (outbox, Inbox { frames: rx, counts })
}

impl Outbox {
    /// Queues `f` without waiting; its position in the queue's history when it was queued.
    pub fn push(&self, f: Frame) -> Result<u64, Refused> {
        let len = f.len() as u64;
        let before = self.counts.bytes.fetch_add(len, AcqRel);
        if before > 0 && before + len > self.max_bytes {
            self.counts.bytes.fetch_sub(len, AcqRel);
            return Err(Refused::Full);
        }
        // Counted before it is sent, so the session never takes away more than was added.
        match self.frames.try_send(f) {
            Ok(()) => Ok(self.counts.pushed.fetch_add(1, AcqRel)),
            Err(e) => {
                self.counts.bytes.fetch_sub(len, AcqRel);
                Err(match e {
                    mpsc::error::TrySendError::Full(_) => Refused::Full,
                    mpsc::error::TrySendError::Closed(_) => Refused::Closed,
                })
            }
        }
    }

    /// Whether the frame queued at `position` has not been taken by the session yet.
    pub fn waiting(&self, position: u64) -> bool {
        self.counts.taken.load(Acquire) <= position
    }

    /// Bytes waiting now.
    pub fn bytes(&self) -> u64 {
        self.counts.bytes.load(Acquire)
    }
}

impl Inbox {
    fn took(&self, f: &Frame) {
        self.counts.bytes.fetch_sub(f.len() as u64, AcqRel);
        self.counts.taken.fetch_add(1, AcqRel);
    }

    /// The next frame; `None` once the hub let go of the connection.
    pub async fn recv(&mut self) -> Option<Frame> {
        let f = self.frames.recv().await?;
        self.took(&f);
        Some(f)
    }

    /// The next frame if one is waiting.
    pub fn try_recv(&mut self) -> Option<Frame> {
        let f = self.frames.try_recv().ok()?;
        self.took(&f);
        Some(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Frame {
        Frame::from("x".repeat(n))
    }

    /// D9: the queue refuses past its bytes as past its frames; an empty queue takes even a
    /// frame larger than the bound; taking frames frees their bytes.
    #[tokio::test]
    async fn the_queue_is_bounded_in_bytes_and_frames_and_tells_what_still_waits() {
        let (out, mut inbox) = queue(3, 100);
        assert_eq!(
            out.push(frame(150)),
            Ok(0),
            "an empty queue takes any frame"
        );
        assert_eq!(out.push(frame(1)), Err(Refused::Full));
        assert_eq!(inbox.recv().await.unwrap().len(), 150);
        assert_eq!(out.bytes(), 0);
        assert_eq!(out.push(frame(60)), Ok(1));
        assert!(out.waiting(1));
        assert_eq!(out.push(frame(40)), Ok(2));
        assert_eq!(out.push(frame(1)), Err(Refused::Full), "101 bytes");
        assert_eq!(inbox.try_recv().unwrap().len(), 60);
        assert!(!out.waiting(1) && out.waiting(2));
        assert_eq!(out.push(frame(1)), Ok(3));
        assert_eq!(out.push(frame(1)), Ok(4));
        assert_eq!(out.push(frame(1)), Err(Refused::Full), "three frames");
        drop(inbox);
        assert_eq!(out.push(frame(1)), Err(Refused::Closed));
    }
}

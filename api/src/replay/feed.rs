//! A scenario run as it is read (issue 36 item 4): the one-pass read (`stream`) hands the run
//! its steps a chunk of instants at a time, so that the engine starts on the first instants,
//! on a thread of its own, while the rest of the file is still being read.
//!
//! A step can be handed out only once no step still to be read can come before it. The feed
//! takes the earliest instant of the latest [`WINDOW`] events for that bound, hands out the
//! steps before it, a chunk of at least [`CHUNK_STEPS`] at a time (each instant whole), and
//! keeps back the rest. That holds for events written in time order, and for those written
//! near it (`scenario-gen` writes each cancel beside its order, ten minutes ahead). An event
//! with a step before what was handed out, more than [`MAX_KEPT`] steps kept back (a file of
//! prices or a recorded market at the top of a scenario), a latency model or a what-if
//! (which move steps when the run starts), or a refusal make the feed give up, and the run is
//! made from the whole plan as before: when it gives up before handing anything out, from the
//! reader's own plan; after, the run it started is dropped with its staging directory and the
//! file read again (the whole read then says where and why, for a refusal). So a fed run is
//! the run of the whole plan, to the byte; a file written to make the feed give up late costs
//! at most the one run it dropped and a second read, within the same bounds.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, TryRecvError};

use perpsim_core::time::Timestamp;
use sha2::Sha256;

use super::plan::Plan;
use super::timeline::Timeline;

/// The fewest steps a chunk holds, but the last: each is a message between threads.
pub const CHUNK_STEPS: usize = 4_096;

/// The events whose earliest instant bounds what can still come.
pub const WINDOW: usize = 64;

/// The most steps kept back: each hand-out copies them once.
pub const MAX_KEPT: usize = 65_536;

/// What the reader hands the run.
pub enum Message {
    /// The plan but its steps, and its first steps: the run can start.
    Start(Box<Plan>, Timeline),
    /// Steps after those handed out before, in time order, each instant whole.
    Steps(Timeline),
    /// Nothing more to read.
    Done(ReadOver),
    /// The scenario is not fed (see the module's header): the run is dropped.
    GiveUp,
}

/// How a read that fed a run ended: the events read, the files they named, and the hash of
/// the text read (the manifest's, taken by the reader while the run goes on).
pub struct ReadOver {
    pub events: usize,
    pub inputs: Vec<PathBuf>,
    pub text_sha256: Sha256,
}

/// The reader's side: what bounds what can still come, and whether it still feeds.
pub struct Feeder {
    to_run: Sender<Message>,
    /// The earliest instant of each of the latest events (at most [`WINDOW`]).
    recent: VecDeque<Timestamp>,
    /// Every step handed out is before this instant.
    handed_before: Option<Timestamp>,
    /// Steps kept back after the last hand-out.
    kept: usize,
    /// The plan but its steps, until the first chunk goes with it.
    header: Option<Box<Plan>>,
    /// Whether steps were handed out (then the reader's plan lacks them).
    handed: bool,
    feeding: bool,
}

impl Feeder {
    pub fn new(to_run: Sender<Message>) -> Self {
        Feeder {
            to_run,
            recent: VecDeque::with_capacity(WINDOW),
            handed_before: None,
            kept: 0,
            header: None,
            handed: false,
            feeding: true,
        }
    }

    pub fn feeding(&self) -> bool {
        self.feeding
    }

    /// Whether steps were handed out: the reader's plan then lacks them.
    pub fn handed(&self) -> bool {
        self.handed
    }

    /// The run's plan but its steps: fed only without a latency model or a what-if.
    pub fn header(&mut self, plan: Plan) {
        match plan.latency.is_none() && plan.what_if.is_empty() {
            true => self.header = Some(Box::new(plan)),
            false => self.give_up(),
        }
    }

    /// After an event was planned into `steps` (never sorted), which held `before` steps
    /// before it: hands out the steps before the window's earliest instant once
    /// [`CHUNK_STEPS`] more than were kept back are waiting.
    pub fn after_event(&mut self, steps: &mut Timeline, before: usize) {
        let Some(first) = (before..steps.len()).filter_map(|i| steps.at(i)).min() else {
            return;
        };
        if self.handed_before.is_some_and(|h| first < h) || steps.len() > MAX_KEPT {
            return self.give_up();
        }
        if self.recent.len() == WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back(first);
        let bound = *self.recent.iter().min().expect("one just pushed");
        if steps.len() >= self.kept + CHUNK_STEPS && self.handed_before.is_none_or(|h| bound > h) {
            let chunk = steps.split_before(bound, CHUNK_STEPS);
            self.kept = steps.len();
            if !chunk.is_empty() {
                self.handed_before = Some(bound);
                self.send(chunk);
            }
        }
    }

    /// The read is over and `unique` (no key given twice): the last steps and how it ended.
    pub fn done(&mut self, steps: &mut Timeline, done: impl FnOnce() -> ReadOver, unique: bool) {
        if !self.feeding || !self.handed {
            // Nothing handed out: the reader's plan is the whole plan.
            return;
        }
        if !unique {
            return self.give_up();
        }
        let last = std::mem::take(steps);
        if !last.is_empty() {
            self.send(last);
        }
        self.post(Message::Done(done()));
    }

    fn send(&mut self, chunk: Timeline) {
        let message = match self.header.take() {
            Some(header) => Message::Start(header, chunk),
            None => Message::Steps(chunk),
        };
        self.handed = true;
        self.post(message);
    }

    /// Stops feeding; a run already started is told to stop.
    pub fn give_up(&mut self) {
        if self.handed {
            self.post(Message::GiveUp);
        }
        self.feeding = false;
    }

    /// A run that stopped takes nothing more: the reader stops feeding it.
    fn post(&mut self, message: Message) {
        if self.to_run.send(message).is_err() {
            self.feeding = false;
        }
    }
}

/// The run's side: the chunks received and not yet run, and how the read ended.
pub struct Fed {
    from_reader: Receiver<Message>,
    queue: VecDeque<Timeline>,
    /// The chunk that came with the start, until the run asks for it.
    first: Option<Timeline>,
    /// How the read ended, once it is over.
    done: Option<ReadOver>,
    gave_up: bool,
}

/// Why a fed run stops: the feed gave up (see the module's header).
pub const GAVE_UP: &str = "the scenario is read whole before it runs";

impl Fed {
    pub fn new(from_reader: Receiver<Message>) -> Self {
        Fed {
            from_reader,
            queue: VecDeque::new(),
            first: None,
            done: None,
            gave_up: false,
        }
    }

    /// The plan but its steps, once the reader hands out its first chunk; `None` if it never
    /// does (the reader's own result then says what the file is).
    pub fn start(&mut self) -> Option<Plan> {
        match self.from_reader.recv().ok()? {
            Message::Start(plan, chunk) => {
                self.first = Some(chunk);
                Some(*plan)
            }
            _ => None,
        }
    }

    /// Whether the feed gave up on the run it started.
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Once the read is over: how it ended.
    pub fn done(&mut self) -> Option<ReadOver> {
        self.done.take()
    }

    /// The next chunk to run, waiting for the reader if it has none yet; `None` after the
    /// last. Every message waiting is taken first, each chunk passed to `arrived` (and `None`
    /// once the read is over), so that the run learns the references of what is to come as
    /// early as the reader allows.
    pub fn next_chunk(
        &mut self,
        arrived: &mut impl FnMut(Option<&Timeline>),
    ) -> Result<Option<Timeline>, String> {
        if let Some(first) = self.first.take() {
            arrived(Some(&first));
            self.queue.push_back(first);
        }
        loop {
            while self.done.is_none() {
                match self.from_reader.try_recv() {
                    Ok(message) => self.take(message, arrived)?,
                    Err(TryRecvError::Empty) => break,
                    Err(TryRecvError::Disconnected) => return Err(self.stop()),
                }
            }
            if let Some(chunk) = self.queue.pop_front() {
                return Ok(Some(chunk));
            }
            if self.done.is_some() {
                return Ok(None);
            }
            match self.from_reader.recv() {
                Ok(message) => self.take(message, arrived)?,
                Err(_) => return Err(self.stop()),
            }
        }
    }

    fn take(
        &mut self,
        message: Message,
        arrived: &mut impl FnMut(Option<&Timeline>),
    ) -> Result<(), String> {
        match message {
            Message::Steps(chunk) => {
                arrived(Some(&chunk));
                self.queue.push_back(chunk);
            }
            Message::Done(read) => {
                self.done = Some(read);
                arrived(None);
            }
            Message::Start(..) | Message::GiveUp => return Err(self.stop()),
        }
        Ok(())
    }

    fn stop(&mut self) -> String {
        self.gave_up = true;
        GAVE_UP.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::files::Limits;
    use super::super::output::{Finished, scenario_run};
    use super::super::{read, run_as_read};

    /// A scenario as `scenario-gen` writes one: orders four a second, every seventh
    /// cancelled ten minutes later by an event written beside it, every fifth priced through
    /// the maker's quotes (so some cancels find their order filled); then `tail`'s events.
    fn scenario(dir: &Path, orders: usize, tail: &str) -> PathBuf {
        let mut events = Vec::new();
        for i in 0..orders {
            let (t, c) = (1 + i / 4, i % 3);
            let side = ["buy", "sell"][i % 2];
            let price = match i % 5 {
                0 => ["2100", "1900"][i % 2],
                _ => ["1990", "2010"][i % 2],
            };
            events.push(format!(
                r#"{{"at":"+{t}s","customer":"c{c}","order":{{"symbol":"ETH-USDC-PERP","side":"{side}","type":"limit","reference_id":"o{i}","amount":"0.01","limit_price":"{price}"}}}}"#
            ));
            if i % 7 == 0 {
                let at = t + 600;
                events.push(format!(
                    r#"{{"at":"+{at}s","customer":"c{c}","cancel":"o{i}"}}"#
                ));
            }
        }
        let customers = r#"[{"name":"c0","deposits":{"USDC":"1000000"}},
{"name":"c1","deposits":{"USDC":"1000000"}},{"name":"c2","deposits":{"USDC":"1000000"}}]"#;
        let text = format!(
            r#"{{"name":"fed","seed":3,"start":"2026-01-01T00:00:00Z","end":"+2h",
"customers":{customers},"events":[{}{tail}]}}"#,
            events.join(",\n")
        );
        let file = dir.join("s.json");
        std::fs::write(&file, text).unwrap();
        file
    }

    /// The run of `file` as it is read into `out`, and whether each call of the run was fed.
    fn fed_run(file: &Path, out: &Path) -> (Result<Finished, String>, Vec<bool>) {
        let limits = Limits::default();
        let mut calls = Vec::new();
        let made = run_as_read(file, &limits, |plan, fed| {
            calls.push(fed.is_some());
            scenario_run(file, plan, out, &limits, fed, &|_, _| {})
        });
        (made.map(|(_, finished)| finished), calls)
    }

    /// The run of the whole plan, as `replay` made it before it fed its runs.
    fn whole_run(file: &Path, out: &Path) -> Finished {
        let limits = Limits::default();
        let mut plan = read(file, &limits).unwrap();
        scenario_run(file, &mut plan, out, &limits, None, &|_, _| {}).unwrap()
    }

    fn same_files(a: &Path, b: &Path) {
        for name in ["journal.redb", "ledger.csv", "trades.csv", "report.json"] {
            let (x, y) = (std::fs::read(a.join(name)), std::fs::read(b.join(name)));
            assert!(x.unwrap() == y.unwrap(), "{name} differs");
        }
    }

    /// Runs the scenario with `tail` as it is read and as a whole plan: the calls of the run
    /// (whether each was fed) are `calls`, and the two runs' files the same.
    fn runs_as_the_whole_plan(tail: &str, calls: &[bool]) {
        let tmp = tempfile::tempdir().unwrap();
        let file = scenario(tmp.path(), 3 * super::CHUNK_STEPS, tail);
        let (fed, made) = fed_run(&file, &tmp.path().join("fed"));
        assert_eq!(made, calls);
        let whole = whole_run(&file, &tmp.path().join("whole"));
        assert_eq!(fed.unwrap().state_hash, whole.state_hash);
        same_files(&tmp.path().join("fed"), &tmp.path().join("whole"));
        let report = std::fs::read_to_string(tmp.path().join("fed/report.json")).unwrap();
        assert!(
            report.contains("is filled and cannot be cancelled"),
            "a refused cancel names its order's status"
        );
    }

    /// Issue 36 item 4: a scenario run as it is read, its cancels written ten minutes ahead
    /// of their place in time, is the run of its whole plan, file for file.
    #[test]
    fn a_scenario_run_as_it_is_read_is_the_run_of_its_whole_plan() {
        runs_as_the_whole_plan("", &[true]);
    }

    /// Issue 36 item 4: an event before the steps a feed handed out stops the run it started,
    /// and the whole plan runs instead, to the same files.
    #[test]
    fn an_event_before_what_was_handed_out_runs_the_whole_plan_instead() {
        let late = r#",{"at":"+2s","customer":"c1","cancel":"o5"}"#;
        runs_as_the_whole_plan(late, &[true, false]);
    }

    /// D11: a refusal met after steps were handed out is the whole read's, where it is, and
    /// the run it started leaves nothing behind.
    #[test]
    fn a_refusal_after_steps_were_handed_out_is_the_whole_reads_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let bad = r#",{"at":"+3000s","customer":"c1","cancel":"o5","side":"Sell"}"#;
        let file = scenario(tmp.path(), 3 * super::CHUNK_STEPS, bad);
        let out = tmp.path().join("fed");
        let (fed, calls) = fed_run(&file, &out);
        let refused = read(&file, &Limits::default()).unwrap_err().to_string();
        assert_eq!(fed.unwrap_err(), refused);
        assert_eq!(calls, [true]);
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the scenario: {left:?}");
    }
}

//! A plan's steps, each command held encoded as the journal encodes it (postcard) in one
//! buffer, beside a fixed-size head per step.
//!
//! Why: as `Command`s, a million orders took about 400 bytes each (the step, the boxed entry,
//! the symbol and the reference), every byte fresh memory the kernel zeroes while the scenario
//! is read, and zeroing fresh pages was two fifths of the read. Encoded, an order takes about
//! 120 bytes with its head. The run decodes each command as it applies it, into memory freed a
//! moment later and reused by the next, and journals the encoding as it is where the command is
//! the file's own (a customer's is bound to its code first, and encoded again).

use std::fmt;

use perpsim_core::time::Timestamp;
use perpsim_systems::Command;

use super::plan::Step;

/// The steps, in the order pushed until [`Timeline::sort`].
#[derive(Clone, Default)]
pub struct Timeline {
    heads: Vec<Head>,
    /// Every command, encoded, one after the other.
    bytes: Vec<u8>,
    /// (customer, where the command starts in `bytes`) of each cancel and amend: 16 bytes a
    /// step, their references read back once, when the run starts (heads move in a sort).
    order_steps: Vec<(usize, usize)>,
}

/// A step without its command: where its encoding starts in the buffer.
#[derive(Clone, Copy)]
struct Head {
    at: Timestamp,
    event: usize,
    customer: Option<usize>,
    start: usize,
}

/// The bytes an encoded command takes on average, for a reservation: an order takes about 75
/// (its customer code alone 16), a cancel about 40.
const COMMAND_BYTES: usize = 80;

impl Timeline {
    /// Room for `steps` more steps: a buffer grown by doubling copies itself and faults in
    /// fresh pages twice over. Capacity never written costs address space, not memory.
    pub fn reserve(&mut self, steps: usize) {
        self.heads.reserve(steps);
        self.bytes.reserve(steps.saturating_mul(COMMAND_BYTES));
    }

    pub fn push(&mut self, step: Step) {
        let start = self.bytes.len();
        if let (Some(c), Some(_)) = (step.customer, step.command.order_reference()) {
            self.order_steps.push((c, start));
        }
        self.bytes = postcard::to_extend(&step.command, std::mem::take(&mut self.bytes))
            .expect("every command encodes, as the journal encodes it");
        self.heads.push(Head {
            at: step.at,
            event: step.event,
            customer: step.customer,
            start,
        });
    }

    pub fn len(&self) -> usize {
        self.heads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heads.is_empty()
    }

    /// The (customer, reference) every cancel and amend names: the references whose latest
    /// ended order a refusal may have to name. Decoded as they are taken.
    pub fn order_references(&self) -> impl Iterator<Item = (usize, String)> + '_ {
        self.order_steps.iter().filter_map(|&(customer, start)| {
            let (command, _) = decode(&self.bytes[start..]);
            Some((customer, command.order_reference()?.1.to_owned()))
        })
    }

    /// In time order; one instant's steps in the order pushed. Only the heads move: steps
    /// written in time order (as a recording is) are not touched at all. A head's `start`
    /// grows with each push, so (time, start) orders as a stable sort by time does, in place:
    /// a stable sort's scratch (a million heads: 40 MB) was fresh pages for the kernel to zero.
    pub fn sort(&mut self) {
        if !self.heads.is_sorted_by_key(|h| h.at) {
            self.heads.sort_unstable_by_key(|h| (h.at, h.start));
        }
    }

    /// Moves every customer's step to `delayed(its time)`, then sorts again (delays drawn in
    /// the timeline's order, so a plan and a seed always give the same run).
    pub fn delay_customers(&mut self, mut delayed: impl FnMut(Timestamp) -> Timestamp) {
        for head in self.heads.iter_mut().filter(|h| h.customer.is_some()) {
            head.at = delayed(head.at);
        }
        self.sort();
    }

    /// The timeline of `f` of each step, in this one's order.
    pub fn map_steps(self, mut f: impl FnMut(Step) -> Step) -> Timeline {
        let mut mapped = Timeline::default();
        mapped.reserve(self.len());
        for step in self.iter() {
            mapped.push(f(step));
        }
        mapped
    }

    /// Hands out the steps before `w`, in time order (one instant's in the order pushed),
    /// keeping the rest in the order pushed, with room for `room` more. Only for a timeline
    /// never sorted (its heads in the order pushed), whose encodings are moved as they are.
    pub fn split_before(&mut self, w: Timestamp, room: usize) -> Timeline {
        let (mut out, mut rest) = (Timeline::default(), Timeline::default());
        rest.reserve(room);
        let mut references = self.order_steps.iter().peekable();
        for (i, head) in self.heads.iter().enumerate() {
            let end = self.heads.get(i + 1).map_or(self.bytes.len(), |h| h.start);
            debug_assert!(head.start < end, "the heads are in the order pushed");
            let into = if head.at < w { &mut out } else { &mut rest };
            let start = into.bytes.len();
            into.bytes.extend_from_slice(&self.bytes[head.start..end]);
            into.heads.push(Head { start, ..*head });
            if let Some(&(customer, _)) = references.next_if(|r| r.1 == head.start) {
                into.order_steps.push((customer, start));
            }
        }
        out.sort();
        *self = rest;
        out
    }

    /// Step `i`'s instant, without decoding its command.
    pub fn at(&self, i: usize) -> Option<Timestamp> {
        self.heads.get(i).map(|h| h.at)
    }

    /// The step at position `i` in order, decoded.
    pub fn get(&self, i: usize) -> Option<Step> {
        self.get_encoded(i).map(|(step, _)| step)
    }

    /// The step at position `i` in order, decoded, and its command's encoding (as the
    /// journal encodes it: a replay journals it as it is).
    pub fn get_encoded(&self, i: usize) -> Option<(Step, &[u8])> {
        self.heads.get(i).map(|h| {
            let (command, encoded) = decode(&self.bytes[h.start..]);
            let step = Step {
                at: h.at,
                event: h.event,
                customer: h.customer,
                command,
            };
            (step, encoded)
        })
    }

    /// The steps in order, each decoded as it is taken.
    pub fn iter(&self) -> impl Iterator<Item = Step> + '_ {
        self.iter_encoded().map(|(step, _)| step)
    }

    /// The steps in order with their commands' encodings, each decoded as it is taken.
    pub fn iter_encoded(&self) -> impl Iterator<Item = (Step, &[u8])> + '_ {
        (0..self.heads.len()).map(|i| self.get_encoded(i).expect("in range"))
    }
}

/// The command encoded at the start of `bytes` (postcard delimits its own values), and its
/// encoding.
fn decode(bytes: &[u8]) -> (Command, &[u8]) {
    let (command, rest) = postcard::take_from_bytes(bytes)
        .expect("a command the timeline encoded decodes, as the journal's do");
    (command, &bytes[..bytes.len() - rest.len()])
}

impl fmt::Debug for Timeline {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan::UNBOUND;
    use super::*;
    use perpsim_systems::command::CancelOrder;

    fn cancel(reference_id: &str) -> Command {
        Command::CancelOrder(CancelOrder {
            customer: UNBOUND,
            reference_id: reference_id.to_owned(),
        })
    }

    /// The references a refusal may have to name: every cancel and amend bound to a
    /// customer, read back as pushed, whatever the sort did to the steps.
    #[test]
    fn cancels_and_amends_give_back_their_customer_and_reference_after_a_sort() {
        let mut timeline = Timeline::default();
        for (i, (second, reference)) in [(9, "late"), (1, "early"), (5, "unbound")]
            .into_iter()
            .enumerate()
        {
            timeline.push(Step {
                at: Timestamp::from_millis(second * 1000),
                event: i,
                customer: (reference != "unbound").then_some(i),
                command: cancel(reference),
            });
        }
        timeline.sort();
        let named: Vec<(usize, String)> = timeline.order_references().collect();
        assert_eq!(named, [(0, "late".to_owned()), (1, "early".to_owned())]);
    }

    /// D11: a timeline split before an instant hands out the earlier steps in time order
    /// and keeps the rest as pushed, references included: what a feed hands out and keeps
    /// is what the whole read plans.
    #[test]
    fn a_timeline_split_before_an_instant_keeps_every_step_and_reference_once() {
        let at = |s: i64| Timestamp::from_millis(s * 1000);
        let mut whole = Timeline::default();
        for (i, (second, reference)) in [(5, "e"), (1, "a"), (9, "x"), (1, "b"), (3, "c")]
            .into_iter()
            .enumerate()
        {
            whole.push(Step {
                at: at(second),
                event: i,
                customer: (i != 3).then_some(i),
                command: cancel(reference),
            });
        }
        let mut rest = whole.clone();
        let front = rest.split_before(at(5), 10);
        let events = |t: &Timeline| t.iter().map(|s| s.event).collect::<Vec<_>>();
        assert_eq!((events(&front), events(&rest)), (vec![1, 3, 4], vec![0, 2]));
        let references = |t: &Timeline| t.order_references().collect::<Vec<_>>();
        assert_eq!(references(&front), [(1, "a".into()), (4, "c".into())]);
        assert_eq!(references(&rest), [(0, "e".into()), (2, "x".into())]);
        rest.push(Step {
            at: at(7),
            event: 5,
            customer: Some(5),
            command: cancel("y"),
        });
        whole.sort();
        let mut all: Vec<String> = front.iter().map(|s| format!("{s:?}")).collect();
        rest.sort();
        all.extend(
            rest.iter()
                .filter(|s| s.event != 5)
                .map(|s| format!("{s:?}")),
        );
        let expected: Vec<String> = whole.iter().map(|s| format!("{s:?}")).collect();
        assert_eq!(all, expected);
        assert_eq!(
            events(&rest),
            [0, 5, 2],
            "a step pushed after a split sorts in its place"
        );
    }

    /// D11: the timeline gives back every command as planned, in time order, one instant's
    /// steps in the order written.
    #[test]
    fn steps_come_back_as_planned_in_time_order_stable_within_an_instant() {
        let mut timeline = Timeline::default();
        let at = |s: i64| Timestamp::from_millis(s * 1000);
        for (i, (second, reference)) in [(5, "e"), (1, "a"), (5, "f"), (1, "b"), (3, "c")]
            .into_iter()
            .enumerate()
        {
            timeline.push(Step {
                at: at(second),
                event: i,
                customer: (i % 2 == 0).then_some(i),
                command: cancel(reference),
            });
        }
        timeline.sort();
        let steps: Vec<Step> = timeline.iter().collect();
        let order: Vec<_> = steps.iter().map(|s| (s.at, s.event)).collect();
        assert_eq!(
            order,
            [(at(1), 1), (at(1), 3), (at(3), 4), (at(5), 0), (at(5), 2)]
        );
        assert_eq!(steps[2].customer, Some(4));
        assert_eq!(steps[1].customer, None);
        assert_eq!(
            format!("{:?}", steps[4].command),
            format!("{:?}", cancel("f"))
        );
    }
}

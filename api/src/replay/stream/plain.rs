//! A JSON scenario's events read without serde where they take the plain shape nearly every
//! event of a large scenario takes: an order or a cancel, every value a string with no escape
//! (`{"at":"+1s","customer":"c1","order":{"symbol":"…","side":"buy",…}}`). serde_json read
//! such an event through `Spanned`'s wrappers, a `Value` a field and a visitor a token: half
//! the reading thread's instructions for a million orders. This walk costs two thirds of what
//! that did, and with the rest of the read's cuts the thread a quarter less. What it reads is
//! a [`Plain`] event, its strings borrowed from the text, planned as it stands: building the
//! [`Event`] serde_json makes (a box and a string for each of its fields, and their drop) was
//! another sixth of the thread.
//!
//! An event of any other shape — another action, a key it does not know or gives twice, a
//! number, `null`, an escape, anything at all — is read by serde_json from where it starts,
//! exactly as the list's element it is, so this reader only ever takes what serde_json reads
//! to the same event (a test holds the two equal over hostile variants). The list itself is
//! found by a walk of the text before it (`list_start`), which gives up, and with it the pass,
//! where a key at the top holds an escape (serde_json's `events` and the walk's would then
//! differ).

use serde_saphyr::Spanned;

use crate::replay::fields::{Fields, order_field};
use crate::replay::format::{Event, Plain, PlainAction};

/// Where the top-level object's `events` list starts (its `[`): the first key of that object
/// written `"events"`. `None` where there is none, or a key of that object before it holds an
/// escape (serde_json reads `"\u0065vents"` as `events` too).
pub(super) fn list_start(text: &str) -> Option<usize> {
    let b = text.as_bytes();
    let (mut i, mut depth, mut key_next) = (0, 0usize, false);
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = string_end(b, i)?;
                if depth == 1 && key_next {
                    let key = &b[i + 1..end];
                    if key.contains(&b'\\') {
                        return None;
                    }
                    if key == b"events" {
                        let colon = skip_space(b, end + 1);
                        let list = skip_space(b, colon + 1);
                        return (b.get(colon) == Some(&b':') && b.get(list) == Some(&b'['))
                            .then_some(list);
                    }
                }
                (key_next, i) = (false, end + 1);
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                key_next = depth == 1 && b[i] == b'{';
            }
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b',' => key_next = depth == 1,
            b':' => key_next = false,
            _ => {}
        }
        i += 1;
    }
    None
}

/// The index of the quote that ends the string whose opening quote is at `open`.
fn string_end(b: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    loop {
        i += memchr::memchr2(b'"', b'\\', b.get(i..)?)?;
        match b[i] {
            b'"' => return Some(i),
            _ => i += 2,
        }
    }
}

/// A byte a plain string holds as written: not its end, an escape or a control character.
fn plain_byte(c: u8) -> bool {
    c >= 0x20 && c != b'"' && c != b'\\'
}

/// How many of the bytes of `b` are plain from its start ([`plain_byte`]). Eight at a time:
/// a string is a few bytes, where a vector search costs more to start than it saves, and a
/// byte at a time was a third of reading an event.
fn plain_len(b: &[u8]) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of each byte below `n` (`n` ≤ 0x80); exact up to the first such byte.
    let below = |w: u64, n: u8| w.wrapping_sub(ONES * n as u64) & !w & HIGH;
    let mut words = b.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        let special = below(w, 0x20)
            | below(w ^ (ONES * b'"' as u64), 1)
            | below(w ^ (ONES * b'\\' as u64), 1);
        if special != 0 {
            return at + special.trailing_zeros() as usize / 8;
        }
        at += 8;
    }
    let rest = words.remainder();
    at + rest
        .iter()
        .position(|&c| !plain_byte(c))
        .unwrap_or(rest.len())
}

/// The first index at or after `i` that is not JSON white space.
pub(super) fn skip_space(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The event whose text starts at `at` (white space before it allowed), and where its text
/// ends; `None` where the event is not written in the plain shape, or is no event at all.
pub(super) fn event(text: &str, at: usize) -> Option<(Plain<'_>, usize)> {
    let mut r = Reader {
        text,
        i: skip_space(text.as_bytes(), at),
    };
    let (mut when, mut customer, mut cancel, mut order) = (None, None, None, None);
    r.object(|r, key| {
        let slot = match key {
            "at" => &mut when,
            "customer" => &mut customer,
            "cancel" => &mut cancel,
            "order" => return once(&mut order, r.order()?, key),
            _ => return None,
        };
        once(slot, r.string()?, key)
    })?;
    let action = match (order, cancel) {
        (Some(fields), None) => PlainAction::Order(fields),
        (None, Some(reference)) => PlainAction::Cancel(reference),
        _ => return None,
    };
    let (at, customer) = (when?, customer?);
    Some((
        Plain {
            at,
            customer,
            action,
        },
        r.i,
    ))
}

/// The event serde_json reads from `at`, and where its text ends; `None` where it refuses.
pub(super) fn event_by_serde(text: &str, at: usize) -> Option<(Spanned<Box<Event>>, usize)> {
    let mut events =
        serde_json::Deserializer::from_str(&text[at..]).into_iter::<Spanned<Box<Event>>>();
    let event = events.next()?.ok()?;
    Some((event, at + events.byte_offset()))
}

/// `value` into an empty `slot`; `None` where the key came before.
fn once<T>(slot: &mut Option<T>, value: T, key: &str) -> Option<()> {
    super::once::<_, serde::de::value::Error>(slot, value, key).ok()
}

/// A walk of the text, at `i`.
struct Reader<'t> {
    text: &'t str,
    i: usize,
}

impl<'t> Reader<'t> {
    /// The next byte after white space, taken.
    fn next(&mut self) -> Option<u8> {
        let b = self.text.as_bytes();
        self.i = skip_space(b, self.i);
        let byte = *b.get(self.i)?;
        self.i += 1;
        Some(byte)
    }

    /// An object of at least one member, each handed to `member` with its key (the reader
    /// at its value); `None` where it is not one, or `member` declines.
    fn object(&mut self, mut member: impl FnMut(&mut Self, &'t str) -> Option<()>) -> Option<()> {
        (self.next()? == b'{').then_some(())?;
        loop {
            let key = self.string()?;
            (self.next()? == b':').then_some(())?;
            member(self, key)?;
            match self.next()? {
                b',' => continue,
                b'}' => return Some(()),
                _ => return None,
            }
        }
    }

    /// A string with no escape and no control character, as written.
    fn string(&mut self) -> Option<&'t str> {
        (self.next()? == b'"').then_some(())?;
        let start = self.i;
        let b = self.text.as_bytes();
        let end = start + plain_len(&b[start..]);
        (b.get(end)? == &b'"').then_some(())?;
        self.i = end + 1;
        Some(&self.text[start..end])
    }

    /// An order's body: each key one of an order's fields, given once, with a string.
    fn order(&mut self) -> Option<Fields> {
        let mut named = Vec::with_capacity(8);
        let mut given = 0u32;
        self.object(|r, key| {
            let f = order_field(key)?;
            (given & 1 << f == 0).then_some(())?;
            given |= 1 << f;
            named.push((f, r.string()?.to_owned()));
            Some(())
        })?;
        Some(Fields::Named(named))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_saphyr::Location;

    use super::*;
    use crate::replay::format::Body;

    /// What serde_json makes of a value written without a place of its own.
    fn spanned<T>(value: T) -> Spanned<T> {
        Spanned::new(value, Location::UNKNOWN, Location::UNKNOWN)
    }

    /// The event serde_json would read where the walk read `plain`.
    fn as_event(plain: Plain) -> Spanned<Box<Event>> {
        let mut event = Event::new(spanned(plain.at.to_owned()));
        event.customer = Some(Box::new(spanned(plain.customer.to_owned())));
        match plain.action {
            PlainAction::Order(fields) => {
                event.order = Some(Box::new(Body::new(spanned(fields))));
            }
            PlainAction::Cancel(reference) => {
                event.cancel = Some(Box::new(spanned(reference.to_owned())));
            }
        }
        spanned(Box::new(event))
    }

    /// What each reader makes of the event written at the start of `text`, as text.
    fn both(text: &str) -> (Option<String>, Option<String>) {
        let show = |read: Option<(Spanned<Box<Event>>, usize)>| {
            read.map(|(event, end)| format!("{end} {event:?}"))
        };
        let plain = event(text, 0).map(|(plain, end)| (as_event(plain), end));
        (show(plain), show(event_by_serde(text, 0)))
    }

    /// The plain reader takes an event only where serde_json reads the same event from the
    /// same text, ending at the same place.
    fn holds(text: &str) -> Option<String> {
        let (plain, serde) = both(text);
        if plain.is_some() {
            assert_eq!(plain, serde, "{text}");
        }
        plain
    }

    const ORDER: &str = r#"{"at":"+1s","customer":"c365","order":{"symbol":"ETH-USDC-PERP","side":"sell","reference_id":"o0","amount":"0.29","type":"market"}}"#;
    const LIMIT: &str = r#"{"at":"+1s","customer":"c743","order":{"symbol":"SOL-USDC-PERP","side":"sell","reference_id":"o2","amount":"0.5","type":"limit","limit_price":"147.645","time_in_force":"IOC"}}"#;
    const CANCEL: &str = r#"{"at":"+601s","customer":"c238","cancel":"o3"}"#;

    /// D11: an order or a cancel written plainly, in any order of keys and with any white
    /// space between its tokens, is read plain as serde_json reads it.
    #[test]
    fn a_plain_order_or_cancel_is_the_event_serde_json_reads() {
        let spaced = " \n{ \"order\" :\t{ \"type\":\"limit\" , \"symbol\":\"BTC-USDC-PERP\",\r\n\
            \"side\":\"buy\",\"reference_id\":\"é-☃\",\"amount\":\"1\",\"limit_price\":\"1\",\
            \"post_only\":\"true\"} , \"customer\" : \"c1\",\"at\":\"2026-01-01T00:00:01Z\" } ,";
        for text in [ORDER, LIMIT, CANCEL, spaced] {
            assert!(holds(text).is_some(), "read plain: {text}");
        }
        let (_, end) = event(spaced, 0).unwrap();
        assert_eq!(&spaced[end..], " ,", "the event ends at its brace");
    }

    /// D11: an event of any other shape is left to serde_json, which reads it or refuses it
    /// as it always did: escapes, control characters, numbers, nulls, nested values, keys
    /// unknown, repeated or missing, both actions or none, and text that is not JSON.
    #[test]
    fn an_event_of_any_other_shape_is_left_to_serde_json() {
        let others = [
            r#"{"at":"+1s","customer":"c\u0031","cancel":"o3"}"#,
            r#"{"at":"+1s","customer":"c\"1","cancel":"o3"}"#,
            "{\"at\":\"+1s\",\"customer\":\"c\t1\",\"cancel\":\"o3\"}",
            r#"{"at":"+1s","customer":"c1","cancel":"o3","cancel":"o4"}"#,
            r#"{"at":"+1s","customer":"c1","customer":"c2","cancel":"o3"}"#,
            r#"{"at":"+1s","customer":"c1","cancel":null}"#,
            r#"{"at":"+1s","customer":"c1","cancel":3}"#,
            r#"{"at":"+1s","customer":"c1"}"#,
            r#"{"at":"+1s","cancel":"o3"}"#,
            r#"{"customer":"c1","cancel":"o3"}"#,
            r#"{"at":"+1s","customer":"c1","cancel":"o3","order":{"symbol":"X"}}"#,
            r#"{"at":"+1s","customer":"c1","cancel":"o3","symbol":"X"}"#,
            r#"{"at":"+1s","customer":"c1","order":{}}"#,
            r#"{"at":"+1s","customer":"c1","order":"o3"}"#,
            r#"{"at":"+1s","customer":"c1","order":{"symbol":"X","symbol":"Y"}}"#,
            r#"{"at":"+1s","customer":"c1","order":{"symbol":"X","leverage":2}}"#,
            r#"{"at":"+1s","customer":"c1","order":{"symbol":"X","post_only":true}}"#,
            r#"{"at":"+1s","customer":"c1","order":{"symbol":"X","colour":"red"}}"#,
            r#"{"at":"+1s","customer":"c1","order":{"symbol":{"a":"b"}}}"#,
            r#"{"__serde_saphyr_private_spanned":true,"value":{"at":"+1s"}}"#,
            r#"{"at":"+1s","customer":"c1","cancel":"o3",}"#,
            r#"{"at":"+1s","customer":"c1","cancel":"o3""#,
            r#"{"at":"+1s","customer":"c1" "cancel":"o3"}"#,
            r#"{"at":"+1s","customer":"c1","cancel":"o3"]"#,
            r#"["at"]"#,
            "",
            "   ",
        ];
        for text in others {
            assert_eq!(holds(text), None, "{text}");
        }
        assert!(both(others[0]).1.is_some(), "an escape serde_json reads");
        assert!(
            both(others[5]).1.is_some(),
            "a null serde_json reads as none"
        );
    }

    /// D11: the list is found at the top-level object's first key `events`, never at a key
    /// of that name inside a value or a string, and not past a key with an escape.
    #[test]
    fn the_list_is_the_top_level_objects_events() {
        let text = r#"{"name":"events","market":{"events":[1]},"x":"\"events\":[","events" : [ ]}"#;
        assert_eq!(list_start(text), text.rfind('['));
        assert_eq!(list_start(r#"{"n\u0061me":"x","events":[]}"#), None);
        assert_eq!(list_start(r#"{"events":{}}"#), None);
        assert_eq!(list_start(r#"{"name":"x"}"#), None);
        assert_eq!(list_start(r#"[{"events":[]}]"#), None);
    }

    /// How many plain bytes `b` starts with, a byte at a time.
    fn plain_len_bytewise(b: &[u8]) -> usize {
        b.iter().position(|&c| !plain_byte(c)).unwrap_or(b.len())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1024))]

        /// The plain bytes counted eight at a time are those counted one at a time.
        #[test]
        fn plain_bytes_are_counted_as_one_at_a_time(b in proptest::collection::vec(
            prop_oneof![Just(b'"'), Just(b'\\'), Just(0x1f), Just(0x20), Just(0x7f), Just(0x80),
                Just(0xff), any::<u8>()], 0..40)) {
            prop_assert_eq!(plain_len(&b), plain_len_bytewise(&b));
        }

        /// D11: an event's text changed anywhere — a byte put in, taken out or replaced by
        /// one that means something to JSON — is read plain only as serde_json reads it.
        #[test]
        fn a_changed_event_is_read_plain_only_as_serde_json_reads_it(
            base in 0..3usize,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), 0..3u8,
                prop::sample::select(b"\"\\{}[],: \t\nax0\x01".to_vec())), 1..4),
        ) {
            let mut text = [ORDER, LIMIT, CANCEL][base].as_bytes().to_vec();
            for (at, how, byte) in edits {
                let at = at.index(text.len());
                match how {
                    0 => text.insert(at, byte),
                    1 => { text.remove(at); }
                    _ => text[at] = byte,
                }
            }
            if let Ok(text) = std::str::from_utf8(&text) {
                holds(text);
            }
        }
    }
}

//! D4: a JSON object with a duplicated key is refused, never read as its first or last
//! occurrence. poem-openapi reads a body through `serde_json::Value`, whose maps keep the
//! last occurrence, so `{"amount":"1","amount":"2"}` would book 2; this pass over the raw
//! bytes runs first, for every body of both APIs (and the WebSocket frames to come).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::fmt;

use perpsim_core::Error;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

/// Refuses a body holding an object with a key given twice, naming the key by its path
/// (`legs[1].price`). A body that is not JSON passes: the operation's own parsing names
/// what is malformed.
pub fn refuse_duplicate_keys(body: &[u8]) -> Result<(), Error> {
    refused_if(duplicate_key(serde_json::Deserializer::from_slice(body)))
}

/// [`refuse_duplicate_keys`] for text already held as a `str` (a scenario): its strings are
/// not checked for UTF-8 again, which was a quarter of the check over a 171 MB scenario.
pub fn refuse_duplicate_keys_in(text: &str) -> Result<(), Error> {
    refused_if(duplicate_key(serde_json::Deserializer::from_str(text)))
}

fn refused_if(duplicate: Option<String>) -> Result<(), Error> {
    match duplicate {
        None => Ok(()),
        Some(path) => Err(Error::validation(format!(
            "duplicate key {path} in the JSON body; each key may appear once"
        ))),
    }
}

/// The path of the first duplicated key the reader meets, if any.
fn duplicate_key<'de, R: serde_json::de::Read<'de>>(
    mut reader: serde_json::Deserializer<R>,
) -> Option<String> {
    let found = RefCell::new(None);
    let root = Node {
        found: &found,
        at: None,
    };
    // A syntax error, or the stop at a duplicate: either way `found` says which.
    let _ = root.deserialize(&mut reader);
    found.into_inner()
}

/// Where a value sits: its key or index, under its parent (built into text only when a
/// duplicate is reported).
struct Segment<'a> {
    parent: Option<&'a Segment<'a>>,
    name: Name<'a>,
}

enum Name<'a> {
    Key(&'a str),
    Index(usize),
}

impl Segment<'_> {
    fn path(&self) -> String {
        let mut text = self.parent.map(Segment::path).unwrap_or_default();
        match self.name {
            Name::Key(k) if text.is_empty() => text.push_str(k),
            Name::Key(k) => {
                text.push('.');
                text.push_str(k)
            }
            Name::Index(i) => text.push_str(&format!("[{i}]")),
        }
        text
    }
}

/// One JSON value, walked for duplicates without keeping it.
struct Node<'s, 'a> {
    found: &'s RefCell<Option<String>>,
    at: Option<&'a Segment<'a>>,
}

impl<'de> DeserializeSeed<'de> for Node<'_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        for index in 0.. {
            let at = Segment {
                parent: self.at,
                name: Name::Index(index),
            };
            let item = Node {
                found: self.found,
                at: Some(&at),
            };
            if items.next_element_seed(item)?.is_none() {
                break;
            }
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut entries: A) -> Result<(), A::Error> {
        let mut seen = Seen::default();
        while let Some(Key(key)) = entries.next_key::<Key<'de>>()? {
            let at = Segment {
                parent: self.at,
                name: Name::Key(&key),
            };
            if seen.contains(&key) {
                *self.found.borrow_mut() = Some(at.path());
                return Err(de::Error::custom("duplicate key"));
            }
            entries.next_value_seed(Node {
                found: self.found,
                at: Some(&at),
            })?;
            seen.insert(key);
        }
        Ok(())
    }
}

/// An object's key as the reader gives it: borrowed from the body when it holds no escape,
/// so a walk of a million small objects (a scenario's events) allocates nothing per key.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(reader: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(key)))
            }
            fn visit_str<E>(self, key: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(key.to_owned())))
            }
        }
        reader.deserialize_str(Text)
    }
}

/// The keys an object has shown so far: a short list searched in turn (an API body's object
/// has a handful), a sorted set once it holds more than [`Seen::SHORT`], so an object of
/// any size costs O(n log n).
#[derive(Default)]
struct Seen<'de> {
    short: Vec<Cow<'de, str>>,
    many: BTreeSet<Cow<'de, str>>,
}

impl<'de> Seen<'de> {
    const SHORT: usize = 16;

    fn contains(&self, key: &str) -> bool {
        self.short.iter().any(|k| k == key) || self.many.contains(key)
    }

    fn insert(&mut self, key: Cow<'de, str>) {
        if self.short.len() < Self::SHORT {
            self.short.push(key);
        } else {
            self.many.insert(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first duplicate as a request's bytes and as a scenario's text are read: the same.
    fn dup(body: &str) -> Option<String> {
        let found = duplicate_key(serde_json::Deserializer::from_slice(body.as_bytes()));
        let in_text = duplicate_key(serde_json::Deserializer::from_str(body));
        assert_eq!(in_text, found, "{body}");
        found
    }

    /// D4: an object with more keys than the short list holds still names its duplicate,
    /// whether the first occurrence was among the first keys or the later ones.
    #[test]
    fn a_duplicate_in_a_large_object_is_found_wherever_its_first_occurrence_sits() {
        let keys: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let body = |extra: &str| format!("{{{},{extra}}}", keys.join(","));
        assert_eq!(dup(&body("\"k3\":0")).as_deref(), Some("k3"));
        assert_eq!(dup(&body("\"k30\":0")).as_deref(), Some("k30"));
        assert_eq!(dup(&body("\"k\\u0033\":0")).as_deref(), Some("k3"));
        assert_eq!(dup(&body("\"k40\":0")), None);
    }

    /// D4: a duplicated key is named wherever it sits, escapes decoded; distinct keys, the
    /// same key in sibling objects, and bodies that are not JSON pass.
    #[test]
    fn a_duplicated_key_is_found_at_any_depth_and_named_by_its_path() {
        assert_eq!(
            dup(r#"{"asset":"USDC","amount":"1","amount":"2"}"#).as_deref(),
            Some("amount")
        );
        assert_eq!(
            dup(r#"{"a":{"b":[1,{"c":1,"d":2,"c":3}]}}"#).as_deref(),
            Some("a.b[1].c")
        );
        assert_eq!(dup(r#"{"a":1,"\u0061":2}"#).as_deref(), Some("a"));
        assert_eq!(
            dup(r#"{"amount":1.5,"amount":2}"#).as_deref(),
            Some("amount")
        );
        for fine in [
            r#"{"asset":"USDC","amount":"1"}"#,
            r#"[{"a":1},{"a":2}]"#,
            r#"{"a":{"a":{"a":null}}}"#,
            r#"{"n":0.100000000000000005551115123}"#,
            "not json",
            "",
            r#"{"a":1,"b""#,
        ] {
            assert_eq!(dup(fine), None, "{fine}");
        }
        let e = refuse_duplicate_keys(br#"{"x":1,"x":1}"#).unwrap_err();
        assert_eq!(e.code, perpsim_core::ErrorCode::Validation);
        assert!(e.message.contains("duplicate key x"), "{}", e.message);
        let e = refuse_duplicate_keys_in(r#"{"x":1,"x":1}"#).unwrap_err();
        assert!(e.message.contains("duplicate key x"), "{}", e.message);
    }
}

//! Cursor pagination, built once for every paginated list (D4).
//!
//! A list is an ordered set of keys. A cursor names one key and is bound to the list and the
//! filters it was issued for: `base64url(version ‖ scope digest ‖ key bytes ‖ MAC)`, with an
//! HMAC-SHA256 under a server secret kept in the data dir. A changed byte, a cursor of another
//! server, list, broker or filter set fails the MAC or the scope check → 400.

use crate::contract::Nullable;
use std::ops::{Bound, RangeBounds};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use imbl::OrdSet;
use perpsim_core::Error;
use perpsim_systems::records::ids::{FundingSeq, MovementSeq, NoticeSeq, OrderId, TradeSeq};
use poem_openapi::Object;
use sha2::{Digest, Sha256};

pub const DEFAULT_LIMIT: u32 = 100;
pub const MAX_LIMIT: u32 = 1_000;
const VERSION: u8 = 1;
const SCOPE_LEN: usize = 8;
const MAC_LEN: usize = 16;
/// Longest cursor accepted; keys are small, so anything longer is not ours.
const MAX_CURSOR_LEN: usize = 256;

/// The cursor parameters of a paginated list (`limit`, `after`, `before`), read from the
/// query as one extractor. poem-openapi documents one parameter per extractor and none for a
/// poem one, so the document gains these three by a contract rule (`contract::paginate`: every
/// operation answering a page takes them); the request guard has checked their values against
/// it before any handler runs.
#[derive(Debug, Default, serde::Deserialize)]
pub struct PageQuery {
    pub limit: Option<u32>,
    pub after: Option<String>,
    pub before: Option<String>,
}

impl<'a> poem::FromRequest<'a> for PageQuery {
    async fn from_request(req: &'a poem::Request, _: &mut poem::RequestBody) -> poem::Result<Self> {
        Ok(req.params::<PageQuery>()?)
    }
}

/// A sort key that can travel inside a cursor.
pub trait CursorKey: Ord + Clone {
    fn to_bytes(&self) -> Vec<u8>;
    fn from_bytes(bytes: &[u8]) -> Option<Self>;
}

/// What a cursor is bound to: the list, the broker and the canonical text of the filters.
pub struct Scope<'a> {
    pub list: &'static str,
    pub broker: perpsim_core::ids::BrokerCode,
    pub filters: &'a str,
}

impl Scope<'_> {
    fn digest(&self) -> [u8; SCOPE_LEN] {
        let mut h = Sha256::new();
        for part in [
            self.list.as_bytes(),
            self.broker.0.as_bytes(),
            self.filters.as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize()[..SCOPE_LEN]
            .try_into()
            .expect("digest is long enough")
    }
}

#[derive(Clone)]
pub struct Cursors {
    secret: [u8; 32],
}

impl Cursors {
    pub fn new(secret: [u8; 32]) -> Self {
        Cursors { secret }
    }

    fn mac(&self, payload: &[u8]) -> [u8; MAC_LEN] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        mac.update(payload);
        mac.finalize().into_bytes()[..MAC_LEN]
            .try_into()
            .expect("mac is long enough")
    }

    pub fn issue<K: CursorKey>(&self, scope: &Scope<'_>, key: &K) -> String {
        let mut payload = vec![VERSION];
        payload.extend_from_slice(&scope.digest());
        payload.extend_from_slice(&key.to_bytes());
        let mac = self.mac(&payload);
        payload.extend_from_slice(&mac);
        URL_SAFE_NO_PAD.encode(payload)
    }

    pub fn open<K: CursorKey>(
        &self,
        scope: &Scope<'_>,
        field: &str,
        cursor: &str,
    ) -> Result<K, Error> {
        let invalid = |why: &str| {
            Error::validation(format!(
                "{field} is not a valid cursor for this list: {why}"
            ))
        };
        if cursor.len() > MAX_CURSOR_LEN {
            return Err(invalid("too long"));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(cursor)
            .map_err(|_| invalid("not a cursor issued by this service"))?;
        if bytes.len() < 1 + SCOPE_LEN + MAC_LEN || bytes[0] != VERSION {
            return Err(invalid("not a cursor issued by this service"));
        }
        let (payload, mac) = bytes.split_at(bytes.len() - MAC_LEN);
        // Constant-time comparison through the MAC's own verifier.
        let mut check = Hmac::<Sha256>::new_from_slice(&self.secret).expect("any key length");
        check.update(payload);
        check
            .verify_truncated_left(mac)
            .map_err(|_| invalid("it was altered or issued by another server"))?;
        if payload[1..1 + SCOPE_LEN] != scope.digest() {
            return Err(invalid("it was issued for another list or other filters"));
        }
        K::from_bytes(&payload[1 + SCOPE_LEN..])
            .ok_or_else(|| invalid("not a cursor issued by this service"))
    }
}

/// Which page was asked for.
pub enum Position<K> {
    First,
    After(K),
    Before(K),
}

pub struct PageRequest<K> {
    pub limit: usize,
    pub position: Position<K>,
}

impl<K: CursorKey> PageRequest<K> {
    /// Validates `limit`, `after` and `before` as D4 says.
    /// The page a list's cursor parameters ask for.
    pub fn of(cursors: &Cursors, scope: &Scope<'_>, query: &PageQuery) -> Result<Self, Error> {
        let (after, before) = (query.after.as_deref(), query.before.as_deref());
        Self::parse(cursors, scope, query.limit, after, before)
    }

    pub fn parse(
        cursors: &Cursors,
        scope: &Scope<'_>,
        limit: Option<u32>,
        after: Option<&str>,
        before: Option<&str>,
    ) -> Result<Self, Error> {
        let limit = limit.unwrap_or(DEFAULT_LIMIT);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(Error::validation(format!(
                "limit must be between 1 and {MAX_LIMIT}, got {limit}"
            )));
        }
        let position = match (after, before) {
            (Some(_), Some(_)) => {
                return Err(Error::validation(
                    "after and before cannot be used together",
                ));
            }
            (Some(c), None) => Position::After(cursors.open(scope, "after", c)?),
            (None, Some(c)) => Position::Before(cursors.open(scope, "before", c)?),
            (None, None) => Position::First,
        };
        Ok(PageRequest {
            limit: limit as usize,
            position,
        })
    }
}

/// `response_metadata` of every paginated list.
#[derive(Object, Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[oai(example)]
pub struct ResponseMetadata {
    /// Cursor of the first item of this page (pass as `before` for the previous page); null on
    /// an empty page.
    pub start_cursor: Nullable<String>,
    /// Cursor of the last item of this page (pass as `after` for the next page); null on an
    /// empty page.
    pub end_cursor: Nullable<String>,
    /// Whether items exist before this page.
    pub has_previous: bool,
    /// Whether items exist after this page.
    pub has_next: bool,
}

/// One page of keys in the list's order, with its metadata.
pub struct Page<K> {
    pub keys: Vec<K>,
    pub metadata: ResponseMetadata,
}

/// Where a list's keys come from: an in-memory set, or a table of the journal's projection.
pub trait Keys<K> {
    type Error;
    /// Up to `limit` keys within `range`, in ascending order from its low end, or with
    /// `from_top` in descending order from its high end.
    fn take(
        &self,
        range: (Bound<K>, Bound<K>),
        from_top: bool,
        limit: usize,
    ) -> Result<Vec<K>, Self::Error>;
}

impl<K: Ord + Clone> Keys<K> for OrdSet<K> {
    type Error = std::convert::Infallible;

    fn take(
        &self,
        range: (Bound<K>, Bound<K>),
        from_top: bool,
        limit: usize,
    ) -> Result<Vec<K>, Self::Error> {
        let keys = self.range::<_, K>(range);
        Ok(match from_top {
            false => keys.take(limit).cloned().collect(),
            true => keys.rev().take(limit).cloned().collect(),
        })
    }
}

/// Cuts one page out of `set` (in the set's order), restricted to the keys within `bounds`
/// (the list's filters, when they map to a key range).
pub fn page<K: CursorKey>(
    set: &OrdSet<K>,
    bounds: (Bound<K>, Bound<K>),
    req: &PageRequest<K>,
    cursors: &Cursors,
    scope: &Scope<'_>,
) -> Page<K> {
    let Ok(page) = page_of(set, bounds, req, (cursors, scope), false);
    page
}

/// The tighter of two lower bounds (`low`) or of two upper bounds, for ranges that must both
/// hold.
fn tighter<K: Ord>(a: Bound<K>, b: Bound<K>, low: bool) -> Bound<K> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    match (&a, &b) {
        (Bound::Unbounded, _) => b,
        (_, Bound::Unbounded) => a,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match (x.cmp(y), low) {
                (Less, true) | (Greater, false) => b,
                (Greater, true) | (Less, false) => a,
                (Equal, _) if matches!(a, Bound::Excluded(_)) => a,
                (Equal, _) => b,
            }
        }
    }
}

/// [`page`], or (`desc`) shown in the reverse of the keys' order (newest first over
/// ascending keys, so one index serves both sort directions), of any [`Keys`]: the keys
/// after or before the cursor that lie within `bounds`, and whether the keys next to the
/// page's ends lie within them.
pub fn page_of<K: CursorKey, S: Keys<K>>(
    keys: &S,
    bounds: (Bound<K>, Bound<K>),
    req: &PageRequest<K>,
    (cursors, scope): (&Cursors, &Scope<'_>),
    desc: bool,
) -> Result<Page<K>, S::Error> {
    let within = |k: &K| bounds.contains(k);
    // The keys past `k` in list order (`forward`) or before it, within the bounds.
    let past = |k: &K, forward: bool| match forward != desc {
        true => (
            tighter(bounds.0.clone(), Bound::Excluded(k.clone()), true),
            bounds.1.clone(),
        ),
        false => (
            bounds.0.clone(),
            tighter(bounds.1.clone(), Bound::Excluded(k.clone()), false),
        ),
    };
    let page: Vec<K> = match &req.position {
        Position::First => keys.take(bounds.clone(), desc, req.limit)?,
        Position::After(k) => keys.take(past(k, true), desc, req.limit)?,
        Position::Before(k) => {
            let mut v = keys.take(past(k, false), !desc, req.limit)?;
            v.reverse();
            v
        }
    };
    // Whether the key next to `k` on either side (in the whole list) lies within the bounds;
    // a failed read is kept and returned.
    let failed = std::cell::RefCell::new(None);
    let next_within = |k: &K, forward: bool| {
        let range = match forward != desc {
            true => (Bound::Excluded(k.clone()), Bound::Unbounded),
            false => (Bound::Unbounded, Bound::Excluded(k.clone())),
        };
        match keys.take(range, forward == desc, 1) {
            Ok(next) => next.first().is_some_and(&within),
            Err(e) => {
                failed.borrow_mut().get_or_insert(e);
                false
            }
        }
    };
    let sides = (|k: &K| next_within(k, false), |k: &K| next_within(k, true));
    let page = finish(page, req, &within, sides, cursors, scope);
    match failed.into_inner() {
        Some(e) => Err(e),
        None => Ok(page),
    }
}

/// A page's metadata. `earlier` / `later` say whether a key in the bounds lies before /
/// after a given key in the list's own order.
fn finish<K: CursorKey>(
    keys: Vec<K>,
    req: &PageRequest<K>,
    within: &dyn Fn(&K) -> bool,
    (earlier, later): (impl Fn(&K) -> bool, impl Fn(&K) -> bool),
    cursors: &Cursors,
    scope: &Scope<'_>,
) -> Page<K> {
    let (has_previous, has_next) = match (keys.first(), keys.last()) {
        (Some(first), Some(last)) => (earlier(first), later(last)),
        // An empty page: what lies on either side of the cursor.
        _ => match &req.position {
            Position::First => (false, false),
            Position::After(k) => (within(k) || earlier(k), false),
            Position::Before(k) => (false, within(k) || later(k)),
        },
    };
    let metadata = ResponseMetadata {
        start_cursor: keys.first().map(|k| cursors.issue(scope, k)).into(),
        end_cursor: keys.last().map(|k| cursors.issue(scope, k)).into(),
        has_previous,
        has_next,
    };
    Page { keys, metadata }
}

/// No restriction: the whole list.
pub fn all<K>() -> (Bound<K>, Bound<K>) {
    (Bound::Unbounded, Bound::Unbounded)
}

/// A key listed newest first is encoded as the key itself.
impl<K: CursorKey> CursorKey for std::cmp::Reverse<K> {
    fn to_bytes(&self) -> Vec<u8> {
        self.0.to_bytes()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        K::from_bytes(bytes).map(std::cmp::Reverse)
    }
}

/// The engine's sequence ids are encoded as their number.
macro_rules! sequence_cursor {
    ($($id:ident),*) => {$(
        impl CursorKey for $id {
            fn to_bytes(&self) -> Vec<u8> {
                self.0.to_bytes()
            }

            fn from_bytes(bytes: &[u8]) -> Option<Self> {
                u64::from_bytes(bytes).map($id)
            }
        }
    )*};
}

sequence_cursor!(MovementSeq, TradeSeq, NoticeSeq, FundingSeq);

impl CursorKey
    for (
        perpsim_core::time::Timestamp,
        perpsim_core::ids::CustomerCode,
    )
{
    fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.0.millis().to_be_bytes().to_vec();
        v.extend_from_slice(self.1.0.as_bytes());
        v
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (t, c) = (bytes.get(..8)?, bytes.get(8..)?);
        let t = perpsim_core::time::Timestamp::from_millis(i64::from_be_bytes(t.try_into().ok()?));
        Some((t, perpsim_core::ids::CustomerCode(uuid_from(c)?)))
    }
}

fn uuid_from(bytes: &[u8]) -> Option<perpsim_core::Uuid> {
    Some(perpsim_core::Uuid::from_bytes(bytes.try_into().ok()?))
}

impl poem_openapi::types::Example for ResponseMetadata {
    fn example() -> Self {
        ResponseMetadata {
            start_cursor: Some("AQIDBAUGBwgAAAGUEQ3aAA0GZXhhbXBsZS1jdXJzb3I".into()).into(),
            end_cursor: Some("AQIDBAUGBwgAAAGUEQ3aIA0GZXhhbXBsZS1jdXJzb3I".into()).into(),
            has_previous: false,
            has_next: true,
        }
    }
}

impl CursorKey for (perpsim_core::time::Timestamp, OrderId) {
    fn to_bytes(&self) -> Vec<u8> {
        let mut v = self.0.millis().to_be_bytes().to_vec();
        v.extend_from_slice(&self.1.0.to_be_bytes());
        v
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let (t, id) = bytes.split_at_checked(8)?;
        Some((
            perpsim_core::time::Timestamp::from_millis(i64::from_be_bytes(t.try_into().ok()?)),
            OrderId(u64::from_be_bytes(id.try_into().ok()?)),
        ))
    }
}

impl CursorKey for u64 {
    fn to_bytes(&self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        Some(u64::from_be_bytes(bytes.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perpsim_core::ids::{BrokerCode, CustomerCode};
    use perpsim_core::time::Timestamp;

    type Key = (Timestamp, CustomerCode);

    fn key(i: u128) -> Key {
        (
            Timestamp::from_millis(i as i64 / 2),
            CustomerCode(perpsim_core::Uuid::from_u128(i)),
        )
    }

    fn scope(filters: &str) -> Scope<'_> {
        Scope {
            list: "customers",
            broker: BrokerCode(perpsim_core::Uuid::from_u128(1)),
            filters,
        }
    }

    fn req(
        c: &Cursors,
        limit: u32,
        after: Option<&str>,
        before: Option<&str>,
    ) -> Result<PageRequest<Key>, Error> {
        PageRequest::parse(c, &scope(""), Some(limit), after, before)
    }

    #[test]
    fn walks_forward_and_back_through_the_whole_list() {
        let c = Cursors::new([5; 32]);
        let set: OrdSet<Key> = (0..10).map(key).collect();
        let p1 = page(
            &set,
            all(),
            &req(&c, 4, None, None).unwrap(),
            &c,
            &scope(""),
        );
        assert_eq!(p1.keys, (0..4).map(key).collect::<Vec<_>>());
        assert!(!p1.metadata.has_previous && p1.metadata.has_next);
        let p2 = page(
            &set,
            all(),
            &req(&c, 4, p1.metadata.end_cursor.as_deref(), None).unwrap(),
            &c,
            &scope(""),
        );
        assert_eq!(p2.keys, (4..8).map(key).collect::<Vec<_>>());
        let p3 = page(
            &set,
            all(),
            &req(&c, 4, p2.metadata.end_cursor.as_deref(), None).unwrap(),
            &c,
            &scope(""),
        );
        assert_eq!(p3.keys, (8..10).map(key).collect::<Vec<_>>());
        assert!(p3.metadata.has_previous && !p3.metadata.has_next);
        let back = page(
            &set,
            all(),
            &req(&c, 4, None, p3.metadata.start_cursor.as_deref()).unwrap(),
            &c,
            &scope(""),
        );
        assert_eq!(back.keys, p2.keys);
        assert!(back.metadata.has_previous && back.metadata.has_next);
    }

    #[test]
    fn bounds_restrict_pages_and_their_neighbours() {
        let c = Cursors::new([5; 32]);
        let set: OrdSet<std::cmp::Reverse<u64>> = (0..20).map(std::cmp::Reverse).collect();
        let scope = scope("window");
        let bounds = (
            Bound::Included(std::cmp::Reverse(14)),
            Bound::Included(std::cmp::Reverse(5)),
        );
        let first = PageRequest {
            limit: 4,
            position: Position::First,
        };
        let p = page(&set, bounds, &first, &c, &scope);
        assert_eq!(
            p.keys.iter().map(|k| k.0).collect::<Vec<_>>(),
            [14, 13, 12, 11]
        );
        assert!(
            !p.metadata.has_previous && p.metadata.has_next,
            "19..15 lie outside the window"
        );
        let mut k = p.keys.last().cloned().unwrap();
        let mut seen = p.keys.len();
        loop {
            let p = page(
                &set,
                bounds,
                &PageRequest {
                    limit: 4,
                    position: Position::After(k),
                },
                &c,
                &scope,
            );
            seen += p.keys.len();
            if !p.metadata.has_next {
                assert_eq!(p.keys.last().unwrap().0, 5);
                break;
            }
            k = p.keys.last().cloned().unwrap();
        }
        assert_eq!(seen, 10);
    }

    #[test]
    fn limits_and_cursor_combinations_are_validated() {
        let c = Cursors::new([5; 32]);
        let cursor = c.issue(&scope(""), &key(1));
        assert!(req(&c, 0, None, None).is_err());
        assert!(req(&c, 1001, None, None).is_err());
        assert!(req(&c, 1000, None, None).is_ok());
        let both = req(&c, 10, Some(&cursor), Some(&cursor)).err().unwrap();
        assert!(both.message.contains("together"));
    }

    #[test]
    fn tampered_foreign_and_mismatched_cursors_are_refused() {
        let c = Cursors::new([5; 32]);
        let cursor = c.issue(&scope(""), &key(3));
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[10] ^= 1;
        let tampered = URL_SAFE_NO_PAD.encode(&bytes);
        assert!(
            req(&c, 10, Some(&tampered), None)
                .err()
                .unwrap()
                .message
                .contains("altered")
        );
        let foreign = Cursors::new([6; 32]).issue(&scope(""), &key(3));
        assert!(req(&c, 10, Some(&foreign), None).is_err());
        let other_filters = c.issue(&scope("symbol=BTC"), &key(3));
        assert!(
            req(&c, 10, Some(&other_filters), None)
                .err()
                .unwrap()
                .message
                .contains("other filters")
        );
        assert!(req(&c, 10, Some("not-a-cursor!"), None).is_err());
        assert_eq!(req(&c, 10, Some(&cursor), None).unwrap().limit, 10);
    }
}

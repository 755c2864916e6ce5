//! A scenario read and planned in one pass. A million events read into a list first and
//! planned after cost a kilobyte each of fresh memory (each body's JSON tree) and most of the
//! read's time; here each event is planned as soon as it is read and then freed.
//!
//! This pass plans only a scenario whose `events` come after every other field (as
//! `scenario-gen` and the worked examples write them): the events need the customers and the
//! instruments resolved first. Anything else, a refusal included, makes it give up, and the
//! caller reads the file again the whole way, which says where and why. So a plan made here is
//! the plan the whole read makes, and a refusal is the same whichever way the file is written.
//!
//! In JSON, serde_json reads the fields before the list of events and stops there; the list is
//! read beside it, each event plain where it can be and by serde_json where not (`plain`).

use std::fmt;
use std::path::Path;

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::feed::Feeder;
use super::files::Limits;
use super::format::{
    Bootstrap, CustomerSpec, Event, InstrumentOverride, Latency, Market, Range, Scenario, Shock,
};
use super::plan::{Plan, Planner, ScenarioError};

mod plain;

/// The plan of a JSON (`json`) or YAML scenario `text` read in one pass, or `None` where this
/// pass gives up (see the module's header). With a `feeder`, its steps are handed out as they
/// are read, as far as the feeder takes them (`feed`): the plan then holds the rest.
pub(super) fn plan(
    file: &Path,
    text: &str,
    json: bool,
    limits: &Limits,
    feeder: Option<&mut Feeder>,
) -> Option<Plan> {
    let mut read = None;
    let whole = Whole {
        file,
        limits,
        events_at_most: text.len() / EVENT_BYTES,
        feeder,
        list: json
            .then(|| plain::list_start(text))
            .flatten()
            .map(|start| List {
                text,
                start,
                read: &mut read,
            }),
    };
    match json {
        true => {
            let mut reader = serde_json::Deserializer::from_str(text);
            match whole.deserialize(&mut reader) {
                // No list of events, so none read beside serde_json.
                Ok(plan) => reader.end().ok().map(|()| plan),
                // Stopped at the list, read beside it (or a refusal before it: none).
                Err(_) => read,
            }
        }
        false => serde_saphyr::with_deserializer_from_str_with_options(
            text,
            super::yaml_options(limits),
            |d| whole.deserialize(d),
        )
        .ok(),
    }
}

/// A JSON text's list of events, read beside serde_json (see `plain`): where it starts, and
/// the plan once read (left `None` where the pass gives up).
struct List<'t, 'r> {
    text: &'t str,
    start: usize,
    read: &'r mut Option<Plan>,
}

impl List<'_, '_> {
    /// Plans the events of the list, each read plain where it can be and by serde_json where
    /// not; then the text must close the scenario. `None` where the pass gives up.
    fn plan(&self, planner: &mut Planner, mut feeder: Option<&mut Feeder>) -> Option<()> {
        let (text, b) = (self.text, self.text.as_bytes());
        let mut i = plain::skip_space(b, self.start + 1);
        if b.get(i) != Some(&b']') {
            loop {
                let end = match plain::event(text, i) {
                    Some((event, end)) => {
                        take(planner, feeder.as_deref_mut(), |p| p.plain_event(event)).ok()?;
                        end
                    }
                    None => {
                        let (mut event, end) = plain::event_by_serde(text, i)?;
                        take(planner, feeder.as_deref_mut(), |p| p.event(&mut event)).ok()?;
                        end
                    }
                };
                i = plain::skip_space(b, end);
                match b.get(i)? {
                    b',' => i += 1,
                    b']' => break,
                    _ => return None,
                }
            }
        }
        let close = plain::skip_space(b, i + 1);
        (b.get(close) == Some(&b'}') && plain::skip_space(b, close + 1) == b.len()).then_some(())
    }
}

/// Plans an event (`plan`) and hands `feeder` what it takes; a message where the pass gives up.
fn take(
    planner: &mut Planner,
    feeder: Option<&mut Feeder>,
    plan: impl FnOnce(&mut Planner) -> Result<(), ScenarioError>,
) -> Result<(), String> {
    let before = planner.steps_len();
    plan(planner).map_err(|e| e.message)?;
    if let Some(f) = feeder.filter(|f| f.feeding()) {
        planner.feed(f, before);
        if !f.feeding() && f.handed() {
            // Steps went to a run that is dropped: this plan can never be whole.
            return Err(super::feed::GAVE_UP.into());
        }
    }
    Ok(())
}

/// The whole scenario, as a plan.
struct Whole<'a, 'f, 'r> {
    file: &'a Path,
    limits: &'a Limits,
    /// As many events as the text could hold, each at least [`EVENT_BYTES`].
    events_at_most: usize,
    feeder: Option<&'f mut Feeder>,
    /// A JSON text's list of events, read beside serde_json.
    list: Option<List<'a, 'r>>,
}

/// The fewest bytes an event takes: `{"at":"+1s","cancel":"r","customer":"c"},`.
const EVENT_BYTES: usize = 40;

/// The fields before `events`, as read so far.
#[derive(Default)]
struct Header {
    name: Option<String>,
    seed: Option<u64>,
    start: Option<Spanned<String>>,
    end: Option<Spanned<String>>,
    instruments: Option<Vec<Spanned<InstrumentOverride>>>,
    market: Option<Option<Spanned<Market>>>,
    sample_every: Option<Option<Spanned<String>>>,
    customers: Option<Vec<Spanned<CustomerSpec>>>,
    latency: Option<Option<Latency>>,
    shocks: Option<Vec<Shock>>,
    volatility_scale: Option<Option<Range>>,
    bootstrap: Option<Vec<Bootstrap>>,
}

impl Header {
    /// The scenario these fields make, without events; `None` if a field it needs is missing.
    fn scenario(self) -> Option<Scenario> {
        Some(Scenario {
            name: self.name?,
            seed: self.seed?,
            start: self.start?,
            end: self.end?,
            instruments: self.instruments.unwrap_or_default(),
            market: self.market.flatten(),
            sample_every: self.sample_every.flatten(),
            customers: self.customers?,
            latency: self.latency.flatten(),
            shocks: self.shocks.unwrap_or_default(),
            volatility_scale: self.volatility_scale.flatten(),
            bootstrap: self.bootstrap.unwrap_or_default(),
            events: Vec::new(),
        })
    }
}

/// A field given once only.
fn once<T, E: serde::de::Error>(slot: &mut Option<T>, value: T, key: &str) -> Result<(), E> {
    match slot.replace(value) {
        None => Ok(()),
        Some(_) => Err(E::custom(format!("duplicate field `{key}`"))),
    }
}

impl<'de> DeserializeSeed<'de> for Whole<'_, '_, '_> {
    type Value = Plan;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Plan, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Whole<'_, '_, '_> {
    type Value = Plan;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a scenario")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plan, A::Error> {
        let mut header = Header::default();
        while let Some(key) = map.next_key::<String>()? {
            let h = &mut header;
            match key.as_str() {
                "name" => once(&mut h.name, map.next_value()?, &key)?,
                "seed" => once(&mut h.seed, map.next_value()?, &key)?,
                "start" => once(&mut h.start, map.next_value()?, &key)?,
                "end" => once(&mut h.end, map.next_value()?, &key)?,
                "instruments" => once(&mut h.instruments, map.next_value()?, &key)?,
                "market" => once(&mut h.market, map.next_value()?, &key)?,
                "sample_every" => once(&mut h.sample_every, map.next_value()?, &key)?,
                "customers" => once(&mut h.customers, map.next_value()?, &key)?,
                "latency" => once(&mut h.latency, map.next_value()?, &key)?,
                "shocks" => once(&mut h.shocks, map.next_value()?, &key)?,
                "volatility_scale" => once(&mut h.volatility_scale, map.next_value()?, &key)?,
                "bootstrap" => once(&mut h.bootstrap, map.next_value()?, &key)?,
                "events" => {
                    let mut planner = self.planner(header)?;
                    let mut feeder = self.feeder;
                    if let Some(f) = feeder.as_deref_mut() {
                        f.header(planner.header());
                    }
                    // A feed's first hand-out leaves the steps it keeps back a timeline of
                    // their own: this room is then the run's address space, never memory.
                    planner.reserve(self.events_at_most);
                    if let Some(list) = self.list {
                        *list.read = list.plan(&mut planner, feeder).map(|()| planner.finish());
                        // serde_json's read ends here, the rest read beside it.
                        return Err(A::Error::custom("the list of events is read beside"));
                    }
                    map.next_value_seed(Events {
                        planner: &mut planner,
                        feeder,
                    })?;
                    return match map.next_key::<String>()? {
                        None => Ok(planner.finish()),
                        Some(_) => Err(A::Error::custom("a field after `events`")),
                    };
                }
                _ => return Err(A::Error::custom(format!("unknown field `{key}`"))),
            }
        }
        Ok(self.planner(header)?.finish())
    }
}

impl<'a> Whole<'a, '_, '_> {
    fn planner<E: serde::de::Error>(&self, header: Header) -> Result<Planner<'a>, E> {
        let scenario = header
            .scenario()
            .ok_or_else(|| E::custom("a field is missing"))?;
        Planner::new(self.file, scenario, self.limits).map_err(|e| E::custom(e.message))
    }
}

/// The `events` list, each planned as it is read (and fed, with a feeder).
struct Events<'p, 'a, 'f> {
    planner: &'p mut Planner<'a>,
    feeder: Option<&'f mut Feeder>,
}

impl<'de> DeserializeSeed<'de> for Events<'_, '_, '_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for Events<'_, '_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Events {
            planner,
            mut feeder,
        } = self;
        while let Some(mut event) = seq.next_element::<Spanned<Box<Event>>>()? {
            take(planner, feeder.as_deref_mut(), |p| p.event(&mut event))
                .map_err(A::Error::custom)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use serde_json::Value;

    use super::super::files::Limits;
    use super::super::{parse, plan, read};

    fn every_kind() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/every-kind/every-kind.yaml")
    }

    /// The plan the whole read makes of `file`, as text (a plan holds every command).
    fn whole(file: &Path, text: &str) -> String {
        let limits = Limits::default();
        format!(
            "{:?}",
            plan::plan((file, text), parse(file, text, &limits).unwrap(), &limits).unwrap()
        )
    }

    /// D11: a scenario planned as it is read is the plan the whole read makes, every field
    /// and kind of event included, YAML and JSON; written in an order the one pass does not
    /// take (events before the customers they name), it is read the whole way, to the same.
    #[test]
    fn a_scenario_planned_as_it_is_read_is_the_plan_of_the_whole_read() {
        let limits = Limits::default();
        let yaml = every_kind();
        let text = std::fs::read_to_string(&yaml).unwrap();
        let streamed = super::plan(&yaml, &text, false, &limits, None).expect("events come last");
        assert_eq!(format!("{streamed:?}"), whole(&yaml, &text));

        let tmp = tempfile::tempdir().unwrap();
        let csv = yaml.with_file_name("every-kind.csv");
        std::fs::copy(&csv, tmp.path().join("every-kind.csv")).unwrap();
        let mut tree: Value = serde_saphyr::from_str(&text).unwrap();
        let events = tree.as_object_mut().unwrap().remove("events").unwrap();
        let head = serde_json::to_string(&tree).unwrap();
        let last = format!("{},\"events\":{events}}}", head.trim_end_matches('}'));
        let first = format!("{{\"events\":{events},{}", &head[1..]);
        let (last_file, first_file) = (tmp.path().join("last.json"), tmp.path().join("first.json"));
        std::fs::write(&last_file, &last).unwrap();
        std::fs::write(&first_file, &first).unwrap();
        let streamed =
            super::plan(&last_file, &last, true, &limits, None).expect("events come last");
        assert_eq!(format!("{streamed:?}"), whole(&last_file, &last));
        assert!(super::plan(&first_file, &first, true, &limits, None).is_none());
        let (a, b) = (
            read(&last_file, &limits).unwrap(),
            read(&first_file, &limits).unwrap(),
        );
        assert_eq!(format!("{:?}", a.steps), format!("{:?}", b.steps));
        assert_eq!(format!("{:?}", a.customers), format!("{:?}", b.customers));
        assert!(a.steps.len() > 10, "every kind of event is planned");
    }

    /// D11: a key given twice inside a JSON body is refused with where it is, never read as
    /// its last value, although serde_json alone would read it so.
    #[test]
    fn a_key_repeated_inside_a_json_body_is_refused_where_it_is() {
        let limits = Limits::default();
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("s.json");
        let text = r#"{"name":"x","seed":1,"start":"2026-01-01T00:00:00Z","end":"+1h",
"customers":[{"name":"a","deposits":{"USDC":"100"}}],
"events":[{"at":"+1m","customer":"a","order":{"symbol":"BTC-USDC-PERP","side":"buy",
"type":"market","reference_id":"x","amount":"0.01","amount":"5"}}]}"#;
        std::fs::write(&file, text).unwrap();
        assert!(
            super::plan(&file, text, true, &limits, None).is_some(),
            "serde_json alone reads the last"
        );
        let refused = read(&file, &limits).unwrap_err();
        assert_eq!((refused.line, refused.column), (4, 52), "{refused}");
        assert!(
            refused.message.contains("duplicate mapping key: amount"),
            "{refused}"
        );
    }
}

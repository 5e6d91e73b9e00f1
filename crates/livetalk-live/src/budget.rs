//! What input may cost a process: one budget, in bytes, for every message from a peer while it
//! is decoded and handled, whatever its shape and however many peers send at once. A message
//! costs its bytes plus what its decoded form takes, which grows with the number of JSON values
//! it holds, not its size (a million empty parts are 3 MB of text and hundreds of MB of
//! structs). The values are counted in a pass that allocates nothing ([`Shape::of`]) before
//! anything is decoded; a message that would cost more than the whole budget is refused at
//! once, and one that fits waits (at most [`INPUT_WAIT`]) until the messages of other peers
//! have been handled. Every server and client of livetalk (`livetalk`, `serve`, `mock`, and
//! the proxy to come) reads through the same [`InputBudget::process`].

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The input a process holds at once, decoded and being handled: 32 MiB (with the event
/// inspector's 16 MiB, what a session may hold of what others sent stays under 64 MiB). With
/// [`BYTE_COST`], the largest message any peer can have read is about 10 MiB.
pub const INPUT_BUDGET: usize = 32 << 20;

/// A message that costs at most this much (an audio chunk, a typical event) is not held from
/// the budget: many sessions' audio queued behind slow readers would otherwise fill it and
/// starve each other. Such messages are bounded by each connection's queue instead.
pub const FREE_COST: usize = 128 << 10;

/// What one JSON value (a part, a turn, a number in a list) is counted as once decoded: the
/// largest wire struct a value becomes, with the room a growing list leaves, and the copies a
/// bridge makes translating it (measured: see `docs/security.md`).
pub const VALUE_COST: usize = 256;

/// What each byte of a message is counted as while it is held: the frame itself, the
/// decoded message, and the events (or, on a bridge, the translation) made of it, each of
/// which copies its text.
pub const BYTE_COST: usize = 3;

/// How long a message that fits the budget waits for other peers' messages to be handled
/// before it is refused.
pub const INPUT_WAIT: Duration = Duration::from_secs(10);

/// The budget is handed out in units of this many bytes (a semaphore's permits).
const UNIT: usize = 1024;

/// What a message holds, counted without decoding it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// Its size in bytes.
    pub bytes: usize,
    /// JSON values: every object, list, string, number, boolean and null, keys not counted.
    pub values: usize,
    /// How deep its lists and objects nest.
    pub depth: usize,
}

impl Shape {
    /// Counts the values of the JSON in `json`, stopping as soon as they would cost more than
    /// `budget` bytes decoded (the count then stands at the value that passed it). Text that
    /// is not JSON is counted as far as it goes: its decoder says what is wrong with it.
    /// Payloads too small to hold that many values are not read at all.
    pub fn of(json: &[u8], budget: usize) -> Shape {
        let mut shape = Shape {
            bytes: json.len(),
            values: 0,
            depth: 0,
        };
        // The densest JSON holds a value in every two bytes (`[0,0,0]`).
        let most_values = json.len() / 2 + 1;
        if cost(json.len(), most_values) <= budget {
            shape.values = most_values;
            return shape;
        }
        Shape::count(
            json,
            budget.saturating_sub(json.len() * BYTE_COST) / VALUE_COST + 1,
        )
    }

    /// Counts the values of the JSON in `json`, stopping past `max_values`.
    pub fn count(json: &[u8], max_values: usize) -> Shape {
        let mut counter = Counter {
            values: 0,
            depth: 0,
            deepest: 0,
            max_values,
        };
        let mut deserializer = serde_json::Deserializer::from_slice(json);
        let _ = Count(&mut counter).deserialize(&mut deserializer);
        Shape {
            bytes: json.len(),
            values: counter.values,
            depth: counter.deepest,
        }
    }

    /// What holding the message decoded costs, in bytes.
    pub fn cost(&self) -> usize {
        cost(self.bytes, self.values)
    }
}

fn cost(bytes: usize, values: usize) -> usize {
    bytes
        .saturating_mul(BYTE_COST)
        .saturating_add(values.saturating_mul(VALUE_COST))
}

struct Counter {
    values: usize,
    depth: usize,
    deepest: usize,
    max_values: usize,
}

impl Counter {
    fn value<E: de::Error>(&mut self) -> Result<(), E> {
        self.values += 1;
        if self.values > self.max_values {
            return Err(E::custom("over the input budget"));
        }
        Ok(())
    }
}

/// One value, counted with what it holds.
struct Count<'a>(&'a mut Counter);

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.0.value()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.0.value()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.0.value()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.0.value()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.0.value()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.0.value()
    }
    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.0.value()
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let counter = self.0;
        counter.value()?;
        counter.depth += 1;
        counter.deepest = counter.deepest.max(counter.depth);
        while seq.next_element_seed(Count(counter))?.is_some() {}
        counter.depth -= 1;
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let counter = self.0;
        counter.value()?;
        counter.depth += 1;
        counter.deepest = counter.deepest.max(counter.depth);
        while map.next_key::<de::IgnoredAny>()?.is_some() {
            map.next_value_seed(Count(counter))?;
        }
        counter.depth -= 1;
        Ok(())
    }
}

/// Why a message was not taken in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// The message alone would cost more than the whole budget.
    #[error(
        "a message of {} holding {} JSON values would take about {} to read, more than the {} livetalk holds for input at once",
        crate::excerpt::human_size(.shape.bytes as u64),
        .shape.values,
        crate::excerpt::human_size(.shape.cost() as u64),
        crate::excerpt::human_size(*.budget as u64)
    )]
    TooCostly {
        /// What it holds (its value count as far as it was counted).
        shape: Shape,
        /// The budget it was weighed against.
        budget: usize,
    },
    /// Other peers' messages held the budget for longer than [`INPUT_WAIT`].
    #[error(
        "a message of {} waited {} s for the {} livetalk holds for input at once, which other messages held",
        crate::excerpt::human_size(.shape.bytes as u64),
        .waited.as_secs(),
        crate::excerpt::human_size(*.budget as u64)
    )]
    Busy {
        /// What it holds.
        shape: Shape,
        /// The budget.
        budget: usize,
        /// How long it waited.
        waited: Duration,
    },
}

/// A budget of bytes for input in flight, shared by every connection that draws on it.
#[derive(Debug, Clone)]
pub struct InputBudget {
    units: Arc<Semaphore>,
    bytes: usize,
}

/// What a message holds of the budget until it is dropped.
#[derive(Debug)]
pub struct Held {
    _permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Held {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl InputBudget {
    /// A budget of `bytes` (at least one unit).
    pub fn new(bytes: usize) -> InputBudget {
        let units = (bytes / UNIT).clamp(1, Semaphore::MAX_PERMITS);
        InputBudget {
            units: Arc::new(Semaphore::new(units)),
            bytes: units * UNIT,
        }
    }

    /// The process's budget: [`INPUT_BUDGET`] for everything it reads from peers.
    pub fn process() -> &'static InputBudget {
        static PROCESS: OnceLock<InputBudget> = OnceLock::new();
        PROCESS.get_or_init(|| InputBudget::new(INPUT_BUDGET))
    }

    /// The budget in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What is free now, in bytes.
    pub fn available(&self) -> usize {
        self.units.available_permits() * UNIT
    }

    /// Counts what `json` holds and refuses it at once when it alone would cost more than the
    /// whole budget: the check every decoder makes before it decodes.
    pub fn weigh(&self, json: &[u8]) -> Result<Shape, Refused> {
        let shape = Shape::of(json, self.bytes);
        if shape.cost() > self.bytes {
            return Err(Refused::TooCostly {
                shape,
                budget: self.bytes,
            });
        }
        Ok(shape)
    }

    /// Holds what the message in `json` costs (its values counted) until the [`Held`] is
    /// dropped: refused at once when it alone costs more than the budget, after
    /// [`INPUT_WAIT`] when other messages hold what it needs for that long. Messages are let
    /// in in the order they asked.
    pub async fn hold(&self, json: &[u8]) -> Result<Held, Refused> {
        // Counted, not estimated: a small frame's worst case (a value every two bytes) would
        // make each audio frame cost megabytes and a few sessions fill the budget.
        let max_values = self.bytes.saturating_sub(json.len() * BYTE_COST) / VALUE_COST + 1;
        let shape = Shape::count(json, max_values);
        if shape.cost() > self.bytes {
            return Err(Refused::TooCostly {
                shape,
                budget: self.bytes,
            });
        }
        if shape.cost() <= FREE_COST {
            return Ok(Held {
                _permit: None,
                bytes: 0,
            });
        }
        self.hold_shape(shape, INPUT_WAIT).await
    }

    /// [`InputBudget::hold`] for a message already weighed, waiting at most `wait`.
    pub async fn hold_shape(&self, shape: Shape, wait: Duration) -> Result<Held, Refused> {
        let cost = shape.cost();
        let units = cost.div_ceil(UNIT);
        if units == 0 {
            return Ok(Held {
                _permit: None,
                bytes: 0,
            });
        }
        let Ok(units) = u32::try_from(units) else {
            return Err(Refused::TooCostly {
                shape,
                budget: self.bytes,
            });
        };
        match tokio::time::timeout(wait, self.units.clone().acquire_many_owned(units)).await {
            Ok(Ok(permit)) => Ok(Held {
                _permit: Some(permit),
                bytes: cost,
            }),
            // The semaphore is never closed; a timeout is the only way here.
            _ => Err(Refused::Busy {
                shape,
                budget: self.bytes,
                waited: wait,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_counted_not_bytes() {
        let shape = Shape::count(br#"{"a": [1, 2, {"b": null}], "c": "x"}"#, usize::MAX);
        assert_eq!((shape.values, shape.depth), (7, 3));
        // A million empty parts are 3 MB of text and a million values.
        let parts = format!("[{}{{}}]", "{},".repeat(999_999));
        let shape = Shape::count(parts.as_bytes(), usize::MAX);
        assert_eq!(shape.values, 1_000_001);
        assert!(shape.cost() > 200 << 20);
    }

    #[test]
    fn counting_stops_past_the_budget_and_small_payloads_are_not_read() {
        let parts = format!("[{}{{}}]", "{},".repeat(999_999));
        let shape = Shape::of(parts.as_bytes(), INPUT_BUDGET);
        assert!(shape.cost() > INPUT_BUDGET);
        assert!(shape.values < 1_000_000 / 2, "{}", shape.values);
        // Not JSON: counted as far as it goes, the decoder says the rest.
        assert!(Shape::count(b"[1, 2, oops", usize::MAX).values >= 2);
        // An audio frame is too small to cost anything worth counting.
        let small = vec![b'A'; 20_000];
        assert_eq!(Shape::of(&small, INPUT_BUDGET).values, 10_001);
    }

    #[test]
    fn a_message_over_the_budget_is_refused_in_words() {
        let budget = InputBudget::new(1 << 20);
        let parts = format!(r#"{{"turns": [{}{{}}]}}"#, "{},".repeat(99_999));
        let refused = budget.weigh(parts.as_bytes()).unwrap_err();
        let words = refused.to_string();
        assert!(
            words.starts_with("a message of 293.0 KiB holding ")
                && words.ends_with("more than the 1.0 MiB livetalk holds for input at once"),
            "{words}"
        );
        assert!(budget.weigh(br#"{"turns": [{}]}"#).is_ok());
    }

    #[tokio::test]
    async fn messages_wait_for_each_other_and_give_up_in_time() {
        let budget = InputBudget::new(1 << 20);
        let big = format!("[{}0]", "0,".repeat(2500));
        let shape = budget.weigh(big.as_bytes()).unwrap();
        assert!(shape.cost() > 512 << 10, "{shape:?}");
        let first = budget.hold_shape(shape, INPUT_WAIT).await.unwrap();
        assert!(budget.available() < 512 << 10);
        let waited = budget
            .hold_shape(shape, Duration::from_millis(50))
            .await
            .unwrap_err();
        assert!(matches!(waited, Refused::Busy { .. }), "{waited}");
        let second = {
            let budget = budget.clone();
            tokio::spawn(async move { budget.hold_shape(shape, INPUT_WAIT).await })
        };
        drop(first);
        let second = second.await.unwrap().unwrap();
        assert_eq!(second.bytes(), shape.cost());
        drop(second);
        assert_eq!(budget.available(), budget.bytes());
    }

    #[tokio::test]
    async fn a_frame_is_held_for_what_it_holds_not_for_its_worst_case() {
        // An audio frame: 30 KB of base64 in a handful of values.
        let frame = format!(
            r#"{{"serverContent":{{"modelTurn":{{"parts":[{{"inlineData":{{"mimeType":"audio/pcm","data":"{}"}}}}]}}}}}}"#,
            "A".repeat(30_000)
        );
        let budget = InputBudget::new(INPUT_BUDGET);
        let shape = Shape::count(frame.as_bytes(), usize::MAX);
        assert_eq!(shape.cost(), frame.len() * BYTE_COST + 8 * VALUE_COST);
        // It costs less than FREE_COST: it takes nothing from the budget.
        let held = budget.hold(frame.as_bytes()).await.unwrap();
        assert_eq!((held.bytes(), budget.available()), (0, budget.bytes()));
        // A megabyte of text does.
        let text = format!(r#"{{"text":"{}"}}"#, "t".repeat(1 << 20));
        let held = budget.hold(text.as_bytes()).await.unwrap();
        assert!(held.bytes() > 3 << 20, "{}", held.bytes());
    }
}

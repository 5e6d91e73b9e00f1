//! What input may cost a process: one budget, in bytes, for every message from a peer from
//! before it is read until it has been handled, whatever its shape and however many peers
//! send at once. A message costs its bytes plus what its decoded form takes, which grows with
//! the number of JSON values it holds, not its size (a million empty parts are 3 MB of text
//! and hundreds of MB of structs).
//!
//! Its bytes are paid for first: every WebSocket livetalk reads (`livetalk`, `serve`, `mock`,
//! and the proxy to come) is read through a [`Gated`] socket, which holds what a frame's bytes
//! will cost from its header on, before tungstenite reads its payload, so ten peers sending
//! 10 MB frames at once are read in turn instead of all at once. Its values are counted next,
//! in a pass that allocates nothing ([`Shape::of`]), before anything is decoded: a message
//! that would cost more than the whole budget is refused at once, and one that fits waits (at
//! most [`INPUT_WAIT`]) until the messages of other peers have been handled
//! ([`InputBudget::hold_after`]).

mod gate;

pub use gate::{Gate, Gated};

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The input a process holds at once, read, decoded and being handled: 32 MiB (with the
/// event inspector's 16 MiB, what a session may hold of what others sent stays under 64 MiB).
pub const INPUT_BUDGET: usize = 32 << 20;

/// The largest message a peer can have taken in: one whose bytes alone cost the whole budget.
/// The servers refuse a larger one from its frame's header, before reading it.
pub const LARGEST_MESSAGE: usize = INPUT_BUDGET / BYTE_COST;

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
    // Short enough for a close reason (123 bytes) with the largest figures.
    #[error(
        "a message of {} would take more than the {} livetalk holds for input at once{}",
        crate::excerpt::human_size(.shape.bytes as u64),
        crate::excerpt::human_size(*.budget as u64),
        counted(.shape, *.budget)
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

/// How many of a costly message's values were counted, when they are why it costs too much
/// (a message whose bytes alone are too many is not counted).
fn counted(shape: &Shape, budget: usize) -> String {
    if shape.bytes.saturating_mul(BYTE_COST) > budget {
        return String::new();
    }
    format!(" ({} JSON values counted)", shape.values)
}

impl Refused {
    /// The refusal as a sentence of its own, short enough for a WebSocket close reason.
    pub fn sentence(&self) -> String {
        let words = crate::excerpt::sentence(&self.to_string());
        let mut chars = words.chars();
        chars.next().map_or_else(String::new, |first| {
            first.to_uppercase().chain(chars).collect()
        })
    }

    /// The refusal a socket read failed with, when a [`Gated`] socket's frame waited longer
    /// than its deadline for the budget.
    pub fn of_read_error(error: &std::io::Error) -> Option<&Refused> {
        error.get_ref()?.downcast_ref::<Refused>()
    }
}

/// A budget of bytes for input in flight, shared by every connection that draws on it.
#[derive(Debug, Clone)]
pub struct InputBudget {
    units: Arc<Semaphore>,
    bytes: usize,
}

/// What a message holds of the budget until it is dropped.
#[derive(Debug, Default)]
pub struct Held {
    permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Held {
    /// The bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn units(&self) -> usize {
        self.permit
            .as_ref()
            .map_or(0, OwnedSemaphorePermit::num_permits)
    }

    /// Adds what `other` holds (of the same budget) to this.
    fn merge(&mut self, other: Held) {
        match (&mut self.permit, other.permit) {
            (Some(permit), Some(more)) => permit.merge(more),
            (None, Some(more)) => self.permit = Some(more),
            (_, None) => {}
        }
        self.bytes += other.bytes;
    }

    /// Gives back what is held past `bytes`, and stands for `bytes` from now on.
    fn keep(&mut self, bytes: usize) {
        let units = bytes.div_ceil(UNIT);
        if let Some(permit) = &mut self.permit
            && permit.num_permits() > units
        {
            drop(permit.split(permit.num_permits() - units));
        }
        self.bytes = bytes;
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
        self.hold_after(json, &mut None).await
    }

    /// [`InputBudget::hold`] for a message whose bytes were paid for while it was read
    /// (`reserved`, what its socket's [`Gate`] held for it): only what its values cost on
    /// top is waited for, and what was held past its cost is given back. `reserved` is taken
    /// once the message is held, and dropped when it is refused; a wait cancelled meanwhile
    /// leaves it where it was.
    pub async fn hold_after(
        &self,
        json: &[u8],
        reserved: &mut Option<Held>,
    ) -> Result<Held, Refused> {
        // Counted, not estimated: a small frame's worst case (a value every two bytes) would
        // make each audio frame cost megabytes and a few sessions fill the budget.
        let max_values = self.bytes.saturating_sub(json.len() * BYTE_COST) / VALUE_COST + 1;
        let shape = Shape::count(json, max_values);
        let cost = shape.cost();
        if cost > self.bytes {
            *reserved = None;
            return Err(Refused::TooCostly {
                shape,
                budget: self.bytes,
            });
        }
        if cost <= FREE_COST {
            *reserved = None;
            return Ok(Held::default());
        }
        let have = reserved.as_ref().map_or(0, Held::units);
        let more = match cost.div_ceil(UNIT).checked_sub(have) {
            Some(units) if units > 0 => match self.acquire(units * UNIT, shape, INPUT_WAIT).await {
                Ok(more) => more,
                Err(refused) => {
                    *reserved = None;
                    return Err(refused);
                }
            },
            _ => Held::default(),
        };
        let mut held = reserved.take().unwrap_or_default();
        held.merge(more);
        held.keep(cost);
        Ok(held)
    }

    /// [`InputBudget::hold`] for a message already weighed, waiting at most `wait`.
    pub async fn hold_shape(&self, shape: Shape, wait: Duration) -> Result<Held, Refused> {
        self.acquire(shape.cost(), shape, wait).await
    }

    /// Holds `bytes` of the budget for a message of `shape`, waiting at most `wait`.
    async fn acquire(&self, bytes: usize, shape: Shape, wait: Duration) -> Result<Held, Refused> {
        let units = bytes.div_ceil(UNIT);
        if units == 0 {
            return Ok(Held::default());
        }
        let Ok(units) = u32::try_from(units) else {
            return Err(Refused::TooCostly {
                shape,
                budget: self.bytes,
            });
        };
        match tokio::time::timeout(wait, self.units.clone().acquire_many_owned(units)).await {
            Ok(Ok(permit)) => Ok(Held {
                permit: Some(permit),
                bytes,
            }),
            // The semaphore is never closed; a timeout is the only way here.
            _ => Err(Refused::Busy {
                shape,
                budget: self.bytes,
                waited: wait,
            }),
        }
    }

    /// Reads `stream`, a peer's socket before its WebSocket upgrade, through a [`Gated`]
    /// socket that holds from this budget what each frame's bytes cost before it is read
    /// (frames over `max_frame`, which tungstenite refuses from their header, are not held
    /// for). What it held for the message read last is taken from the [`Gate`].
    pub fn gate<S>(&self, stream: S, max_frame: usize) -> (Gated<S>, Gate) {
        Gated::new(stream, self.clone(), max_frame, INPUT_WAIT)
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
            words.starts_with(
                "a message of 293.0 KiB would take more than the 1.0 MiB livetalk holds for input at once ("
            ) && words.ends_with(" JSON values counted)"),
            "{words}"
        );
        // The longest it can be fits a WebSocket close reason (values are counted no further
        // than the budget holds: six digits), and a message whose bytes alone are too many
        // is not said to have had its values counted.
        let shape = |bytes, values| Shape {
            bytes,
            values,
            depth: 0,
        };
        for (shape, counted) in [
            (shape(LARGEST_MESSAGE - 1, 999_999), true),
            (shape(1023 << 20, 2), false),
        ] {
            let longest = Refused::TooCostly {
                shape,
                budget: INPUT_BUDGET,
            }
            .sentence();
            assert!(longest.len() <= 123, "{longest}");
            assert!(longest.starts_with("A message of "), "{longest}");
            assert_eq!(longest.contains("values counted"), counted, "{longest}");
        }
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
    async fn a_message_whose_bytes_were_held_while_read_tops_up_or_gives_back() {
        let budget = InputBudget::new(4 << 20);
        let used = |budget: &InputBudget| budget.bytes() - budget.available();
        // What a message's bytes held while it was read.
        let read = |bytes: usize| {
            let budget = budget.clone();
            async move {
                budget
                    .acquire(bytes, Shape::default(), INPUT_WAIT)
                    .await
                    .unwrap()
            }
        };
        let text = format!(r#"{{"text":"{}"}}"#, "t".repeat(300 << 10));
        let cost = text.len() * BYTE_COST + 2 * VALUE_COST;
        // Its bytes were held while it was read; its two values are held on top. Held for more
        // than it costs (a large frame holds up to the whole budget), the rest is given back.
        for bytes in [text.len() * BYTE_COST, budget.bytes()] {
            let held = budget
                .hold_after(text.as_bytes(), &mut Some(read(bytes).await))
                .await
                .unwrap();
            assert_eq!(held.bytes(), cost);
            assert_eq!(used(&budget), cost.div_ceil(UNIT) * UNIT);
        }
        assert_eq!(used(&budget), 0);
        // Refused: what was held while it was read is given back too.
        let parts = format!("[{}{{}}]", "{},".repeat(99_999));
        let mut read = Some(read(parts.len() * BYTE_COST).await);
        let refused = budget.hold_after(parts.as_bytes(), &mut read).await;
        assert!(matches!(refused, Err(Refused::TooCostly { .. })));
        assert!(read.is_none());
        assert_eq!(used(&budget), 0);
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

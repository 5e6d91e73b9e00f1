//! Lenient serde helpers for the Live API's proto3-JSON: int64 as number or string, bools as
//! `true` or `"true"`, `google.protobuf.Duration` strings like `"9.5s"`, and base64 in either
//! alphabet, padded or not.

use std::borrow::Cow;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serializer};

/// Decodes base64 in the standard or URL-safe alphabet, padded or not (the Python SDK sends
/// URL-safe, the service and JS send standard).
pub(crate) fn decode_base64(text: impl AsRef<[u8]>) -> Result<Vec<u8>, base64::DecodeError> {
    let text = text.as_ref();
    // What the service sends, standard and padded, takes the SIMD decoder; it accepts nothing
    // the rules below would refuse or read differently (tests::simd_agrees_with_the_rules).
    if let Ok(bytes) = base64_simd::STANDARD.decode_to_vec(text) {
        return Ok(bytes);
    }
    decode_base64_by_shape(text)
}

/// The alphabet and padding read off the text itself.
fn decode_base64_by_shape(text: &[u8]) -> Result<Vec<u8>, base64::DecodeError> {
    let url_safe = text.iter().any(|&b| b == b'-' || b == b'_');
    let padded = text.last() == Some(&b'=');
    let engine = match (url_safe, padded) {
        (false, true) => &STANDARD,
        (false, false) => &STANDARD_NO_PAD,
        (true, true) => &URL_SAFE,
        (true, false) => &URL_SAFE_NO_PAD,
    };
    engine.decode(text)
}

/// Encodes bytes as standard padded base64, the canonical form we always send.
pub(crate) fn encode_base64(bytes: &[u8]) -> String {
    base64_simd::STANDARD.encode_to_string(bytes)
}

/// [`encode_base64`] appended to `out` (base64 never needs escaping inside a JSON string).
pub(crate) fn append_base64(bytes: &[u8], out: &mut String) {
    base64_simd::STANDARD.encode_append(bytes, out);
}

/// Length of [`encode_base64`]'s output for `len` bytes.
pub(crate) const fn base64_len(len: usize) -> usize {
    len.div_ceil(3) * 4
}

/// `bytes` fields: standard base64 out, either alphabet in. For `#[serde(with = "…")]`.
pub mod base64_bytes {
    use super::*;

    /// Writes the bytes as standard padded base64.
    pub fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&encode_base64(bytes))
    }

    /// Reads base64 in either alphabet, padded or not.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<u8>, D::Error> {
        // Borrow when the JSON string has no escapes: audio frames are large.
        let text = Cow::<'de, str>::deserialize(deserializer)?;
        decode_base64(text.as_bytes())
            .map_err(|e| de::Error::custom(format!("invalid base64 data: {e}")))
    }
}

struct LenientI64;

impl Visitor<'_> for LenientI64 {
    type Value = i64;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an integer as a JSON number or string")
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        if v.fract() == 0.0 && v.abs() < 9.0e15 {
            Ok(v as i64)
        } else {
            Err(E::custom(format!("expected an integer, got {v}")))
        }
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<i64, E> {
        v.trim()
            .parse()
            .map_err(|_| E::custom(format!("expected an integer, got {v:?}")))
    }
}

/// A value read as the visitor inside reads it, where anything it refuses is no value rather
/// than an error: a peer's counter that overflows (`1e30`, `2^64`), a duration no clock holds
/// or a garbled flag loses that field, not the whole frame (and the `turnComplete` riding in
/// it). Arrays and objects where a scalar belongs are skipped whole.
struct Lossy<V>(V);

impl<'de, V: Visitor<'de>> Visitor<'de> for Lossy<V> {
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        self.0.expecting(f)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(self.0.visit_bool::<E>(v).ok())
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(self.0.visit_i64::<E>(v).ok())
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(self.0.visit_u64::<E>(v).ok())
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(self.0.visit_f64::<E>(v).ok())
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(self.0.visit_str::<E>(v).ok())
    }
    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map
            .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
            .is_some()
        {}
        Ok(None)
    }
}

/// Optional int32-style counters: sent as numbers, read from numbers or strings; a value that
/// is no integer in range is read as absent.
pub(crate) mod opt_int {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<i64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serializer.serialize_i64(*v),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<i64>, D::Error> {
        deserializer.deserialize_any(Lossy(LenientI64))
    }
}

/// Optional int64 fields: proto3-JSON writes them as strings; read numbers or strings; a value
/// that is no integer in range is read as absent.
pub(crate) mod opt_int64 {
    use super::*;

    pub fn serialize<S: Serializer>(value: &Option<i64>, serializer: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serializer.serialize_str(&v.to_string()),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<i64>, D::Error> {
        deserializer.deserialize_any(Lossy(LenientI64))
    }
}

struct LenientBool;

impl Visitor<'_> for LenientBool {
    type Value = bool;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a boolean or \"true\"/\"false\"")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<bool, E> {
        Ok(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
        match v.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(E::custom(format!("expected a boolean, got {v:?}"))),
        }
    }
}

/// Optional booleans that some producers write as strings (`"resumable": "true"`); anything
/// else is read as absent.
pub(crate) mod opt_bool {
    use super::*;

    pub fn serialize<S: Serializer>(
        value: &Option<bool>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serializer.serialize_bool(*v),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<bool>, D::Error> {
        deserializer.deserialize_any(Lossy(LenientBool))
    }
}

/// Parses a `google.protobuf.Duration` JSON string such as `"10s"`, `"9.5s"` or `"0.250s"`.
pub(crate) fn parse_duration(text: &str) -> Option<Duration> {
    let number = text.trim().strip_suffix('s').unwrap_or(text.trim());
    if let Some(exact) = parse_decimal_seconds(number) {
        return exact;
    }
    let seconds: f64 = number.parse().ok()?;
    // try_: a huge value ("20000000000000000000s") must be an error, not a panic (fuzzing).
    Duration::try_from_secs_f64(seconds).ok()
}

/// Seconds written the way [`format_duration`] writes them (digits, then at most nine decimals)
/// are read exactly; through `f64` a large count of seconds would come back changed. `None` for
/// any other spelling, which `f64` reads as before.
fn parse_decimal_seconds(number: &str) -> Option<Option<Duration>> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let scale = 10u32.pow(9 - fraction.len() as u32);
    let nanos = if fraction.is_empty() {
        0
    } else {
        fraction.parse::<u32>().ok()? * scale
    };
    // Too many seconds for a u64 is an error, as it was through f64.
    Some(
        whole
            .parse::<u64>()
            .ok()
            .map(|seconds| Duration::new(seconds, nanos)),
    )
}

/// Formats a duration the way proto3-JSON does: seconds with an `s` suffix, no trailing zeros.
pub(crate) fn format_duration(duration: Duration) -> String {
    let nanos = duration.subsec_nanos();
    if nanos == 0 {
        format!("{}s", duration.as_secs())
    } else {
        let fraction = format!("{nanos:09}");
        format!("{}.{}s", duration.as_secs(), fraction.trim_end_matches('0'))
    }
}

struct LenientDuration;

impl Visitor<'_> for LenientDuration {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a duration such as \"9.5s\" or a number of seconds")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
        parse_duration(v).ok_or_else(|| E::custom(format!("invalid duration {v:?}")))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Duration, E> {
        Duration::try_from_secs_f64(v).map_err(|_| E::custom(format!("invalid duration {v}")))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
        Ok(Duration::from_secs(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
        u64::try_from(v)
            .map(Duration::from_secs)
            .map_err(|_| E::custom("negative duration"))
    }
}

/// Optional `google.protobuf.Duration` fields; one that is no duration (or too long for one)
/// is read as absent.
pub(crate) mod opt_duration {
    use super::*;

    pub fn serialize<S: Serializer>(
        value: &Option<Duration>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => serializer.serialize_str(&format_duration(*v)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Duration>, D::Error> {
        deserializer.deserialize_any(Lossy(LenientDuration))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_accepts_both_alphabets_with_and_without_padding() {
        let bytes = [0xfb, 0xff, 0xfe, 0x00, 0x01];
        assert_eq!(decode_base64("+//+AAE=").unwrap(), bytes);
        assert_eq!(decode_base64("-__-AAE=").unwrap(), bytes);
        assert_eq!(decode_base64("-__-AAE").unwrap(), bytes);
        assert_eq!(decode_base64("+//+AAE").unwrap(), bytes);
        assert_eq!(encode_base64(&bytes), "+//+AAE=");
        assert!(decode_base64("not base64!").is_err());
    }

    /// Characters that make or break base64 in either alphabet, and a few that never do.
    const BASE64_CHARS: &[u8] = b"AQgwBz09+/-_=== \n.!";

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(4096))]

        /// The SIMD fast path never answers differently from the rules it short-cuts: whatever
        /// it accepts, the alphabet-and-padding rules accept with the same bytes. Texts are
        /// random, or real encodings with one character changed (the near misses).
        #[test]
        fn simd_agrees_with_the_rules(
            random in proptest::collection::vec(proptest::sample::select(BASE64_CHARS), 0..24),
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..48),
            at in proptest::num::usize::ANY,
            swap in proptest::sample::select(BASE64_CHARS),
        ) {
            let encoded = encode_base64(&bytes);
            let mut near_miss = encoded.clone().into_bytes();
            if let Some(len) = std::num::NonZeroUsize::new(near_miss.len()) {
                near_miss[at % len] = swap;
            }
            for text in [&random, &near_miss] {
                if let Ok(fast) = base64_simd::STANDARD.decode_to_vec(text) {
                    proptest::prop_assert_eq!(decode_base64_by_shape(text), Ok(fast));
                }
            }
            proptest::prop_assert_eq!(encoded.len(), base64_len(bytes.len()));
            proptest::prop_assert_eq!(&encoded, &STANDARD.encode(&bytes));
            proptest::prop_assert_eq!(decode_base64(&encoded), Ok(bytes.clone()));
            let url_safe = URL_SAFE_NO_PAD.encode(&bytes);
            proptest::prop_assert_eq!(decode_base64(url_safe), Ok(bytes));
        }
    }

    #[test]
    fn non_canonical_base64_is_refused_on_both_paths() {
        // Trailing bits set ("AR==" is not how 0x01 is written) and padding in the middle.
        for text in ["AR==", "AQ=A", "A===", "AQ==AQ==", "=", "AQ"] {
            assert_eq!(
                decode_base64(text).is_ok(),
                decode_base64_by_shape(text.as_bytes()).is_ok(),
                "{text}"
            );
        }
        assert!(decode_base64("AR==").is_err());
        assert_eq!(decode_base64("AQ").unwrap(), [1]);
    }

    #[test]
    fn durations_round_trip_in_proto_json_form() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("9.5s"), Some(Duration::from_millis(9500)));
        assert_eq!(parse_duration("0.250s"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(format_duration(Duration::from_millis(9500)), "9.5s");
        assert_eq!(format_duration(Duration::from_secs(50)), "50s");
        // Exact where f64 is not: a count of seconds beyond 2^53 comes back as written.
        let long = Duration::new(8_712_304_810_006_893_848, 5);
        assert_eq!(parse_duration(&format_duration(long)), Some(long));
        assert_eq!(
            parse_duration("18446744073709551615s"),
            Some(Duration::MAX.saturating_sub(Duration::new(0, 999_999_999)))
        );
        assert_eq!(parse_duration("18446744073709551616s"), None);
        // Other spellings still read through f64.
        assert_eq!(parse_duration("1e3s"), Some(Duration::from_secs(1000)));
        assert_eq!(parse_duration(".5s"), Some(Duration::from_millis(500)));
        assert_eq!(
            parse_duration("0.1234567891s"),
            Some(Duration::from_nanos(123_456_789))
        );
    }
}

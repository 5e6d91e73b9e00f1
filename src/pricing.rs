//! What a session's tokens cost: the service's published prices per model (a dated table,
//! overridable in the config's `[pricing."MODEL"]`), the tokens of each `usageMetadata` sorted
//! by modality, and the sum. Pure: the app, `inspect` and the headless summary all price with
//! it.
//!
//! The Live API bills every turn's whole prompt (the context is billed again each turn), so a
//! session costs the sum of its `usageMetadata` reports, priced per modality: a prompt's
//! tokens at the input price of their modality, the reply's at the output price, thinking
//! tokens as text output.

use std::collections::BTreeMap;

use livetalk_live::wire::{ModalityTokenCount, UsageMetadata};
use serde::Deserialize;

/// When the prices below were read.
pub const PRICES_READ_ON: &str = "2026-11-26";

/// Where they were read (see docs/configuration.md#what-a-session-costs for which figure came
/// from where).
pub const PRICES_SOURCE: &str = "https://ai.google.dev/gemini-api/docs/pricing";

/// US dollars per million tokens, by modality, one way or the other.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelPrices {
    /// Text (and documents) in.
    pub text_in: f64,
    /// Audio in.
    pub audio_in: f64,
    /// Images and video in.
    pub video_in: f64,
    /// Text out, thinking included.
    pub text_out: f64,
    /// Audio out.
    pub audio_out: f64,
}

/// The built-in table: a model id prefix and its prices, the most specific prefix first.
///
/// Read on [`PRICES_READ_ON`]. The 3.1 Flash Live text prices are the pricing page's; its
/// audio prices are the page's per-minute prices ($0.005 a minute in, $0.018 out) at the
/// documented 25 audio tokens a second. Gemini 3.8 Live is listed at the same text prices
/// (Vercel's AI Gateway, which cites the pricing page); no published audio price for it was
/// found, so 3.1 Flash Live's is used. 2.0 Flash Live's are as Google's staff quoted the page.
/// Images and video cost what text costs on the 3.x pages.
const TABLE: [(&str, ModelPrices); 3] = [
    (
        "gemini-3.8-live",
        ModelPrices {
            text_in: 0.75,
            audio_in: 3.00,
            video_in: 0.75,
            text_out: 4.50,
            audio_out: 12.00,
        },
    ),
    (
        "gemini-3.1-flash-live",
        ModelPrices {
            text_in: 0.75,
            audio_in: 3.00,
            video_in: 0.75,
            text_out: 4.50,
            audio_out: 12.00,
        },
    ),
    (
        "gemini-2.0-flash-live",
        ModelPrices {
            text_in: 0.35,
            audio_in: 2.10,
            video_in: 2.10,
            text_out: 1.50,
            audio_out: 8.50,
        },
    ),
];

/// `[pricing."MODEL"]`: US dollars per million tokens, per modality, in and out; what is not
/// given keeps the built-in price (or 0 for a model the table does not know).
#[derive(Debug, Default, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceOverride {
    pub text_in: Option<f64>,
    pub audio_in: Option<f64>,
    pub video_in: Option<f64>,
    pub text_out: Option<f64>,
    pub audio_out: Option<f64>,
}

/// The prices a session goes by, for whichever model it talks to: the built-in table with the
/// config's `[pricing."MODEL"]` over it (by bare model id), so a model changed mid-session is
/// priced as the one it started with was.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PriceBook {
    overrides: BTreeMap<String, PriceOverride>,
}

impl PriceBook {
    /// The built-in table with `overrides` (bare model ids, already checked) over it.
    pub fn new(overrides: BTreeMap<String, PriceOverride>) -> Self {
        PriceBook { overrides }
    }

    /// What `model` costs: its published prices, each price the config gives in their place.
    /// `None` for a model nobody priced.
    pub fn prices(&self, model: &str) -> Option<ModelPrices> {
        let published = published(model);
        let Some(set) = self.overrides.get(model_id(model)) else {
            return published;
        };
        let mut prices = published.unwrap_or_default();
        for (value, slot) in [
            (set.text_in, &mut prices.text_in),
            (set.audio_in, &mut prices.audio_in),
            (set.video_in, &mut prices.video_in),
            (set.text_out, &mut prices.text_out),
            (set.audio_out, &mut prices.audio_out),
        ] {
            if let Some(value) = value {
                *slot = value;
            }
        }
        Some(prices)
    }
}

/// The bare id of a model name (`models/gemini-3.8-live` → `gemini-3.8-live`).
pub fn model_id(model: &str) -> &str {
    model.trim().rsplit('/').next().unwrap_or_default()
}

/// The built-in prices of `model` (a bare id or a `models/…` name), if the table has them.
pub fn published(model: &str) -> Option<ModelPrices> {
    let id = model_id(model);
    TABLE
        .iter()
        .find(|(prefix, _)| id.starts_with(prefix))
        .map(|(_, prices)| *prices)
}

/// Tokens of a session by modality, summed over its `usageMetadata` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenTally {
    pub text_in: u64,
    pub audio_in: u64,
    pub video_in: u64,
    pub text_out: u64,
    pub audio_out: u64,
}

/// A count from a peer: anything an i64 holds, read as tokens.
fn count(value: Option<i64>) -> u64 {
    value.unwrap_or(0).max(0).unsigned_abs()
}

impl TokenTally {
    /// Adds one report. Tokens its modality details leave out count as text.
    pub fn add(&mut self, usage: &UsageMetadata) {
        let mut detailed_in = 0u64;
        for detail in &usage.prompt_tokens_details {
            let n = count(detail.token_count);
            detailed_in = detailed_in.saturating_add(n);
            let slot = match modality(detail) {
                Modality::Audio => &mut self.audio_in,
                Modality::Video => &mut self.video_in,
                Modality::Text => &mut self.text_in,
            };
            *slot = slot.saturating_add(n);
        }
        let rest_in = count(usage.prompt_token_count).saturating_sub(detailed_in);
        self.text_in = self.text_in.saturating_add(rest_in);
        let mut detailed_out = 0u64;
        for detail in &usage.response_tokens_details {
            let n = count(detail.token_count);
            detailed_out = detailed_out.saturating_add(n);
            let slot = match modality(detail) {
                Modality::Audio => &mut self.audio_out,
                _ => &mut self.text_out,
            };
            *slot = slot.saturating_add(n);
        }
        let rest_out = count(usage.response_token_count).saturating_sub(detailed_out);
        self.text_out = self
            .text_out
            .saturating_add(rest_out)
            .saturating_add(count(usage.thoughts_token_count));
    }

    /// All tokens in and out.
    pub fn total(&self) -> u64 {
        [
            self.text_in,
            self.audio_in,
            self.video_in,
            self.text_out,
            self.audio_out,
        ]
        .iter()
        .fold(0u64, |sum, n| sum.saturating_add(*n))
    }

    /// The tokens added since `earlier` (a copy of this tally taken before).
    pub fn since(&self, earlier: &TokenTally) -> TokenTally {
        TokenTally {
            text_in: self.text_in.saturating_sub(earlier.text_in),
            audio_in: self.audio_in.saturating_sub(earlier.audio_in),
            video_in: self.video_in.saturating_sub(earlier.video_in),
            text_out: self.text_out.saturating_sub(earlier.text_out),
            audio_out: self.audio_out.saturating_sub(earlier.audio_out),
        }
    }

    /// What these tokens cost at these prices, in US dollars.
    pub fn cost(&self, prices: &ModelPrices) -> f64 {
        let per_million = |tokens: u64, price: f64| tokens as f64 * price / 1e6;
        per_million(self.text_in, prices.text_in)
            + per_million(self.audio_in, prices.audio_in)
            + per_million(self.video_in, prices.video_in)
            + per_million(self.text_out, prices.text_out)
            + per_million(self.audio_out, prices.audio_out)
    }
}

enum Modality {
    Text,
    Audio,
    Video,
}

fn modality(detail: &ModalityTokenCount) -> Modality {
    match detail.modality.to_ascii_uppercase().as_str() {
        "AUDIO" => Modality::Audio,
        "IMAGE" | "VIDEO" => Modality::Video,
        _ => Modality::Text,
    }
}

/// A cost as the panel and the summaries say it: "≈ $0.012".
pub fn dollars(cost: f64) -> String {
    if cost >= 100.0 {
        format!("≈ ${cost:.0}")
    } else if cost >= 1.0 {
        format!("≈ ${cost:.2}")
    } else {
        format!("≈ ${cost:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(json: &str) -> UsageMetadata {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn tokens_are_sorted_by_modality_and_the_rest_counts_as_text() {
        let mut tally = TokenTally::default();
        // The report a forum post quoted from gemini-3.8-live: 25 prompt tokens have no
        // modality, and thinking is billed as output.
        tally.add(&usage(
            r#"{"promptTokenCount":522,"responseTokenCount":42,"totalTokenCount":564,
                "promptTokensDetails":[{"modality":"TEXT","tokenCount":332},{"modality":"AUDIO","tokenCount":165}],
                "responseTokensDetails":[{"modality":"AUDIO","tokenCount":42}],
                "thoughtsTokenCount":136}"#,
        ));
        assert_eq!(
            tally,
            TokenTally {
                text_in: 357,
                audio_in: 165,
                video_in: 0,
                text_out: 136,
                audio_out: 42,
            }
        );
        tally.add(&usage(
            r#"{"promptTokenCount":-5,"responseTokenCount":9223372036854775807,
                "promptTokensDetails":[{"modality":"IMAGE","tokenCount":258}]}"#,
        ));
        assert_eq!(tally.video_in, 258);
        assert_eq!(tally.text_in, 357, "a negative count adds nothing");
        assert_eq!(tally.text_out, 136 + i64::MAX.unsigned_abs());
        tally.add(&usage(r#"{"responseTokenCount":9223372036854775807}"#));
        assert_eq!(tally.text_out, u64::MAX, "a huge count saturates");
        assert_eq!(tally.total(), u64::MAX);
    }

    #[test]
    fn a_session_is_priced_per_modality() {
        let tally = TokenTally {
            text_in: 1_000_000,
            audio_in: 100_000,
            video_in: 0,
            text_out: 10_000,
            audio_out: 50_000,
        };
        let prices = published("models/gemini-3.8-live").unwrap();
        let cost = tally.cost(&prices);
        // 0.75 + 0.30 + 0.045 + 0.60
        assert!((cost - 1.695).abs() < 1e-9, "{cost}");
        assert_eq!(dollars(1.696), "≈ $1.70");
        assert_eq!(dollars(0.0123), "≈ $0.012");
        assert_eq!(dollars(123.4), "≈ $123");
    }

    #[test]
    fn models_are_found_by_family() {
        assert!(published("gemini-3.1-flash-live-preview").is_some());
        assert!(published("gemini-2.0-flash-live-001").is_some());
        assert_eq!(published("gemini-live-offline-demo"), None);
        assert_eq!(published(""), None);
    }
}

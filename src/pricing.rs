//! A session's tokens and what they cost: the service's own total (each `usageMetadata`'s
//! `totalTokenCount`, summed) split into parts by modality that add up to it, the published
//! prices per model (a dated table, for Google's own routes), the config's `[pricing."MODEL"]`,
//! and the words every place shows them in. Pure: the app, `inspect` and the headless summary
//! all count and price with it, so a session has one figure for each.
//!
//! The Live API bills every turn's whole prompt (the context is billed again each turn), so a
//! session costs the sum of its `usageMetadata` reports, priced per modality: a prompt's
//! tokens at the input price of their modality, the reply's at the output price, thinking
//! tokens as text output.

use std::collections::BTreeMap;

use livetalk_live::wire::{ModalityTokenCount, UsageMetadata};
use serde::{Deserialize, Serialize};

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

/// Models a config may price (a bound on what a file can make us hold).
pub const PRICED_MODELS_MAX: usize = 64;

/// The highest price taken, in dollars per million tokens: far above any published one, so a
/// value past it is a slip (a price per token, or per thousand).
pub const PRICE_MAX: f64 = 1000.0;

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
/// given keeps the built-in price (or 0 for a model the table does not know, or a route Google
/// does not bill).
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceOverride {
    pub text_in: Option<f64>,
    pub audio_in: Option<f64>,
    pub video_in: Option<f64>,
    pub text_out: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_out: Option<f64>,
}

/// The prices a session goes by, for whichever model it talks to: on Google's own routes (the
/// Gemini API, Vertex AI) the built-in table, and on any route the config's
/// `[pricing."MODEL"]` over it (by bare model id), so a model changed mid-session is priced as
/// the one it started with was. Elsewhere (the demo model, `livetalk mock`, a bridge, another
/// endpoint) nobody published what a token costs: only the config prices a model there.
/// The default prices nothing.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PriceBook {
    /// The built-in table applies: the route is Google's own.
    #[serde(default)]
    published: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    overrides: BTreeMap<String, PriceOverride>,
}

impl PriceBook {
    /// The prices of a route to `host` (a host name as [`Settings::endpoint_label`] gives it):
    /// the built-in table when Google bills it, with `overrides` (bare model ids, already
    /// checked) over it.
    ///
    /// [`Settings::endpoint_label`]: crate::config::Settings::endpoint_label
    pub fn for_host(host: &str, overrides: BTreeMap<String, PriceOverride>) -> Self {
        PriceBook {
            published: billed_by_google(host),
            overrides,
        }
    }

    /// The prices a recorded session went by: as its metadata kept them (`config.pricing`),
    /// each price checked as the config checks it (one out of bounds is dropped), else, for a
    /// recording from before they were kept, the built-in table where Google billed it.
    pub fn recorded(kept: Option<&serde_json::Value>, host: &str) -> Self {
        let Some(mut book) = kept.and_then(|kept| PriceBook::deserialize(kept).ok()) else {
            return PriceBook::for_host(host, BTreeMap::new());
        };
        let fair = |price: &mut Option<f64>| {
            if price.is_some_and(|p| !(0.0..=PRICE_MAX).contains(&p)) {
                *price = None;
            }
        };
        for prices in book.overrides.values_mut() {
            for price in [
                &mut prices.text_in,
                &mut prices.audio_in,
                &mut prices.video_in,
                &mut prices.text_out,
                &mut prices.audio_out,
            ] {
                fair(price);
            }
        }
        if book.overrides.len() > PRICED_MODELS_MAX {
            book.overrides = book.overrides.into_iter().take(PRICED_MODELS_MAX).collect();
        }
        book
    }

    /// What `model` costs: its published prices where they apply, each price the config gives
    /// in their place. `None` for a model nobody priced on this route.
    pub fn prices(&self, model: &str) -> Option<ModelPrices> {
        let published = published(model).filter(|_| self.published);
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

/// Whether Google bills a session at `host`: the Gemini API's host and Vertex AI's (global or
/// regional). Every other host (the demo model, `livetalk mock`, a bridge, a proxy of one's
/// own) prices nothing unless the config does.
pub fn billed_by_google(host: &str) -> bool {
    let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
    host == "generativelanguage.googleapis.com"
        || host == "aiplatform.googleapis.com"
        || host
            .strip_suffix("-aiplatform.googleapis.com")
            .is_some_and(|region| {
                !region.is_empty()
                    && region
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
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

/// A session's tokens: the service's own total, the sum of each `usageMetadata`'s
/// `totalTokenCount`, in parts by modality that add up to it. A report without a total (the
/// newer models' early look at the prompt, counted again by the turn's own report) adds
/// nothing.
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
    /// Adds one report: its total, split by what it says of its parts. The prompt's tokens by
    /// modality come first (those its details leave out count as text), then the reply's, the
    /// tool results' and the thinking; a part the total does not hold is left out, and what
    /// the total holds beyond its parts counts as text in.
    pub fn add(&mut self, usage: &UsageMetadata) {
        let mut left = count(usage.total_token_count);
        let mut take = |slot: &mut u64, n: u64| {
            let n = n.min(left);
            left -= n;
            *slot = slot.saturating_add(n);
        };
        let mut detailed_in = 0u64;
        for detail in &usage.prompt_tokens_details {
            let n = count(detail.token_count);
            detailed_in = detailed_in.saturating_add(n);
            let slot = match modality(detail) {
                Modality::Audio => &mut self.audio_in,
                Modality::Video => &mut self.video_in,
                Modality::Text => &mut self.text_in,
            };
            take(slot, n);
        }
        take(
            &mut self.text_in,
            count(usage.prompt_token_count).saturating_sub(detailed_in),
        );
        let mut detailed_out = 0u64;
        for detail in &usage.response_tokens_details {
            let n = count(detail.token_count);
            detailed_out = detailed_out.saturating_add(n);
            let slot = match modality(detail) {
                Modality::Audio => &mut self.audio_out,
                _ => &mut self.text_out,
            };
            take(slot, n);
        }
        take(
            &mut self.text_out,
            count(usage.response_token_count).saturating_sub(detailed_out),
        );
        take(&mut self.text_in, count(usage.tool_use_prompt_token_count));
        take(&mut self.text_out, count(usage.thoughts_token_count));
        take(&mut self.text_in, u64::MAX);
    }

    /// All tokens in and out: the service's total.
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

/// The prompt's tokens that are pictures and video, by its per-modality counts (`IMAGE`,
/// `VIDEO`).
pub fn video_prompt_tokens(usage: &UsageMetadata) -> u64 {
    usage
        .prompt_tokens_details
        .iter()
        .filter(|detail| matches!(modality(detail), Modality::Video))
        .fold(0u64, |sum, detail| {
            sum.saturating_add(count(detail.token_count))
        })
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

/// Said where a session has no cost: its route's model has no price (see [`PriceBook`]).
pub const NOT_PRICED: &str = "not priced";

/// A session's cost as every place says it: "≈ $0.012", or [`NOT_PRICED`].
pub fn cost_words(cost: Option<f64>) -> String {
    cost.map_or_else(|| NOT_PRICED.to_owned(), dollars)
}

/// A count of tokens as every place shows it, whole, in groups of three: "1,046".
pub fn tokens_words(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

impl TokenTally {
    /// The parts as the summaries say them, each a part of [`TokenTally::total`]: "text 300
    /// in, 12 out; audio 700 in, 34 out; images and video 0 in".
    pub fn parts_words(&self) -> String {
        format!(
            "text {} in, {} out; audio {} in, {} out; images and video {} in",
            tokens_words(self.text_in),
            tokens_words(self.text_out),
            tokens_words(self.audio_in),
            tokens_words(self.audio_out),
            tokens_words(self.video_in),
        )
    }

    /// The parts by modality, in and out together, the largest first and those with none left
    /// out: "audio 5,800 · text 800" (the session panel's short form).
    pub fn by_modality_words(&self) -> String {
        let mut parts = [
            ("text", self.text_in.saturating_add(self.text_out)),
            ("audio", self.audio_in.saturating_add(self.audio_out)),
            ("images and video", self.video_in),
        ];
        parts.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
        parts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| format!("{name} {}", tokens_words(*n)))
            .collect::<Vec<_>>()
            .join(" · ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(json: &str) -> UsageMetadata {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn the_total_is_the_services_and_its_parts_add_up_to_it() {
        let mut tally = TokenTally::default();
        // The report a forum post quoted from gemini-3.8-live: 25 prompt tokens have no
        // modality, and its total holds the prompt and the reply but not the thinking.
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
                text_out: 0,
                audio_out: 42,
            }
        );
        assert_eq!(tally.total(), 564);
        // A total that holds the thinking and tool results counts them; what it holds beyond
        // every part it names is text in.
        tally.add(&usage(
            r#"{"promptTokenCount":100,"responseTokenCount":10,"toolUsePromptTokenCount":20,
                "thoughtsTokenCount":30,"totalTokenCount":165}"#,
        ));
        assert_eq!(tally.total(), 564 + 165);
        assert_eq!((tally.text_in, tally.text_out), (357 + 125, 40));
        // The newer models' early look at the prompt, with no total: the turn's own report
        // counts those tokens.
        tally.add(&usage(r#"{"promptTokenCount":7}"#));
        assert_eq!(tally.total(), 564 + 165);
    }

    #[test]
    fn a_hostile_report_neither_overflows_nor_breaks_the_sum() {
        let mut tally = TokenTally::default();
        tally.add(&usage(
            r#"{"promptTokenCount":-5,"responseTokenCount":9223372036854775807,"totalTokenCount":300,
                "promptTokensDetails":[{"modality":"IMAGE","tokenCount":258}]}"#,
        ));
        assert_eq!(tally.video_in, 258);
        assert_eq!(tally.text_out, 42, "the reply gets what the total leaves");
        assert_eq!(tally.total(), 300);
        tally.add(&usage(r#"{"totalTokenCount":-9}"#));
        assert_eq!(tally.total(), 300, "a negative total adds nothing");
        for _ in 0..3 {
            tally.add(&usage(r#"{"totalTokenCount":9223372036854775807}"#));
        }
        assert_eq!(tally.total(), u64::MAX, "a huge count saturates");
    }

    proptest::proptest! {
        #[test]
        fn the_parts_always_add_up_to_the_reported_totals(
            reports in proptest::collection::vec(
                (
                    proptest::option::of(-10i64..100_000),
                    proptest::option::of(-10i64..100_000),
                    proptest::option::of(-10i64..100_000),
                    proptest::option::of(-10i64..1000),
                    proptest::option::of(-10i64..1000),
                    proptest::collection::vec((0usize..4, -10i64..50_000), 0..4),
                    proptest::collection::vec((0usize..4, -10i64..50_000), 0..4),
                ),
                0..8,
            )
        ) {
            const MODALITIES: [&str; 4] = ["TEXT", "AUDIO", "IMAGE", "VIDEO"];
            let mut tally = TokenTally::default();
            let mut expected = 0u64;
            for (prompt, response, total, tools, thoughts, details_in, details_out) in reports {
                let details = |list: Vec<(usize, i64)>| {
                    list.into_iter()
                        .map(|(m, n)| ModalityTokenCount {
                            modality: MODALITIES[m].to_owned(),
                            token_count: Some(n),
                        })
                        .collect()
                };
                tally.add(&UsageMetadata {
                    prompt_token_count: prompt,
                    response_token_count: response,
                    total_token_count: total,
                    tool_use_prompt_token_count: tools,
                    thoughts_token_count: thoughts,
                    prompt_tokens_details: details(details_in),
                    response_tokens_details: details(details_out),
                    ..UsageMetadata::default()
                });
                expected += total.unwrap_or(0).max(0).unsigned_abs();
            }
            proptest::prop_assert_eq!(tally.total(), expected);
        }
    }

    #[test]
    fn counts_read_in_groups_of_three() {
        assert_eq!(tokens_words(0), "0");
        assert_eq!(tokens_words(999), "999");
        assert_eq!(tokens_words(1046), "1,046");
        assert_eq!(tokens_words(1_234_567), "1,234,567");
        let tally = TokenTally {
            text_in: 300,
            audio_in: 4000,
            video_in: 0,
            text_out: 500,
            audio_out: 1800,
        };
        assert_eq!(tally.by_modality_words(), "audio 5,800 · text 800");
        assert_eq!(
            tally.parts_words(),
            "text 300 in, 500 out; audio 4,000 in, 1,800 out; images and video 0 in"
        );
        assert_eq!(TokenTally::default().by_modality_words(), "");
        assert_eq!(cost_words(None), "not priced");
        assert_eq!(cost_words(Some(0.0123)), "≈ $0.012");
    }

    #[test]
    fn only_googles_routes_and_the_config_price_a_model() {
        let override_3_8 = || {
            BTreeMap::from([(
                "gemini-3.8-live".to_owned(),
                PriceOverride {
                    audio_out: Some(20.0),
                    ..PriceOverride::default()
                },
            )])
        };
        for host in [
            "generativelanguage.googleapis.com",
            "aiplatform.googleapis.com",
            "us-central1-aiplatform.googleapis.com",
        ] {
            let book = PriceBook::for_host(host, BTreeMap::new());
            assert_eq!(
                book.prices("models/gemini-3.8-live"),
                published("gemini-3.8-live"),
                "{host}"
            );
        }
        for host in [
            "offline demo model",
            "127.0.0.1",
            "localhost",
            "bridge.example",
            "generativelanguage.googleapis.com.evil.example",
            "-aiplatform.googleapis.com",
        ] {
            let book = PriceBook::for_host(host, BTreeMap::new());
            assert_eq!(book.prices("models/gemini-3.8-live"), None, "{host}");
            // The config prices a model on any route: what it does not give is 0 there.
            let book = PriceBook::for_host(host, override_3_8());
            assert_eq!(
                book.prices("models/gemini-3.8-live"),
                Some(ModelPrices {
                    audio_out: 20.0,
                    ..ModelPrices::default()
                }),
                "{host}"
            );
            assert_eq!(book.prices("models/gemini-3.1-flash-live"), None);
        }
        assert_eq!(PriceBook::default().prices("gemini-3.8-live"), None);
        let book = PriceBook::for_host("generativelanguage.googleapis.com", override_3_8());
        let prices = book.prices("gemini-3.8-live").unwrap();
        assert_eq!((prices.text_in, prices.audio_out), (0.75, 20.0));
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

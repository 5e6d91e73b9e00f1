//! The `[pricing."MODEL"]` tables: prices over the published ones, checked.

use std::collections::BTreeMap;

use super::ConfigError;
use crate::pricing::{PRICE_MAX, PRICED_MODELS_MAX, PriceOverride};

/// The prices the layers set so far, by model id.
#[derive(Debug, Default)]
pub(super) struct PriceChoice(pub(super) BTreeMap<String, PriceOverride>);

impl PriceChoice {
    /// One layer's `[pricing]` tables.
    pub(super) fn apply(
        &mut self,
        tables: BTreeMap<String, PriceOverride>,
        source: &str,
    ) -> Result<(), ConfigError> {
        for (model, prices) in tables {
            self.set_prices(&model, prices, source)?;
        }
        Ok(())
    }

    /// One `[pricing."MODEL"]` table, checked: a model id, and each price a number of dollars
    /// per million tokens from 0 to [`PRICE_MAX`].
    fn set_prices(
        &mut self,
        model: &str,
        prices: PriceOverride,
        source: &str,
    ) -> Result<(), ConfigError> {
        let shown = livetalk_live::excerpt::bounded(model, 80);
        let id = crate::pricing::model_id(model);
        if id.is_empty() {
            return Err(ConfigError::new(
                source,
                &format!("pricing.{shown:?}"),
                "names no model; use a model id, e.g. [pricing.\"gemini-3.8-live\"]",
            ));
        }
        for (name, value) in [
            ("text_in", prices.text_in),
            ("audio_in", prices.audio_in),
            ("video_in", prices.video_in),
            ("text_out", prices.text_out),
            ("audio_out", prices.audio_out),
        ] {
            if let Some(value) = value
                && !(0.0..=PRICE_MAX).contains(&value)
            {
                return Err(ConfigError::new(
                    source,
                    &format!("pricing.{shown:?}.{name}"),
                    format!(
                        "{value} is not a price; give US dollars per million tokens, from 0 to {PRICE_MAX}"
                    ),
                ));
            }
        }
        if !self.0.contains_key(id) && self.0.len() >= PRICED_MODELS_MAX {
            return Err(ConfigError::new(
                source,
                "pricing",
                format!(
                    "prices more than {PRICED_MODELS_MAX} models; at most {PRICED_MODELS_MAX} are taken"
                ),
            ));
        }
        let slot = self.0.entry(id.to_owned()).or_default();
        for (value, slot) in [
            (prices.text_in, &mut slot.text_in),
            (prices.audio_in, &mut slot.audio_in),
            (prices.video_in, &mut slot.video_in),
            (prices.text_out, &mut slot.text_out),
            (prices.audio_out, &mut slot.audio_out),
        ] {
            if value.is_some() {
                *slot = value;
            }
        }
        Ok(())
    }
}

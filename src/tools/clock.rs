//! `get_current_time`: the local date and time, so the model stops guessing what day it is.

use jiff::Zoned;
use jiff::fmt::strtime;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Tool, ToolError};
use livetalk_live::wire::{Behavior, Scheduling};

/// Arguments of a tool that takes none.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
pub struct NoArgs {}

/// `get_current_time`: NON_BLOCKING, since the model can keep talking while it runs and should
/// only mention the time once it is idle.
pub struct GetCurrentTime;

impl Tool for GetCurrentTime {
    type Args = NoArgs;

    fn name(&self) -> &'static str {
        "get_current_time"
    }

    fn description(&self) -> &'static str {
        "Gets the current local date and time, with the user's time zone."
    }

    fn behavior(&self) -> Behavior {
        Behavior::NonBlocking
    }

    fn scheduling(&self) -> Scheduling {
        Scheduling::WhenIdle
    }

    async fn call(&self, _args: NoArgs) -> Result<Value, ToolError> {
        time_report(&Zoned::now())
    }
}

/// The tool's answer for a given instant, e.g. `{"iso": "2026-11-21T14:05:09+01:00",
/// "time_zone": "Europe/Berlin", "utc_offset": "+01:00", "local_time": "14:05",
/// "date": "Saturday, 21 November 2026"}`.
pub fn time_report(now: &Zoned) -> Result<Value, ToolError> {
    let format = |pattern: &str| {
        strtime::format(pattern, now)
            .map_err(|error| ToolError::failed(format!("could not format the time: {error}")))
    };
    let offset = format("%:z")?;
    // A zone read from a bare TZ offset has no IANA name; the offset is the best we can say.
    let time_zone = now
        .time_zone()
        .iana_name()
        .map_or_else(|| format!("UTC{offset}"), str::to_owned);
    Ok(json!({
        "iso": format("%Y-%m-%dT%H:%M:%S%:z")?,
        "time_zone": time_zone,
        "utc_offset": offset,
        "local_time": format("%H:%M")?,
        "date": format("%A, %-d %B %Y")?,
    }))
}

#[cfg(test)]
mod tests {
    use jiff::civil::date;
    use jiff::tz::{Offset, TimeZone};

    use super::*;

    #[test]
    fn report_for_a_fixed_offset() -> Result<(), Box<dyn std::error::Error>> {
        let zone = TimeZone::fixed(Offset::from_hours(1)?);
        let now = date(2026, 11, 21).at(14, 5, 9, 0).to_zoned(zone)?;
        assert_eq!(
            time_report(&now)?,
            json!({
                "iso": "2026-11-21T14:05:09+01:00",
                "time_zone": "UTC+01:00",
                "utc_offset": "+01:00",
                "local_time": "14:05",
                "date": "Saturday, 21 November 2026",
            })
        );
        Ok(())
    }

    #[test]
    fn report_names_an_iana_zone() -> Result<(), Box<dyn std::error::Error>> {
        let now = date(2026, 3, 1).at(9, 0, 0, 0).to_zoned(TimeZone::UTC)?;
        let report = time_report(&now)?;
        assert_eq!(report["time_zone"], "UTC");
        assert_eq!(report["date"], "Sunday, 1 March 2026");
        assert_eq!(report["local_time"], "09:00");
        Ok(())
    }

    #[tokio::test]
    async fn the_tool_reports_now() -> Result<(), ToolError> {
        let report = GetCurrentTime.call(NoArgs {}).await?;
        for key in ["iso", "time_zone", "utc_offset", "local_time", "date"] {
            assert!(report[key].is_string(), "{key} in {report}");
        }
        assert_eq!(GetCurrentTime.behavior(), Behavior::NonBlocking);
        assert_eq!(GetCurrentTime.scheduling(), Scheduling::WhenIdle);
        Ok(())
    }
}

//! Reading tool calls and results: the envelopes clients wrap answers in, the errors they
//! report, and the device state they describe.

use serde_json::Value;

use super::devices::DeviceState;

/// The tool's answer, unwrapped from the `{"output": …}` / `{"result": …}` envelopes clients use.
pub(super) fn payload(response: &Value) -> &Value {
    if let Some(object) = response.as_object()
        && !object.contains_key("status")
        && !object.contains_key("error")
    {
        for key in ["output", "result", "response"] {
            if let Some(inner) = object.get(key) {
                return inner;
            }
        }
    }
    response
}

/// The error a result reports, if any (`{"error": …}` or `{"success": false, …}`).
pub(super) fn failure(response: &Value) -> Option<String> {
    fn check(value: &Value) -> Option<String> {
        let object = value.as_object()?;
        let failed = [object.get("success"), object.get("ok")]
            .into_iter()
            .any(|flag| flag == Some(&Value::Bool(false)));
        match object.get("error") {
            Some(Value::Null | Value::Bool(false)) | None if !failed => None,
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Object(inner)) => Some(
                inner
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| compact(&Value::Object(inner.clone())), str::to_owned),
            ),
            Some(other @ (Value::Number(_) | Value::Array(_))) => Some(compact(other)),
            _ => Some(
                object
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the tool reported a failure without saying why")
                    .to_owned(),
            ),
        }
    }
    check(response).or_else(|| check(payload(response)))
}

/// "Device not found." → "device not found", ready to follow a colon.
pub(super) fn tidy_error(error: &str) -> String {
    let trimmed = error.trim().trim_end_matches(['.', '!']);
    let mut chars = trimmed.chars();
    match (chars.next(), chars.next()) {
        (Some(first), Some(second)) if first.is_uppercase() && second.is_lowercase() => first
            .to_lowercase()
            .chain(trimmed.chars().skip(1))
            .collect(),
        _ => trimmed.to_owned(),
    }
}

/// A field of the result, at the top or inside a nested settings/state object.
fn field<'a>(response: &'a Value, keys: &[&str]) -> Option<&'a Value> {
    let object = payload(response).as_object()?;
    let nested = [
        "settings",
        "setting",
        "settings_updated",
        "state",
        "attributes",
    ]
    .into_iter()
    .filter_map(|key| object.get(key)?.as_object());
    std::iter::once(object).chain(nested).find_map(|level| {
        keys.iter().find_map(|key| {
            level
                .get(*key)
                .filter(|value| !value.is_null() && !value.is_object())
        })
    })
}

pub(super) fn field_str(response: &Value, keys: &[&str]) -> Option<String> {
    match field(response, keys)? {
        Value::String(text) => Some(text.trim().to_owned()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

fn field_num(response: &Value, keys: &[&str]) -> Option<f64> {
    match field(response, keys)? {
        Value::Number(number) => number.as_f64(),
        Value::String(text) => text.trim().trim_end_matches('%').trim().parse().ok(),
        _ => None,
    }
}

pub(super) fn read_state(response: &Value) -> DeviceState {
    DeviceState {
        status: field_str(response, &["status", "new_status", "state"]).map(|s| s.to_lowercase()),
        brightness: field_num(response, &["brightness"]),
        color: field_str(response, &["color", "colour"]).map(|s| s.to_lowercase()),
        temperature: field_num(
            response,
            &[
                "temperature_celsius",
                "temperature",
                "target_temperature_celsius",
                "target_temperature",
            ],
        ),
    }
}

pub(super) fn requested_state(args: &Value) -> DeviceState {
    let setting = args.get("setting");
    let number = |key: &str| setting.and_then(|s| s.get(key)).and_then(Value::as_f64);
    DeviceState {
        status: args
            .get("new_status")
            .and_then(Value::as_str)
            .map(str::to_owned),
        brightness: number("brightness"),
        color: setting
            .and_then(|s| s.get("color"))
            .and_then(Value::as_str)
            .map(str::to_owned),
        temperature: number("temperature_celsius"),
    }
}

pub(super) fn compact(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() > 200 {
        let cut: String = text.chars().take(200).collect();
        format!("{cut}…")
    } else {
        text
    }
}

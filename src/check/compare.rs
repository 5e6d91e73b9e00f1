//! Whether a turn did what it must: its tool calls against what was expected (a recording's
//! `toolCall`s whole, or a scenario's calls in order with the arguments given), its reply
//! against the words it must hold, its first response against its deadline. Each problem is
//! one line with the expected beside the actual.

use serde_json::Value;

use super::scenario::{Call, Expect, ToolsExpected};
use livetalk_live::reading::Grounding;

/// How a recording's calls are compared (`--match`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum MatchMode {
    /// Names and arguments.
    #[default]
    Args,
    /// Names only.
    Names,
}

/// What a turn showed.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    /// Each `toolCall`'s calls, in order.
    pub calls: Vec<Vec<Call>>,
    /// The reply's text and transcription.
    pub reply: String,
    pub first_response_ms: Option<f64>,
    /// What the reply searched with Google Search and the sources it drew on.
    pub grounding: Grounding,
}

/// The problems with a turn; none when it passed.
pub fn judge(expect: &Expect, observed: &Observed, mode: MatchMode) -> Vec<String> {
    let mut problems = Vec::new();
    let made: Vec<&Call> = observed.calls.iter().flatten().collect();
    match &expect.tools {
        ToolsExpected::Any => {}
        ToolsExpected::None => {
            if !made.is_empty() {
                problems.push(format!("expected no tool call, got {}", calls_text(&made)));
            }
        }
        ToolsExpected::InOrder(wanted) => {
            let mut rest = made.iter();
            let missing = wanted
                .iter()
                .find(|w| !rest.any(|m| m.name == w.name && contains(&m.args, &w.args)));
            if missing.is_some() {
                problems.push(format!(
                    "expected {}, got {}",
                    calls_text(&wanted.iter().collect::<Vec<_>>()),
                    calls_text(&made)
                ));
            }
        }
        ToolsExpected::Recorded(groups) => {
            let same = groups.len() == observed.calls.len()
                && groups
                    .iter()
                    .zip(&observed.calls)
                    .all(|(want, got)| same_calls(want, got, mode));
            if !same {
                let wanted: Vec<&Call> = groups.iter().flatten().collect();
                problems.push(format!(
                    "expected {}, got {}",
                    calls_text(&wanted),
                    calls_text(&made)
                ));
            }
        }
    }
    let reply = observed.reply.to_lowercase();
    for words in &expect.reply_contains {
        if !reply.contains(&words.to_lowercase()) {
            problems.push(format!(
                "expected the reply to contain \"{words}\", got \"{}\"",
                livetalk_live::excerpt::bounded(observed.reply.trim(), 200)
            ));
        }
    }
    let grounding = &observed.grounding;
    match expect.searched {
        Some(true) if grounding.is_empty() => {
            problems.push("expected a Google Search, got none".to_owned());
        }
        Some(false) if !grounding.is_empty() => problems.push(format!(
            "expected no Google Search, got {}",
            searched_text(grounding)
        )),
        _ => {}
    }
    for words in &expect.source_contains {
        let wanted = words.to_lowercase();
        let found = grounding.sources.iter().any(|source| {
            [&source.title, &source.uri]
                .into_iter()
                .flatten()
                .any(|text| text.to_lowercase().contains(&wanted))
        });
        if !found {
            problems.push(format!(
                "expected a source containing \"{words}\", got {}",
                searched_text(grounding)
            ));
        }
    }
    if let Some(limit) = expect.max_first_response_ms {
        match observed.first_response_ms {
            Some(ms) if ms > limit => problems.push(format!(
                "expected a first response within {limit:.0} ms, got one after {ms:.0} ms"
            )),
            None => problems.push(format!(
                "expected a first response within {limit:.0} ms, got none"
            )),
            Some(_) => {}
        }
    }
    problems
}

/// What a turn searched, as people read it: `searched "q" (2 sources: title <link>, …)`, or
/// "no search".
pub fn searched_text(grounding: &Grounding) -> String {
    if grounding.is_empty() {
        return "no search".to_owned();
    }
    let sources: Vec<String> = grounding.sources.iter().map(|s| s.as_line()).collect();
    let count = grounding.sources.len() + grounding.more_sources;
    let what = match count {
        0 => "no source".to_owned(),
        1 => format!("1 source: {}", sources.join(", ")),
        n => format!("{n} sources: {}", sources.join(", ")),
    };
    let text = if grounding.queries.is_empty() {
        format!("a search ({what})")
    } else {
        format!("searched {} ({what})", grounding.queries_line())
    };
    livetalk_live::excerpt::bounded(&text, 600).into_owned()
}

/// One `toolCall`'s calls against the recorded ones: the same calls in any order.
fn same_calls(want: &[Call], got: &[Call], mode: MatchMode) -> bool {
    if want.len() != got.len() {
        return false;
    }
    let mut unused: Vec<&Call> = got.iter().collect();
    want.iter().all(|w| {
        let found = unused.iter().position(|g| {
            g.name == w.name && (mode == MatchMode::Names || json_equal(&g.args, &w.args))
        });
        found.map(|i| unused.swap_remove(i)).is_some()
    })
}

/// Equal JSON values, numbers compared as numbers (`20` equals `20.0`).
pub fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

/// `actual` holds `wanted`: objects by the keys wanted (recursively; other keys may be
/// anything), everything else equal (numbers as numbers).
pub fn contains(actual: &Value, wanted: &Value) -> bool {
    match (actual, wanted) {
        (Value::Object(actual), Value::Object(wanted)) => wanted
            .iter()
            .all(|(k, w)| actual.get(k).is_some_and(|a| contains(a, w))),
        (Value::Array(actual), Value::Array(wanted)) => {
            actual.len() == wanted.len() && actual.iter().zip(wanted).all(|(a, w)| contains(a, w))
        }
        _ => json_equal(actual, wanted),
    }
}

/// Calls as people read them: `set_device_status {new_status: on}, get_device_status {…}`,
/// or "no call".
pub fn calls_text(calls: &[&Call]) -> String {
    if calls.is_empty() {
        return "no call".to_owned();
    }
    calls
        .iter()
        .map(|c| call_text(c))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One call: `name {key: value, …}` (no braces without arguments).
pub fn call_text(call: &Call) -> String {
    let name = livetalk_live::excerpt::bounded(&call.name, 80);
    match &call.args {
        Value::Object(map) if map.is_empty() => name.into_owned(),
        Value::Null => name.into_owned(),
        args => format!(
            "{name} {}",
            livetalk_live::excerpt::bounded(&value_text(args), 300)
        ),
    }
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{k}: {}", value_text(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(value_text).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(name: &str, args: Value) -> Call {
        Call {
            name: name.into(),
            args,
        }
    }

    fn observed(calls: Vec<Vec<Call>>) -> Observed {
        Observed {
            calls,
            ..Observed::default()
        }
    }

    #[test]
    fn numbers_compare_as_numbers_and_objects_by_the_keys_given() {
        assert!(json_equal(&json!({"t": 20}), &json!({"t": 20.0})));
        assert!(!json_equal(&json!({"t": 20}), &json!({"t": 20, "u": 1})));
        assert!(contains(
            &json!({"device_name": "lamp", "new_status": "on", "extra": {"a": 1, "b": 2}}),
            &json!({"new_status": "on", "extra": {"b": 2.0}})
        ));
        assert!(!contains(&json!({"a": "on"}), &json!({"a": "off"})));
        assert!(!contains(&json!({}), &json!({"a": "on"})));
    }

    #[test]
    fn scenario_calls_match_in_order_with_others_between() {
        let expect = Expect {
            tools: ToolsExpected::InOrder(vec![call("a", json!({"x": 1})), call("c", json!({}))]),
            ..Expect::default()
        };
        let good = observed(vec![
            vec![call("a", json!({"x": 1, "y": 2})), call("b", json!({}))],
            vec![call("c", json!({"z": 3}))],
        ]);
        assert!(judge(&expect, &good, MatchMode::Args).is_empty());
        let wrong_order = observed(vec![vec![call("c", json!({})), call("a", json!({"x": 1}))]]);
        assert_eq!(
            judge(&expect, &wrong_order, MatchMode::Args),
            ["expected a {x: 1}, c, got c, a {x: 1}"]
        );
    }

    #[test]
    fn recorded_calls_match_whole_in_any_order_within_a_tool_call() {
        let recorded = Expect {
            tools: ToolsExpected::Recorded(vec![vec![
                call("a", json!({"x": 1})),
                call("b", json!({"y": "on"})),
            ]]),
            ..Expect::default()
        };
        let swapped = observed(vec![vec![
            call("b", json!({"y": "on"})),
            call("a", json!({"x": 1.0})),
        ]]);
        assert!(judge(&recorded, &swapped, MatchMode::Args).is_empty());
        let other_args = observed(vec![vec![
            call("b", json!({"y": "off"})),
            call("a", json!({"x": 1})),
        ]]);
        assert_eq!(
            judge(&recorded, &other_args, MatchMode::Args),
            ["expected a {x: 1}, b {y: on}, got b {y: off}, a {x: 1}"]
        );
        assert!(judge(&recorded, &other_args, MatchMode::Names).is_empty());
        assert_eq!(
            judge(&recorded, &observed(Vec::new()), MatchMode::Names),
            ["expected a {x: 1}, b {y: on}, got no call"]
        );
    }

    #[test]
    fn reply_words_and_first_response_are_judged() {
        let expect = Expect {
            tools: ToolsExpected::None,
            reply_contains: vec!["OFF".into()],
            max_first_response_ms: Some(100.0),
            ..Expect::default()
        };
        let good = Observed {
            reply: "The lamp is off.".into(),
            first_response_ms: Some(50.0),
            ..Observed::default()
        };
        assert!(judge(&expect, &good, MatchMode::Args).is_empty());
        let bad = Observed {
            calls: vec![vec![call(
                "get_device_status",
                json!({"device_name": "lamp"}),
            )]],
            reply: "It is on.".into(),
            first_response_ms: Some(250.0),
            ..Observed::default()
        };
        assert_eq!(
            judge(&expect, &bad, MatchMode::Args),
            [
                "expected no tool call, got get_device_status {device_name: lamp}",
                "expected the reply to contain \"OFF\", got \"It is on.\"",
                "expected a first response within 100 ms, got one after 250 ms",
            ]
        );
    }

    #[test]
    fn a_search_and_its_sources_are_judged() {
        let expect = Expect {
            searched: Some(true),
            source_contains: vec!["ENCYCLOPEDIA".into(), "news.example.org".into()],
            ..Expect::default()
        };
        let mut grounding = Grounding::default();
        grounding.absorb(Grounding::of(&json!({
            "webSearchQueries": ["otters"],
            "groundingChunks": [
                {"web": {"title": "Otters - Example Encyclopedia", "uri": "https://encyclopedia.example/wiki/otters"}},
                {"web": {"title": "News about otters", "uri": "https://news.example.org/search?q=otters"}}
            ]
        })));
        let searched = Observed {
            grounding: grounding.clone(),
            ..Observed::default()
        };
        assert!(judge(&expect, &searched, MatchMode::Args).is_empty());
        assert_eq!(
            judge(&expect, &Observed::default(), MatchMode::Args),
            [
                "expected a Google Search, got none",
                "expected a source containing \"ENCYCLOPEDIA\", got no search",
                "expected a source containing \"news.example.org\", got no search",
            ]
        );
        let none_wanted = Expect {
            searched: Some(false),
            ..Expect::default()
        };
        assert_eq!(
            judge(&none_wanted, &searched, MatchMode::Args),
            [
                "expected no Google Search, got searched \"otters\" (2 sources: \
              Otters - Example Encyclopedia <https://encyclopedia.example/wiki/otters>, \
              News about otters <https://news.example.org/search?q=otters>)"
            ]
        );
        assert!(judge(&none_wanted, &Observed::default(), MatchMode::Args).is_empty());
    }
}

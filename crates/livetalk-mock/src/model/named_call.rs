//! Calls of any declared tool by its name — "use the echo tool with message hello", "call
//! get-sum with a 2 and b 3" — so a demo of the user's own tools (MCP ones included) needs no
//! API key. The arguments are read from the words after the name and checked against the
//! tool's declared schema: a number where it wants a number, true/false for a boolean, the
//! words themselves for a string; `{…}` is taken as the JSON arguments. What cannot be read
//! is answered with a sentence saying what is missing, and an example.

use serde_json::{Map, Value, json};

use super::tools::PlannedCall;
use livetalk_live::wire::FunctionDeclaration;

/// Words that ask for a tool by name.
const VERBS: &[&str] = &["use", "call", "run", "invoke", "try"];
/// Words between a property's name and its value, dropped.
const LINKS: &[&str] = &["=", ":", "is", "of", "as", "to", "equals", "and", ","];

/// What a request naming a tool comes to.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum NamedCall {
    /// Call it with these arguments.
    Call(PlannedCall),
    /// Say this instead: why it cannot be called as asked.
    Problem(String),
}

/// A request that names a declared tool, or says "the X tool" of one not declared; `None`
/// for anything else (left to the smart-home understanding).
pub(super) fn named_call(text: &str, tools: &[FunctionDeclaration]) -> Option<NamedCall> {
    let tokens = tokenize(text);
    let verb = tokens
        .iter()
        .position(|t| VERBS.contains(&t.lower.as_str()))?;
    let mut at = verb + 1;
    if tokens.get(at).is_some_and(|t| t.lower == "the") {
        at += 1;
    }
    let Some((tool, used)) = match_tool(&tokens[at..], tools) else {
        // Only "the X tool" / "the X function" is surely about a tool ("run the heater" is not).
        let named = tokens.get(at)?;
        let says_tool = tokens
            .get(at + 1)
            .is_some_and(|t| t.lower == "tool" || t.lower == "function");
        if !says_tool {
            return None;
        }
        let known: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        let list = if known.is_empty() {
            "none".to_owned()
        } else {
            known.join(", ")
        };
        return Some(NamedCall::Problem(format!(
            "This session has no tool called {}. The tools I can call are: {list}.",
            named.text
        )));
    };
    at += used;
    if tokens
        .get(at)
        .is_some_and(|t| t.lower == "tool" || t.lower == "function")
    {
        at += 1;
    }
    if tokens
        .get(at)
        .is_some_and(|t| matches!(t.lower.as_str(), "with" | "using" | "passing" | "where"))
    {
        at += 1;
    }
    Some(match arguments(tool, &tokens[at..]) {
        Ok(args) => NamedCall::Call(PlannedCall {
            name: tool.name.clone(),
            args,
        }),
        Err(problem) => NamedCall::Problem(problem),
    })
}

/// A word as typed (quotes removed, trailing punctuation kept apart) and in lower case.
#[derive(Debug, Clone)]
struct Token {
    text: String,
    lower: String,
    /// It was quoted: never a property name or a linking word.
    quoted: bool,
}

fn tokenize(text: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut chars = text.trim().trim_end_matches(['.', '!', '?']).chars();
    let push = |tokens: &mut Vec<Token>, text: String, quoted: bool| {
        if !text.is_empty() || quoted {
            tokens.push(Token {
                lower: text.to_lowercase(),
                text,
                quoted,
            });
        }
    };
    let mut word = String::new();
    while let Some(c) = chars.next() {
        match c {
            '"' | '“' | '”' if word.is_empty() => {
                let mut quoted = String::new();
                for c in chars.by_ref() {
                    if matches!(c, '"' | '“' | '”') {
                        break;
                    }
                    quoted.push(c);
                }
                push(&mut tokens, quoted, true);
            }
            // A JSON object is one token, whatever it holds.
            '{' if word.is_empty() => {
                let mut json = String::from('{');
                json.extend(chars.by_ref());
                push(&mut tokens, json, true);
            }
            c if c.is_whitespace() => push(&mut tokens, std::mem::take(&mut word), false),
            ',' | '=' | ':' => {
                push(&mut tokens, std::mem::take(&mut word), false);
                push(&mut tokens, c.to_string(), false);
            }
            c => word.push(c),
        }
    }
    push(&mut tokens, word, false);
    tokens
}

/// A name as the user may say it: lower case, without `-`, `_` or spaces.
fn folded(name: &str) -> String {
    name.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' '))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The declared tool the first words name ("get-sum", "get sum", "GET_SUM"), and how many
/// words that took; the longest match wins.
fn match_tool<'t>(
    tokens: &[Token],
    tools: &'t [FunctionDeclaration],
) -> Option<(&'t FunctionDeclaration, usize)> {
    (1..=tokens.len().min(4)).rev().find_map(|words| {
        if tokens[..words].iter().any(|t| t.quoted) {
            return None;
        }
        let said: String = tokens[..words].iter().map(|t| folded(&t.text)).collect();
        tools
            .iter()
            .find(|tool| !said.is_empty() && folded(&tool.name) == said)
            .map(|tool| (tool, words))
    })
}

/// A declared property: its name and JSON type ("string", "number", …; lower case).
#[derive(Debug, Clone)]
struct Property {
    name: String,
    kind: String,
    required: bool,
}

fn schema_of(tool: &FunctionDeclaration) -> Option<&Value> {
    tool.parameters
        .as_ref()
        .or(tool.parameters_json_schema.as_ref())
}

/// The type named by a schema (`"STRING"`, `"string"`, `["string", "null"]`), lower case.
fn kind_of(schema: &Value) -> String {
    match schema.get("type") {
        Some(Value::String(kind)) => kind.to_lowercase(),
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| !k.eq_ignore_ascii_case("null"))
            .unwrap_or("string")
            .to_lowercase(),
        _ => "string".to_owned(),
    }
}

fn properties(tool: &FunctionDeclaration) -> Vec<Property> {
    let Some(schema) = schema_of(tool) else {
        return Vec::new();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, schema)| Property {
                    name: name.clone(),
                    kind: kind_of(schema),
                    required: required.contains(&name.as_str()),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The arguments the words give, checked against the schema; or what to say instead.
fn arguments(tool: &FunctionDeclaration, tokens: &[Token]) -> Result<Value, String> {
    let declared = properties(tool);
    let mut args = Map::new();
    if let Some(json) = tokens.first().filter(|t| t.text.starts_with('{')) {
        let Ok(Value::Object(given)) = serde_json::from_str::<Value>(&json.text) else {
            return Err(format!(
                "The arguments for {} aren't a valid JSON object.",
                tool.name
            ));
        };
        for (name, value) in given {
            let Some(property) = declared.iter().find(|p| p.name == name) else {
                return Err(format!(
                    "{} has no argument called {name}. {}",
                    tool.name,
                    usage(tool, &declared)
                ));
            };
            let value = match value {
                Value::String(text) if property.kind != "string" => {
                    convert(tool, property, &text, &declared)?
                }
                other => other,
            };
            args.insert(name, value);
        }
    } else {
        let spans = spans(tokens, &declared);
        if spans.is_empty() && !tokens.is_empty() {
            // "use the echo tool with hello": the words are the one argument there is.
            let sole: Vec<&Property> = if declared.len() == 1 {
                declared.iter().collect()
            } else {
                declared.iter().filter(|p| p.required).collect()
            };
            match sole.as_slice() {
                [property] => {
                    let text = join(tokens);
                    args.insert(
                        property.name.clone(),
                        convert(tool, property, &text, &declared)?,
                    );
                }
                _ => {
                    return Err(format!(
                        "I couldn't tell which arguments of {} you meant. {}",
                        tool.name,
                        usage(tool, &declared)
                    ));
                }
            }
        }
        for (property, words) in spans {
            if words.is_empty() {
                return Err(format!(
                    "What should {} be? {}",
                    property.name,
                    usage(tool, &declared)
                ));
            }
            let text = join(words);
            args.insert(
                property.name.clone(),
                convert(tool, property, &text, &declared)?,
            );
        }
    }
    let missing: Vec<&Property> = declared
        .iter()
        .filter(|p| p.required && !args.contains_key(&p.name))
        .collect();
    if !missing.is_empty() {
        let names: Vec<String> = missing
            .iter()
            .map(|p| format!("{} ({})", p.name, spoken_kind(&p.kind)))
            .collect();
        return Err(format!(
            "To call {} I need {}. {}",
            tool.name,
            join_list(&names),
            usage(tool, &declared)
        ));
    }
    Ok(Value::Object(args))
}

/// Each named property with the words up to the next one ("a 2 and b 3": a → [2], b → [3]).
fn spans<'p, 'w>(
    tokens: &'w [Token],
    declared: &'p [Property],
) -> Vec<(&'p Property, &'w [Token])> {
    let property_at = |token: &Token| {
        (!token.quoted)
            .then(|| {
                declared
                    .iter()
                    .find(|p| folded(&p.name) == folded(&token.text))
            })
            .flatten()
    };
    let starts: Vec<(usize, &Property)> = tokens
        .iter()
        .enumerate()
        .filter_map(|(i, token)| property_at(token).map(|p| (i, p)))
        .collect();
    starts
        .iter()
        .enumerate()
        .map(|(n, &(start, property))| {
            let end = starts.get(n + 1).map_or(tokens.len(), |&(next, _)| next);
            let mut words = &tokens[start + 1..end];
            while let Some((first, rest)) = words.split_first()
                && !first.quoted
                && LINKS.contains(&first.lower.as_str())
            {
                words = rest;
            }
            while let Some((last, rest)) = words.split_last()
                && !last.quoted
                && LINKS.contains(&last.lower.as_str())
            {
                words = rest;
            }
            (property, words)
        })
        .collect()
}

fn join(tokens: &[Token]) -> String {
    tokens
        .iter()
        .map(|t| t.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words for a property, as the JSON type its schema names.
fn convert(
    tool: &FunctionDeclaration,
    property: &Property,
    text: &str,
    declared: &[Property],
) -> Result<Value, String> {
    let wrong = || {
        format!(
            "{} needs {} for {}, but I heard \"{text}\". {}",
            tool.name,
            spoken_kind(&property.kind),
            property.name,
            usage(tool, declared)
        )
    };
    match property.kind.as_str() {
        "integer" => text
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| {
                text.parse::<f64>()
                    .ok()
                    .filter(|n| n.fract() == 0.0 && n.abs() < 9e15)
                    .map(|n| Value::from(n as i64))
                    .ok_or(())
            })
            .map_err(|()| wrong()),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(|n| serde_json::Number::from_f64(n).map(Value::Number))
            .ok_or_else(wrong),
        "boolean" => match text.to_lowercase().as_str() {
            "true" | "yes" | "on" => Ok(Value::Bool(true)),
            "false" | "no" | "off" => Ok(Value::Bool(false)),
            _ => Err(wrong()),
        },
        "array" | "object" => serde_json::from_str::<Value>(text)
            .ok()
            .filter(|v| {
                (property.kind == "array" && v.is_array())
                    || (property.kind == "object" && v.is_object())
            })
            .ok_or_else(wrong),
        _ => Ok(Value::String(text.to_owned())),
    }
}

fn spoken_kind(kind: &str) -> &'static str {
    match kind {
        "integer" => "a whole number",
        "number" => "a number",
        "boolean" => "true or false",
        "array" => "a JSON list",
        "object" => "a JSON object",
        _ => "some text",
    }
}

/// "For example: call get-sum with a 2 and b 3."
fn usage(tool: &FunctionDeclaration, declared: &[Property]) -> String {
    let wanted: Vec<&Property> = {
        let required: Vec<&Property> = declared.iter().filter(|p| p.required).collect();
        if required.is_empty() {
            declared.iter().take(1).collect()
        } else {
            required
        }
    };
    if wanted.is_empty() {
        return format!("For example: call {}.", tool.name);
    }
    let parts: Vec<String> = wanted
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let sample = match p.kind.as_str() {
                "integer" | "number" => (i + 2).to_string(),
                "boolean" => "true".to_owned(),
                "array" => "[1, 2]".to_owned(),
                "object" => json!({}).to_string(),
                _ => "hello".to_owned(),
            };
            format!("{} {sample}", p.name)
        })
        .collect();
    format!(
        "For example: call {} with {}.",
        tool.name,
        parts.join(" and ")
    )
}

fn join_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: Value) -> FunctionDeclaration {
        FunctionDeclaration {
            name: name.to_owned(),
            parameters: Some(parameters),
            ..FunctionDeclaration::default()
        }
    }

    fn declared() -> Vec<FunctionDeclaration> {
        vec![
            tool(
                "echo",
                json!({"type": "OBJECT", "properties": {"message": {"type": "STRING"}}, "required": ["message"]}),
            ),
            tool(
                "get-sum",
                json!({"type": "OBJECT", "properties": {"a": {"type": "NUMBER"}, "b": {"type": "NUMBER"}}, "required": ["a", "b"]}),
            ),
            FunctionDeclaration {
                name: "toggle_fan".to_owned(),
                parameters_json_schema: Some(json!({
                    "type": "object",
                    "properties": {"on": {"type": "boolean"}, "speed": {"type": ["integer", "null"]}},
                    "required": ["on"]
                })),
                ..FunctionDeclaration::default()
            },
            FunctionDeclaration {
                name: "get_current_time".to_owned(),
                ..FunctionDeclaration::default()
            },
        ]
    }

    fn called(text: &str) -> PlannedCall {
        match named_call(text, &declared()) {
            Some(NamedCall::Call(call)) => call,
            other => panic!("{text:?}: expected a call, got {other:?}"),
        }
    }

    fn problem(text: &str) -> String {
        match named_call(text, &declared()) {
            Some(NamedCall::Problem(problem)) => problem,
            other => panic!("{text:?}: expected a problem, got {other:?}"),
        }
    }

    #[test]
    fn arguments_are_read_from_the_words_by_the_schema() {
        let call = called("use the echo tool with message hello");
        assert_eq!(
            (call.name.as_str(), call.args),
            ("echo", json!({"message": "hello"}))
        );
        assert_eq!(
            called("call get-sum with a 2 and b 3").args,
            json!({"a": 2.0, "b": 3.0})
        );
        assert_eq!(
            called("Call get sum with a=2.5, b=-1").args["a"],
            json!(2.5)
        );
        // Case and quotes are kept in strings; a lone string argument needs no name.
        assert_eq!(
            called("please use the echo tool with \"Hello, World\"").args,
            json!({"message": "Hello, World"})
        );
        assert_eq!(
            called("use echo with message Hello There.").args,
            json!({"message": "Hello There"})
        );
        assert_eq!(
            called("run toggle_fan with on yes and speed 3").args,
            json!({"on": true, "speed": 3})
        );
        assert_eq!(
            called(r#"call get-sum with {"a": 1, "b": "2"}"#).args,
            json!({"a": 1, "b": 2.0})
        );
        assert_eq!(called("call get_current_time").args, json!({}));
    }

    #[test]
    fn what_cannot_be_read_is_said_with_an_example() {
        let said = problem("call get-sum with a two and b 3");
        assert!(
            said.contains("needs a number for a") && said.contains("\"two\""),
            "{said}"
        );
        assert!(
            said.contains("For example: call get-sum with a 2 and b 3."),
            "{said}"
        );
        let said = problem("call get-sum with a 2");
        assert!(
            said.starts_with("To call get-sum I need b (a number)."),
            "{said}"
        );
        let said = problem("use the echo tool");
        assert!(said.contains("I need message (some text)"), "{said}");
        let said = problem("run toggle_fan with on maybe");
        assert!(said.contains("true or false"), "{said}");
        let said = problem(r#"call echo with {"text": "hi"}"#);
        assert!(said.contains("no argument called text"), "{said}");
        let said = problem("use the weather tool with city Paris");
        assert!(
            said.contains("no tool called weather") && said.contains("echo, get-sum"),
            "{said}"
        );
    }

    #[test]
    fn requests_that_name_no_tool_are_left_alone() {
        for text in [
            "run the heater",
            "turn on the lamp",
            "call me maybe",
            "what time is it?",
        ] {
            assert_eq!(named_call(text, &declared()), None, "{text}");
        }
    }
}

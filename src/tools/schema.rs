//! Turns schemars output into the OpenAPI subset Gemini's `Schema` accepts.
//!
//! Gemini rejects unknown keywords with a 400 at setup time, which would take the whole session
//! down, so this keeps a closed list of keywords and refuses (rather than silently mangles) the
//! constructs it cannot express: `$ref`, `oneOf`, `allOf`, `not`, tuples, multi-type unions.

use livetalk_live::excerpt::bounded;
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value};

/// A schema that cannot be expressed as a Gemini `Schema`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A keyword Gemini has no equivalent for survived generation.
    #[error("schema at {path}: `{keyword}` is not supported in Gemini function declarations")]
    Unsupported { path: String, keyword: &'static str },
    /// The schema has a shape the normaliser cannot map.
    #[error("schema at {path}: {message}")]
    Invalid { path: String, message: String },
}

/// Keywords whose presence means generation did not inline or flatten something; dropping them
/// would change what the model is allowed to send, so they are errors.
const REFUSED: &[&str] = &["$ref", "oneOf", "allOf", "not"];

/// The Gemini `Schema` of `T` as a function's `parameters`, or `None` when `T` takes no
/// arguments (Gemini wants `parameters` omitted then, not an empty object).
pub fn parameters_for<T: JsonSchema>() -> Result<Option<Value>, SchemaError> {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let raw = generator.into_root_schema_for::<T>().to_value();
    let mut schema = normalize_schema(&raw)?;
    let Some(object) = schema.as_object_mut() else {
        return Err(invalid("#", "a schema must be an object"));
    };
    if object.get("type").and_then(Value::as_str) != Some("OBJECT") {
        return Err(invalid("#", "tool arguments must be an object"));
    }
    // The root description is the Args type's doc comment, written for developers; the model
    // already gets the function's own description.
    object.remove("description");
    let has_properties = object
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty());
    Ok(has_properties.then_some(schema))
}

/// The most nodes (schemas, keywords, list entries) a foreign tool's parameters may take once
/// simplified: inlining `$ref`s copies their targets, so a few KB that fan out can become
/// millions of nodes. Past this the tool is left out rather than declared.
pub const MAX_SCHEMA_NODES: usize = 10_000;

/// The most text (property names, descriptions, enum values) a foreign tool's parameters may
/// hold once simplified.
pub const MAX_SCHEMA_TEXT: usize = 256 << 10;

/// The most a foreign schema may be as the server sent it (nodes, and bytes of text) before
/// livetalk works on it at all.
pub const MAX_INPUT_NODES: usize = 50_000;
pub const MAX_INPUT_TEXT: usize = 1 << 20;

/// How deep the simplified parameters may nest; deeper parts are read as strings.
const MAX_NESTING: usize = 32;

/// Simplification notes kept per tool; the rest are counted in a last note.
pub const MAX_NOTES: usize = 8;

/// Why a foreign tool cannot be declared at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TooLarge {
    #[error(
        "its argument schema is too large to read (more than {MAX_INPUT_NODES} parts or {} KiB of text)",
        MAX_INPUT_TEXT >> 10
    )]
    Input,
    #[error(
        "its argument schema would take more than {MAX_SCHEMA_NODES} parts once its `$ref`s are inlined"
    )]
    Nodes,
    #[error(
        "its argument schema would hold more than {} KiB of text once its `$ref`s are inlined",
        MAX_SCHEMA_TEXT >> 10
    )]
    Text,
}

/// A foreign schema made declarable.
#[derive(Debug, Clone, PartialEq)]
pub struct Foreign {
    /// The parameters (`None` when there are none).
    pub parameters: Option<Value>,
    /// What was simplified, at most [`MAX_NOTES`] and a count of the rest.
    pub notes: Vec<String>,
    /// The nodes the simplified schema took, of [`MAX_SCHEMA_NODES`].
    pub nodes: usize,
}

/// A schema written by someone else (an MCP server's `inputSchema`) as a function's
/// `parameters`: what the Gemini subset cannot say is simplified first — local `$ref`s
/// inlined, `oneOf` read as `anyOf`, `allOf` merged, `not` dropped, a union of types cut to
/// its first, non-string `enum`s and tuples dropped — and a property that still cannot be
/// expressed is left out. Each simplification is noted, for the log. A schema too large to
/// read, or one that would grow past [`MAX_SCHEMA_NODES`] or [`MAX_SCHEMA_TEXT`] as it is
/// simplified, is refused: the work stops as soon as a bound is passed.
pub fn normalize_foreign(schema: &Value) -> Result<Foreign, TooLarge> {
    let mut input = Budget::new(MAX_INPUT_NODES, MAX_INPUT_TEXT);
    if input.charge_value(schema).is_err() {
        return Err(TooLarge::Input);
    }
    let null = Value::Null;
    let mut work = Simplifier {
        defs: schema
            .get("$defs")
            .or_else(|| schema.get("definitions"))
            .unwrap_or(&null),
        budget: Budget::new(MAX_SCHEMA_NODES, MAX_SCHEMA_TEXT),
        path: Vec::new(),
        notes: Notes::default(),
    };
    let mut simple = work.simplify(schema, 0)?;
    let nodes = MAX_SCHEMA_NODES - work.budget.nodes;
    let mut notes = work.notes;
    if let Some(object) = simple.as_object_mut() {
        object.remove("description");
        object.remove("title");
        if !object.contains_key("type") {
            object.insert("type".into(), Value::String("object".into()));
        }
    }
    if simple.get("type").and_then(Value::as_str) != Some("object") {
        notes.push(|| "the arguments are not an object; declared without parameters".to_owned());
        return Ok(Foreign {
            parameters: None,
            notes: notes.into_vec(),
            nodes,
        });
    }
    // Whatever still fails is left out property by property, so one odd argument does not
    // cost the whole tool.
    if let Some(properties) = simple.get_mut("properties").and_then(Value::as_object_mut) {
        properties.retain(|name, property| match normalize_schema(property) {
            Ok(_) => true,
            Err(error) => {
                notes.push(|| format!("argument `{name}` left out: {error}"));
                false
            }
        });
    }
    let parameters = match normalize_schema(&simple) {
        Ok(normalized) => {
            let has_properties = normalized
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty());
            has_properties.then_some(normalized)
        }
        Err(error) => {
            notes.push(|| format!("declared without parameters: {error}"));
            None
        }
    };
    Ok(Foreign {
        parameters,
        notes: notes.into_vec(),
        nodes,
    })
}

/// How deep `$ref`s are followed before the rest is cut off (recursive schemas).
const MAX_REF_DEPTH: usize = 8;

/// What may still be spent: nodes and bytes of text.
struct Budget {
    nodes: usize,
    text: usize,
}

/// A budget ran out.
struct Spent {
    text: bool,
}

impl Budget {
    fn new(nodes: usize, text: usize) -> Budget {
        Budget { nodes, text }
    }

    fn node(&mut self) -> Result<(), Spent> {
        self.nodes = self.nodes.checked_sub(1).ok_or(Spent { text: false })?;
        Ok(())
    }

    fn text(&mut self, bytes: usize) -> Result<(), Spent> {
        self.text = self.text.checked_sub(bytes).ok_or(Spent { text: true })?;
        Ok(())
    }

    /// Charges every node and string of `value`, walking it without recursion (a peer's
    /// nesting is not this stack's to pay for) and stopping at the first overdraft.
    fn charge_value(&mut self, value: &Value) -> Result<(), Spent> {
        let mut stack = vec![value];
        while let Some(value) = stack.pop() {
            self.node()?;
            match value {
                Value::String(text) => self.text(text.len())?,
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => {
                    for (key, value) in map {
                        self.text(key.len())?;
                        stack.push(value);
                    }
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        Ok(())
    }
}

/// Simplification notes: the first [`MAX_NOTES`], written only when kept, and a count.
#[derive(Default)]
struct Notes {
    kept: Vec<String>,
    more: usize,
}

impl Notes {
    fn push(&mut self, note: impl FnOnce() -> String) {
        if self.kept.len() < MAX_NOTES {
            self.kept.push(bounded(&note(), 1024).into_owned());
        } else {
            self.more += 1;
        }
    }

    fn into_vec(mut self) -> Vec<String> {
        if self.more > 0 {
            self.kept
                .push(format!("and {} more simplifications", self.more));
        }
        self.kept
    }
}

/// One foreign schema being simplified under a budget.
struct Simplifier<'a> {
    defs: &'a Value,
    budget: Budget,
    /// Where the walk is, as segments; joined only for a note.
    path: Vec<String>,
    notes: Notes,
}

/// Keywords [`normalize_schema`] reads besides those simplified on their own; nothing else
/// is copied (a large `default` or `examples` would be copied with every inlined `$ref`).
const KEPT: &[&str] = &[
    "description",
    "format",
    "required",
    "minimum",
    "maximum",
    "minItems",
    "maxItems",
    "nullable",
];

/// `true`, the schema that allows anything.
static ANYTHING: Value = Value::Bool(true);

impl From<Spent> for TooLarge {
    fn from(spent: Spent) -> TooLarge {
        if spent.text {
            TooLarge::Text
        } else {
            TooLarge::Nodes
        }
    }
}

impl Simplifier<'_> {
    fn note(&mut self, note: impl FnOnce(&str) -> String) {
        let path = &self.path;
        self.notes.push(|| {
            let mut here = String::from("#");
            for segment in path {
                here.push('/');
                here.push_str(segment);
            }
            note(&here)
        });
    }

    /// Simplifies `schema` with `segment` pushed onto the path.
    fn child(&mut self, schema: &Value, depth: usize, segment: String) -> Result<Value, TooLarge> {
        self.path.push(segment);
        let child = self.simplify(schema, depth);
        self.path.pop();
        child
    }

    /// A copy of `value`, charged.
    fn copy(&mut self, value: &Value) -> Result<Value, TooLarge> {
        self.budget.charge_value(value)?;
        Ok(value.clone())
    }

    fn string_schema(&mut self) -> Result<Value, TooLarge> {
        self.budget.node()?;
        self.budget.node()?;
        Ok(serde_json::json!({"type": "string"}))
    }

    fn simplify(&mut self, schema: &Value, depth: usize) -> Result<Value, TooLarge> {
        let Some(source) = schema.as_object() else {
            // `true` (anything) and other shorthands: the model may send a string.
            return self.string_schema();
        };
        if self.path.len() >= MAX_NESTING {
            self.note(|path| format!("{path}: nested too deep; read as a string"));
            return self.string_schema();
        }
        self.budget.node()?;
        if let Some(reference) = source.get("$ref").and_then(Value::as_str) {
            let name = reference
                .strip_prefix("#/$defs/")
                .or_else(|| reference.strip_prefix("#/definitions/"));
            let target = name.and_then(|n| self.defs.get(n));
            return match target {
                Some(target) if depth < MAX_REF_DEPTH => {
                    let mut inlined = self.simplify(target, depth + 1)?;
                    if let Some(description) = source.get("description") {
                        let description = self.copy(description)?;
                        if let Some(out) = inlined.as_object_mut() {
                            out.insert("description".into(), description);
                        }
                    }
                    Ok(inlined)
                }
                _ => {
                    self.note(|path| {
                        format!(
                            "{path}: `$ref` {} could not be inlined; read as a string",
                            bounded(reference, 200)
                        )
                    });
                    self.string_schema()
                }
            };
        }
        let mut out = Map::new();
        for (key, value) in source {
            match key.as_str() {
                "properties" => {
                    let mut properties = Map::new();
                    if let Some(map) = value.as_object() {
                        for (name, property) in map {
                            self.budget.text(name.len())?;
                            let child =
                                self.child(property, depth, format!("properties/{name}"))?;
                            properties.insert(name.clone(), child);
                        }
                    }
                    out.insert(key.clone(), Value::Object(properties));
                }
                "items" => {
                    let item = match value {
                        Value::Array(items) => {
                            self.note(|path| {
                                format!("{path}: tuple `items` read as a list of its first item")
                            });
                            items.first().unwrap_or(&ANYTHING)
                        }
                        other => other,
                    };
                    let item = self.child(item, depth, "items".to_owned())?;
                    out.insert(key.clone(), item);
                }
                "anyOf" | "oneOf" => {
                    if key == "oneOf" {
                        self.note(|path| format!("{path}: `oneOf` read as `anyOf`"));
                    }
                    let mut variants = Vec::new();
                    for (i, variant) in value.as_array().into_iter().flatten().enumerate() {
                        variants.push(self.child(variant, depth, format!("{key}/{i}"))?);
                    }
                    out.insert("anyOf".into(), Value::Array(variants));
                }
                "allOf" => {
                    self.note(|path| format!("{path}: `allOf` merged"));
                    for (i, part) in value.as_array().into_iter().flatten().enumerate() {
                        let part = self.child(part, depth, format!("allOf/{i}"))?;
                        merge_into(&mut out, part);
                    }
                }
                "not" => self.note(|path| format!("{path}: `not` dropped")),
                "type" => match value {
                    Value::Array(types) => {
                        let non_null: Vec<&Value> = types
                            .iter()
                            .filter(|t| t.as_str() != Some("null"))
                            .collect();
                        let first = match non_null.first() {
                            Some(first) => self.copy(first)?,
                            None => Value::String("string".into()),
                        };
                        if non_null.len() > 1 {
                            self.note(|path| {
                                format!("{path}: a value of several types read as {first}")
                            });
                        }
                        let mut kept = vec![first];
                        if non_null.len() < types.len() {
                            kept.push(Value::String("null".into()));
                        }
                        self.budget.node()?;
                        out.insert(key.clone(), Value::Array(kept));
                    }
                    other => {
                        let other = self.copy(other)?;
                        out.insert(key.clone(), other);
                    }
                },
                "enum" => {
                    let strings = value
                        .as_array()
                        .is_some_and(|vs| vs.iter().all(|v| v.is_string() || v.is_null()));
                    if strings {
                        let value = self.copy(value)?;
                        out.insert(key.clone(), value);
                    } else {
                        self.note(|path| format!("{path}: an `enum` of non-strings dropped"));
                    }
                }
                "const" if value.is_string() => {
                    let value = self.copy(value)?;
                    self.budget.node()?;
                    out.insert("enum".into(), Value::Array(vec![value]));
                }
                kept if KEPT.contains(&kept) => {
                    let value = self.copy(value)?;
                    out.insert(key.clone(), value);
                }
                _ => {}
            }
        }
        if !out.contains_key("type") && out.contains_key("properties") {
            out.insert("type".into(), Value::String("object".into()));
        }
        Ok(Value::Object(out))
    }
}

/// Folds one `allOf` part into the schema: properties and `required` are united, other
/// keywords kept where the schema has none.
fn merge_into(out: &mut Map<String, Value>, part: Value) {
    let Value::Object(part) = part else {
        return;
    };
    for (key, value) in part {
        match (key.as_str(), out.get_mut(&key)) {
            ("properties", Some(Value::Object(mine))) => {
                if let Value::Object(theirs) = value {
                    mine.extend(theirs);
                }
            }
            ("required", Some(Value::Array(mine))) => {
                if let Value::Array(theirs) = value {
                    mine.extend(theirs);
                }
            }
            (_, Some(_)) => {}
            (_, None) => {
                out.insert(key, value);
            }
        }
    }
}

/// Converts one (already inlined) JSON Schema into the Gemini subset.
pub fn normalize_schema(schema: &Value) -> Result<Value, SchemaError> {
    normalize_at(schema, "#")
}

fn invalid(path: &str, message: impl Into<String>) -> SchemaError {
    SchemaError::Invalid {
        path: path.to_owned(),
        message: message.into(),
    }
}

fn normalize_at(schema: &Value, path: &str) -> Result<Value, SchemaError> {
    let Some(source) = schema.as_object() else {
        return Err(invalid(
            path,
            format!("expected a schema object, found {schema}"),
        ));
    };
    for keyword in REFUSED {
        if source.contains_key(*keyword) {
            return Err(SchemaError::Unsupported {
                path: path.to_owned(),
                keyword,
            });
        }
    }

    let mut out = Map::new();
    let mut nullable = source.get("nullable").and_then(Value::as_bool) == Some(true);

    let gemini_type = match source.get("type") {
        None => None,
        Some(t) => {
            let (name, null_in_type) = single_type(t, path)?;
            nullable |= null_in_type;
            Some(name)
        }
    };
    if let Some(name) = gemini_type {
        out.insert("type".into(), Value::String(name.into()));
        if let Some(format) = source.get("format").and_then(Value::as_str)
            && format_allowed(name, format)
        {
            out.insert("format".into(), Value::String(format.into()));
        }
    }

    if let Some(description) = source.get("description").and_then(Value::as_str) {
        out.insert("description".into(), Value::String(description.into()));
    }

    if let Some(values) = source.get("enum") {
        let Some(values) = values.as_array() else {
            return Err(invalid(path, "`enum` must be an array"));
        };
        let mut strings = Vec::with_capacity(values.len());
        for value in values {
            match value {
                Value::Null => nullable = true,
                Value::String(s) => strings.push(Value::String(s.clone())),
                other => {
                    return Err(invalid(
                        path,
                        format!("Gemini only allows string enum values, found {other}"),
                    ));
                }
            }
        }
        if !strings.is_empty() {
            out.insert("enum".into(), Value::Array(strings));
        }
    }

    if let Some(properties) = source.get("properties") {
        let Some(properties) = properties.as_object() else {
            return Err(invalid(path, "`properties` must be an object"));
        };
        let mut converted = Map::new();
        for (name, property) in properties {
            let child = normalize_at(property, &format!("{path}/properties/{name}"))?;
            converted.insert(name.clone(), child);
        }
        let required = required_names(source.get("required"), &converted, path)?;
        out.insert("properties".into(), Value::Object(converted));
        if !required.is_empty() {
            out.insert("required".into(), Value::Array(required));
        }
    }

    if let Some(items) = source.get("items") {
        if items.is_array() {
            return Err(invalid(
                path,
                "tuple `items` (a list of schemas) has no Gemini form",
            ));
        }
        out.insert(
            "items".into(),
            normalize_at(items, &format!("{path}/items"))?,
        );
    }

    for keyword in ["minimum", "maximum"] {
        if let Some(bound) = source.get(keyword).filter(|v| v.is_number()) {
            out.insert(keyword.into(), bound.clone());
        }
    }
    for keyword in ["minItems", "maxItems"] {
        if let Some(bound) = source.get(keyword).filter(|v| v.is_u64()) {
            out.insert(keyword.into(), bound.clone());
        }
    }

    if let Some(variants) = source.get("anyOf") {
        fold_any_of(variants, path, &mut out, &mut nullable)?;
    }

    if nullable {
        out.insert("nullable".into(), Value::Bool(true));
    }
    Ok(Value::Object(out))
}

/// Maps a JSON Schema `type` (a name or a list of names) to one Gemini type, reporting whether
/// `null` was among them (that becomes `nullable`).
fn single_type(t: &Value, path: &str) -> Result<(&'static str, bool), SchemaError> {
    match t {
        Value::String(name) => Ok((gemini_type_name(name, path)?, false)),
        Value::Array(names) => {
            let mut null_seen = false;
            let mut others = Vec::new();
            for name in names {
                match name.as_str() {
                    Some("null") => null_seen = true,
                    Some(other) => others.push(other),
                    None => return Err(invalid(path, format!("bad entry in `type`: {name}"))),
                }
            }
            match others.as_slice() {
                [one] => Ok((gemini_type_name(one, path)?, null_seen)),
                [] => Err(invalid(path, "a schema whose only type is null")),
                _ => Err(invalid(
                    path,
                    format!(
                        "a value of several types ({}) has no Gemini form",
                        others.join(", ")
                    ),
                )),
            }
        }
        other => Err(invalid(path, format!("bad `type`: {other}"))),
    }
}

fn gemini_type_name(name: &str, path: &str) -> Result<&'static str, SchemaError> {
    Ok(match name {
        "object" => "OBJECT",
        "string" => "STRING",
        "integer" => "INTEGER",
        "number" => "NUMBER",
        "boolean" => "BOOLEAN",
        "array" => "ARRAY",
        "null" => return Err(invalid(path, "a schema whose only type is null")),
        other => return Err(invalid(path, format!("unknown type `{other}`"))),
    })
}

/// Gemini answers 400 for any other format ("only 'enum' and 'date-time' are supported for
/// STRING type"), and schemars emits e.g. `uint8` for `u8`.
fn format_allowed(gemini_type: &str, format: &str) -> bool {
    matches!(
        (gemini_type, format),
        ("INTEGER", "int32" | "int64")
            | ("NUMBER", "float" | "double")
            | ("STRING", "enum" | "date-time")
    )
}

/// `required` restricted to properties that exist and are not nullable: an `Option` argument
/// listed as required makes the model invent a value for it.
fn required_names(
    required: Option<&Value>,
    properties: &Map<String, Value>,
    path: &str,
) -> Result<Vec<Value>, SchemaError> {
    let Some(required) = required else {
        return Ok(Vec::new());
    };
    let Some(required) = required.as_array() else {
        return Err(invalid(path, "`required` must be an array"));
    };
    let mut names = Vec::new();
    for name in required {
        let Some(name) = name.as_str() else {
            return Err(invalid(path, format!("bad entry in `required`: {name}")));
        };
        let Some(property) = properties.get(name) else {
            continue;
        };
        if property.get("nullable") == Some(&Value::Bool(true)) {
            continue;
        }
        names.push(Value::String(name.to_owned()));
    }
    Ok(names)
}

/// Keeps `anyOf`, except that null variants become `nullable` and a single remaining variant is
/// merged into the parent (schemars writes `Option<T>` as `anyOf: [T, null]`).
fn fold_any_of(
    variants: &Value,
    path: &str,
    out: &mut Map<String, Value>,
    nullable: &mut bool,
) -> Result<(), SchemaError> {
    let Some(variants) = variants.as_array() else {
        return Err(invalid(path, "`anyOf` must be an array"));
    };
    let mut kept = Vec::with_capacity(variants.len());
    for (index, variant) in variants.iter().enumerate() {
        if is_null_schema(variant) {
            *nullable = true;
            continue;
        }
        kept.push(normalize_at(variant, &format!("{path}/anyOf/{index}"))?);
    }
    match kept.len() {
        0 => {}
        1 => {
            if let Some(Value::Object(only)) = kept.pop() {
                for (key, value) in only {
                    if key == "nullable" {
                        *nullable |= value == Value::Bool(true);
                        continue;
                    }
                    // The outer schema's own keywords (notably its description) win.
                    out.entry(key).or_insert(value);
                }
            }
        }
        _ => {
            out.insert("anyOf".into(), Value::Array(kept));
        }
    }
    Ok(())
}

fn is_null_schema(schema: &Value) -> bool {
    let Some(object) = schema.as_object() else {
        return false;
    };
    match object.get("type") {
        Some(Value::String(t)) => t == "null",
        None => {
            object.get("nullable") == Some(&Value::Bool(true))
                && object.keys().all(|k| k == "nullable")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    fn norm(schema: Value) -> Result<Value, SchemaError> {
        normalize_schema(&schema)
    }

    #[test]
    fn types_are_upper_cased() -> Result<(), SchemaError> {
        for (lower, upper) in [
            ("object", "OBJECT"),
            ("string", "STRING"),
            ("integer", "INTEGER"),
            ("number", "NUMBER"),
            ("boolean", "BOOLEAN"),
            ("array", "ARRAY"),
        ] {
            assert_eq!(norm(json!({"type": lower}))?, json!({"type": upper}));
        }
        Ok(())
    }

    #[test]
    fn type_array_with_null_becomes_nullable() -> Result<(), SchemaError> {
        assert_eq!(
            norm(json!({"type": ["string", "null"]}))?,
            json!({"type": "STRING", "nullable": true})
        );
        Ok(())
    }

    #[test]
    fn type_array_with_several_types_is_refused() {
        let error = norm(json!({"type": ["string", "integer"]}));
        assert!(
            matches!(error, Err(SchemaError::Invalid { .. })),
            "{error:?}"
        );
    }

    #[test]
    fn formats_kept_only_where_gemini_allows() -> Result<(), SchemaError> {
        let cases = [
            ("integer", "int32", true),
            ("integer", "int64", true),
            ("integer", "uint8", false),
            ("integer", "uint", false),
            ("number", "float", true),
            ("number", "double", true),
            ("string", "date-time", true),
            ("string", "enum", true),
            ("string", "uuid", false),
            ("string", "int64", false),
        ];
        for (t, format, kept) in cases {
            let out = norm(json!({"type": t, "format": format}))?;
            assert_eq!(out.get("format").is_some(), kept, "{t} {format}: {out}");
        }
        Ok(())
    }

    #[test]
    fn dropped_keywords() -> Result<(), SchemaError> {
        let out = norm(json!({
            "$schema": "https://spec.openapis.org/oas/3.0/schema/2021-09-28#/definitions/Schema",
            "title": "Args",
            "type": "object",
            "default": {},
            "additionalProperties": false,
            "$defs": {"Unused": {"type": "string"}},
            "examples": [{}],
            "example": {},
            "properties": {"a": {"type": "string", "title": "A", "default": "x"}},
        }))?;
        assert_eq!(
            out,
            json!({"type": "OBJECT", "properties": {"a": {"type": "STRING"}}})
        );
        Ok(())
    }

    #[test]
    fn kept_keywords() -> Result<(), SchemaError> {
        let schema = json!({
            "type": "object",
            "description": "d",
            "properties": {
                "n": {"type": "integer", "minimum": 0, "maximum": 100},
                "list": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 3},
                "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
            },
            "required": ["n"],
        });
        assert_eq!(
            norm(schema)?,
            json!({
                "type": "OBJECT",
                "description": "d",
                "properties": {
                    "n": {"type": "INTEGER", "minimum": 0, "maximum": 100},
                    "list": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 1, "maxItems": 3},
                    "either": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
                },
                "required": ["n"],
            })
        );
        Ok(())
    }

    #[test]
    fn null_is_removed_from_enum() -> Result<(), SchemaError> {
        assert_eq!(
            norm(json!({"type": "string", "enum": ["a", "b", null], "nullable": true}))?,
            json!({"type": "STRING", "enum": ["a", "b"], "nullable": true})
        );
        Ok(())
    }

    #[test]
    fn non_string_enum_is_refused() {
        assert!(norm(json!({"type": "integer", "enum": [1, 2]})).is_err());
    }

    #[test]
    fn leftover_ref_one_of_all_of_are_refused() {
        for keyword in ["$ref", "oneOf", "allOf"] {
            let nested = json!({
                "type": "object",
                "properties": {"deep": {"type": "object", "properties": {"x": {keyword: []}}}},
            });
            match norm(nested) {
                Err(SchemaError::Unsupported { path, keyword: k }) => {
                    assert_eq!(k, keyword);
                    assert_eq!(path, "#/properties/deep/properties/x");
                }
                other => panic!("{keyword} must be refused, got {other:?}"),
            }
        }
    }

    #[test]
    fn tuple_items_are_refused() {
        assert!(norm(json!({"type": "array", "items": [{"type": "string"}]})).is_err());
    }

    #[test]
    fn any_of_with_null_collapses_to_nullable() -> Result<(), SchemaError> {
        assert_eq!(
            norm(json!({
                "description": "outer",
                "anyOf": [{"type": "object", "description": "inner", "properties": {}}, {"type": "null"}],
            }))?,
            json!({"type": "OBJECT", "description": "outer", "properties": {}, "nullable": true})
        );
        Ok(())
    }

    #[test]
    fn nullable_properties_are_not_required() -> Result<(), SchemaError> {
        let out = norm(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": ["string", "null"]}},
            "required": ["a", "b", "missing"],
        }))?;
        assert_eq!(out["required"], json!(["a"]));
        Ok(())
    }

    /// Arguments covering what tool authors are told to use.
    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Sample {
        /// A name.
        name: String,
        /// Optional count.
        count: Option<u8>,
        /// A unit.
        unit: Option<Unit>,
        /// Tags.
        tags: Vec<String>,
        /// Nested.
        inner: Inner,
        /// Maybe nested.
        maybe_inner: Option<Inner>,
        /// Ratio.
        #[schemars(range(min = 0.0, max = 1.0))]
        ratio: f64,
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    #[allow(dead_code)]
    enum Unit {
        Celsius,
        Fahrenheit,
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        /// Flag.
        flag: bool,
    }

    #[test]
    fn schemars_output_is_normalised_end_to_end() -> Result<(), SchemaError> {
        let Some(params) = parameters_for::<Sample>()? else {
            panic!("Sample has arguments");
        };
        assert_eq!(params["type"], "OBJECT");
        assert!(params.get("description").is_none(), "{params}");
        assert!(params.get("title").is_none(), "{params}");
        let props = &params["properties"];
        assert_eq!(
            props["name"],
            json!({"type": "STRING", "description": "A name."})
        );
        // uint8 dropped, the unsigned minimum kept, null folded into nullable.
        assert_eq!(
            props["count"],
            json!({"type": "INTEGER", "description": "Optional count.", "minimum": 0, "maximum": 255, "nullable": true})
        );
        assert_eq!(props["unit"]["enum"], json!(["celsius", "fahrenheit"]));
        assert_eq!(props["unit"]["nullable"], true);
        assert_eq!(props["tags"]["items"], json!({"type": "STRING"}));
        assert_eq!(props["inner"]["properties"]["flag"]["type"], "BOOLEAN");
        assert_eq!(props["maybe_inner"]["type"], "OBJECT");
        assert_eq!(props["maybe_inner"]["nullable"], true);
        assert_eq!(props["ratio"]["minimum"], json!(0.0));
        assert_eq!(props["ratio"]["format"], "double");
        assert_eq!(
            params["required"],
            json!(["name", "tags", "inner", "ratio"])
        );
        let text = params.to_string();
        for banned in [
            "$ref",
            "$defs",
            "$schema",
            "\"null\"",
            "null,",
            ",null",
            "uint8",
            "additionalProperties",
        ] {
            assert!(!text.contains(banned), "{banned} left in {text}");
        }
        Ok(())
    }

    #[derive(Deserialize, JsonSchema)]
    struct Empty {}

    #[test]
    fn zero_argument_tools_have_no_parameters() -> Result<(), SchemaError> {
        assert_eq!(parameters_for::<Empty>()?, None);
        Ok(())
    }

    #[derive(Deserialize, JsonSchema)]
    #[serde(tag = "kind")]
    #[allow(dead_code)]
    enum Tagged {
        A { a: String },
        B { b: i32 },
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct WithTagged {
        choice: Tagged,
    }

    #[test]
    fn tagged_enums_fail_loudly() {
        let result = parameters_for::<WithTagged>();
        assert!(
            matches!(
                result,
                Err(SchemaError::Unsupported {
                    keyword: "oneOf",
                    ..
                })
            ),
            "{result:?}"
        );
    }

    #[derive(Deserialize, JsonSchema)]
    #[allow(dead_code)]
    struct Recursive {
        children: Vec<Recursive>,
    }

    #[test]
    fn recursive_types_fail_loudly() {
        assert!(parameters_for::<Recursive>().is_err());
    }

    #[test]
    fn non_object_arguments_are_refused() {
        assert!(parameters_for::<String>().is_err());
    }

    #[test]
    fn foreign_schemas_are_simplified_not_refused() {
        let schema = json!({
            "type": "object",
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
            "properties": {
                "at": {"$ref": "#/$defs/Point", "description": "Where."},
                "mode": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                "both": {"allOf": [
                    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                    {"properties": {"b": {"type": "integer"}}}
                ]},
                "either": {"type": ["string", "integer", "null"]},
                "level": {"type": "integer", "enum": [1, 2, 3]},
                "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]},
                "nothing": {"not": {"type": "string"}, "type": "string"},
                "self": {"$ref": "#/$defs/Missing"}
            },
            "required": ["at"],
            "additionalProperties": false,
            "$schema": "http://json-schema.org/draft-07/schema#"
        });
        let Foreign {
            parameters, notes, ..
        } = normalize_foreign(&schema).unwrap();
        let Some(parameters) = parameters else {
            panic!("the tool keeps its parameters: {notes:?}");
        };
        let properties = &parameters["properties"];
        assert_eq!(properties["at"]["type"], "OBJECT");
        assert_eq!(properties["at"]["description"], "Where.");
        assert_eq!(properties["at"]["properties"]["x"]["type"], "NUMBER");
        assert_eq!(properties["mode"]["anyOf"][1]["type"], "INTEGER");
        assert_eq!(properties["both"]["properties"]["b"]["type"], "INTEGER");
        assert_eq!(properties["both"]["required"], json!(["a"]));
        assert_eq!(
            properties["either"],
            json!({"type": "STRING", "nullable": true})
        );
        assert_eq!(properties["level"], json!({"type": "INTEGER"}));
        assert_eq!(properties["pair"]["items"]["type"], "STRING");
        assert_eq!(properties["self"]["type"], "STRING");
        assert_eq!(parameters["required"], json!(["at"]));
        assert!(notes.len() >= 6, "every simplification is noted: {notes:?}");
    }

    #[test]
    fn a_foreign_schema_without_properties_declares_no_parameters() {
        for schema in [
            json!({"type": "object", "properties": {}}),
            json!({"type": "object"}),
            json!({}),
        ] {
            assert_eq!(
                normalize_foreign(&schema).unwrap().parameters,
                None,
                "{schema}"
            );
        }
    }

    /// `$defs` L0…L{levels-1}, each with `fan` properties pointing at the next level.
    fn fan_out(fan: usize, levels: usize) -> Value {
        let mut defs = Map::new();
        for level in 0..levels {
            let mut properties = Map::new();
            for i in 0..fan {
                let property = if level + 1 < levels {
                    json!({"$ref": format!("#/$defs/L{}", level + 1)})
                } else {
                    json!({"type": "string"})
                };
                properties.insert(format!("p{i}"), property);
            }
            defs.insert(
                format!("L{level}"),
                json!({"type": "object", "properties": properties}),
            );
        }
        json!({"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/L0"}}})
    }

    #[test]
    fn a_schema_whose_refs_fan_out_is_refused_by_the_copies_it_would_make() {
        let started = std::time::Instant::now();
        // 2.6 KB of schema that inlines into 5^8 copies.
        let schema = fan_out(5, 12);
        assert!(schema.to_string().len() < 4000);
        assert_eq!(normalize_foreign(&schema), Err(TooLarge::Nodes));
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        // A small fan-out is declared whole.
        let small = normalize_foreign(&fan_out(2, 3)).unwrap();
        let parameters = small.parameters.unwrap();
        assert_eq!(
            parameters["properties"]["root"]["properties"]["p1"]["properties"]["p0"]["properties"]
                ["p1"]["type"],
            "STRING"
        );
    }

    #[test]
    fn large_copied_keywords_count_and_unread_ones_are_not_copied() {
        let big = "x".repeat(100_000);
        // A description copied with every inlined copy: the text budget stops it.
        let schema = json!({
            "type": "object",
            "$defs": {"T": {"type": "string", "description": big}},
            "properties": {"a": {"$ref": "#/$defs/T"}, "b": {"$ref": "#/$defs/T"}, "c": {"$ref": "#/$defs/T"}},
        });
        assert_eq!(normalize_foreign(&schema), Err(TooLarge::Text));
        // `examples` is not something Gemini reads: not copied, not counted.
        let schema = json!({
            "type": "object",
            "$defs": {"T": {"type": "string", "examples": [big]}},
            "properties": {"a": {"$ref": "#/$defs/T"}, "b": {"$ref": "#/$defs/T"}, "c": {"$ref": "#/$defs/T"}},
        });
        let parameters = normalize_foreign(&schema).unwrap().parameters.unwrap();
        assert_eq!(parameters["properties"]["c"], json!({"type": "STRING"}));
    }

    #[test]
    fn a_schema_too_large_to_read_is_refused_before_any_work() {
        let mut properties = Map::new();
        for i in 0..60_000 {
            properties.insert(format!("p{i}"), json!(true));
        }
        let many = json!({"type": "object", "properties": properties});
        assert_eq!(normalize_foreign(&many), Err(TooLarge::Input));
        let long = json!({"type": "object", "description": "y".repeat(5 << 20)});
        assert_eq!(normalize_foreign(&long), Err(TooLarge::Input));
    }

    #[test]
    fn notes_are_capped_and_counted() {
        let mut properties = Map::new();
        for i in 0..1000 {
            properties.insert(format!("p{i}"), json!({"oneOf": [{"type": "string"}]}));
        }
        let schema = json!({"type": "object", "properties": properties});
        let foreign = normalize_foreign(&schema).unwrap();
        assert_eq!(foreign.notes.len(), MAX_NOTES + 1, "{:?}", foreign.notes);
        assert_eq!(
            foreign.notes.last().unwrap(),
            &format!("and {} more simplifications", 1000 - MAX_NOTES)
        );
    }

    #[test]
    fn deep_nesting_is_cut_not_recursed_into() {
        let mut schema = json!({"type": "string"});
        for _ in 0..100 {
            schema = json!({"type": "object", "properties": {"x": schema}});
        }
        let foreign = normalize_foreign(&schema).unwrap();
        assert!(foreign.parameters.is_some());
        assert!(
            foreign.notes.iter().any(|n| n.contains("nested too deep")),
            "{:?}",
            foreign.notes
        );
    }
}

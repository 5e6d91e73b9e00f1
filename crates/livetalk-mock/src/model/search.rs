//! Google Search, as the demo model plays it: "search the web for …" is answered with a
//! grounded reply whose `groundingMetadata` names the query and two made-up web sources (the
//! mock never reaches the internet, and says so), when the setup turned Search on; without it,
//! the model says it cannot search.

use serde_json::{Value, json};

use super::ModelStep;
use super::tools::Toolset;

/// What the model says when the setup did not turn Search on.
pub(super) const CANNOT_SEARCH: &str = "I can't search the web, because this session didn't turn on Google Search (the googleSearch tool).";

/// What the model says to "search the web" with nothing to search for.
const WHAT_TO_SEARCH: &str =
    "What should I search the web for? For example: \"search the web for the weather in Paris\".";

/// The longest query the model takes from a request, in characters.
const MAX_QUERY: usize = 200;

/// Words a request may open with before it asks ("please", "can you").
const OPENERS: &[&str] = &[
    "please",
    "can you",
    "could you",
    "would you",
    "will you",
    "ok",
    "okay",
    "now",
    "hey",
    "gemini",
];

/// How a search is asked for, the query after it (the longest first).
const ASKS: &[&str] = &[
    "search the web for",
    "search the internet for",
    "search online for",
    "search google for",
    "search for",
    "do a web search for",
    "web search for",
    "google",
    "look up",
    "search",
];

/// What may trail the query without being part of it, and whether it says where to look.
const TRAILERS: &[(&str, bool)] = &[
    (" on the web", true),
    (" on the internet", true),
    (" online", true),
    (" on google", true),
    (" for me", false),
    (" please", false),
];

/// Separators between the words of a request and what follows them.
const GAP: [char; 4] = [' ', ',', ':', ';'];

/// `text` (lower-cased) opens with `words` as whole words: the length of what to skip.
fn opens_with(text: &str, words: &str) -> Option<usize> {
    let rest = text.strip_prefix(words)?;
    let whole = rest.chars().next().is_none_or(|c| !c.is_alphanumeric());
    whole.then(|| text.len() - rest.trim_start_matches(GAP).len())
}

/// The query when `text` asks for a web search ("search the web for the weather in Paris",
/// "please google rust editions", "look up the tides online"); empty when it asks with nothing
/// to search for. `None` when it asks for something else.
pub(super) fn asked(text: &str) -> Option<String> {
    // ASCII lower-casing keeps every byte where it was, so the query keeps its own casing.
    let original = text.trim().trim_end_matches(['.', '!', '?', ' ']);
    let lower = original.to_ascii_lowercase();
    let mut at = 0;
    while let Some(skip) = OPENERS.iter().find_map(|o| opens_with(&lower[at..], o)) {
        at += skip;
    }
    for bare in ["search the web", "search the internet", "search online"] {
        if lower[at..] == *bare {
            return Some(String::new());
        }
    }
    let (ask, skip) = ASKS
        .iter()
        .find_map(|ask| Some((*ask, opens_with(&lower[at..], ask)?)))?;
    let mut query = &original[at + skip..];
    let mut said_where = false;
    while let Some((trailer, where_)) = TRAILERS
        .iter()
        .find(|(t, _)| query.to_ascii_lowercase().ends_with(t))
    {
        said_where |= *where_;
        query = &query[..query.len() - trailer.len()];
    }
    // "look up" is a search only when it says where: "look up the lamp" is not one.
    if ask == "look up" && !said_where {
        return None;
    }
    Some(query.trim().chars().take(MAX_QUERY).collect())
}

/// The model's answer to a search for `query`: a grounded reply when the setup turned Search
/// on, else why it cannot search.
pub(super) fn answer(tools: &Toolset, query: &str) -> ModelStep {
    if !tools.searches() {
        return ModelStep::Reply(CANNOT_SEARCH.to_owned());
    }
    if query.is_empty() {
        return ModelStep::Reply(WHAT_TO_SEARCH.to_owned());
    }
    let searched = format!("I searched the web for \"{query}\".");
    let text = format!(
        "{searched} This offline demo model can't reach the internet, so the two sources I \
         cite, Example Encyclopedia and Example News, are made up: they show how a grounded \
         reply and its sources look."
    );
    let slug = slug(query);
    let sources = [
        (
            format!("{query} - Example Encyclopedia"),
            format!("https://encyclopedia.example/wiki/{slug}"),
            "encyclopedia.example",
        ),
        (
            format!("News about {query} - Example News"),
            format!("https://news.example.org/search?q={slug}"),
            "news.example.org",
        ),
    ];
    let chunks: Vec<Value> = sources
        .iter()
        .map(|(title, uri, domain)| json!({"web": {"uri": uri, "title": title, "domain": domain}}))
        .collect();
    let grounding = json!({
        "webSearchQueries": [query],
        "groundingChunks": chunks,
        "groundingSupports": [{
            "segment": {"startIndex": 0, "endIndex": searched.len(), "text": searched},
            "groundingChunkIndices": [0, 1],
        }],
    });
    ModelStep::Grounded { text, grounding }
}

/// The query as a link's path: ASCII letters and digits, lower-cased, joined by dashes.
fn slug(query: &str) -> String {
    let words: Vec<String> = query
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        "search".to_owned()
    } else {
        words.join("-")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_are_asked_for_in_the_ways_people_ask() {
        for (text, query) in [
            (
                "search the web for the weather in Paris",
                "the weather in Paris",
            ),
            (
                "Please search the web for Rust 2024 editions.",
                "Rust 2024 editions",
            ),
            ("Can you google the tides in Brest?", "the tides in Brest"),
            ("search for Ada Lovelace online", "Ada Lovelace"),
            (
                "look up the opening hours of the Louvre on the web",
                "the opening hours of the Louvre",
            ),
            ("Search the internet for: moon phases", "moon phases"),
            ("Hey Gemini, search for otters", "otters"),
        ] {
            assert_eq!(asked(text).as_deref(), Some(query), "{text:?}");
        }
        assert_eq!(
            asked(super::super::SEARCH_PROMPT).as_deref(),
            Some("the weather in Paris"),
            "the prompt the app suggests"
        );
        assert_eq!(asked("search the web").as_deref(), Some(""));
        assert_eq!(asked("Search!").as_deref(), Some(""));
        for text in [
            "Is the living room lamp on?",
            "look up the lamp",
            "what's the research on lamps",
            "Turn it on and make it blue",
            "searching is fun",
        ] {
            assert_eq!(asked(text), None, "{text:?}");
        }
    }

    #[test]
    fn a_search_is_grounded_only_when_the_setup_turned_it_on() {
        let off = Toolset::new(Vec::new(), false);
        assert_eq!(
            answer(&off, "weather"),
            ModelStep::Reply(CANNOT_SEARCH.to_owned())
        );
        let on = Toolset::new(Vec::new(), true);
        let ModelStep::Grounded { text, grounding } = answer(&on, "Weather in Paris") else {
            panic!("a grounded reply")
        };
        assert!(text.contains("made up"), "the demo says so: {text}");
        assert_eq!(grounding["webSearchQueries"], json!(["Weather in Paris"]));
        let chunks = grounding["groundingChunks"].as_array().unwrap();
        assert_eq!(chunks.len(), 2);
        assert_eq!(
            chunks[0]["web"]["uri"],
            "https://encyclopedia.example/wiki/weather-in-paris"
        );
        assert_eq!(
            chunks[1]["web"]["title"],
            "News about Weather in Paris - Example News"
        );
        assert_eq!(answer(&on, ""), ModelStep::Reply(WHAT_TO_SEARCH.to_owned()));
    }
}

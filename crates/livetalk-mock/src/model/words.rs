//! The words of a request: text split into lower-cased clauses, the vocabulary the model
//! knows (greetings, fillers, verbs, colours, places) and numbers written as digits or words.

/// The lower-cased words of one clause; clauses end at punctuation and joining words.
#[derive(Debug, Default)]
pub(super) struct Clause {
    pub(super) words: Vec<String>,
    pub(super) question: bool,
}

/// Device nouns a request may put in the possessive ("the lamp's colour").
const POSSESSED_NOUNS: &[&str] = &["lamp", "light", "thermostat", "heater", "door", "lock"];

pub(super) fn split_clauses(text: &str) -> Vec<Clause> {
    let lower = text.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let mut padded = String::with_capacity(lower.len() + 16);
    for (i, &c) in chars.iter().enumerate() {
        let between_digits = i > 0
            && chars[i - 1].is_ascii_digit()
            && chars.get(i + 1).is_some_and(char::is_ascii_digit);
        match c {
            '%' => padded.push_str(" percent "),
            '°' => padded.push_str(" degrees "),
            '?' => padded.push_str(" ? | "),
            '.' if between_digits => padded.push('.'),
            ',' | '.' | ';' | ':' | '!' | '\n' => padded.push_str(" | "),
            '\'' | '’' | '‘' => padded.push('\''),
            c if c.is_alphanumeric() => padded.push(c),
            _ => padded.push(' '),
        }
    }
    let mut clauses = vec![Clause::default()];
    for raw in padded.split_whitespace() {
        let raw = raw.trim_matches('\'');
        // "the lamp's status" is about the lamp; "what's" and "it's" stay as they are.
        let raw = match raw.strip_suffix("'s") {
            Some(noun) if POSSESSED_NOUNS.contains(&noun) => noun,
            _ => raw,
        };
        for word in split_digits(raw) {
            match word.as_str() {
                "|" | "and" | "then" | "also" | "plus" | "but" => clauses.push(Clause::default()),
                "?" => {
                    if let Some(current) = clauses.last_mut() {
                        current.question = true;
                    }
                }
                _ => {
                    if let Some(current) = clauses.last_mut() {
                        current.words.push(word);
                    }
                }
            }
        }
    }
    clauses.retain(|clause| !clause.words.is_empty());
    clauses
}

/// "22c" → "22", "c"; decimals stay whole.
fn split_digits(word: &str) -> Vec<String> {
    let mut parts: Vec<String> = Vec::new();
    let mut last_numeric = None;
    for c in word.chars() {
        let numeric = c.is_ascii_digit() || c == '.';
        match parts.last_mut() {
            Some(part) if last_numeric == Some(numeric) => part.push(c),
            _ => parts.push(c.to_string()),
        }
        last_numeric = Some(numeric);
    }
    parts.retain(|part| !part.is_empty() && part != ".");
    parts
}

const GREETINGS: &[&[&str]] = &[
    &["hi"],
    &["hello"],
    &["hey"],
    &["hiya"],
    &["howdy"],
    &["good", "morning"],
    &["good", "afternoon"],
    &["good", "evening"],
];

const FILLERS: &[&[&str]] = &[
    &["okay"],
    &["ok"],
    &["so"],
    &["well"],
    &["um"],
    &["uh"],
    &["hmm"],
    &["please"],
    &["alright"],
    &["all", "right"],
    &["now"],
    &["great"],
    &["cool"],
    &["nice"],
    &["perfect"],
    &["oh"],
    &["yes"],
    &["yeah"],
    &["no"],
    &["sure"],
    &["just"],
    &["actually"],
    &["kindly"],
    &["maybe"],
    &["can", "you"],
    &["could", "you"],
    &["would", "you"],
    &["will", "you"],
    &["you", "can"],
    &["i", "want", "to"],
    &["i'd", "like", "to"],
    &["i'd", "like", "you", "to"],
    &["i", "would", "like", "to"],
    &["i", "would", "like", "you", "to"],
    &["i", "need", "to"],
    &["i", "need", "you", "to"],
    &["go", "ahead", "and"],
    &["let's"],
    &["lets"],
];

pub(super) const QUESTION_STARTS: &[&str] = &[
    "is", "are", "was", "were", "what", "what's", "whats", "which", "how", "how's", "hows", "does",
    "do", "did", "has", "have", "tell", "check", "show", "status", "whether", "any",
];

pub(super) const COMMAND_VERBS: &[&str] = &[
    "turn",
    "switch",
    "set",
    "put",
    "make",
    "change",
    "unlock",
    "dim",
    "brighten",
    "raise",
    "lower",
    "increase",
    "decrease",
    "reduce",
    "heat",
    "cool",
    "warm",
    "open",
    "enable",
    "disable",
    "activate",
    "deactivate",
    "adjust",
    "ensure",
    "start",
];

pub(super) const COLOURS: &[&str] = &[
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "pink",
    "white",
    "cyan",
    "magenta",
    "violet",
    "teal",
    "turquoise",
    "amber",
    "indigo",
    "lavender",
    "gold",
];

pub(super) const COLOUR_SHADES: &[&str] =
    &["warm", "cool", "light", "dark", "pale", "deep", "bright"];

/// Rooms and places the demo has no device in, so "bedroom lamp" is not the living room lamp.
pub(super) const OTHER_PLACES: &[&str] = &[
    "bedroom",
    "bathroom",
    "garage",
    "office",
    "hallway",
    "hall",
    "dining",
    "garden",
    "patio",
    "back",
    "side",
    "basement",
    "attic",
    "upstairs",
    "downstairs",
    "porch",
    "nursery",
    "guest",
    "kids",
    "study",
    "laundry",
    "balcony",
    "yard",
];

pub(super) const PRONOUNS: &[&str] = &["it", "its", "it's", "that", "them", "this"];

/// A clause's words with the lookups the parser needs.
#[derive(Clone, Copy)]
pub(super) struct Words<'a>(pub(super) &'a [String]);

impl<'a> Words<'a> {
    pub(super) fn get(self, index: usize) -> &'a str {
        self.0.get(index).map_or("", String::as_str)
    }

    pub(super) fn has(self, word: &str) -> bool {
        self.0.iter().any(|w| w == word)
    }

    pub(super) fn any(self, words: &[&str]) -> bool {
        self.0.iter().any(|w| words.contains(&w.as_str()))
    }

    pub(super) fn seq(self, phrase: &[&str]) -> bool {
        self.0
            .windows(phrase.len())
            .any(|window| window.iter().zip(phrase).all(|(a, b)| a == b))
    }

    fn starts_with(self, phrase: &[&str]) -> bool {
        self.0.len() >= phrase.len() && self.0.iter().zip(phrase).all(|(a, b)| a == b)
    }

    /// "lock" is a verb in "lock the door" / "please lock it", a noun in "the lock".
    pub(super) fn lock_is_verb(self, index: usize) -> bool {
        index == 0
            || matches!(
                self.get(index - 1),
                "please" | "and" | "to" | "then" | "you" | "also" | "just" | "now" | "should"
            )
    }

    pub(super) fn has_lock_verb(self) -> bool {
        self.0
            .iter()
            .enumerate()
            .any(|(i, w)| w == "lock" && self.lock_is_verb(i))
    }
}

pub(super) fn strip_leading<'a>(mut words: &'a [String], greeted: &mut bool) -> &'a [String] {
    loop {
        let matched = |phrases: &[&[&str]]| {
            phrases
                .iter()
                .find(|phrase| Words(words).starts_with(phrase))
                .map(|phrase| phrase.len())
        };
        if let Some(len) = matched(GREETINGS) {
            *greeted = true;
            words = &words[len..];
        } else if let Some(len) = matched(FILLERS) {
            words = &words[len..];
        } else {
            return words;
        }
    }
}

pub(super) struct Number {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) value: f64,
}

fn number_word(word: &str) -> Option<f64> {
    const UNITS: &[&str] = &[
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
    ];
    const TENS: &[&str] = &[
        "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if let Some(value) = UNITS.iter().position(|unit| *unit == word) {
        return Some(value as f64);
    }
    TENS.iter()
        .position(|tens| *tens == word)
        .map(|index| (index as f64 + 2.0) * 10.0)
}

pub(super) fn numbers(w: Words) -> Vec<Number> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < w.0.len() {
        let word = w.get(i);
        if word.starts_with(|c: char| c.is_ascii_digit())
            && let Ok(value) = word.parse::<f64>()
        {
            found.push(Number {
                start: i,
                end: i,
                value,
            });
        } else if let Some(mut value) = number_word(word) {
            let start = i;
            if value >= 20.0
                && let Some(unit) = number_word(w.get(i + 1)).filter(|u| (1.0..10.0).contains(u))
            {
                value += unit;
                i += 1;
            }
            if w.get(i + 1) == "hundred" {
                value *= 100.0;
                i += 1;
            }
            found.push(Number {
                start,
                end: i,
                value,
            });
        }
        i += 1;
    }
    found
}

/// The number that goes with a unit word when there is one ("to 30 percent"), else the last.
pub(super) fn pick_number<'n>(w: Words, found: &'n [Number], units: &[&str]) -> Option<&'n Number> {
    found
        .iter()
        .find(|n| units.contains(&w.get(n.end + 1)))
        .or_else(|| found.last())
}

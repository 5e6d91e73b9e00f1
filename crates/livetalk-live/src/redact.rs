//! The one place secrets are kept out of what livetalk writes. Every credential (the API key,
//! bearer and access tokens, bridge tokens, proxy passwords) is [`remember`]ed the moment it is
//! read; every sink (terminal lines, JSON lines, the log, recordings, what the bridge sends apps)
//! passes its text through [`scrub`] on the way out. Text from a server (a close reason quoting
//! the key, a skipped frame) can take any path to a sink, so the sinks are the one place that
//! cannot be bypassed.

use std::borrow::Cow;
use std::sync::{PoisonError, RwLock};
/// What a secret becomes.
pub(crate) const MASK: &str = "[redacted]";

/// Shorter secrets are not searched for: they would mask ordinary words.
const MIN_LEN: usize = 6;

/// The secrets in their written forms (as given, and percent-encoded as in a URL query),
/// longest first so a secret containing another is masked whole.
static KNOWN: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remembers a secret from now on (a blank or very short one is ignored).
pub fn remember(secret: &str) {
    let secret = secret.trim();
    if secret.len() < MIN_LEN {
        return;
    }
    let mut known = KNOWN.write().unwrap_or_else(PoisonError::into_inner);
    for form in [secret.to_owned(), percent_encoded(secret)] {
        if !known.contains(&form) {
            known.push(form);
        }
    }
    known.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Query parameters whose values are taken for credentials, by a part of their name.
const SECRET_PARAMETERS: [&str; 9] = [
    "key", "token", "secret", "pass", "auth", "sig", "cred", "session", "code",
];

/// Remembers the credentials a URL carries: its user and password, and the values of query
/// parameters named like keys, tokens, secrets or signatures (as written and decoded). Call it
/// before the URL is quoted anywhere, even in an error about the URL itself.
pub fn remember_url_credentials(url: &str) {
    let decoded = |text: &str| {
        percent_encoding::percent_decode_str(text)
            .decode_utf8_lossy()
            .into_owned()
    };
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        // A lone user part is a token often enough (`https://TOKEN@host`): both are kept out.
        for part in userinfo.split(':') {
            remember(part);
            remember(&decoded(part));
        }
        // HTTP clients send the userinfo as Basic credentials, which a server may quote.
        let (user, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
        remember(&base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            format!("{}:{}", decoded(user), decoded(password)),
        ));
    }
    let query = after_scheme
        .split_once('?')
        .map(|(_, query)| query.split('#').next().unwrap_or_default())
        .unwrap_or_default();
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let name = decoded(name).to_ascii_lowercase();
        if SECRET_PARAMETERS.iter().any(|part| name.contains(part)) {
            remember(value);
            remember(&decoded(value));
        }
    }
}

/// `text` with every remembered secret replaced by `[redacted]`.
pub fn scrub(text: &str) -> Cow<'_, str> {
    replace_with(text, |_| MASK.to_owned())
}

/// `text` with every remembered secret replaced by as many `*` as it has characters, for a
/// screen whose layout must not move.
pub fn scrub_keeping_width(text: &str) -> Cow<'_, str> {
    replace_with(text, |secret| "*".repeat(secret.chars().count()))
}

fn replace_with(text: &str, mask: impl Fn(&str) -> String) -> Cow<'_, str> {
    let known = KNOWN.read().unwrap_or_else(PoisonError::into_inner);
    if !known.iter().any(|s| text.contains(s.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_owned();
    for secret in known.iter() {
        if out.contains(secret.as_str()) {
            out = out.replace(secret.as_str(), &mask(secret));
        }
    }
    Cow::Owned(out)
}

fn percent_encoded(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembered_secrets_are_masked_in_every_written_form() {
        remember("sk-test-SECRET/with+plus");
        let text =
            "closed: key=sk-test-SECRET%2Fwith%2Bplus bad, and sk-test-SECRET/with+plus again";
        let scrubbed = scrub(text);
        assert!(!scrubbed.contains("SECRET"), "{scrubbed}");
        assert_eq!(scrubbed.matches(MASK).count(), 2);
        assert!(matches!(scrub("nothing to hide"), Cow::Borrowed(_)));
    }

    #[test]
    fn the_credentials_a_url_carries_are_remembered_and_nothing_else() {
        remember_url_credentials(
            "https://svc-user:p%40ss-word-1@mcp.example:8443/v1/mcp?api_key=AIzaQUERYKEY9&X-Amz-Signature=abcdef0123&transport=streamable#frag",
        );
        let text = "https://svc-user:p%40ss-word-1@mcp.example:8443/v1/mcp?api_key=AIzaQUERYKEY9&X-Amz-Signature=abcdef0123&transport=streamable failed; password p@ss-word-1";
        let scrubbed = scrub(text);
        for secret in [
            "svc-user",
            "p%40ss-word-1",
            "p@ss-word-1",
            "AIzaQUERYKEY9",
            "abcdef0123",
        ] {
            assert!(!scrubbed.contains(secret), "{secret} in {scrubbed}");
        }
        // What an HTTP client sends for that userinfo, as a server quoting it shows it.
        assert_eq!(
            scrub("Basic c3ZjLXVzZXI6cEBzcy13b3JkLTE="),
            "Basic [redacted]"
        );
        for kept in ["mcp.example:8443/v1/mcp", "transport=streamable"] {
            assert!(scrubbed.contains(kept), "{kept} in {scrubbed}");
        }
        remember_url_credentials("https://TOKEN-ONLY-123@mcp.example/");
        assert_eq!(scrub("TOKEN-ONLY-123"), MASK);
    }

    #[test]
    fn short_secrets_are_not_searched_for() {
        remember("abc");
        assert_eq!(scrub("abc abc"), "abc abc");
    }
}

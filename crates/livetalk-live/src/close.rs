//! Human meanings of close codes, rejected upgrades and connection failures, as the Live API
//! documents them.

/// A close code and reason turned into one sentence a user can act on.
pub(crate) fn describe_close(code: u16, reason: &str) -> String {
    let reason = reason.trim();
    // Our sentence supplies the full stop; a reason ending in one would double it.
    let quoted = match reason.trim_end_matches('.') {
        "" => String::new(),
        shown => format!(": {shown}"),
    };
    let lower = reason.to_ascii_lowercase();
    match code {
        1000 => format!("The server ended the session normally (1000){quoted}."),
        1001 => format!("The server is going away (1001){quoted}."),
        1006 => "The connection was lost without a close message (1006): the server went away or the network dropped.".to_owned(),
        1007 | 1008 if lower.contains("api key") => format!(
            "The API key was rejected ({code}){quoted}. Check GEMINI_API_KEY (or GOOGLE_API_KEY) or the config's api_key."
        ),
        1007 if lower.contains("non-audio") => format!(
            "The model rejected the setup (1007){quoted}. Native-audio models only answer with AUDIO; use output transcription for text."
        ),
        1007 if lower.contains("unknown name") => format!(
            "The Live API does not accept a field we sent (1007){quoted}. Check `api_version` and the setup options."
        ),
        1007 if lower.contains("location") => format!(
            "The Live API is not available from this location (1007){quoted}."
        ),
        1007 => format!(
            "The Live API rejected the request as invalid (1007){quoted}. Check the model, setup options and tool declarations."
        ),
        1008 if lower.contains("session not found") => format!(
            "The session to resume no longer exists (1008){quoted}. A fresh session is needed."
        ),
        1008 if lower.contains("not found") || lower.contains("not supported for bidigeneratecontent") => match super::models::retired_hint(reason) {
            Some(hint) => format!("The model is not available (1008){quoted}. {hint}"),
            None => format!(
                "The model is not available (1008){quoted}. Check `model` and `api_version` in the config."
            ),
        },
        1008 if lower.contains("operation was aborted") => format!(
            "The server ended the connection (1008){quoted}. This happens after a goAway, or when audio is streamed while a blocking tool call is unanswered."
        ),
        1008 if lower.contains("disabled") || lower.contains("denied") || lower.contains("permission") => format!(
            "The API key's project may not use the Live API (1008){quoted}."
        ),
        1008 => format!("The server refused the request (1008){quoted}."),
        1011 if lower.contains("quota") || lower.contains("exhausted") || lower.contains("credits") => format!(
            "The API quota is used up (1011){quoted}. Check the plan and billing of the key's project."
        ),
        1011 if lower.contains("deadline") => format!(
            "The connection reached the server's time limit (1011){quoted}. Live connections end after about 10 minutes."
        ),
        1011 => format!(
            "The Live API had an internal error (1011){quoted}. Trying again usually helps."
        ),
        1012 => format!("The server is restarting (1012){quoted}. Try again shortly."),
        1013 => format!("The server is overloaded (1013){quoted}. Try again later."),
        _ => format!("The server closed the connection ({code}){quoted}."),
    }
}

/// Whether reconnecting could help after this close (bad keys, unknown models and invalid
/// requests fail the same way every time).
pub(crate) fn is_retryable(code: Option<u16>, reason: &str) -> bool {
    let lower = reason.to_ascii_lowercase();
    match code {
        None | Some(1006) | Some(1001) | Some(1012) | Some(1013) => true,
        Some(1007) => false,
        Some(1008) => {
            lower.contains("operation was aborted") || lower.contains("session not found")
        }
        Some(1011) => {
            !(lower.contains("quota") || lower.contains("exhausted") || lower.contains("credits"))
        }
        Some(_) => false,
    }
}

/// A rejected WebSocket upgrade (an HTTP status instead of 101).
pub fn describe_http_status(status: u16, host: &str) -> String {
    match status {
        400 => format!(
            "{host} rejected the connection request (HTTP 400). Check the endpoint URL and api_version."
        ),
        401 | 403 => format!(
            "{host} refused the API key (HTTP {status}). Check GEMINI_API_KEY (or GOOGLE_API_KEY) or the config's api_key."
        ),
        404 => format!(
            "There is no Live API at this URL on {host} (HTTP 404). Check the endpoint and api_version."
        ),
        429 => format!("{host} is rate limiting this key (HTTP 429). Wait a moment and try again."),
        500..=599 => format!("{host} had a server error (HTTP {status}). Try again shortly."),
        _ => format!("{host} refused the WebSocket upgrade (HTTP {status})."),
    }
}

/// A failure to reach the server at all.
pub(crate) fn describe_io_error(error: &std::io::Error, host: &str) -> String {
    use std::io::ErrorKind;
    match error.kind() {
        ErrorKind::ConnectionRefused => {
            format!(
                "Could not connect to {host}: connection refused. Is the server running, and on this port?"
            )
        }
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::UnexpectedEof => {
            format!("The connection to {host} was reset.")
        }
        ErrorKind::TimedOut => format!("Connecting to {host} timed out."),
        _ if error.to_string().contains("failed to lookup")
            || error.to_string().contains("Name or service not known") =>
        {
            format!("Could not resolve {host}. Check the endpoint and your network.")
        }
        _ => crate::excerpt::sentence(&format!("Could not connect to {host}: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_codes_from_the_field_become_actionable_sentences() {
        assert_eq!(
            describe_close(1011, "Internal error encountered."),
            "The Live API had an internal error (1011): Internal error encountered. Trying again usually helps."
        );
        assert!(
            describe_close(1007, "Cannot extract voices from a non-audio request")
                .contains("AUDIO")
        );
        assert!(describe_close(1008, "models/x is not found for API version v1beta, or is not supported for bidiGenerateContent. Call ListModels").contains("`model`"));
        assert!(
            describe_close(1008, "BidiGenerateContent session not found")
                .contains("no longer exists")
        );
        assert!(describe_close(1011, "You exceeded your current quota").contains("quota"));
        assert!(
            describe_close(1011, "Deadline expired before operation could complete.")
                .contains("10 minutes")
        );
        assert!(describe_close(1006, "").contains("lost"));
        assert!(
            describe_close(1007, "API key not valid. Please pass a valid API key.")
                .starts_with("The API key was rejected (1007)")
        );
        assert!(!is_retryable(Some(1007), "API key not valid."));
        assert_eq!(
            describe_close(4000, "custom"),
            "The server closed the connection (4000): custom."
        );
    }

    #[test]
    fn only_transient_closes_are_retryable() {
        assert!(is_retryable(None, ""));
        assert!(is_retryable(Some(1011), "Internal error encountered."));
        assert!(is_retryable(Some(1008), "The operation was aborted."));
        assert!(!is_retryable(
            Some(1007),
            "Request contains an invalid argument."
        ));
        assert!(!is_retryable(Some(1008), "models/x is not found"));
        assert!(!is_retryable(
            Some(1011),
            "Resource has been exhausted (e.g. check quota)."
        ));
    }

    #[test]
    fn upgrade_failures_name_the_fix() {
        assert!(describe_http_status(401, "h").contains("GEMINI_API_KEY"));
        assert!(describe_http_status(404, "h").contains("api_version"));
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert!(describe_io_error(&refused, "127.0.0.1").contains("connection refused"));
    }
}

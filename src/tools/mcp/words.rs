//! What went wrong with an MCP server, in the user's words: what happened and what to do,
//! never a library's type names (rmcp's errors print their transports' Rust types).

use std::error::Error;

use rmcp::ServiceError;
use rmcp::service::ClientInitializeError;
use rmcp::transport::DynamicTransportError;
use rmcp::transport::streamable_http_client::StreamableHttpError;

use livetalk_live::excerpt::{SUMMARY, bounded};

/// Why starting the MCP session (the handshake) failed.
pub(super) fn start_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::TransportError { error, .. } => transport(error),
        ClientInitializeError::ConnectionClosed(_) => {
            "it closed the connection before the MCP handshake ended".to_owned()
        }
        ClientInitializeError::JsonRpcError(data) => format!(
            "it refused the MCP handshake: {}",
            bounded(&data.message, SUMMARY)
        ),
        ClientInitializeError::NoCompatibleProtocolVersion { .. } => {
            "it speaks no version of MCP that livetalk speaks".to_owned()
        }
        ClientInitializeError::LegacyFallbackFailed { fallback, .. } => start_error(fallback),
        ClientInitializeError::Cancelled => "starting it was cancelled".to_owned(),
        _ => "its answer to the MCP handshake made no sense".to_owned(),
    }
}

/// Why a request to a running server failed.
pub(super) fn service_error(error: &ServiceError) -> String {
    match error {
        ServiceError::McpError(data) => format!(
            "it answered with an error: {}",
            bounded(&data.message, SUMMARY)
        ),
        ServiceError::TransportSend(error) => transport(error),
        ServiceError::TransportClosed => "its connection closed".to_owned(),
        ServiceError::Timeout { timeout } => {
            format!("it did not answer within {:.0} s", timeout.as_secs_f64())
        }
        ServiceError::Cancelled { .. } => "the request was cancelled".to_owned(),
        _ => "its answer was not what MCP asks for".to_owned(),
    }
}

/// True when the failure means the server is gone (a closed pipe or connection), rather than
/// that it answered badly.
pub(super) fn server_is_gone(error: &ServiceError) -> bool {
    match error {
        ServiceError::TransportClosed => true,
        ServiceError::TransportSend(error) => error
            .error
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| {
                matches!(
                    e.kind(),
                    std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::UnexpectedEof
                )
            }),
        _ => false,
    }
}

fn transport(error: &DynamicTransportError) -> String {
    let inner: &(dyn Error + 'static) = error.error.as_ref();
    if let Some(http) = inner.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        return http_error(http);
    }
    if let Some(io) = inner.downcast_ref::<std::io::Error>() {
        return io_error(io);
    }
    "its connection failed".to_owned()
}

fn http_error(error: &StreamableHttpError<reqwest::Error>) -> String {
    match error {
        StreamableHttpError::HttpStatus(status) => http_status(status.status),
        StreamableHttpError::AuthRequired(_) => http_status(401),
        StreamableHttpError::InsufficientScope(_) => http_status(403),
        StreamableHttpError::SessionExpired => {
            "it forgot the MCP session (HTTP 404); it will be started again".to_owned()
        }
        StreamableHttpError::Client(error) => request_error(error),
        StreamableHttpError::Io(error) => io_error(error),
        StreamableHttpError::ResponseBodyTooLarge { max_size } => {
            format!("its answer was larger than the {max_size} bytes livetalk reads")
        }
        StreamableHttpError::UnexpectedContentType(kind) => format!(
            "it did not answer as an MCP server does (content type {})",
            bounded(kind.as_deref().unwrap_or("none"), SUMMARY)
        ),
        StreamableHttpError::Deserialize(_)
        | StreamableHttpError::UnexpectedServerResponse(_)
        | StreamableHttpError::Sse(_) => "its answer was not valid MCP".to_owned(),
        StreamableHttpError::UnexpectedEndOfStream
        | StreamableHttpError::TransportChannelClosed => {
            "it closed the connection before it answered".to_owned()
        }
        _ => "the HTTP request to it failed".to_owned(),
    }
}

fn http_status(status: u16) -> String {
    match status {
        401 => "it wants credentials (HTTP 401): set `bearer_token_env_var` to a variable that \
                holds a token it accepts"
            .to_owned(),
        403 => "it refused the credentials (HTTP 403): check the token in \
                `bearer_token_env_var`"
            .to_owned(),
        404 => "there is no MCP server at that URL (HTTP 404): check `url`".to_owned(),
        429 => "it is refusing requests for now (HTTP 429, too many); try again later".to_owned(),
        500..=599 => format!("the server failed (HTTP {status}); its own log says why"),
        other => format!("it answered HTTP {other}"),
    }
}

fn request_error(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "it did not answer in time".to_owned()
    } else if error.is_connect() {
        "nothing answered at that address: is the server running, and is `url` right?".to_owned()
    } else if error.is_redirect() {
        "it redirected the request too often".to_owned()
    } else if let Some(status) = error.status() {
        http_status(status.as_u16())
    } else {
        "the HTTP request to it failed".to_owned()
    }
}

fn io_error(error: &std::io::Error) -> String {
    use std::io::ErrorKind::*;
    match error.kind() {
        BrokenPipe | UnexpectedEof | ConnectionReset | ConnectionAborted => {
            "it stopped before it answered".to_owned()
        }
        ConnectionRefused => "nothing answered at that address".to_owned(),
        TimedOut => "it did not answer in time".to_owned(),
        _ => format!("reading from it failed ({})", error.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(error: StreamableHttpError<reqwest::Error>) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "rmcp::transport::worker::WorkerTransport<StreamableHttpClientWorker<reqwest::Client>>",
            std::any::TypeId::of::<()>(),
            Box::new(error),
        ))
    }

    #[test]
    fn no_type_names_and_a_next_step() {
        use rmcp::transport::streamable_http_client::HttpStatusError;
        let cases = [
            (
                http(StreamableHttpError::HttpStatus(HttpStatusError::new(
                    500, None,
                ))),
                "HTTP 500",
            ),
            (
                http(StreamableHttpError::HttpStatus(HttpStatusError::new(
                    401, None,
                ))),
                "bearer_token_env_var",
            ),
            (
                http(StreamableHttpError::UnexpectedContentType(Some(
                    "text/html".into(),
                ))),
                "text/html",
            ),
            (ServiceError::TransportClosed, "closed"),
            (
                ServiceError::TransportSend(DynamicTransportError::from_parts(
                    "rmcp::transport::child_process::TokioChildProcess",
                    std::any::TypeId::of::<()>(),
                    Box::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe)),
                )),
                "stopped before it answered",
            ),
        ];
        for (error, words) in cases {
            let said = service_error(&error);
            assert!(said.contains(words), "{words:?} in {said:?}");
            for name in ["rmcp", "Transport", "Worker", "reqwest", "::", "Error"] {
                assert!(!said.contains(name), "{name:?} in {said:?}");
            }
        }
    }
}

//! What `livetalk serve` counts for `GET /metrics`: one registry of prometheus-client metrics,
//! encoded in the OpenMetrics text format Prometheus scrapes. Every name starts with
//! `livetalk_bridge_`; docs/bridge.md lists them.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// What `/metrics` answers with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Which way bytes went.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Direction {
    pub direction: Way,
}

#[derive(
    Debug, Clone, Copy, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelValue,
)]
#[allow(non_camel_case_types)] // the label's values, as Prometheus shows them
pub enum Way {
    /// Towards the bridge: from the app, or from the Live API.
    received,
    /// Away from it: to the app, or to the Live API.
    sent,
}

/// How a session opened: whether the app came back with a handle.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Opened {
    pub resumed: bool,
}

/// How a drained connection was closed: at the end of its turn, or when the drain timed out.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Drained {
    pub at: DrainedAt,
}

#[derive(
    Debug, Clone, Copy, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelValue,
)]
#[allow(non_camel_case_types)]
pub enum DrainedAt {
    turn_end,
    timeout,
}

/// Every metric of one bridge.
pub struct BridgeMetrics {
    registry: Registry,
    pub connections_open: Gauge,
    pub connections: Counter,
    pub sessions_open: Gauge,
    pub sessions: Family<Opened, Counter>,
    pub turns: Counter,
    pub tool_calls: Counter,
    pub upstream_reconnects: Counter,
    pub upstream_hand_overs: Counter,
    pub app_bytes: Family<Direction, Counter>,
    pub upstream_bytes: Family<Direction, Counter>,
    pub webrtc_peers_open: Gauge,
    pub webrtc_peers: Counter,
    pub drains: Counter,
    pub drained: Family<Drained, Counter>,
    pub first_response: Histogram,
    pub first_audio: Histogram,
    pub tool_answer: Histogram,
}

/// Buckets for latencies, in seconds: 10 ms to a minute.
fn latency_buckets() -> impl Iterator<Item = f64> {
    [
        0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    ]
    .into_iter()
}

impl Default for BridgeMetrics {
    fn default() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("livetalk_bridge");
        let metrics = BridgeMetrics {
            registry: Registry::default(),
            connections_open: Gauge::default(),
            connections: Counter::default(),
            sessions_open: Gauge::default(),
            sessions: Family::default(),
            turns: Counter::default(),
            tool_calls: Counter::default(),
            upstream_reconnects: Counter::default(),
            upstream_hand_overs: Counter::default(),
            app_bytes: Family::default(),
            upstream_bytes: Family::default(),
            webrtc_peers_open: Gauge::default(),
            webrtc_peers: Counter::default(),
            drains: Counter::default(),
            drained: Family::default(),
            first_response: Histogram::new(latency_buckets()),
            first_audio: Histogram::new(latency_buckets()),
            tool_answer: Histogram::new(latency_buckets()),
        };
        registry.register(
            "connections_open",
            "App connections open now",
            metrics.connections_open.clone(),
        );
        registry.register(
            "connections",
            "App connections accepted (WebSocket upgrades)",
            metrics.connections.clone(),
        );
        registry.register(
            "sessions_open",
            "Upstream Live sessions open now",
            metrics.sessions_open.clone(),
        );
        registry.register(
            "sessions",
            "Upstream Live sessions opened (CONNECT_GEMINI, UPDATE_CONFIG); resumed when the app gave a session handle",
            metrics.sessions.clone(),
        );
        registry.register(
            "turns",
            "Model turns completed (TURN_COMPLETE sent to apps)",
            metrics.turns.clone(),
        );
        registry.register(
            "tool_calls",
            "Function calls the model made (in TOOL_CALL messages)",
            metrics.tool_calls.clone(),
        );
        registry.register(
            "upstream_reconnects",
            "Upstream connections replaced after one was lost",
            metrics.upstream_reconnects.clone(),
        );
        registry.register(
            "upstream_hand_overs",
            "Upstream connections replaced as planned (a goAway, a changed setup)",
            metrics.upstream_hand_overs.clone(),
        );
        registry.register(
            "app_bytes",
            "Bytes of WebSocket messages from and to apps",
            metrics.app_bytes.clone(),
        );
        registry.register(
            "upstream_bytes",
            "Bytes of WebSocket messages from and to the Live API",
            metrics.upstream_bytes.clone(),
        );
        registry.register(
            "webrtc_peers_open",
            "WebRTC peer connections open now",
            metrics.webrtc_peers_open.clone(),
        );
        registry.register(
            "webrtc_peers",
            "WebRTC peer connections opened (offers answered)",
            metrics.webrtc_peers.clone(),
        );
        registry.register(
            "drains",
            "Drains started (SIGTERM or POST /drain)",
            metrics.drains.clone(),
        );
        registry.register(
            "drained_connections",
            "App connections closed by a drain, at their turn's end or when the drain timed out",
            metrics.drained.clone(),
        );
        registry.register(
            "first_response_seconds",
            "From the end of the user's turn to the model's first message",
            metrics.first_response.clone(),
        );
        registry.register(
            "first_audio_seconds",
            "From the end of the user's turn to the model's first audio",
            metrics.first_audio.clone(),
        );
        registry.register(
            "tool_answer_seconds",
            "From a TOOL_CALL sent to the app to its SEND_TOOL_RESPONSE",
            metrics.tool_answer.clone(),
        );
        BridgeMetrics {
            registry: root,
            ..metrics
        }
    }
}

impl BridgeMetrics {
    /// The exposition, in the OpenMetrics text format ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }

    /// Counts a message of `bytes` bytes to or from an app.
    pub fn app_message(&self, way: Way, bytes: usize) {
        self.app_bytes
            .get_or_create(&Direction { direction: way })
            .inc_by(bytes as u64);
    }

    /// Counts a frame of `bytes` bytes to or from the Live API.
    pub fn upstream_frame(&self, way: Way, bytes: usize) {
        self.upstream_bytes
            .get_or_create(&Direction { direction: way })
            .inc_by(bytes as u64);
    }
}

/// A duration as the seconds a histogram observes.
pub fn seconds(duration: Duration) -> f64 {
    duration.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exposition_names_every_metric_with_the_prefix_and_ends_with_eof() {
        let metrics = BridgeMetrics::default();
        metrics.connections.inc();
        metrics
            .sessions
            .get_or_create(&Opened { resumed: true })
            .inc();
        metrics.app_message(Way::received, 120);
        metrics.first_response.observe(0.3);
        let text = metrics.encode();
        assert!(
            text.contains("livetalk_bridge_connections_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("livetalk_bridge_sessions_total{resumed=\"true\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("livetalk_bridge_app_bytes_total{direction=\"received\"} 120\n"),
            "{text}"
        );
        assert!(
            text.contains("livetalk_bridge_first_response_seconds_bucket{le=\"0.5\"} 1\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            assert!(line.starts_with("livetalk_bridge_"), "{line}");
        }
    }
}

//! Where an app's upstream Live session goes and what sees its connections: the [`Upstream`]
//! every session of the bridge dials, the dialer that tells the fleet whether the service
//! could be reached (`/readyz`), and the wire tap that counts the bytes for the metrics and
//! feeds the session's recording.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use super::fleet::Fleet;
use super::metrics::Way;
use crate::record::WireRecorder;
use livetalk_live::connection::{TappedFrame, WireTap};
use livetalk_live::session::{Dialer, LiveApi};
use livetalk_live::wire::{ClientMessage, Setup};
use livetalk_live::{ApiKey, CloseInfo, ConnectError, Connection, Endpoint};

/// Where each client's Live session goes. `Debug` never shows the key.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub endpoint: Endpoint,
    pub api_key: Option<ApiKey>,
    pub connect_timeout: Duration,
    /// It is livetalk's own offline demo model (recordings say so).
    pub offline: bool,
}

/// Opens the upstream connections of a session (the first, and every reconnect) as the Live
/// API's own dialer does, and tells the fleet whether the service could be reached
/// (`/readyz`).
pub(super) struct UpstreamDialer {
    pub(super) service: LiveApi,
    pub(super) fleet: Arc<Fleet>,
}

impl Dialer for UpstreamDialer {
    fn dial(
        &self,
        setup: Setup,
        connect_timeout: Duration,
        tap: Option<Arc<dyn WireTap>>,
    ) -> BoxFuture<'static, Result<Connection, ConnectError>> {
        let connecting = self.service.dial(setup, connect_timeout, tap);
        let fleet = self.fleet.clone();
        Box::pin(async move {
            let result = connecting.await;
            // A setup the service refused (an app's unknown model) is the app's business; an
            // upstream that cannot be reached, refuses the upgrade or never answers is the
            // instance's.
            fleet.upstream_attempt(match &result {
                Ok(_) | Err(ConnectError::Closed(_)) => Ok(()),
                Err(e) => Err(livetalk_live::excerpt::sentence(&e.to_string())),
            });
            result
        })
    }
}

/// What sees every upstream connection of a session: the bytes each way for the metrics, and
/// the recording when there is one.
pub(super) struct SessionTap {
    pub(super) fleet: Arc<Fleet>,
    pub(super) recorder: Option<WireRecorder>,
}

impl WireTap for SessionTap {
    fn connecting(&self, host: &str) {
        if let Some(recorder) = &self.recorder {
            recorder.connecting(host);
        }
    }

    fn sent(&self, message: &Arc<ClientMessage>, bytes: usize) {
        self.fleet.metrics.upstream_frame(Way::sent, bytes);
        if let Some(recorder) = &self.recorder {
            recorder.sent(message, bytes);
        }
    }

    fn handshake(&self, frame: TappedFrame<'_>, bytes: usize) {
        self.fleet.metrics.upstream_frame(Way::received, bytes);
        if let Some(recorder) = &self.recorder {
            recorder.handshake(frame, bytes);
        }
    }

    fn closed(&self, close: &CloseInfo) {
        if let Some(recorder) = &self.recorder {
            recorder.closed(close);
        }
    }
}

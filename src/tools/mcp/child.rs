//! A stdio MCP server as rmcp's transport, with a bound on each message it sends: the MCP
//! library turns a message into typed values through several copies (a 5 MB `tools/list`
//! answer took 150–220 MB), so a longer one is dropped unread and counted, and the listing
//! that waited for it says why instead of waiting out its deadline.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::watch;

/// The longest message livetalk reads from a stdio server. Generous for a tool list or a
/// tool's answer (what reaches the model is cut far shorter by `[tools] max_response_bytes`);
/// a longer message is dropped.
pub const MAX_MESSAGE: usize = 2 << 20;

/// How long a server may take to exit once its stdin is closed, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// A child process speaking MCP over its stdin and stdout.
pub(super) struct ChildTransport {
    /// Killed when dropped (spawned with `kill_on_drop`).
    child: Child,
    transport: AsyncRwTransport<RoleClient, Watched<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    /// The transport over `child`'s stdin and stdout (which must be piped and not taken);
    /// each message longer than [`MAX_MESSAGE`] is dropped and counts one in `oversized`.
    pub fn new(mut child: Child, oversized: watch::Sender<u64>) -> std::io::Result<Self> {
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(std::io::Error::other("its stdin or stdout is not a pipe"));
        };
        let stdout = Watched::new(stdout, oversized);
        let transport = AsyncRwTransport::new(stdout, stdin).with_max_line_length(MAX_MESSAGE);
        Ok(ChildTransport { child, transport })
    }
}

impl Transport<RoleClient> for ChildTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: rmcp::service::TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl Future<Output = Option<rmcp::service::RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// Closes its stdin (how MCP asks a stdio server to quit), then kills it if it is still
    /// there after [`EXIT_GRACE`].
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        if tokio::time::timeout(EXIT_GRACE, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// A server's stdout, watched for lines longer than [`MAX_MESSAGE`] as it passes (nothing is
/// held: the transport reads it as before).
pub(super) struct Watched<R> {
    inner: R,
    /// Bytes of the current line so far.
    line: usize,
    /// The current line was counted already.
    counted: bool,
    oversized: watch::Sender<u64>,
}

impl<R> Watched<R> {
    fn new(inner: R, oversized: watch::Sender<u64>) -> Self {
        Watched {
            inner,
            line: 0,
            counted: false,
            oversized,
        }
    }

    fn saw(&mut self, bytes: &[u8]) {
        for (index, segment) in bytes.split(|b| *b == b'\n').enumerate() {
            if index > 0 {
                self.line = 0;
                self.counted = false;
            }
            self.line = self.line.saturating_add(segment.len());
            if self.line > MAX_MESSAGE && !self.counted {
                self.counted = true;
                self.oversized.send_modify(|count| *count += 1);
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Watched<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            this.saw(&buf.filled()[before..]);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt as _;

    use super::*;

    #[tokio::test]
    async fn each_line_longer_than_a_message_counts_once_and_passes_through() {
        let mut stream = Vec::new();
        stream.extend_from_slice(b"{\"short\":1}\n");
        stream.extend(std::iter::repeat_n(b'x', 2 * MAX_MESSAGE));
        stream.extend_from_slice(b"\n{\"short\":2}\n");
        stream.extend(std::iter::repeat_n(b'y', MAX_MESSAGE + 1));
        stream.extend_from_slice(b"\n");
        stream.extend(std::iter::repeat_n(b'z', MAX_MESSAGE));
        stream.extend_from_slice(b"\n");
        let (oversized, counted) = watch::channel(0);
        let mut watched = Watched::new(stream.as_slice(), oversized);
        let mut read = Vec::new();
        watched.read_to_end(&mut read).await.unwrap();
        assert_eq!(read, stream, "nothing is held or changed");
        assert_eq!(*counted.borrow(), 2);
    }
}

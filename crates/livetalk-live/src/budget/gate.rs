//! A peer's socket whose frames are paid for before they are read: tungstenite reads a whole
//! frame into memory once its header has named its length, so a peer's bytes cost memory
//! before any message can be counted. [`Gated`] sits between the socket and tungstenite, reads
//! each frame's header first (with tungstenite's own parser), holds what the frame's bytes
//! will cost from the process's [`InputBudget`] (waiting, at most its deadline, while other
//! peers' messages hold it), and only then lets tungstenite read the payload. Ten peers each
//! sending a 10 MB frame are so read in turn, and the socket of one that waits is not read at
//! all (TCP holds the rest at the sender). Small frames (an audio chunk) pass without a hold:
//! see [`super::FREE_COST`].
//!
//! The HTTP upgrade before the first frame passes untouched, up to the blank line that ends
//! it, which is also where tungstenite stops reading it; nothing past a frame is handed on
//! before the frame's hold is decided, so the two never disagree about where a frame starts.
//! Bytes that are no frame tungstenite can read (a bad header) pass untouched too, for
//! tungstenite to refuse.

use std::fmt;
use std::future::Future;
use std::io::{self, Cursor};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_tungstenite::tungstenite::protocol::frame::FrameHeader;
use tokio_tungstenite::tungstenite::protocol::frame::coding::OpCode;

use super::{BYTE_COST, FREE_COST, Held, InputBudget, Refused, Shape};

/// The longest frame header (RFC 6455 §5.2: 2 bytes, 8 of length, 4 of mask).
const HEADER_MAX: usize = 14;

/// What a [`Gated`] socket held for the frames of the message read last, until its reader
/// takes it (right after tungstenite hands the message over, before asking for the next).
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Mutex<Option<Held>>>);

impl Gate {
    /// Takes what was held for the message read last (`None`: nothing was, its frames were
    /// small). Dropping it gives it back.
    pub fn take(&self) -> Option<Held> {
        self.0.lock().ok()?.take()
    }

    fn held(&self) -> usize {
        self.0
            .lock()
            .ok()
            .and_then(|held| held.as_ref().map(Held::bytes))
            .unwrap_or(0)
    }

    fn add(&self, more: Held) {
        if let Ok(mut held) = self.0.lock() {
            match held.as_mut() {
                Some(held) => held.merge(more),
                None => *held = Some(more),
            }
        }
    }
}

/// Where a [`Gated`] socket is in the stream of bytes it passes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The HTTP upgrade, up to its blank line: `line` is how far the bytes passed last went
    /// into a line break (0: within a line; 1: after `\n`; 2: after `\n\r`).
    Upgrade { line: u8 },
    /// Before a frame's header: read whole, then held for.
    Header,
    /// Within a frame: this many bytes of its header and payload are still to pass.
    Frame { left: u64 },
    /// Past bytes that are no frame: everything passes, for tungstenite to refuse.
    Open,
}

/// A hold being waited for.
type Reserving = Pin<Box<dyn Future<Output = Result<Held, Refused>> + Send>>;

/// A socket read through the input budget; see the module's documentation. Made by
/// [`InputBudget::gate`]; writes pass straight through.
pub struct Gated<S> {
    inner: S,
    budget: InputBudget,
    max_frame: u64,
    wait: Duration,
    /// Bytes read from the socket and not passed on yet: a frame header being read, or what
    /// the upgrade's last read brought past its end. `start` is where they begin.
    pending: Vec<u8>,
    start: usize,
    mode: Mode,
    reserving: Option<Reserving>,
    gate: Gate,
}

impl<S> fmt::Debug for Gated<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gated")
            .field("mode", &self.mode)
            .field("held", &self.gate.held())
            .finish_non_exhaustive()
    }
}

impl<S> Gated<S> {
    pub(super) fn new(
        inner: S,
        budget: InputBudget,
        max_frame: usize,
        wait: Duration,
    ) -> (Gated<S>, Gate) {
        let gate = Gate::default();
        let gated = Gated {
            inner,
            budget,
            max_frame: max_frame as u64,
            wait,
            pending: Vec::new(),
            start: 0,
            mode: Mode::Upgrade { line: 0 },
            reserving: None,
            gate: gate.clone(),
        };
        (gated, gate)
    }

    /// The socket underneath.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    fn pending(&self) -> &[u8] {
        &self.pending[self.start..]
    }

    /// Passes on up to `most` pending bytes; returns how many.
    fn pass_pending(&mut self, out: &mut ReadBuf<'_>, most: u64) -> usize {
        let n = self
            .pending()
            .len()
            .min(out.remaining())
            .min(usize::try_from(most).unwrap_or(usize::MAX));
        out.put_slice(&self.pending[self.start..self.start + n]);
        self.start += n;
        if self.start == self.pending.len() {
            self.pending.clear();
            self.start = 0;
        }
        n
    }

    /// Holds what the frame whose header is `header` (of `length` payload bytes) costs:
    /// nothing for a control frame, a small frame or one tungstenite refuses from its header;
    /// otherwise its bytes' cost, less what the message's earlier frames hold, up to the
    /// whole budget (a larger message is refused once it is counted).
    fn poll_hold(
        &mut self,
        cx: &mut Context<'_>,
        header: &FrameHeader,
        length: u64,
    ) -> Poll<Result<(), Refused>> {
        if self.reserving.is_none() {
            let cost = length.saturating_mul(BYTE_COST as u64);
            let data = matches!(header.opcode, OpCode::Data(_));
            if !data || cost <= FREE_COST as u64 || length > self.max_frame {
                return Poll::Ready(Ok(()));
            }
            let room = self.budget.bytes().saturating_sub(self.gate.held());
            let bytes = usize::try_from(cost).unwrap_or(usize::MAX).min(room);
            if bytes == 0 {
                return Poll::Ready(Ok(()));
            }
            let shape = Shape {
                bytes: usize::try_from(length).unwrap_or(usize::MAX),
                values: 0,
                depth: 0,
            };
            let budget = self.budget.clone();
            let wait = self.wait;
            self.reserving = Some(Box::pin(
                async move { budget.acquire(bytes, shape, wait).await },
            ));
        }
        let Some(reserving) = self.reserving.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let held = ready!(reserving.as_mut().poll(cx));
        self.reserving = None;
        Poll::Ready(held.map(|held| self.gate.add(held)))
    }
}

/// Where the blank line that ends an HTTP head ends in `bytes`, `line` carrying how far the
/// bytes before went into a line break (httparse takes `\n` as well as `\r\n`).
fn upgrade_end(line: &mut u8, bytes: &[u8]) -> Option<usize> {
    for (i, &byte) in bytes.iter().enumerate() {
        *line = match (byte, *line) {
            (b'\n', 1 | 2) => return Some(i + 1),
            (b'\n', _) => 1,
            (b'\r', 1) => 2,
            _ => 0,
        };
    }
    None
}

impl<S: AsyncRead + Unpin> AsyncRead for Gated<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.mode {
                Mode::Open => {
                    if !this.pending().is_empty() {
                        this.pass_pending(out, u64::MAX);
                        return Poll::Ready(Ok(()));
                    }
                    return Pin::new(&mut this.inner).poll_read(cx, out);
                }
                // Nothing is pending before the upgrade's end: bytes are held back only from
                // there on.
                Mode::Upgrade { mut line } => {
                    let before = out.filled().len();
                    ready!(Pin::new(&mut this.inner).poll_read(cx, out))?;
                    let read = &out.filled()[before..];
                    match upgrade_end(&mut line, read) {
                        Some(end) => {
                            // What came after the upgrade is the first frame: held back.
                            this.pending.extend_from_slice(&read[end..]);
                            out.set_filled(before + end);
                            this.mode = Mode::Header;
                        }
                        None => this.mode = Mode::Upgrade { line },
                    }
                    return Poll::Ready(Ok(()));
                }
                Mode::Header => {
                    let mut cursor = Cursor::new(this.pending());
                    match FrameHeader::parse(&mut cursor) {
                        Err(_) => this.mode = Mode::Open,
                        Ok(Some((header, length))) => {
                            let header_bytes = cursor.position();
                            if let Err(refused) = ready!(this.poll_hold(cx, &header, length)) {
                                this.mode = Mode::Open;
                                return Poll::Ready(Err(io::Error::other(refused)));
                            }
                            this.mode = Mode::Frame {
                                left: header_bytes.saturating_add(length),
                            };
                        }
                        Ok(None) => {
                            // Read no further than a whole header could reach.
                            let have = this.pending().len();
                            this.pending.drain(..this.start);
                            this.start = 0;
                            let mut chunk = [0u8; HEADER_MAX];
                            let mut buf = ReadBuf::new(&mut chunk[..HEADER_MAX - have]);
                            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut buf))?;
                            if buf.filled().is_empty() {
                                // The peer is gone mid-header: tungstenite says so.
                                this.mode = Mode::Open;
                            }
                            this.pending.extend_from_slice(buf.filled());
                        }
                    }
                }
                Mode::Frame { left: 0 } => this.mode = Mode::Header,
                Mode::Frame { left } => {
                    if out.remaining() == 0 {
                        return Poll::Ready(Ok(()));
                    }
                    let passed = if this.pending().is_empty() {
                        let most = usize::try_from(left)
                            .unwrap_or(usize::MAX)
                            .min(out.remaining());
                        let read = {
                            let mut within = ReadBuf::new(out.initialize_unfilled_to(most));
                            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut within))?;
                            within.filled().len()
                        };
                        out.advance(read);
                        read
                    } else {
                        this.pass_pending(out, left)
                    };
                    this.mode = Mode::Frame {
                        left: left - passed as u64,
                    };
                    return Poll::Ready(Ok(()));
                }
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Gated<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::INPUT_WAIT;
    use futures_util::{SinkExt, StreamExt};
    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream, duplex};
    use tokio_tungstenite::WebSocketStream;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    use tokio_tungstenite::tungstenite::protocol::frame::Frame;
    use tokio_tungstenite::tungstenite::protocol::frame::coding::Data;

    /// A client and a server over an in-memory socket, the server's side gated by `budget`.
    async fn pair(
        budget: &InputBudget,
        wait: Duration,
    ) -> (
        WebSocketStream<DuplexStream>,
        WebSocketStream<Gated<DuplexStream>>,
        Gate,
    ) {
        let (client, server) = duplex(64 << 10);
        let (server, gate) = Gated::new(server, budget.clone(), 16 << 20, wait);
        let accept = tokio::spawn(tokio_tungstenite::accept_async(server));
        let (client, _) = tokio_tungstenite::client_async("ws://localhost/", client)
            .await
            .unwrap();
        (client, accept.await.unwrap().unwrap(), gate)
    }

    #[tokio::test]
    async fn messages_pass_whole_and_large_ones_are_held_for_until_taken() {
        let budget = InputBudget::new(4 << 20);
        let (mut client, mut server, gate) = pair(&budget, INPUT_WAIT).await;
        let large = "L".repeat(200 << 10);
        let sent = [
            Message::text("small"),
            Message::text(large.clone()),
            Message::binary(vec![7u8; 300]),
        ];
        // A message in three frames, a ping between them.
        let part = |text: &str, opcode, last| {
            Message::Frame(Frame::message(text.to_owned(), opcode, last))
        };
        let mut frames = sent.to_vec();
        frames.extend([
            part(&large, OpCode::Data(Data::Text), false),
            Message::Ping("p".into()),
            part(&large, OpCode::Data(Data::Continue), false),
            part("end", OpCode::Data(Data::Continue), true),
        ]);
        // Sent beside the reads: the socket holds 64 KiB.
        let sending = tokio::spawn(async move {
            for frame in frames {
                client.send(frame).await.unwrap();
            }
            client
        });

        for message in sent {
            let read = server.next().await.unwrap().unwrap();
            let held = gate.take();
            assert!(read == message, "{} bytes read", read.len());
            // The large one's bytes were held for while it was read (three times its size),
            // the small ones' not at all.
            let expected = if read.len() > 100_000 {
                read.len() * 3
            } else {
                0
            };
            assert_eq!(held.as_ref().map_or(0, Held::bytes), expected);
            drop(held);
            assert_eq!(budget.available(), budget.bytes());
        }
        // The ping is passed on as it comes; what the message's first frame holds stays
        // held (a reader takes the hold with a message, not with a ping).
        let ping = server.next().await.unwrap().unwrap();
        assert_eq!(
            (ping, gate.held()),
            (Message::Ping("p".into()), large.len() * 3)
        );
        let read = server.next().await.unwrap().unwrap();
        assert!(
            read == Message::text(format!("{large}{large}end")),
            "{} bytes read",
            read.len()
        );
        assert_eq!(gate.take().map(|held| held.bytes()), Some(large.len() * 6));
        drop(sending.await.unwrap());
    }

    /// `bytes` of `budget` held by other peers' messages.
    async fn others_hold(budget: &InputBudget, bytes: usize) -> Held {
        budget
            .acquire(bytes, Shape::default(), INPUT_WAIT)
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_frame_waits_for_the_budget_unread_and_gives_up_in_words() {
        let budget = InputBudget::new(1 << 20);
        let (mut client, mut server, gate) = pair(&budget, Duration::from_millis(200)).await;
        let others = others_hold(&budget, 900 << 10).await;
        // 600 KiB of bytes held for: more than the budget has left. It is not read: the
        // sender is held up by the socket.
        let message = Message::text("x".repeat(200 << 10));
        let sending = tokio::spawn(async move { client.send(message).await });
        let read = server.next().await.unwrap().unwrap_err();
        let tokio_tungstenite::tungstenite::Error::Io(error) = read else {
            panic!("{read:?}")
        };
        let refused = Refused::of_read_error(&error).expect("the budget's refusal");
        assert!(
            refused
                .to_string()
                .starts_with("a message of 200.0 KiB waited 0 s for the 1.0 MiB"),
            "{refused}"
        );
        assert!(gate.take().is_none());
        assert!(!sending.is_finished(), "the frame was read");
        sending.abort();
        drop(others);
        assert_eq!(budget.available(), budget.bytes());
    }

    #[tokio::test]
    async fn a_waiting_frame_is_read_once_the_budget_frees() {
        let budget = InputBudget::new(1 << 20);
        let (mut client, mut server, gate) = pair(&budget, INPUT_WAIT).await;
        let others = others_hold(&budget, 900 << 10).await;
        let message = Message::text("x".repeat(200 << 10));
        let sent = message.clone();
        let _sending = tokio::spawn(async move { client.send(sent).await });
        let reading = tokio::spawn(async move {
            let read = server.next().await.unwrap().unwrap();
            (read, gate.take().map(|held| held.bytes()))
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reading.is_finished(), "read while the budget was held");
        drop(others);
        let (read, held) = reading.await.unwrap();
        assert!(read == message, "{} bytes read", read.len());
        assert_eq!(held, Some(600 << 10));
    }

    /// A server that sends its first frame in the same write as the end of its upgrade answer
    /// (and a bare `\n\n` ending it): the gate passes the answer and holds the frame back,
    /// so both agree where it starts.
    #[tokio::test]
    async fn a_frame_in_the_upgrades_last_read_is_read_as_a_frame() {
        let budget = InputBudget::new(1 << 20);
        for end in ["\r\n\r\n", "\n\n"] {
            // Room for the whole answer: the far end writes it at once.
            let (client, mut server) = duplex(1 << 20);
            let (client, gate) = Gated::new(client, budget.clone(), 16 << 20, INPUT_WAIT);
            let far_end = tokio::spawn(async move {
                let mut request = Vec::new();
                while !request.ends_with(b"\r\n\r\n") {
                    let mut byte = [0u8];
                    server.read_exact(&mut byte).await.unwrap();
                    request.push(byte[0]);
                }
                let request = String::from_utf8(request).unwrap();
                let key = request
                    .lines()
                    .find_map(|line| line.strip_prefix("Sec-WebSocket-Key: "))
                    .unwrap();
                let mut answer = format!(
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {}{end}",
                    derive_accept_key(key.as_bytes())
                )
                .into_bytes();
                Frame::message("x".repeat(70_000), OpCode::Data(Data::Text), true)
                    .format(&mut answer)
                    .unwrap();
                Frame::message("after", OpCode::Data(Data::Text), true)
                    .format(&mut answer)
                    .unwrap();
                server.write_all(&answer).await.unwrap();
                server
            });
            let (mut client, _) = tokio_tungstenite::client_async("ws://localhost/", client)
                .await
                .unwrap();
            let _far_end = far_end.await.unwrap();
            let first = client.next().await.unwrap().unwrap();
            assert_eq!(first.len(), 70_000, "{end:?}");
            assert_eq!(gate.take().map(|held| held.bytes()), Some(210_000));
            let second = client.next().await.unwrap().unwrap();
            assert_eq!(second, Message::text("after"));
            assert!(gate.take().is_none());
        }
    }
}

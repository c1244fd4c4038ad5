//! One accepted TCP connection's byte stream, guarded: a peer that sends nothing or stops reading is cut off after a bound, and a close with unread input lingers so the peer still gets the answer.
//!
//! hyper bounds neither how long a connection may sit before its first byte (its HTTP/1
//! header timeout starts only once it knows the protocol) nor how long a write may wait for a
//! peer that never reads. Without these bounds a client that connects and stays silent, or a
//! watcher that stops reading, holds a task, its buffers and a socket until the process ends.
//!
//! The lingering close is what Go's server does for kube-apiserver (`closeWriteAndWait`):
//! when a request is refused before its body was read (413 for an oversized body), closing
//! the socket with unread input makes the kernel send a reset, and a reset can destroy the
//! answer on its way to the peer. So the write side is shut first and the remaining input is
//! discarded for a short, bounded while.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

/// How long a closing connection keeps discarding unread input at most.
const LINGER_TIME: Duration = Duration::from_secs(1);
/// How much unread input a closing connection discards at most.
const LINGER_BYTES: usize = 4 << 20;

/// The bounds a guarded connection enforces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// The peer must send its first byte within this long of the accept.
    pub first_byte_timeout: Duration,
    /// A write that cannot progress for this long (the peer does not read) fails the
    /// connection.
    pub write_stall_timeout: Duration,
}

/// A TCP stream with the bounds of [`ConnectionLimits`] and a lingering close.
pub struct GuardedStream {
    /// Always `Some` until dropped.
    inner: Option<TcpStream>,
    limits: ConnectionLimits,
    /// Running until the first byte arrives; `None` afterwards.
    first_byte: Option<Pin<Box<Sleep>>>,
    /// Running while writes are blocked; reset by every write that progresses.
    write_stall: Option<Pin<Box<Sleep>>>,
}

impl GuardedStream {
    /// Guards `stream`; the first-byte clock starts now.
    pub fn new(stream: TcpStream, limits: ConnectionLimits) -> Self {
        Self {
            inner: Some(stream),
            limits,
            first_byte: Some(Box::pin(tokio::time::sleep(limits.first_byte_timeout))),
            write_stall: None,
        }
    }

    fn stream(&mut self) -> io::Result<&mut TcpStream> {
        self.inner
            .as_mut()
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))
    }

    /// Polls the write-stall clock after a write returned `Pending`: `Pending` while within
    /// the bound (the clock's waker makes the writer poll again at the deadline), an error
    /// once past it.
    fn poll_stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limits.write_stall_timeout;
        let clock = self
            .write_stall
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match clock.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the peer has not read for {limit:?}"),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn wrote<T>(
        &mut self,
        result: Poll<io::Result<T>>,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<T>> {
        match result {
            Poll::Ready(r) => {
                self.write_stall = None;
                Poll::Ready(r)
            }
            Poll::Pending => self.poll_stall(cx),
        }
    }
}

impl AsyncRead for GuardedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let result = Pin::new(this.stream()?).poll_read(cx, buf);
        match result {
            Poll::Ready(Ok(())) if buf.filled().len() > before => {
                this.first_byte = None;
                Poll::Ready(Ok(()))
            }
            Poll::Pending => match this.first_byte.as_mut().map(|t| t.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the peer sent nothing after connecting",
                ))),
                _ => Poll::Pending,
            },
            other => other,
        }
    }
}

impl AsyncWrite for GuardedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(this.stream()?).poll_write(cx, buf);
        this.wrote(result, cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(this.stream()?).poll_write_vectored(cx, bufs);
        this.wrote(result, cx)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.as_ref().is_some_and(|s| s.is_write_vectored())
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(this.stream()?).poll_flush(cx);
        this.wrote(result, cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(this.stream()?).poll_shutdown(cx);
        this.wrote(result, cx)
    }
}

impl Drop for GuardedStream {
    fn drop(&mut self) {
        let Some(stream) = self.inner.take() else {
            return;
        };
        // Only a peer that sent input nobody read needs the lingering close; probing takes
        // one byte, which is discarded with the rest.
        let mut probe = [0u8; 1];
        if !matches!(stream.try_read(&mut probe), Ok(n) if n > 0) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(linger(stream));
        }
    }
}

/// Shuts the write side (the answer is already written), then discards input for a bounded
/// time and amount before the socket closes.
async fn linger(mut stream: TcpStream) {
    let _ = stream.shutdown().await;
    let mut scratch = vec![0u8; 64 * 1024];
    let mut discarded = 0usize;
    let _ = tokio::time::timeout(LINGER_TIME, async {
        while discarded < LINGER_BYTES {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(n) => discarded += n,
            }
        }
    })
    .await;
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;

    async fn pair(limits: ConnectionLimits) -> (GuardedStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = TcpStream::connect(addr).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        (GuardedStream::new(server, limits), client)
    }

    const LIMITS: ConnectionLimits = ConnectionLimits {
        first_byte_timeout: Duration::from_millis(200),
        write_stall_timeout: Duration::from_millis(200),
    };

    #[tokio::test]
    async fn a_silent_peer_is_cut_off_and_a_talking_one_is_not() {
        let (mut server, _client) = pair(LIMITS).await;
        let mut buf = [0u8; 8];
        let err = tokio::time::timeout(Duration::from_secs(10), server.read(&mut buf))
            .await
            .expect("bounded")
            .expect_err("silent peer");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);

        let (mut server, mut client) = pair(LIMITS).await;
        client.write_all(b"GET").await.expect("write");
        assert_eq!(server.read(&mut buf).await.expect("read"), 3);
        // After the first byte, silence is the protocol's business (keep-alive).
        let idle = tokio::time::timeout(Duration::from_millis(500), server.read(&mut buf)).await;
        assert!(idle.is_err(), "still waiting: {idle:?}");
    }

    #[tokio::test]
    async fn a_peer_that_never_reads_fails_the_writer() {
        let (mut server, _client) = pair(LIMITS).await;
        let chunk = vec![b'x'; 64 * 1024];
        let outcome: io::Result<()> = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                server.write_all(&chunk).await?;
            }
        })
        .await
        .expect("bounded");
        let err = outcome.expect_err("stalled");
        assert_eq!(err.kind(), io::ErrorKind::TimedOut);
    }

    #[tokio::test]
    async fn unread_input_is_drained_after_the_answer() {
        let (mut server, mut client) = pair(LIMITS).await;
        client
            .write_all(&vec![b'b'; 256 * 1024])
            .await
            .expect("send");
        server.write_all(b"413").await.expect("answer");
        drop(server);
        // The peer reads the whole answer and then a clean end, never a reset.
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("no reset");
        assert_eq!(answer, b"413");
    }
}

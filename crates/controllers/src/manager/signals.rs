//! Shutdown signals: the first SIGINT/SIGTERM cancels gracefully, a second exits at once.

use futures::{Stream, StreamExt};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The exit code on a second signal, as sample-controller's `SetupSignalHandler`.
pub const SECOND_SIGNAL_EXIT_CODE: i32 = 1;

/// Cancels `cancel` on the first item of `signals`, then calls `on_second` on the next one
/// (client-go's `SetupSignalHandler`: graceful first, forced second).
pub async fn handle_shutdown_signals<S, F>(signals: S, cancel: CancellationToken, on_second: F)
where
    S: Stream<Item = &'static str> + Send,
    F: FnOnce(),
{
    let mut signals = std::pin::pin!(signals);
    let Some(first) = signals.next().await else {
        return;
    };
    tracing::info!(
        signal = first,
        "Received shutdown signal, shutting down gracefully; send it again to exit immediately"
    );
    cancel.cancel();
    if let Some(second) = signals.next().await {
        tracing::warn!(
            signal = second,
            "Received second shutdown signal, exiting immediately"
        );
        on_second();
    }
}

/// SIGINT and SIGTERM as a stream of their names.
#[cfg(unix)]
pub fn shutdown_signals() -> std::io::Result<impl Stream<Item = &'static str> + Send> {
    use tokio::signal::unix::{SignalKind, signal};
    let interrupt = signal(SignalKind::interrupt())?;
    let terminate = signal(SignalKind::terminate())?;
    Ok(futures::stream::unfold(
        (interrupt, terminate),
        |(mut interrupt, mut terminate)| async move {
            let name = tokio::select! {
                received = interrupt.recv() => received.map(|()| "SIGINT"),
                received = terminate.recv() => received.map(|()| "SIGTERM"),
            }?;
            Some((name, (interrupt, terminate)))
        },
    ))
}

/// Installs the process's handler: the first SIGINT/SIGTERM cancels `cancel`, the second
/// exits the process with status 1.
#[cfg(unix)]
pub fn install_signal_handler(cancel: CancellationToken) -> std::io::Result<JoinHandle<()>> {
    let signals = shutdown_signals()?;
    Ok(tokio::spawn(handle_shutdown_signals(
        signals,
        cancel,
        || std::process::exit(SECOND_SIGNAL_EXIT_CODE),
    )))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use tokio::sync::mpsc;
    use tokio_stream::wrappers::UnboundedReceiverStream;

    use super::*;

    #[tokio::test]
    async fn first_signal_cancels_second_forces() {
        let (tx, rx) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let forced = Arc::new(AtomicBool::new(false));
        let handler = tokio::spawn(handle_shutdown_signals(
            UnboundedReceiverStream::new(rx),
            cancel.clone(),
            {
                let forced = Arc::clone(&forced);
                move || forced.store(true, Ordering::SeqCst)
            },
        ));
        tx.send("SIGTERM").expect("send");
        cancel.cancelled().await;
        assert!(!forced.load(Ordering::SeqCst), "one signal only cancels");
        tx.send("SIGINT").expect("send");
        handler.await.expect("handler");
        assert!(
            forced.load(Ordering::SeqCst),
            "the second signal forces the exit"
        );
    }

    #[tokio::test]
    async fn no_signal_no_action() {
        let (tx, rx) = mpsc::unbounded_channel::<&'static str>();
        let cancel = CancellationToken::new();
        drop(tx);
        handle_shutdown_signals(UnboundedReceiverStream::new(rx), cancel.clone(), || {
            panic!("must not force")
        })
        .await;
        assert!(!cancel.is_cancelled());
    }
}

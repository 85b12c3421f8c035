//! A shutdown signal: one trigger, any number of cheap receivers.

use tokio::sync::watch;

/// Fires the [`Shutdown`] signal. Dropping it fires the signal too.
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

/// Resolves once shutdown is requested. Clone freely.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// A new trigger and its signal.
pub fn shutdown_channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger(tx), Shutdown(rx))
}

impl ShutdownTrigger {
    /// Requests shutdown.
    pub fn trigger(&self) {
        self.0.send_replace(true);
    }

    /// A new receiver of this trigger's signal.
    pub fn signal(&self) -> Shutdown {
        Shutdown(self.0.subscribe())
    }
}

impl Shutdown {
    /// Waits until shutdown is requested (or the trigger is dropped).
    pub async fn wait(&self) {
        let mut rx = self.0.clone();
        let _ = rx.wait_for(|requested| *requested).await;
    }

    /// Whether shutdown has been requested.
    pub(crate) fn is_triggered(&self) -> bool {
        *self.0.borrow() || self.0.has_changed().is_err()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::shutdown_channel;

    #[tokio::test]
    async fn trigger_wakes_every_receiver() {
        let (trigger, signal) = shutdown_channel();
        let other = signal.clone();
        assert!(!signal.is_triggered());
        let waiter = tokio::spawn(async move { other.wait().await });
        trigger.trigger();
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(signal.is_triggered());
        assert!(trigger.signal().is_triggered());
    }

    #[tokio::test]
    async fn dropping_the_trigger_fires() {
        let (trigger, signal) = shutdown_channel();
        drop(trigger);
        tokio::time::timeout(Duration::from_secs(5), signal.wait())
            .await
            .unwrap();
        assert!(signal.is_triggered());
    }
}

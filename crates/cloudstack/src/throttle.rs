//! The account's API limit, shared by every call of a client.
//!
//! CloudStack counts calls per account in fixed windows and answers 429 ("retry after
//! N ms") once the window's quota is used. When one call hears that, every other call of
//! the client would hear it too: [`ThrottleGate`] holds them all until the window the
//! server named has passed, instead of letting each find out (and back off on its own,
//! which leaves the quota of the next window unused).

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Closed until a moment the server named; open otherwise.
#[derive(Debug, Default)]
pub(crate) struct ThrottleGate {
    closed_until: Mutex<Option<Instant>>,
}

impl ThrottleGate {
    /// Waits while the gate is closed.
    pub(crate) async fn pass(&self) {
        loop {
            let until = *self.closed_until.lock().unwrap_or_else(|e| e.into_inner());
            match until {
                Some(until) if until > Instant::now() => tokio::time::sleep_until(until).await,
                _ => return,
            }
        }
    }

    /// Closes the gate for `delay` from now (never shortening an earlier closing).
    pub(crate) fn close_for(&self, delay: Duration) {
        let until = Instant::now() + delay;
        let mut closed = self.closed_until.lock().unwrap_or_else(|e| e.into_inner());
        if closed.is_none_or(|current| current < until) {
            *closed = Some(until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;

    #[tokio::test]
    async fn an_open_gate_lets_calls_through_and_a_closed_one_holds_them() {
        let gate = ThrottleGate::default();
        assert!(gate.pass().now_or_never().is_some(), "open");
        gate.close_for(Duration::from_millis(50));
        gate.close_for(Duration::from_millis(1));
        let started = std::time::Instant::now();
        assert!(gate.pass().now_or_never().is_none(), "closed");
        gate.pass().await;
        assert!(
            started.elapsed() >= Duration::from_millis(45),
            "a shorter closing does not cut an earlier one short"
        );
    }
}

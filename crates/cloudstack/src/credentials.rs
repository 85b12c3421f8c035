//! The keys a client signs with and the HTTP connections it sends on, both replaceable
//! while calls run ([`Live`]), and the pacing of calls while CloudStack refuses the keys
//! ([`RefusalGate`]).
//!
//! CloudStack answers every request whose keys or signature it cannot verify with 401
//! "unable to verify user credentials and/or request signature" (`ApiServer.verifyRequest`).
//! Once it has said so, sending more requests with the same keys only adds refusals (and
//! log lines on the management server): the gate holds every call of the client (they fail
//! at once with [`crate::Error::CredentialsRefused`]) and, when a call arrives after the
//! probe interval, sends one probe (`listCapabilities`, or one VM where the role refuses it:
//! [`crate::access::probe_request`]; on a task of its own so no caller
//! can cancel it) for the whole client. A probe answered by anything but a 401 (or a 432,
//! which the access checks give before the signature is looked at) opens the
//! gate (and the waiting call goes on); so do new keys
//! ([`crate::Client::adopt_credentials`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::envelope::decode_reply;
use crate::requests::{ListAccounts, Request as _};
use crate::{Client, CredentialsChange, Error, Secret};

/// Numbers every set of keys any client ever held, so a reply to a request signed with
/// replaced keys is told apart from one signed with the keys in use.
static GENERATIONS: AtomicU64 = AtomicU64::new(1);

/// The keys and connections one request is signed and sent with.
pub(crate) struct Live {
    /// The user's API key.
    pub(crate) api_key: Secret,
    /// The user's secret key.
    pub(crate) secret_key: Secret,
    /// The connection pool (TLS settings included).
    pub(crate) http: reqwest::Client,
    /// Which set of keys this is.
    pub(crate) generation: u64,
    /// The account these keys belong to, once learnt (named in refusal reports).
    pub(crate) account: Mutex<Option<String>>,
    /// That account's id, once learnt (the owner `listSslCerts` names).
    pub(crate) account_id: Mutex<Option<String>>,
    /// What these keys' role is known to allow and refuse.
    pub(crate) access: crate::access::KeyAccess,
}

impl Live {
    /// A new set of keys with its connection pool.
    pub(crate) fn new(api_key: Secret, secret_key: Secret, http: reqwest::Client) -> Arc<Live> {
        Arc::new(Live {
            api_key,
            secret_key,
            http,
            generation: GENERATIONS.fetch_add(1, Ordering::Relaxed),
            account: Mutex::new(None),
            account_id: Mutex::new(None),
            access: crate::access::KeyAccess::new(),
        })
    }

    /// The account these keys belong to, if learnt.
    pub(crate) fn account(&self) -> Option<String> {
        self.account
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Whether a call may be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The keys are not known to be refused: send.
    Send,
    /// The keys are refused and a probe is due: send this one as the probe.
    Probe,
    /// The keys are refused: do not send.
    Hold,
}

/// What a reply said about the keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// CloudStack refused the keys (401, credentials).
    Refused,
    /// CloudStack verified the keys (any other reply from the server).
    Accepted,
    /// No reply from the server: nothing learnt.
    Unknown,
}

/// A change of the gate, reported once per change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// The keys in use were just refused.
    Refused,
    /// The keys in use are accepted again (a probe passed, or new keys were adopted).
    Accepted,
}

/// Closed while CloudStack refuses the keys in use; one probe per interval.
#[derive(Debug)]
pub(crate) struct RefusalGate {
    probe_interval: Duration,
    state: Mutex<GateState>,
}

#[derive(Debug, Default)]
struct GateState {
    /// The generation of keys found refused, while they are in use.
    refused: Option<u64>,
    /// When the next probe may go.
    next_probe: Option<Instant>,
    /// Whether a probe is out.
    probing: bool,
}

impl RefusalGate {
    /// An open gate that, once closed, lets a probe through every `probe_interval`.
    pub(crate) fn new(probe_interval: Duration) -> Self {
        Self {
            probe_interval,
            state: Mutex::default(),
        }
    }

    /// The probe interval.
    pub(crate) fn probe_interval(&self) -> Duration {
        self.probe_interval
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether keys of `generation` are known to be refused.
    pub(crate) fn is_refused(&self, generation: u64) -> bool {
        self.lock().refused == Some(generation)
    }

    /// Whether a call signed with keys of `generation` may go now.
    pub(crate) fn admit(&self, generation: u64) -> Admission {
        let mut state = self.lock();
        if state.refused != Some(generation) {
            return Admission::Send;
        }
        let now = Instant::now();
        let due = state.next_probe.is_none_or(|at| at <= now);
        if due && !state.probing {
            state.probing = true;
            state.next_probe = Some(now + self.probe_interval);
            Admission::Probe
        } else {
            Admission::Hold
        }
    }

    /// Records the verdict of a reply to a call signed with keys of `generation` (the keys
    /// in use: replies to replaced keys are not recorded) and admitted as `admission`.
    pub(crate) fn record(
        &self,
        generation: u64,
        admission: Admission,
        verdict: Verdict,
    ) -> Option<Transition> {
        let mut state = self.lock();
        if admission == Admission::Probe {
            state.probing = false;
        }
        let refused = state.refused == Some(generation);
        match verdict {
            Verdict::Refused if !refused => {
                state.refused = Some(generation);
                state.probing = false;
                state.next_probe = Some(Instant::now() + self.probe_interval);
                Some(Transition::Refused)
            }
            Verdict::Accepted if refused => {
                *state = GateState::default();
                Some(Transition::Accepted)
            }
            _ => None,
        }
    }

    /// New keys are in use: the gate opens. `Accepted` when it was closed.
    pub(crate) fn reopen(&self) -> Option<Transition> {
        let mut state = self.lock();
        let was_refused = state.refused.is_some();
        *state = GateState::default();
        was_refused.then_some(Transition::Accepted)
    }
}

/// The keys of a [`Client`]: replacing them, learning their account, probing and judging
/// what CloudStack says about them.
impl Client {
    /// From now on, signs with the keys of `other` and connects with its TLS settings
    /// (typically a client built from a new configuration and checked with a call).
    /// Calls in flight finish as they were sent; jobs being waited for are polled with the
    /// new keys. Opens the gate if the keys in use were refused (reported to the observer
    /// as accepted).
    pub fn adopt_credentials(&self, other: &Client) {
        let adopted = other.live();
        *self.inner.live.write().unwrap_or_else(|e| e.into_inner()) = adopted;
        if let Some(Transition::Accepted) = self.inner.refusal.reopen() {
            self.report(&CredentialsChange::Accepted {
                account: self.account().as_deref(),
            });
        }
    }

    /// Whether CloudStack refuses the keys in use (calls are held, see [`Client`]).
    pub fn credentials_refused(&self) -> bool {
        self.inner.refusal.is_refused(self.live().generation)
    }

    /// The account the keys in use belong to, once [`Client::identify_account`] learnt it.
    pub fn account(&self) -> Option<String> {
        self.live().account()
    }

    /// The id of the account the keys in use belong to, once
    /// [`Client::identify_account`] learnt it.
    pub fn account_id(&self) -> Option<String> {
        self.live()
            .account_id
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Asks CloudStack which account the keys in use belong to (`listAccounts` without
    /// `listall`: every caller, root admins included, sees its own account only) and
    /// remembers its name (for refusal reports) and id. `None` when the answer names no
    /// single account.
    pub async fn identify_account(&self) -> Result<Option<String>, Error> {
        let live = self.live();
        // One account or more than one is all it needs to know: two items of one page.
        let (accounts, count): (Vec<serde_json::Value>, _) = self
            .list_one_page(
                ListAccounts::COMMAND,
                "account",
                ListAccounts {}.to_params(),
                1,
                2,
            )
            .await?;
        let text = |account: &serde_json::Value, field: &str| {
            account
                .get(field)
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned)
        };
        let (name, id) = match accounts.as_slice() {
            [only] if count.is_none_or(|count| count == 1) => {
                (text(only, "name"), text(only, "id"))
            }
            _ => (None, None),
        };
        if name.is_some() {
            *live.account.lock().unwrap_or_else(|e| e.into_inner()) = name.clone();
        }
        if id.is_some() {
            *live.account_id.lock().unwrap_or_else(|e| e.into_inner()) = id;
        }
        Ok(name)
    }

    /// Reports a change of the credentials' state to the observer.
    fn report(&self, change: &CredentialsChange<'_>) {
        if let Some(observer) = &self.inner.config.observer {
            observer.on_credentials(change);
        }
    }

    /// Sends one call signed with `live` as the probe of refused keys
    /// ([`crate::access::probe_request`]); whether CloudStack accepts them now.
    pub(crate) async fn probe(&self, live: &Arc<Live>) -> bool {
        let recheck = self.inner.config.refused_command_recheck;
        let (command, params) = crate::access::probe_request(&live.access, recheck);
        let decode = |status, body: &[u8]| decode_reply(command, status, body);
        let _ = self
            .send_observed(command, &params, &decode, live, Admission::Probe)
            .await;
        !self.inner.refusal.is_refused(live.generation)
    }

    /// Asks CloudStack, with one cheap read the keys' role allows ([`crate::access::probe_request`]),
    /// whether it accepts the keys in use: `Ok` when it verified them, the error
    /// otherwise ([`Error::CredentialsRefused`] when it refused them). A read the role
    /// refuses (432, answered before the signature is checked) proves nothing: the next
    /// candidate is asked.
    pub async fn verify_keys(&self) -> Result<(), Error> {
        let recheck = self.inner.config.refused_command_recheck;
        loop {
            let live = self.live();
            let (command, params) = crate::access::probe_request(&live.access, recheck);
            match self.call(command, params).await {
                Err(error)
                    if error.is_command_refused() && command != crate::access::LAST_PROBE =>
                {
                    continue;
                }
                other => return other.map(|_| ()),
            }
        }
    }

    /// Records what `result` (of a call signed with `live`, admitted as `admission`) says
    /// about the keys, reports a change, and turns a refusal into
    /// [`Error::CredentialsRefused`].
    pub(crate) fn judge_credentials<R>(
        &self,
        command: &str,
        live: &Live,
        admission: Admission,
        result: Result<R, Error>,
    ) -> Result<R, Error> {
        let verdict = match &result {
            Err(error) if error.is_refused_credentials() => Verdict::Refused,
            // The access checks answer before the signature is verified: a refused command
            // says nothing about the keys.
            Err(error) if error.is_command_refused() => Verdict::Unknown,
            Err(Error::Transport { .. } | Error::Certificate { .. }) => Verdict::Unknown,
            _ => Verdict::Accepted,
        };
        // A reply to replaced keys says nothing about the keys in use.
        if live.generation == self.live().generation {
            match self
                .inner
                .refusal
                .record(live.generation, admission, verdict)
            {
                Some(Transition::Refused) => {
                    let errortext = result.as_ref().err().and_then(Error::text).unwrap_or("");
                    self.report(&CredentialsChange::Refused {
                        command,
                        errortext,
                        account: live.account().as_deref(),
                        probe_interval: self.inner.refusal.probe_interval(),
                    });
                }
                Some(Transition::Accepted) => self.report(&CredentialsChange::Accepted {
                    account: live.account().as_deref(),
                }),
                None => {}
            }
        }
        match result {
            Err(error) if error.is_refused_credentials() => Err(Error::CredentialsRefused {
                command: command.to_owned(),
                reply: Some(Box::new(error)),
            }),
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_probe_per_interval_while_refused() {
        let gate = RefusalGate::new(Duration::from_secs(5));
        assert_eq!(gate.admit(7), Admission::Send);
        assert_eq!(
            gate.record(7, Admission::Send, Verdict::Refused),
            Some(Transition::Refused)
        );
        // Another call of the same keys refused at the same time: no second report.
        assert_eq!(gate.record(7, Admission::Send, Verdict::Refused), None);
        assert_eq!(gate.admit(7), Admission::Hold);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(gate.admit(7), Admission::Probe);
        assert_eq!(gate.admit(7), Admission::Hold, "one probe at a time");
        assert_eq!(gate.record(7, Admission::Probe, Verdict::Refused), None);
        assert_eq!(gate.admit(7), Admission::Hold, "the next probe waits");
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(gate.admit(7), Admission::Probe);
        assert_eq!(
            gate.record(7, Admission::Probe, Verdict::Unknown),
            None,
            "no reply: still refused"
        );
        assert_eq!(gate.admit(7), Admission::Hold);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(gate.admit(7), Admission::Probe);
        assert_eq!(
            gate.record(7, Admission::Probe, Verdict::Accepted),
            Some(Transition::Accepted)
        );
        assert_eq!(gate.admit(7), Admission::Send);
    }

    #[test]
    fn new_keys_open_the_gate() {
        let gate = RefusalGate::new(Duration::from_secs(5));
        gate.record(1, Admission::Send, Verdict::Refused);
        assert!(gate.is_refused(1));
        assert_eq!(gate.reopen(), Some(Transition::Accepted));
        assert_eq!(gate.reopen(), None, "reported once");
        assert_eq!(gate.admit(2), Admission::Send);
        assert!(!gate.is_refused(2));
    }
}

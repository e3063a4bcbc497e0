//! Calls in the order they arrived.
//!
//! Over Streamable HTTP each request is its own HTTP exchange, handled
//! concurrently: a large call that arrived first can reach the tool after a
//! small one that arrived later. The HTTP transport therefore gives every
//! POST of a session a [`Ticket`] the moment its request line arrives; a
//! `tools/call` waits for every earlier ticket of its session to be done
//! ([`Ticket::wait_turn`]) and holds its own until its work is done, even if
//! the client drops the request. Any other request gives its ticket back as
//! soon as its body is read, so only calls wait for calls. Over stdio the
//! transport reads lines in order and gives each `tools/call` its place by
//! request id ([`Arrivals`]), since rmcp may start a small call's handler
//! before a large one read just before it.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use cordis_sync::LockExt;

/// The tickets of one session.
#[derive(Debug, Default)]
pub struct CallOrder {
    state: Mutex<State>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct State {
    /// The next ticket to hand out.
    issued: u64,
    /// Every ticket below this one is done.
    floor: u64,
    /// Done tickets above the floor.
    done: BTreeSet<u64>,
}

impl CallOrder {
    /// The next ticket, in arrival order.
    pub fn ticket(self: &Arc<Self>) -> Ticket {
        let mut state = self.state.lock_or_recover();
        let seq = state.issued;
        state.issued += 1;
        Ticket { seq, order: self.clone() }
    }

    fn finish(&self, seq: u64) {
        let mut state = self.state.lock_or_recover();
        state.done.insert(seq);
        loop {
            let floor = state.floor;
            if !state.done.remove(&floor) {
                break;
            }
            state.floor += 1;
        }
        drop(state);
        self.changed.notify_waiters();
    }
}

/// A place in a session's arrival order; done when dropped.
#[derive(Debug)]
pub struct Ticket {
    seq: u64,
    order: Arc<CallOrder>,
}

impl Ticket {
    /// Waits until every ticket handed out before this one is done.
    pub async fn wait_turn(&self) {
        loop {
            let notified = self.order.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.order.state.lock_or_recover().floor >= self.seq {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.order.finish(self.seq);
    }
}

/// What the stdio transport knows of the calls it read: the place of each
/// `tools/call` by request id, until its handler takes it.
#[derive(Debug, Default)]
pub struct Arrivals {
    order: Arc<CallOrder>,
    places: Mutex<std::collections::HashMap<String, Place>>,
}

/// A call's place, or that the client cancelled it before it started.
#[derive(Debug)]
pub enum Place {
    /// Its ticket.
    Waiting(Ticket),
    /// Cancelled before its handler took its place: it must not run.
    Cancelled,
}

fn key(id: &serde_json::Value) -> String {
    id.to_string()
}

impl Arrivals {
    /// A `tools/call` with request id `id` was read.
    pub fn arrived(&self, id: &serde_json::Value) {
        let ticket = self.order.ticket();
        self.places.lock_or_recover().insert(key(id), Place::Waiting(ticket));
    }

    /// The client cancelled request `id`: if its handler has not taken its
    /// place yet, the place is given up and the call will not run.
    pub fn cancelled(&self, id: &serde_json::Value) {
        let mut places = self.places.lock_or_recover();
        if let Some(place) = places.get_mut(&key(id)) {
            *place = Place::Cancelled;
        }
    }

    /// Gives up the place of the call read first that no handler has
    /// taken (a line rmcp could not read answers without an id, so which
    /// call it was is not known): a call after it never waits for a
    /// handler that will not come.
    pub fn give_up_oldest(&self) {
        let mut places = self.places.lock_or_recover();
        let oldest = places.iter().filter_map(|(k, p)| if let Place::Waiting(t) = p { Some((t.seq, k.clone())) } else { None }).min();
        if let Some((_, key)) = oldest {
            places.remove(&key);
        }
    }

    /// The place of request `id` (serialized as JSON-RPC writes it), taken
    /// by its handler.
    pub fn take(&self, id: &serde_json::Value) -> Option<Place> {
        self.places.lock_or_recover().remove(&key(id))
    }
}

/// The ticket of one HTTP request, carried in its extensions to the
/// handler, which takes it.
#[derive(Debug, Clone)]
pub struct ArrivalTicket(pub Arc<Mutex<Option<Ticket>>>);

impl ArrivalTicket {
    /// Takes the ticket out (once).
    pub fn take(&self) -> Option<Ticket> {
        self.0.lock_or_recover().take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_ticket_waits_for_every_earlier_one() {
        let order = Arc::new(CallOrder::default());
        let (a, b, c) = (order.ticket(), order.ticket(), order.ticket());
        let waiting = tokio::spawn(async move {
            c.wait_turn().await;
        });
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(b);
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "a is not done yet");
        drop(a);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiting).await.unwrap().unwrap();
    }
}

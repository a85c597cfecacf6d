//! PostgreSQL's side of live changes ([`super::live`]): a listener on the two channels, and the
//! sequencer it drives. Each server runs both; passes of different servers wait for each other
//! on an advisory lock, so a change committed through any server is numbered once, and every
//! server hears of the numbers from the notification of the pass that gave them.

use super::live::{self, NUMBERED_CHANNEL, WRITTEN_CHANNEL};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// How often a pass runs and readers are woken without a notification: the net under a lost
/// notification (a reconnect, another program's write).
const TICK: Duration = Duration::from_secs(1);

/// What the listener heard.
enum Heard {
    /// Changes wait for a number.
    Written,
    /// A pass numbered changes.
    Numbered,
    /// The connection was lost and made again: notifications may have been missed.
    Reconnected,
}

/// Starts the listener and the sequencer, stopped by aborting the two tasks; `signal` is bumped
/// whenever new numbers may be readable.
pub(super) fn start(
    pool: PgPool,
    signal: Arc<watch::Sender<u64>>,
) -> [tokio::task::JoinHandle<()>; 2] {
    let (tx, rx) = mpsc::channel(64);
    [
        tokio::spawn(listen(pool.clone(), tx)),
        tokio::spawn(sequence(pool, signal, rx)),
    ]
}

async fn listen(pool: PgPool, tx: mpsc::Sender<Heard>) {
    while !(pool.is_closed() || tx.is_closed()) {
        let mut listener = match PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "live changes: cannot listen; trying again");
                tokio::time::sleep(TICK).await;
                continue;
            }
        };
        if let Err(e) = listener
            .listen_all([WRITTEN_CHANNEL, NUMBERED_CHANNEL])
            .await
        {
            tracing::warn!(error = %e, "live changes: LISTEN failed; trying again");
            tokio::time::sleep(TICK).await;
            continue;
        }
        let _ = tx.try_send(Heard::Reconnected);
        loop {
            let heard = match listener.try_recv().await {
                Ok(Some(n)) if n.channel() == WRITTEN_CHANNEL => Heard::Written,
                Ok(Some(_)) => Heard::Numbered,
                Ok(None) => Heard::Reconnected,
                Err(e) => {
                    tracing::warn!(error = %e, "live changes: the listener failed; listening again");
                    break;
                }
            };
            if tx.is_closed() {
                return;
            }
            // A full channel already holds a wake-up.
            let _ = tx.try_send(heard);
        }
    }
}

async fn sequence(pool: PgPool, signal: Arc<watch::Sender<u64>>, mut rx: mpsc::Receiver<Heard>) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let (mut pass, mut wake) = tokio::select! {
            h = rx.recv() => match h {
                Some(Heard::Written) => (true, false),
                Some(Heard::Numbered) => (false, true),
                Some(Heard::Reconnected) => (true, true),
                None => return,
            },
            _ = tick.tick() => (true, true),
        };
        // Everything already heard is served by this turn.
        while let Ok(h) = rx.try_recv() {
            pass |= matches!(h, Heard::Written | Heard::Reconnected);
            wake |= !matches!(h, Heard::Written);
        }
        if pool.is_closed() {
            return;
        }
        if pass && number_all(&pool).await {
            wake = true;
        }
        if wake {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// Runs sequencer passes until one leaves nothing behind; whether any numbered changes.
async fn number_all(pool: &PgPool) -> bool {
    let mut numbered = false;
    loop {
        match pass(pool).await {
            Ok(Some((_, full))) => {
                numbered = true;
                if !full {
                    return true;
                }
            }
            Ok(None) => return numbered,
            Err(e) => {
                tracing::warn!(error = %e, "live changes: a sequencer pass failed; it runs again");
                return numbered;
            }
        }
    }
}

async fn pass(pool: &PgPool) -> super::Result<Option<(i64, bool)>> {
    let tx = pool.begin().await.map_err(super::postgres::db)?;
    let mut tx = super::postgres::PgTx(tx);
    let numbered = live::number(&mut tx).await?;
    tx.0.commit().await.map_err(super::postgres::db)?;
    Ok(numbered)
}

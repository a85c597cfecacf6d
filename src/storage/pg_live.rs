//! PostgreSQL's side of live changes ([`super::live`]): the sequencer and a listener. Each
//! server runs both. The sequencer runs a pass after this server's own writes commit (the
//! storage wakes it; writers do not `NOTIFY`, which would make their commits wait for each
//! other) and every [`TICK`] for other writers; passes of different servers wait for each
//! other on an advisory lock, so a change committed through any server is numbered once. A
//! pass that numbered changes notifies [`NUMBERED_CHANNEL`], and every server's listener wakes
//! its readers.

use super::live::{self, NUMBERED_CHANNEL};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};

/// How often a pass runs and readers are woken without being told: for writes of other servers
/// whose own sequencer is gone, another program's writes, and a lost notification.
const TICK: Duration = Duration::from_millis(250);

/// What the sequencer heard.
enum Heard {
    /// This server wrote.
    Written,
    /// A pass numbered changes.
    Numbered,
    /// The connection was lost and made again: notifications may have been missed.
    Reconnected,
}

/// Starts the listener, the sequencer and the task that hands it `wake` (told after each write
/// of this server), stopped by aborting the three tasks; `signal` is bumped whenever new
/// numbers may be readable.
pub(super) fn start(
    pool: PgPool,
    signal: Arc<watch::Sender<u64>>,
    wake: Arc<Notify>,
) -> [tokio::task::JoinHandle<()>; 3] {
    let (tx, rx) = mpsc::channel(64);
    let written = tx.clone();
    [
        tokio::spawn(listen(pool.clone(), tx)),
        tokio::spawn(async move {
            loop {
                wake.notified().await;
                if written.send(Heard::Written).await.is_err() {
                    return;
                }
            }
        }),
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
        if let Err(e) = listener.listen(NUMBERED_CHANNEL).await {
            tracing::warn!(error = %e, "live changes: LISTEN failed; trying again");
            tokio::time::sleep(TICK).await;
            continue;
        }
        let _ = tx.try_send(Heard::Reconnected);
        loop {
            let heard = match listener.try_recv().await {
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
    let mut logged = false;
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
        // A new database gets the live log from the migrations, which run just after the
        // storage connects: a pass before them would fail, and say so.
        logged = logged || has_log(&pool).await;
        if pass && logged && number_all(&pool).await {
            wake = true;
        }
        if wake {
            signal.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

/// Whether the database has the live log yet.
async fn has_log(pool: &PgPool) -> bool {
    sqlx::query_scalar::<_, bool>("SELECT to_regclass('live_changes') IS NOT NULL")
        .fetch_one(pool)
        .await
        .unwrap_or(false)
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
    let tx = pool
        .begin_with(sqlx::AssertSqlSafe(live::PASS_BEGIN))
        .await
        .map_err(super::postgres::db)?;
    let mut tx = Box::new(super::postgres::PgTx::new(tx, None, None));
    let numbered = live::number(tx.as_mut()).await?;
    super::Tx::commit(tx).await?;
    Ok(numbered)
}

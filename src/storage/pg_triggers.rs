//! PostgreSQL: the statement triggers on every entity table, one per event, that see every
//! writer (this server, another one of the fleet, another program) inside its transaction and
//! its savepoints:
//!
//! - `entiserve_ins` records the inserted rows' count delta ([`super::counts`]) and logs the
//!   created ranges for live changes ([`super::live`]);
//! - `entiserve_upd` logs each updated object with its row before the update;
//! - `entiserve_del` logs each deleted object with its row before, and the count's delta.
//!
//! A trigger a statement fires costs the database about as much again as a single-row insert,
//! so each event has one trigger doing both jobs. The functions come with the fixed tables
//! (`migrations/postgres/0010_one_trigger.sql`); SQLite's writer counts and logs by itself.

use super::sql::Dialect;

/// The triggers of the table of entity `entity`, created when missing; nothing on SQLite. Run
/// in the transaction that creates or extends the table, before its row count is first taken.
pub fn track(d: Dialect, entity: &str) -> Vec<String> {
    if d != Dialect::Postgres {
        return Vec::new();
    }
    let table = d.quote(entity);
    [
        ("entiserve_ins", "INSERT", "NEW TABLE AS \"new_rows\""),
        ("entiserve_upd", "UPDATE", "OLD TABLE AS \"old_rows\""),
        ("entiserve_del", "DELETE", "OLD TABLE AS \"old_rows\""),
    ]
    .into_iter()
    .map(|(trigger, event, tables)| {
        format!(
            "DO $d$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_trigger \
             WHERE tgname = '{trigger}' AND tgrelid = '{table}'::regclass) THEN \
             CREATE TRIGGER \"{trigger}\" AFTER {event} ON {table} \
             REFERENCING {tables} FOR EACH STATEMENT \
             EXECUTE FUNCTION \"{trigger}\"(); END IF; END $d$"
        )
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_trigger_per_event_on_postgres_and_none_on_sqlite() {
        assert!(track(Dialect::Sqlite, "campaigns").is_empty());
        let stmts = track(Dialect::Postgres, "campaigns");
        assert_eq!(stmts.len(), 3);
        for (s, event) in stmts.iter().zip(["INSERT", "UPDATE", "DELETE"]) {
            assert!(
                s.contains(&format!("AFTER {event} ON \"campaigns\"")),
                "{s}"
            );
        }
    }
}

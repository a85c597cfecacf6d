//! What one read connection remembers of the rows it read by id on the snapshot it holds (see
//! [`super`]): emptied when the snapshot ends, and bounded.

use crate::storage::PointRow;
use std::collections::HashMap;
use std::sync::Arc;

/// Reads by id on one snapshot and what they found: per statement (the SQL text, and the
/// column types it decodes), the row of each id, or none. Bounded by [`MEMO_ENTRIES`] and
/// [`MEMO_BYTES`]; past either, reads are no longer remembered until the snapshot ends.
#[derive(Default)]
pub(super) struct Memo {
    statements: HashMap<Box<str>, Remembered, foldhash::fast::RandomState>,
    entries: usize,
    bytes: usize,
}

/// One statement's remembered reads.
struct Remembered {
    types: Box<[crate::schema::ColType]>,
    rows: HashMap<i64, Option<Arc<PointRow>>, foldhash::fast::RandomState>,
}

/// The most reads a connection remembers on one snapshot.
const MEMO_ENTRIES: usize = 4096;
/// The most bytes of rows a connection remembers on one snapshot (counted as twice their
/// texts' lengths, for the text and its JSON, and 32 bytes a value).
const MEMO_BYTES: usize = 4 << 20;

impl Memo {
    /// The rows remembered for `id` read by `sql`, decoded as `types`.
    pub(super) fn get(
        &self,
        sql: &str,
        types: &[crate::schema::ColType],
        id: i64,
    ) -> Option<Option<Arc<PointRow>>> {
        let s = self.statements.get(sql)?;
        if *s.types != *types {
            return None;
        }
        s.rows.get(&id).cloned()
    }

    /// Remembers what a read of `id` by `sql` found.
    pub(super) fn put(
        &mut self,
        sql: &str,
        types: &[crate::schema::ColType],
        id: i64,
        row: &Option<Arc<PointRow>>,
    ) {
        let bytes = row
            .as_ref()
            .map_or(0, |r| r.row.iter().map(value_bytes).sum::<usize>());
        if self.entries >= MEMO_ENTRIES || self.bytes + bytes > MEMO_BYTES {
            return;
        }
        let s = match self.statements.get_mut(sql) {
            Some(s) if *s.types == *types => s,
            Some(_) => return,
            None => self
                .statements
                .entry(sql.into())
                .or_insert_with(|| Remembered {
                    types: types.into(),
                    rows: HashMap::default(),
                }),
        };
        if s.rows.insert(id, row.clone()).is_none() {
            self.entries += 1;
            self.bytes += bytes;
        }
    }

    pub(super) fn clear(&mut self) {
        if self.entries > 0 || !self.statements.is_empty() {
            self.statements.clear();
            self.entries = 0;
            self.bytes = 0;
        }
    }
}

/// What a value is counted as in [`MEMO_BYTES`].
fn value_bytes(v: &crate::storage::Value) -> usize {
    32 + match v {
        crate::storage::Value::Text(Some(t)) => 2 * t.len(),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ColType;
    use crate::storage::Value;

    #[test]
    fn the_memory_of_a_snapshot_is_bounded() {
        let mut m = Memo::default();
        let types = [ColType::Text];
        let row = |n: usize| Some(Arc::new(PointRow::new(vec![Value::text("x".repeat(n))])));
        let text = |r: Option<Option<Arc<PointRow>>>| r.flatten().map(|p| p.row[0].clone());
        for id in 0..MEMO_ENTRIES as i64 + 10 {
            m.put("q", &types, id, &row(1));
        }
        assert_eq!(m.entries, MEMO_ENTRIES);
        assert!(m.get("q", &types, MEMO_ENTRIES as i64).is_none());
        assert_eq!(text(m.get("q", &types, 0)), Some(Value::text("x")));
        let mut m = Memo::default();
        m.put("q", &types, 1, &row(MEMO_BYTES / 2));
        assert!(
            m.get("q", &types, 1).is_none(),
            "a row over the bound is not kept"
        );
        m.put("q", &types, 2, &None);
        assert!(
            matches!(m.get("q", &types, 2), Some(None)),
            "no row is remembered too"
        );
        m.put("q", &types, 3, &row(10));
        m.clear();
        assert!(m.get("q", &types, 3).is_none());
        assert_eq!((m.entries, m.bytes), (0, 0));
    }
}

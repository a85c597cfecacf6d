//! Events as the text a stream sends (Server-Sent Events: `id:`, `event:`, `data:`, a blank
//! line), written once per page and group of subscriptions: every stream of the group sends a
//! slice of the same bytes, and the JSON pages read the data back from them.

use bytes::Bytes;
use serde::Serialize;

/// Where one event sits in a page's text.
#[derive(Debug, Clone, Copy)]
struct Mark {
    seq: i64,
    op: &'static str,
    /// Where its frame starts.
    start: usize,
    /// Where its data (`{"op", "id", "object"}`) starts; it ends two bytes before the next
    /// frame.
    data: usize,
}

/// The events of one page for one group, in order of number.
#[derive(Debug, Clone, Default)]
pub struct Frames {
    text: Bytes,
    marks: Vec<Mark>,
}

/// An event's data, in the order the contract shows it.
#[derive(Serialize)]
struct Data<'a, T> {
    op: &'a str,
    id: i64,
    object: T,
}

/// One event to write: its number, name (`create`, `update`, `delete`), object id and object.
pub struct Item<T> {
    pub seq: i64,
    pub op: &'static str,
    pub id: i64,
    pub object: T,
}

impl Frames {
    /// The frames of `events`, which come in order of number.
    pub fn of<T: Serialize>(events: impl IntoIterator<Item = Item<T>>) -> Frames {
        let mut buf: Vec<u8> = Vec::new();
        let mut marks = Vec::new();
        for ev in events {
            let start = buf.len();
            head(&mut buf, ev.seq, ev.op);
            let data = buf.len();
            let d = Data {
                op: ev.op,
                id: ev.id,
                object: ev.object,
            };
            serde_json::to_writer(&mut buf, &d).expect("JSON of a stored row");
            buf.extend_from_slice(b"\n\n");
            marks.push(Mark {
                seq: ev.seq,
                op: ev.op,
                start,
                data,
            });
        }
        Frames {
            text: Bytes::from(buf),
            marks,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.marks.is_empty()
    }

    /// The number of events.
    pub fn len(&self) -> usize {
        self.marks.len()
    }

    /// The number of the last event.
    pub fn last(&self) -> Option<i64> {
        self.marks.last().map(|m| m.seq)
    }

    /// The text of the events numbered above `done`, sharing this page's bytes.
    pub fn after(&self, done: i64) -> Option<Bytes> {
        let first = self.marks.partition_point(|m| m.seq <= done);
        let m = self.marks.get(first)?;
        Some(self.text.slice(m.start..))
    }

    /// Each event's number, name and data.
    pub fn iter(&self) -> impl Iterator<Item = (i64, &'static str, &str)> + '_ {
        self.marks.iter().enumerate().map(|(i, m)| {
            let end = self.marks.get(i + 1).map_or(self.text.len(), |n| n.start) - 2;
            let data = std::str::from_utf8(&self.text[m.data..end]).expect("text written as JSON");
            (m.seq, m.op, data)
        })
    }
}

/// `id:` and `event:` lines, then the start of the `data:` line.
fn head(buf: &mut Vec<u8>, seq: i64, op: &str) {
    use std::io::Write;
    write!(buf, "id: {seq}\nevent: {op}\ndata: ").expect("writing to memory");
}

/// A stream's `ready` or `reset` with number `n`.
pub fn control(name: &'static str, n: i64) -> Bytes {
    let mut buf = Vec::new();
    head(&mut buf, n, name);
    buf.extend_from_slice(format!("{{\"seq\":{n}}}\n\n").as_bytes());
    Bytes::from(buf)
}

/// The comment a stream sends while nothing happens, so proxies keep it open.
pub const HEARTBEAT: &[u8] = b":\n\n";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(seq: i64, op: &'static str, name: &str) -> Item<serde_json::Value> {
        Item {
            seq,
            op,
            id: seq * 10,
            object: json!({"id": seq * 10, "name": name}),
        }
    }

    #[test]
    fn frames_read_back_and_slice() {
        let evs = [
            ev(3, "create", "a\nb"),
            ev(5, "update", "c"),
            ev(9, "delete", ""),
        ];
        let f = Frames::of(evs);
        assert_eq!(f.last(), Some(9));
        let all = String::from_utf8(f.after(0).unwrap().to_vec()).unwrap();
        assert!(all.starts_with(
            "id: 3\nevent: create\ndata: {\"op\":\"create\",\"id\":30,\"object\":{\"id\":30,\"name\":\"a\\nb\"}}\n\n"
        ));
        let tail = String::from_utf8(f.after(5).unwrap().to_vec()).unwrap();
        assert!(tail.starts_with("id: 9\nevent: delete\n"), "{tail}");
        assert!(f.after(9).is_none());
        let back: Vec<(i64, &str, serde_json::Value)> = f
            .iter()
            .map(|(s, op, d)| (s, op, serde_json::from_str(d).unwrap()))
            .collect();
        assert_eq!(back.len(), 3);
        assert_eq!(back[1].2["object"]["name"], "c");
        assert_eq!(back[2].1, "delete");
        assert_eq!(
            String::from_utf8(control("ready", 7).to_vec()).unwrap(),
            "id: 7\nevent: ready\ndata: {\"seq\":7}\n\n"
        );
    }
}

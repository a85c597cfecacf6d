//! The JSON texts of a request's items in one buffer: what a batch body holds, what the queue
//! stores per item and what the engine seals; below the modules that pass it along.

use serde_json::Value as Json;

/// The JSON texts of a request's items, held in one buffer: a batch of 100,000 items is a
/// few allocations, not a tree of values per item. The buffer may be the request body itself,
/// the items being where the array holds them. Items are stored as these texts.
#[derive(Debug, Clone, Default)]
pub struct ItemTexts {
    text: String,
    /// Where each item's text starts and ends in `text`.
    spans: Vec<(usize, usize)>,
}

impl ItemTexts {
    /// The items of `text` at `spans` (each a `char` boundary pair within `text`).
    pub fn in_text(text: String, spans: Vec<(usize, usize)>) -> ItemTexts {
        ItemTexts { text, spans }
    }

    /// The texts of `values`.
    pub fn of_values(values: &[Json]) -> ItemTexts {
        let mut out = ItemTexts::default();
        for v in values {
            out.push_value(v);
        }
        out
    }

    /// Appends the text of one item.
    pub fn push(&mut self, text: &str) {
        let start = self.text.len();
        self.text.push_str(text);
        self.spans.push((start, self.text.len()));
    }

    /// Appends the text of `v`.
    pub fn push_value(&mut self, v: &Json) {
        use std::fmt::Write;
        let start = self.text.len();
        let _ = write!(self.text, "{v}");
        self.spans.push((start, self.text.len()));
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The text of item `i`.
    pub fn get(&self, i: usize) -> &str {
        let (start, end) = self.spans[i];
        &self.text[start..end]
    }

    /// The texts in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }
}

//! Bulk writes in progress on this server (uploads): while one runs, work that can wait for
//! it, such as handing live changes on to subscribers ([`crate::live`]), gives way, so that
//! the write keeps the CPU it needs and the rest catches up once it ends.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// How many bulk writes run on this server now.
#[derive(Clone, Default)]
pub struct Bulk(Arc<AtomicUsize>);

/// One bulk write, counted while it lives.
pub struct Running(Arc<AtomicUsize>);

impl Bulk {
    /// Counts a bulk write until the returned guard is dropped.
    pub fn start(&self) -> Running {
        self.0.fetch_add(1, Ordering::Relaxed);
        Running(self.0.clone())
    }

    /// Whether some bulk write runs now.
    pub fn running(&self) -> bool {
        self.0.load(Ordering::Relaxed) > 0
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::Bulk;

    #[test]
    fn counts_each_write_while_it_lives() {
        let bulk = Bulk::default();
        assert!(!bulk.running());
        let a = bulk.start();
        let b = bulk.clone().start();
        assert!(bulk.running());
        drop(a);
        assert!(bulk.running());
        drop(b);
        assert!(!bulk.running());
    }
}

//! Small helpers the benchmark examples share.
#![allow(dead_code)]

use anyhow::{Context, Result};
use std::time::Instant;

pub fn elapsed_ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

pub fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 6]>())
}

/// `url` with its database name replaced by `db`.
pub fn with_database(url: &str, db: &str) -> Result<String> {
    let start = url.find("://").context("a database URL has a scheme")? + 3;
    let (head, query) = url.split_at(url.find('?').unwrap_or(url.len()));
    let host_end = head[start..].find('/').map_or(head.len(), |i| start + i);
    Ok(format!("{}/{db}{query}", &head[..host_end]))
}

/// Timings of repeated runs, in ms.
#[derive(Debug, Clone, Default)]
pub struct Stats(pub Vec<f64>);

impl Stats {
    pub fn push(&mut self, ms: f64) {
        self.0.push(ms);
    }
    pub fn sorted(&self) -> Vec<f64> {
        let mut v = self.0.clone();
        v.sort_by(f64::total_cmp);
        v
    }
    pub fn median(&self) -> f64 {
        let v = self.sorted();
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    }
    /// The 99th percentile (nearest rank).
    pub fn p99(&self) -> f64 {
        let v = self.sorted();
        let rank = ((v.len() as f64) * 0.99).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }
    pub fn min(&self) -> f64 {
        self.sorted()[0]
    }
    pub fn max(&self) -> f64 {
        *self.sorted().last().expect("at least one run")
    }
}

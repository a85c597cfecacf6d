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

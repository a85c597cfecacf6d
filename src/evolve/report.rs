//! `entiserve plan`: what a start (or reload) with these definitions would do to the tables of
//! this database, printed, with nothing changed.

use super::{Mode, Outcome};
use crate::schema::Catalog;
use std::fmt::Write;

/// The plan's exit status: 0 everything would apply, 1 something would be refused (or the
/// database cannot be read), 2 the definitions do not compile.
pub enum Verdict {
    Applies,
    Refused,
    DoesNotCompile,
}

/// Plans `catalog` against the database at `url` and writes the report.
pub async fn plan(catalog: &Catalog, url: &str) -> (String, Verdict) {
    let mut out = String::new();
    let _ = writeln!(out, "plan against {}", crate::storage::redact(url));
    if let Some(path) = url.strip_prefix("sqlite://")
        && !std::path::Path::new(path).exists()
    {
        let _ = writeln!(out, "no database yet: a start creates it with these tables");
        for name in catalog.entities.keys() {
            let _ = writeln!(out, "  create table `{name}`");
        }
        return (out, Verdict::Applies);
    }
    let storage = match crate::storage::open(url).await {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(out, "cannot open the database: {e:#}");
            return (out, Verdict::Refused);
        }
    };
    let outcome = super::run(storage.as_ref(), catalog, Mode::Plan, "plan").await;
    let last = super::last_change(storage.as_ref()).await.ok().flatten();
    storage.close().await;
    let Outcome { steps, refusals } = match outcome {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(out, "{e}");
            return (out, Verdict::Refused);
        }
    };
    if steps.is_empty() {
        let _ = writeln!(
            out,
            "the tables already follow these definitions: nothing to change"
        );
    } else {
        let _ = writeln!(out, "steps, in one transaction:");
        for s in &steps {
            let _ = writeln!(out, "  {s}");
        }
    }
    if !refusals.is_empty() {
        let _ = writeln!(out, "refused (nothing would change):");
        for r in &refusals {
            let _ = writeln!(out, "  {r}");
        }
    }
    match last {
        Some(c) => {
            let _ = writeln!(
                out,
                "last applied {} by {} (definitions {})",
                c.applied_dt,
                c.server,
                &c.digest[..c.digest.len().min(12)]
            );
        }
        None => {
            let _ = writeln!(out, "no change recorded yet");
        }
    }
    let verdict = if refusals.is_empty() {
        Verdict::Applies
    } else {
        Verdict::Refused
    };
    (out, verdict)
}

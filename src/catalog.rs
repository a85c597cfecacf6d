//! The catalog in force: a handle every request reads once at its start, so that a reload swaps
//! routes, validation and mappings together while in-flight requests finish on the old one.

use crate::schema::Catalog;
use std::sync::{Arc, RwLock};

#[derive(Clone, Default)]
pub struct CatalogHandle(Arc<RwLock<Arc<Catalog>>>);

impl CatalogHandle {
    pub fn new(c: Catalog) -> CatalogHandle {
        CatalogHandle(Arc::new(RwLock::new(Arc::new(c))))
    }

    /// The current catalog.
    pub fn load(&self) -> Arc<Catalog> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Makes `c` the current catalog if `current` still is; says whether it did.
    pub fn replace_if(&self, current: &Arc<Catalog>, c: Catalog) -> bool {
        let mut slot = self.0.write().unwrap_or_else(|p| p.into_inner());
        if !Arc::ptr_eq(&slot, current) {
            return false;
        }
        *slot = Arc::new(c);
        true
    }

    /// Makes `c` the current catalog.
    pub fn store(&self, c: Catalog) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(c);
    }
}

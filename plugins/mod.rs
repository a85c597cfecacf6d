//! Plugins: hooks on calls and on uploads, named from entity YAML (`plugins:`) with their
//! settings. Every hook has a no-op default, so a plugin implements only what it needs. A
//! [`Registry`] holds the built-in plugins (this folder) and any a program adds with
//! [`Registry::with`]; the app is built with one (see [`crate::App::build_with`]), its engine
//! runs the call hooks through it, and `compile()` rejects names it does not hold.
//!
//! Every plugin declares the JSON Schema of its settings ([`Plugin::settings_schema`]);
//! [`Registry::entity_schema`] is the JSON Schema of entity files for the plugins it holds
//! (what `entiserve entity-schema` prints for the built-in ones), so an editor checks the
//! settings an entity gives each plugin.
//!
//! Hooks, in the order an upload meets them:
//! - [`Plugin::on_archive`]: a ZIP bundle was extracted; claim its parts (`pages.pdf`,
//!   `res/`), store files, and keep per-upload state. Runs before the reply; an error refuses
//!   the upload with nothing applied.
//! - [`Plugin::on_start`]: the upload starts running (in the background or not), inside the
//!   transaction that records the state, so work done here happens exactly once.
//! - [`Plugin::on_row`]: a CSV row of a bundle is about to run.
//! - [`Plugin::before_call`]: any call of the entity (REST, batch item, CSV row) is about to
//!   be checked and run.

pub mod pdf_markers;
pub mod res_links;

use crate::engine::{Call, CallError, Caller, Engine};
use crate::schema::Entity;
use crate::settings::Settings;
use crate::storage::Tx;
use serde_json::Value as Json;
use std::path::PathBuf;
use std::sync::Arc;

/// Why an upload was refused as a whole (nothing ran); what [`Plugin::on_archive`] returns.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    #[error("{0}")]
    BadRequest(String),
    #[error("the file cannot be used: {0}")]
    BadFile(String),
    #[error("{0}")]
    TooLarge(String),
    #[error("{0}")]
    UnknownEntity(String),
    #[error("storage failure: {0}")]
    Io(String),
    /// The disk or the store is full.
    #[error("out of space: {0}")]
    Full(String),
}

impl From<std::io::Error> for UploadError {
    fn from(e: std::io::Error) -> Self {
        if crate::storage::is_out_of_space(&e) {
            UploadError::Full(e.to_string())
        } else {
            UploadError::Io(e.to_string())
        }
    }
}

/// A CSV reader's or writer's failure: [`UploadError::Full`] when its I/O found the disk full.
impl From<csv::Error> for UploadError {
    fn from(e: csv::Error) -> Self {
        UploadError::from(std::io::Error::from(e))
    }
}

impl From<crate::files::FileError> for UploadError {
    fn from(e: crate::files::FileError) -> Self {
        if e.full {
            UploadError::Full(e.to_string())
        } else {
            UploadError::Io(e.to_string())
        }
    }
}

/// A plugin. `settings` is what the entity's YAML gives it (`null` when none).
#[async_trait::async_trait]
pub trait Plugin: Send + Sync {
    /// The name entity files use.
    fn name(&self) -> &'static str;

    /// The JSON Schema (2020-12) of the settings an entity file gives the plugin
    /// (`- name: { settings }`). Naming the plugin alone (`- name`) gives it no settings, which
    /// is always allowed.
    fn settings_schema(&self) -> Json;

    /// Before any call of an entity using the plugin is checked; may change the call or
    /// refuse it.
    fn before_call(
        &self,
        _settings: &Json,
        _caller: &Caller,
        _call: &mut Call,
    ) -> Result<(), CallError> {
        Ok(())
    }

    /// A ZIP bundle was uploaded for the entity: claim the parts this plugin handles.
    async fn on_archive(
        &self,
        _settings: &Json,
        _archive: &mut Archive<'_>,
    ) -> Result<(), UploadError> {
        Ok(())
    }

    /// The bundle's upload starts running; `state` is what [`Plugin::on_archive`] left and is
    /// stored again with the transaction `tx`.
    async fn on_start(&self, _settings: &Json, _start: &mut Start<'_>) -> Result<(), String> {
        Ok(())
    }

    /// A row of the bundle's CSV is about to run as `call`.
    fn on_row(&self, _settings: &Json, _state: &Json, _call: &mut Call) -> Result<(), CallError> {
        Ok(())
    }
}

/// An extracted bundle offered to the plugins of the uploaded entity.
pub struct Archive<'a> {
    pub engine: &'a Engine,
    pub files: &'a crate::files::Files,
    pub settings: &'a Settings,
    pub caller: &'a Caller,
    /// The entity the upload is for.
    pub entity: &'a str,
    /// The uploaded file's name.
    pub file_name: &'a str,
    /// A fresh id naming this upload's stored files.
    pub bundle_id: &'a str,
    /// The `campaign_id` form field.
    pub campaign_id: Option<i64>,
    /// A scratch directory removed after the upload.
    pub work_dir: PathBuf,
    /// `pages.pdf`, until a plugin takes it.
    pub pdf: Option<PathBuf>,
    /// Files of `res/` (path below `res/`, extracted file), until a plugin takes them.
    pub res: Option<Vec<(String, PathBuf)>>,
    /// Per-plugin state, by plugin name, kept with the upload.
    pub state: serde_json::Map<String, Json>,
    /// Key prefixes of stored files, removed if the upload is refused.
    pub stored: Vec<String>,
    /// The bytes the upload may still store; every plugin counts its files here before it
    /// stores them.
    pub budget: crate::files::StoreBudget,
    /// Lines for the request's details.
    pub notes: Vec<String>,
}

/// The start of a bundle upload's run.
pub struct Start<'a> {
    pub engine: &'a Engine,
    pub tx: &'a mut dyn Tx,
    pub caller: &'a Caller,
    /// Records what the start changes, as part of the upload (see
    /// [`crate::engine::changes`]).
    pub recorder: &'a crate::engine::changes::Recorder,
    /// This plugin's state; changes are stored with `tx`.
    pub state: &'a mut Json,
    /// Lines for the request's details.
    pub notes: Vec<String>,
    /// Contention met in `tx`: the start is rolled back and runs again from the state it
    /// began with (the hook's `Err` is then no refusal).
    pub failed: Option<crate::storage::StorageError>,
}

/// The plugins entity files may name.
pub struct Registry {
    plugins: Vec<Arc<dyn Plugin>>,
}

impl Registry {
    /// The built-in plugins.
    pub fn builtin() -> Registry {
        Registry {
            plugins: vec![
                Arc::new(pdf_markers::PdfMarkers),
                Arc::new(res_links::ResLinks),
            ],
        }
    }

    /// Adds `plugin` to the registry.
    pub fn with(mut self, plugin: Arc<dyn Plugin>) -> Registry {
        self.plugins.push(plugin);
        self
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Plugin>> {
        self.plugins.iter().find(|p| p.name() == name)
    }

    pub fn names(&self) -> Vec<&'static str> {
        self.plugins.iter().map(|p| p.name()).collect()
    }

    /// Each plugin's name with the JSON Schema of its settings.
    pub fn settings_schemas(&self) -> Vec<(&'static str, Json)> {
        self.plugins
            .iter()
            .map(|p| (p.name(), p.settings_schema()))
            .collect()
    }

    /// The JSON Schema of an entity file that uses the plugins of this registry, their
    /// settings included.
    pub fn entity_schema(&self) -> Json {
        crate::schema::format::json_schema(&self.settings_schemas())
    }

    /// The plugins `e` uses, with their settings, in the order its file lists them.
    pub fn of<'a>(
        &'a self,
        e: &'a Entity,
    ) -> impl Iterator<Item = (&'a Arc<dyn Plugin>, &'a Json)> {
        e.plugins
            .iter()
            .filter_map(|r| self.get(&r.name).map(|p| (p, &r.settings)))
    }
}

impl crate::engine::hooks::CallHooks for Registry {
    fn names(&self) -> Vec<&'static str> {
        Registry::names(self)
    }

    /// Runs the `before_call` hooks of `e` on `call`.
    fn before_call(&self, e: &Entity, caller: &Caller, call: &mut Call) -> Result<(), CallError> {
        if e.plugins.is_empty() {
            return Ok(());
        }
        for (p, settings) in self.of(e) {
            p.before_call(settings, caller, call)?;
        }
        Ok(())
    }
}

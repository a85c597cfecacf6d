//! `pdf_markers`: a bundle's `pages.pdf` becomes one marker per page, `page 001`, `page 002`,
//! ..., in the upload's `campaign_id` (which must exist and be readable by the uploader) or in
//! a new campaign named after the uploaded file. Each page is stored as a one-page PDF and
//! linked from the marker's `file`; the pages count against the upload's store budget, and
//! the split stops as soon as they would pass it (413). With `page_field` set (assets:
//! `marker_id`), page numbers in that column of the bundle's CSV become the new markers' ids.
//!
//! Settings: `markers` (entity, default `markers`), `campaigns` (entity, default
//! `campaigns`), `page_field` (optional).

use super::UploadError;
use super::{Archive, Plugin, Start};
use crate::engine::{Call, CallError, Op};
use serde_json::{Map, Value as Json, json};

pub struct PdfMarkers;

fn setting<'a>(s: &'a Json, key: &str, default: &'a str) -> &'a str {
    s.get(key).and_then(Json::as_str).unwrap_or(default)
}

/// A marker's name for page `n` (three digits, wider past 999).
pub fn page_name(n: usize) -> String {
    format!("page {n:03}")
}

#[async_trait::async_trait]
impl Plugin for PdfMarkers {
    fn name(&self) -> &'static str {
        "pdf_markers"
    }

    fn settings_schema(&self) -> Json {
        let entity = |about: &str, default: &str| json!({"type": "string", "pattern": crate::schema::format::IDENTIFIER, "default": default, "description": about});
        json!({
            "type": "object",
            "properties": {
                "markers": entity("the entity the pages become objects of", "markers"),
                "campaigns": entity("the entity of the upload's `campaign_id`, where a new campaign is made when there is none", "campaigns"),
                "page_field": {
                    "type": "string",
                    "pattern": crate::schema::format::IDENTIFIER,
                    "description": "a field of the bundle's CSV whose page numbers become the new markers' ids"
                }
            },
            "additionalProperties": false
        })
    }

    async fn on_archive(&self, settings: &Json, a: &mut Archive<'_>) -> Result<(), UploadError> {
        let Some(pdf) = a.pdf.take() else {
            return Ok(());
        };
        let markers = setting(settings, "markers", "markers");
        let campaigns = setting(settings, "campaigns", "campaigns");
        if let Some(id) = a.campaign_id
            && a.engine.get(a.caller, campaigns, id).await.is_err()
        {
            return Err(UploadError::BadRequest(format!(
                "`campaign_id` {id} is not a campaign you can see"
            )));
        }
        let dir = a.work_dir.join("pages");
        // The child stops splitting as soon as the pages would take more than the upload
        // may still store.
        let limits = crate::pdf::ChildLimits {
            output: a.budget.left(),
            ..Default::default()
        };
        let count = crate::pdf::split_contained(
            &a.settings.helper_exe,
            &pdf,
            &dir,
            a.settings.pdf_max_pages,
            &limits,
        )
        .await
        .map_err(|e| match e {
            crate::pdf::PdfError::TooMuchOutput { .. } => UploadError::from(a.budget.over()),
            e => UploadError::BadRequest(e.to_string()),
        })?;
        let pages: Vec<std::path::PathBuf> = (1..=count)
            .map(|n| dir.join(crate::pdf::page_file(n)))
            .collect();
        for p in &pages {
            let len = std::fs::metadata(p)
                .map_err(|e| UploadError::Io(e.to_string()))?
                .len();
            a.budget.take(len)?;
        }
        let prefix = format!("{markers}/{}", a.bundle_id);
        a.stored.push(prefix.clone());
        let mut files = Vec::with_capacity(count);
        for (i, page) in pages.iter().enumerate() {
            let key = format!("{prefix}/pages/page-{:03}.pdf", i + 1);
            a.files
                .put(&key, page)
                .await
                .map_err(|e| UploadError::Io(e.to_string()))?;
            files.push(Json::String(crate::files::url_of(&key)));
        }
        a.notes.push(format!("pages.pdf: {count} pages"));
        a.state.insert(
            self.name().into(),
            json!({
                "markers": markers,
                "campaigns": campaigns,
                "campaign_id": a.campaign_id,
                "campaign_name": a.file_name,
                "files": files,
                "marker_ids": [],
            }),
        );
        Ok(())
    }

    async fn on_start(&self, _settings: &Json, s: &mut Start<'_>) -> Result<(), String> {
        let done = s.state["marker_ids"]
            .as_array()
            .is_some_and(|a| !a.is_empty());
        let files = s.state["files"].as_array().cloned().unwrap_or_default();
        if done || files.is_empty() {
            return Ok(());
        }
        let markers = s.state["markers"].as_str().unwrap_or("markers").to_string();
        // A campaign this start creates has no markers to update.
        let fresh = s.state["campaign_id"].as_i64().is_none();
        let campaign_id = match s.state["campaign_id"].as_i64() {
            Some(id) => id,
            None => {
                let campaigns = s.state["campaigns"]
                    .as_str()
                    .unwrap_or("campaigns")
                    .to_string();
                let name = s.state["campaign_name"]
                    .as_str()
                    .unwrap_or("pages.pdf")
                    .to_string();
                let mut params = Map::new();
                params.insert("name".into(), json!(name));
                let id = create(s, &campaigns, vec![params]).await?[0];
                s.notes
                    .push(format!("campaign {id} `{name}` created for the markers"));
                s.state["campaign_id"] = json!(id);
                id
            }
        };
        let mut ids = Vec::with_capacity(files.len());
        let mut updated = 0;
        for (chunk_no, chunk) in files.chunks(1000).enumerate() {
            let params = chunk
                .iter()
                .enumerate()
                .map(|(i, url)| {
                    let n = chunk_no * 1000 + i + 1;
                    let mut p = Map::new();
                    p.insert("name".into(), json!(page_name(n)));
                    p.insert("campaign_id".into(), json!(campaign_id));
                    p.insert("page".into(), json!(n));
                    p.insert("file".into(), url.clone());
                    p
                })
                .collect();
            if fresh {
                ids.extend(create(s, &markers, params).await?);
            } else {
                ids.extend(save(s, &markers, params, &mut updated).await?);
            }
        }
        s.notes.push(if updated == 0 {
            format!(
                "{} markers created from pages.pdf in campaign {campaign_id}",
                ids.len()
            )
        } else {
            format!(
                "{} markers from pages.pdf in campaign {campaign_id}: {} created, {updated} updated (a marker of that name was there)",
                ids.len(),
                ids.len() - updated
            )
        });
        s.state["marker_ids"] = json!(ids);
        Ok(())
    }

    fn on_row(&self, settings: &Json, state: &Json, call: &mut Call) -> Result<(), CallError> {
        let Some(field) = settings.get("page_field").and_then(Json::as_str) else {
            return Ok(());
        };
        let Some(ids) = state["marker_ids"].as_array().filter(|a| !a.is_empty()) else {
            return Ok(());
        };
        let page = match call.params.get(field) {
            None | Some(Json::Null) => return Ok(()),
            Some(Json::Number(n)) => n.as_i64(),
            Some(Json::String(s)) if s.trim().is_empty() => return Ok(()),
            Some(Json::String(s)) => s.trim().parse::<i64>().ok(),
            Some(_) => None,
        };
        let id = page
            .filter(|p| *p >= 1 && (*p as usize) <= ids.len())
            .and_then(|p| ids[p as usize - 1].as_i64())
            .ok_or_else(|| {
                CallError::invalid_field(
                    field,
                    format!(
                        "`{}` is not a page of pages.pdf, which has {} pages",
                        call.params[field],
                        ids.len()
                    ),
                )
            })?;
        call.params.insert(field.to_string(), json!(id));
        Ok(())
    }
}

/// Saves objects of `entity` in the start transaction: when the entity has a key that the
/// objects' values hold (markers: `[campaign_id, name]`), an object with the same key is
/// updated (a PDF uploaded again into its campaign replaces the pages' files and keeps the
/// markers and what refers to them); the others are created. Their ids, in order, or why not.
async fn save(
    s: &mut Start<'_>,
    entity: &str,
    rows: Vec<Map<String, Json>>,
    updated: &mut usize,
) -> Result<Vec<i64>, String> {
    let keyed = s.engine.catalog.load().get(entity).is_some_and(|e| {
        e.has_key() && rows.iter().all(|r| e.key.iter().all(|k| r.contains_key(k)))
    });
    if !keyed {
        return create(s, entity, rows).await;
    }
    let calls = rows
        .iter()
        .map(|params| {
            Ok(Call {
                entity: entity.to_string(),
                op: Op::Update,
                id: None,
                params: params.clone(),
                prehashed: false,
            })
        })
        .collect();
    let outcomes = run(s, calls).await?;
    let mut ids: Vec<Option<i64>> = Vec::with_capacity(rows.len());
    let mut missing = Vec::new();
    for (o, params) in outcomes.into_iter().zip(rows) {
        match o {
            Ok(obj) => {
                *updated += 1;
                ids.push(obj["id"].as_i64());
            }
            Err(CallError::NoKeyMatch { .. }) => {
                ids.push(None);
                missing.push(params);
            }
            Err(e) => {
                return Err(format!(
                    "cannot update {entity} from pages.pdf: {}",
                    e.description()
                ));
            }
        }
    }
    let mut created = create(s, entity, missing).await?.into_iter();
    ids.into_iter()
        .map(|id| {
            id.or_else(|| created.next())
                .ok_or_else(|| "a saved object has no id".to_string())
        })
        .collect()
}

/// Creates objects of `entity` in the start transaction; their ids, or why not.
async fn create(
    s: &mut Start<'_>,
    entity: &str,
    rows: Vec<Map<String, Json>>,
) -> Result<Vec<i64>, String> {
    let calls = rows
        .into_iter()
        .map(|params| {
            Ok(Call {
                entity: entity.to_string(),
                op: Op::Create,
                id: None,
                params,
                prehashed: false,
            })
        })
        .collect();
    let outcomes = run(s, calls).await?;
    outcomes
        .into_iter()
        .map(|o| match o {
            Ok(obj) => obj["id"]
                .as_i64()
                .ok_or_else(|| "a created object has no id".to_string()),
            Err(e) => Err(format!(
                "cannot create {entity} from pages.pdf: {}",
                e.description()
            )),
        })
        .collect()
}

/// Runs calls in the start transaction; their outcomes, or why the start stops.
async fn run(
    s: &mut Start<'_>,
    calls: Vec<Result<Call, CallError>>,
) -> Result<Vec<crate::engine::Outcome>, String> {
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    // The start transaction is already open: the calls are checked inside it.
    let prepared = s.engine.prepare_chunk(s.caller, calls).await;
    let outcomes = match s
        .engine
        .execute_chunk(&mut *s.tx, s.caller, &prepared, true, Some(s.recorder))
        .await
    {
        Ok(o) => o,
        Err(e) if e.contention().is_some() => {
            // Not a refusal: the start runs again.
            s.failed = Some(e);
            return Err("another writer was in the way".to_string());
        }
        Err(e) => {
            tracing::error!(error = %e, "creating markers failed");
            return Err("the database failed".to_string());
        }
    };
    Ok(outcomes)
}

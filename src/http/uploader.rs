//! `POST /tools/uploader.ex.php`: a CSV upload, run synchronously (the result CSV, or a
//! streamed progress log) or as a background request.

use super::error::{ApiError, Result};
use super::{AppState, Authed, json_response};
use crate::engine::Caller;
use crate::jobs::{kinds::KindId, queue::NewRequest};
use crate::uploader::intake::{self, Received};
use crate::uploader::rows::Columns;
use crate::uploader::run::{self, Sink};
use crate::uploader::{Plan, UploadError, validate};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Body, Request, Response, handler};
use serde_json::json;
use std::sync::Arc;

impl From<UploadError> for ApiError {
    fn from(e: UploadError) -> Self {
        match e {
            UploadError::BadRequest(m) => ApiError::BadRequest(m),
            e @ UploadError::BadFile(_) => ApiError::BadRequest(e.to_string()),
            UploadError::UnknownEntity(m) => ApiError::BadRequest(m),
            UploadError::TooLarge(m) => ApiError::TooLarge(m),
            UploadError::Io(m) => {
                tracing::error!(error = %m, "upload storage failure");
                ApiError::Call(crate::engine::CallError::Internal)
            }
        }
    }
}

fn flag(r: &Received, name: &str) -> Result<bool> {
    match r.fields.get(name).map(|v| v.trim().to_ascii_lowercase()) {
        None => Ok(false),
        Some(v) => match v.as_str() {
            "" | "0" | "no" | "false" => Ok(false),
            "1" | "yes" | "true" => Ok(true),
            _ => Err(ApiError::BadRequest(format!("`{name}` must be 1 or 0"))),
        },
    }
}

/// Removes an upload's scratch files, and the stored files of a refused bundle, when the
/// handler returns.
struct Cleanup {
    files: Vec<std::path::PathBuf>,
    dirs: Vec<std::path::PathBuf>,
    /// Key prefixes in the file storage.
    stored: Vec<String>,
    store: Arc<dyn crate::files::FileStore>,
}
impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.files {
            let _ = std::fs::remove_file(p);
        }
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
        if !self.stored.is_empty() {
            let (files, prefixes) = (self.store.clone(), std::mem::take(&mut self.stored));
            tokio::spawn(async move {
                for p in prefixes {
                    let _ = files.remove_prefix(&p).await;
                }
            });
        }
    }
}

/// An opened ZIP bundle: its CSV, and what the entity's plugins made of the rest.
struct Opened {
    csv: std::path::PathBuf,
    state: serde_json::Map<String, serde_json::Value>,
    notes: Vec<String>,
}

/// Checks and extracts a bundle and offers it to the entity's plugins; refuses parts no
/// plugin takes. Its scratch directory and stored files go into `cleanup`, which removes them
/// unless the upload is accepted.
async fn open_bundle(
    state: &AppState,
    caller: &Caller,
    e: &crate::schema::Entity,
    src: &std::path::Path,
    file_name: &str,
    campaign_id: Option<i64>,
    cleanup: &mut Cleanup,
) -> Result<Opened> {
    let entity = e.name.as_str();
    let bundle_id = hex::encode(rand::random::<[u8; 12]>());
    let work_dir = intake::work_dir(&state.settings.data_dir).join(format!("{bundle_id}.bundle"));
    cleanup.dirs.push(work_dir.clone());
    let (src2, dir2, limits) = (
        src.to_path_buf(),
        work_dir.clone(),
        state.settings.zip.clone(),
    );
    let store_cap = state.settings.max_upload_store_bytes;
    let started = std::time::Instant::now();
    let extracted = tokio::task::spawn_blocking(move || {
        crate::uploader::bundle::extract(&src2, &dir2, &limits, store_cap)
    })
    .await
    .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))??;
    let summary = format!(
        "zip extraction completed: 1 CSV{}, {} files in res/",
        if extracted.pdf.is_some() {
            ", pages.pdf"
        } else {
            ""
        },
        extracted.res.len()
    );
    let mut archive = crate::plugins::Archive {
        engine: &state.engine,
        files: state.files.as_ref(),
        settings: &state.settings,
        caller,
        entity,
        file_name,
        bundle_id: &bundle_id,
        campaign_id,
        work_dir,
        pdf: extracted.pdf,
        res: (!extracted.res.is_empty()).then_some(extracted.res),
        state: Default::default(),
        stored: Vec::new(),
        budget: crate::files::StoreBudget::new(store_cap),
        notes: vec!["zip extraction started".into()],
    };
    let outcome = crate::uploader::bundle::offer(&state.plugins, e, &mut archive).await;
    cleanup.stored.append(&mut archive.stored);
    outcome?;
    if archive.pdf.is_some() {
        return Err(ApiError::BadRequest(format!(
            "the ZIP archive holds pages.pdf, which entity `{entity}` does not use"
        )));
    }
    if archive.res.is_some() {
        return Err(ApiError::BadRequest(format!(
            "the ZIP archive holds a res/ folder, which entity `{entity}` does not use"
        )));
    }
    let mut notes = archive.notes;
    notes.push(summary);
    tracing::info!(
        bundle = %bundle_id,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "bundle opened"
    );
    Ok(Opened {
        csv: extracted.csv,
        state: archive.state,
        notes,
    })
}

#[handler]
pub async fn upload(
    req: &Request,
    body: Body,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let ctype = req.header("content-type").unwrap_or("");
    if !ctype
        .to_ascii_lowercase()
        .starts_with("multipart/form-data")
    {
        return Err(ApiError::UnsupportedMediaType(
            "the uploader takes multipart/form-data".into(),
        ));
    }
    let dir = intake::work_dir(&state.settings.data_dir);
    let received = intake::receive(
        req.header("content-type").unwrap_or(""),
        body,
        &dir,
        "csvfile",
        intake::FormLimits {
            file: state.settings.max_upload_bytes,
            field: state.settings.max_field_bytes as u64,
        },
    )
    .await?;
    let mut cleanup = Cleanup {
        files: received.file.iter().map(|(p, _)| p.clone()).collect(),
        dirs: Vec::new(),
        stored: Vec::new(),
        store: state.files.clone(),
    };
    let entity = received
        .fields
        .get("entity")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::BadRequest("the `entity` field is required".into()))?;
    let catalog = state.engine.catalog.load();
    let e = catalog
        .get(&entity)
        .cloned()
        .ok_or_else(|| ApiError::BadRequest(format!("there is no entity `{entity}`")))?;
    let (src, file_name) = received
        .file
        .clone()
        .ok_or_else(|| ApiError::BadRequest("the `csvfile` file is required".into()))?;
    let label = received
        .fields
        .get("encoding")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .unwrap_or("UTF-8");
    let encoding = encoding_rs::Encoding::for_label(label.as_bytes())
        .ok_or_else(|| ApiError::BadRequest(format!("unknown encoding `{label}`")))?;
    let background = flag(&received, "bgrs")?;
    let show_progress = flag(&received, "show_progress")?;
    let get_content = flag(&received, "get_content")?;
    let campaign_id = match received
        .fields
        .get("campaign_id")
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(c) => Some(
            c.parse::<i64>()
                .map_err(|_| ApiError::BadRequest("`campaign_id` must be an integer".into()))?,
        ),
    };
    let opened = if crate::uploader::bundle::is_zip(&src) {
        Some(
            open_bundle(
                state,
                &caller,
                &e,
                &src,
                &file_name,
                campaign_id,
                &mut cleanup,
            )
            .await?,
        )
    } else {
        None
    };
    let csv_path = opened.as_ref().map_or(src.clone(), |o| o.csv.clone());
    let utf8 = dir.join(format!(
        "{}.utf8.csv",
        hex::encode(rand::random::<[u8; 12]>())
    ));
    cleanup.files.push(utf8.clone());
    let (s2, u2) = (csv_path, utf8.clone());
    let started = std::time::Instant::now();
    let layout = tokio::task::spawn_blocking(move || validate::check(&s2, &u2, encoding))
        .await
        .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))??;
    tracing::info!(
        rows = layout.rows,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "upload checked"
    );
    Columns::from_header(&layout.header, &e)
        .map_err(|m| ApiError::BadRequest(format!("the file cannot be used: {m}")))?;
    let (u2, l2, e2) = (utf8.clone(), layout.clone(), e.clone());
    let sealed =
        tokio::task::spawn_blocking(move || crate::uploader::seal::seal_file(&u2, &l2, &e2))
            .await
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))??;
    let plan = Plan {
        entity: entity.clone(),
        encoding: encoding.name().to_string(),
        layout,
        utf8_path: utf8.clone(),
        file_name,
        bundle: opened.as_ref().map(|o| o.state.clone()),
        sealed,
    };
    let new = NewRequest {
        user_id: caller.id,
        name: "uploader".into(),
        kind: if background {
            KindId::Upload
        } else {
            KindId::UploadHere
        },
        entity,
        params: serde_json::to_value(&plan)
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))?,
        items: Vec::new(),
        total: Some(plan.layout.rows as i64),
        content_type: format!("text/csv; charset={}", encoding.name()),
        run_here: !background,
        details: opened.map(|o| o.notes).unwrap_or_default(),
    };
    let key = req.header("idempotency-key").map(str::to_string);
    let rid = match state.jobs.enqueue(new, key.as_deref()).await? {
        Ok(rid) => rid,
        Err(reply) => {
            return Ok(Response::builder()
                .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK))
                .content_type(reply.content_type)
                .body(reply.body));
        }
    };
    // The working copy and stored files now belong to the request.
    cleanup.files.retain(|p| p != &utf8);
    cleanup.stored.clear();
    if background {
        return Ok(json_response(
            StatusCode::ACCEPTED,
            &json!({"request": rid}),
        ));
    }
    synchronous(state, &caller, &rid, &plan, show_progress, get_content).await
}

async fn synchronous(
    state: &AppState,
    caller: &Caller,
    rid: &str,
    plan: &Plan,
    show_progress: bool,
    get_content: bool,
) -> Result<Response> {
    let req = state
        .jobs
        .load(rid)
        .await?
        .ok_or(ApiError::Call(crate::engine::CallError::Internal))?;
    let (jobs, plugins) = (state.jobs.clone(), state.plugins.clone());
    let (result_path, rel) = crate::uploader::result_location(&state.settings.data_dir, rid);
    if !show_progress {
        let (_keep, stop) = tokio::sync::watch::channel(false);
        run::rows(&jobs, &plugins, &req, caller, Sink::Quiet, &stop).await?;
        let file = tokio::fs::File::open(&result_path)
            .await
            .map_err(|e| ApiError::from(UploadError::Io(e.to_string())))?;
        return Ok(csv_attachment(
            Body::from_async_read(file),
            &plan.result_name(),
            plan,
        ));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<String>(1024);
    let (out_tx, out_rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(16);
    let caller = caller.clone();
    tokio::spawn(async move {
        let forward = {
            let out_tx = out_tx.clone();
            tokio::spawn(async move {
                let mut rx = rx;
                while let Some(line) = rx.recv().await {
                    if out_tx
                        .send(Ok(bytes::Bytes::from(format!("{line}\n"))))
                        .await
                        .is_err()
                    {
                        break;
                    }
                }
            })
        };
        let (_keep, stop) = tokio::sync::watch::channel(false);
        let result = run::rows(&jobs, &plugins, &req, &caller, Sink::Stream(tx), &stop).await;
        let _ = forward.await;
        let tail = match result {
            Err(e) => {
                tracing::error!(error = %e, "synchronous upload failed");
                "Error: the upload stopped because of a server failure\n".to_string()
            }
            Ok(()) if get_content => {
                // The result file, piece by piece.
                use tokio::io::AsyncReadExt;
                if let Ok(mut f) = tokio::fs::File::open(&result_path).await {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = f.read(&mut buf).await {
                        if n == 0
                            || out_tx
                                .send(Ok(bytes::Bytes::copy_from_slice(&buf[..n])))
                                .await
                                .is_err()
                        {
                            break;
                        }
                    }
                }
                return;
            }
            Ok(()) => format!("Result: {rel}\n"),
        };
        let _ = out_tx.send(Ok(bytes::Bytes::from(tail))).await;
    });
    let stream = tokio_stream_from(out_rx);
    Ok(Response::builder()
        .content_type("text/plain; charset=utf-8")
        .body(Body::from_bytes_stream(stream)))
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A result CSV as a download named `<original name>res.csv`.
pub fn csv_attachment(body: Body, name: &str, plan: &Plan) -> Response {
    let safe: String = name
        .chars()
        .map(|c| if c == '"' || c.is_control() { '_' } else { c })
        .collect();
    Response::builder()
        .content_type(format!("text/csv; charset={}", plan.encoding().name()))
        .header(
            "content-disposition",
            format!("attachment; filename=\"{safe}\""),
        )
        .body(body)
}

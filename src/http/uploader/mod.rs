//! `POST /tools/uploader.ex.php`: a CSV upload, run synchronously (the result CSV, or a
//! streamed progress log) or as a background request.

use super::api::Tag;
use super::api::{Body as Media, E400, E413, E415, Replies, Reply, SIGNED, Signed, Streamed};
use super::error::{ApiError, Result};
use super::{AppState, json_response};
use crate::engine::Caller;
use crate::jobs::{kinds::KindId, queue::NewRequest};
use crate::uploader::intake::{self, Received};
use crate::uploader::run::{self, Sink};
use crate::uploader::{Plan, UploadError, validate};
use poem::http::StatusCode;
use poem::web::Data;
use poem::{Body, Response};
use poem_openapi::OpenApi;
use poem_openapi::param::Header;
use poem_openapi::types::Type;
use serde_json::json;
use std::sync::Arc;

mod form;
use form::Form;

/// What an upload answers.
pub struct UploadReplies;
impl Replies for UploadReplies {
    const REPLIES: &'static [super::api::Documented] = &[
        (
            200,
            "the result CSV, or the progress log (show_progress=1)",
            &[("text/csv", Media::Text), ("text/plain", Media::Text)],
        ),
        (
            202,
            "running in the background: follow it at /bgrs/{rid}",
            &[(
                "application/json",
                Media::Typed(
                    <super::api::Accepted as Type>::schema_ref,
                    <super::api::Accepted as Type>::register,
                ),
            )],
        ),
    ];
}

pub struct UploaderApi;

#[OpenApi]
impl UploaderApi {
    /// Apply the create/update/delete rows of a CSV file (or a ZIP bundle) to one entity
    ///
    /// The CSV's `op` column says what each row does (`c`, `u`, `d`); the whole file is
    /// checked before any row runs. Synchronously the reply is the result CSV: every row with
    /// its `res`. With `bgrs=1` it runs in the background (202) and the result CSV is the
    /// request's result. An `Idempotency-Key` header makes a retry answer as the first did.
    #[oai(
        path = "/tools/uploader.ex.php",
        method = "post",
        operation_id = "uploadFile",
        tag = "Tag::Uploader"
    )]
    async fn upload(
        &self,
        Signed(caller): Signed,
        /// makes a retry answer as the first request did, without running again
        #[oai(name = "Idempotency-Key", validator(min_length = 1, max_length = 255))]
        idempotency_key: Header<Option<String>>,
        Form(received): Form,
        Data(state): Data<&Arc<AppState>>,
    ) -> Reply<Streamed<UploadReplies>, { E400 | SIGNED | E413 | E415 }> {
        Ok(Streamed::new(
            upload(idempotency_key.0, received, caller, state).await?,
        ))
    }
}

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
            UploadError::Full(m) => {
                tracing::error!(error = %m, "upload refused: out of space");
                ApiError::Call(crate::engine::CallError::InsufficientStorage)
            }
        }
    }
}

/// A yes/no field of the form; empty or absent is no.
fn flag(r: &Received, name: &str) -> Result<bool> {
    match r.fields.get(name).filter(|v| !v.trim().is_empty()) {
        None => Ok(false),
        Some(v) => crate::input::flag(v)
            .ok_or_else(|| ApiError::BadRequest(crate::input::flag_error(name))),
    }
}

/// Removes an upload's scratch files, and the stored files of a refused bundle, when the
/// handler returns.
struct Cleanup {
    files: Vec<std::path::PathBuf>,
    dirs: Vec<std::path::PathBuf>,
    /// Key prefixes in the file storage.
    stored: Vec<String>,
    store: crate::files::Files,
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
        files: &state.files,
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

/// What an upload's form asks for, checked field by field.
struct Asked {
    /// The idempotency key, as a dry run keys it.
    key: Option<String>,
    mode: crate::engine::whole::Mode,
    /// The entity as the form names it, and its definition.
    name: String,
    entity: Arc<crate::schema::Entity>,
    /// The received file and its original name.
    src: std::path::PathBuf,
    file_name: String,
    encoding: &'static encoding_rs::Encoding,
    background: bool,
    show_progress: bool,
    get_content: bool,
    campaign_id: Option<i64>,
}

/// Reads and checks the form's fields, in the order their errors are reported.
fn asked(idempotency_key: Option<&str>, received: &Received, state: &AppState) -> Result<Asked> {
    let key = crate::input::idempotency_key(idempotency_key).map_err(ApiError::BadRequest)?;
    let mode = crate::engine::whole::Mode {
        dry_run: flag(received, "dry_run")?,
        atomic: flag(received, "atomic")?,
    };
    let key = super::batch::dry_run_key(key, mode);
    let name = received
        .fields
        .get("entity")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| ApiError::BadRequest("the `entity` field is required".into()))?;
    let catalog = state.engine.catalog.load();
    let entity = catalog.get(&name).cloned().ok_or_else(|| {
        ApiError::BadRequest(crate::schema::format::with_hint(
            format!(
                "there is no entity `{}`",
                crate::schema::format::shown(&name)
            ),
            &name,
            catalog.entities.keys().map(String::as_str),
        ))
    })?;
    let (src, file_name) = received
        .file
        .clone()
        .ok_or_else(|| ApiError::BadRequest("the `csvfile` file is required".into()))?;
    let encoding = encoding_of(received.fields.get("encoding").map(String::as_str))
        .map_err(|label| ApiError::BadRequest(format!("unknown encoding `{label}`")))?;
    let background = flag(received, "bgrs")?;
    let show_progress = flag(received, "show_progress")?;
    let get_content = flag(received, "get_content")?;
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
    Ok(Asked {
        key,
        mode,
        name,
        entity,
        src,
        file_name,
        encoding,
        background,
        show_progress,
        get_content,
        campaign_id,
    })
}

/// The encoding the `encoding` field names (UTF-8 when it is absent or blank), or the label
/// it does not know.
fn encoding_of(field: Option<&str>) -> std::result::Result<&'static encoding_rs::Encoding, &str> {
    let label = field
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .unwrap_or("UTF-8");
    encoding_rs::Encoding::for_label(label.as_bytes()).ok_or(label)
}

/// Checks the CSV at `csv_path` whole, writing its UTF-8 working copy to `utf8`, and seals
/// the copy's secret columns: its layout, and whether it was sealed. A record may be as long
/// as the body of one call (`max_body_bytes`).
async fn check_file(
    csv_path: std::path::PathBuf,
    utf8: &std::path::Path,
    asked: &Asked,
    early: Option<intake::Early>,
    max_record: usize,
) -> Result<(validate::Layout, bool)> {
    let (u2, encoding) = (utf8.to_path_buf(), asked.encoding);
    let started = std::time::Instant::now();
    let layout = match early {
        Some(checked) => checked.finish(&csv_path).await?,
        None => tokio::task::spawn_blocking(move || {
            validate::check(&csv_path, &u2, encoding, max_record)
        })
        .await
        .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))??,
    };
    tracing::info!(
        rows = layout.rows,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "upload checked"
    );
    let (l2, e2, u2) = (layout.clone(), asked.entity.clone(), utf8.to_path_buf());
    tokio::task::spawn_blocking(move || {
        crate::uploader::rows::check_columns(&l2, &e2, &u2, encoding)
    })
    .await
    .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))?
    .map_err(|m| ApiError::BadRequest(format!("the file cannot be used: {m}")))?;
    let (u2, l2, e2) = (utf8.to_path_buf(), layout.clone(), asked.entity.clone());
    let sealed =
        tokio::task::spawn_blocking(move || crate::uploader::seal::seal_file(&u2, &l2, &e2))
            .await
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))??;
    Ok((layout, sealed))
}

/// The background request that runs `plan`: in the background, or here.
fn upload_request(
    caller: &Caller,
    asked: &Asked,
    plan: &Plan,
    details: Vec<String>,
) -> Result<NewRequest> {
    Ok(NewRequest {
        user_id: caller.id,
        name: "uploader".into(),
        kind: if asked.background {
            KindId::Upload
        } else {
            KindId::UploadHere
        },
        entity: plan.entity.clone(),
        params: serde_json::to_value(plan)
            .map_err(|_| ApiError::Call(crate::engine::CallError::Internal))?,
        items: Default::default(),
        total: Some(plan.layout.rows as i64),
        content_type: format!("text/csv; charset={}", asked.encoding.name()),
        run_here: !asked.background,
        details,
    })
}

/// An upload: the form checked, a bundle opened, the file checked and sealed, the request
/// enqueued; answered 202 (background) or run here.
async fn upload(
    idempotency_key: Option<String>,
    mut received: Received,
    caller: Caller,
    state: &AppState,
) -> Result<Response> {
    let early = received.early.take();
    let dir = intake::work_dir(&state.settings.data_dir);
    let mut cleanup = Cleanup {
        files: received.file.iter().map(|(p, _)| p.clone()).collect(),
        dirs: Vec::new(),
        stored: Vec::new(),
        store: state.files.clone(),
    };
    let asked = asked(idempotency_key.as_deref(), &received, state)?;
    let opened = if crate::uploader::bundle::is_zip(&asked.src) {
        Some(
            open_bundle(
                state,
                &caller,
                &asked.entity,
                &asked.src,
                &asked.file_name,
                asked.campaign_id,
                &mut cleanup,
            )
            .await?,
        )
    } else {
        None
    };
    let csv_path = opened.as_ref().map_or(asked.src.clone(), |o| o.csv.clone());
    // The check made as the file arrived stands when the file is the CSV and was read in
    // the encoding finally asked for.
    let early = early.filter(|e| opened.is_none() && e.encoding == asked.encoding);
    let utf8 = early
        .as_ref()
        .map_or_else(|| intake::working_copy_path(&dir), |e| e.utf8.clone());
    cleanup.files.push(utf8.clone());
    let (layout, sealed) = check_file(
        csv_path,
        &utf8,
        &asked,
        early,
        state.settings.max_body_bytes,
    )
    .await?;
    let mode = asked.mode;
    let plan = Plan {
        entity: asked.name.clone(),
        encoding: asked.encoding.name().to_string(),
        layout,
        utf8_path: utf8.clone(),
        file_name: asked.file_name.clone(),
        bundle: opened.as_ref().map(|o| o.state.clone()),
        sealed,
        mode,
        stored: if mode.whole() {
            cleanup.stored.clone()
        } else {
            Vec::new()
        },
    };
    // Every server finds the working copy of a background upload from here on (the 202 comes
    // after); a synchronous one runs here only.
    if asked.background {
        crate::uploader::keep::publish_working_copy(&state.jobs, &plan).await?;
    }
    let new = upload_request(
        &caller,
        &asked,
        &plan,
        opened.map(|o| o.notes).unwrap_or_default(),
    )?;
    let rid = match state.jobs.enqueue(new, asked.key.as_deref()).await? {
        Ok(rid) => rid,
        Err(reply) => {
            // A retry answered as the first request did: its own working copy is not used.
            crate::uploader::keep::drop_working_copy(&state.jobs, &plan).await;
            return Ok(Response::builder()
                .status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK))
                .content_type(reply.content_type)
                .body(reply.body));
        }
    };
    // The working copy and stored files now belong to the request.
    cleanup.files.retain(|p| p != &utf8);
    cleanup.stored.clear();
    if asked.background {
        return Ok(json_response(
            StatusCode::ACCEPTED,
            &json!({"request": rid}),
        ));
    }
    let (show_progress, get_content) = (asked.show_progress, asked.get_content);
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
    let (jobs, plugins, files) = (
        state.jobs.clone(),
        state.plugins.clone(),
        state.files.clone(),
    );
    let (_, rel) = crate::uploader::result_location(&state.settings.data_dir, rid);
    if !show_progress {
        let (_keep, stop) = tokio::sync::watch::channel(false);
        let bundles = run::Bundles {
            plugins: &plugins,
            files: &files,
        };
        run::rows(&jobs, &bundles, &req, caller, Sink::Quiet, &stop).await?;
        let body = stored_result(&jobs, &rel).await?;
        return Ok(csv_attachment(body, &plan.result_name(), plan));
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
        let bundles = run::Bundles {
            plugins: &plugins,
            files: &files,
        };
        let result = run::rows(&jobs, &bundles, &req, &caller, Sink::Stream(tx), &stop).await;
        let _ = forward.await;
        let tail = match result {
            Err(e) => {
                tracing::error!(error = %e, "synchronous upload failed");
                "Error: the upload stopped because of a server failure\n".to_string()
            }
            Ok(()) if get_content => {
                // The result file, piece by piece.
                use futures::StreamExt;
                if let Some(meta) = jobs.files.head(&rel).await.ok().flatten()
                    && let Ok(mut bytes) = jobs.files.read(&rel, 0..meta.size).await
                {
                    while let Some(chunk) = bytes.next().await {
                        if out_tx.send(chunk).await.is_err() {
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

/// The whole stored result file `key`, as a body.
async fn stored_result(jobs: &crate::jobs::Jobs, key: &str) -> Result<Body> {
    let io = |e: crate::files::FileError| ApiError::from(UploadError::from(e));
    let meta = jobs
        .files
        .head(key)
        .await
        .map_err(io)?
        .ok_or_else(|| ApiError::from(UploadError::Io(format!("{key} is missing"))))?;
    let bytes = jobs.files.read(key, 0..meta.size).await.map_err(io)?;
    Ok(Body::from_bytes_stream(bytes))
}

fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<std::io::Result<bytes::Bytes>>,
) -> impl futures::Stream<Item = std::io::Result<bytes::Bytes>> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// A result CSV as a download named `<original name>res.csv`.
pub fn csv_attachment(body: Body, name: &str, plan: &Plan) -> Response {
    let mut resp = Response::builder().body(body);
    csv_headers(&mut resp, name, plan);
    resp
}

/// Makes `resp` a result CSV download named `<original name>res.csv`.
pub fn csv_headers(resp: &mut Response, name: &str, plan: &Plan) {
    let safe: String = name
        .chars()
        .map(|c| if c == '"' || c.is_control() { '_' } else { c })
        .collect();
    let h = resp.headers_mut();
    let mut set = |name, s: String| {
        if let Ok(v) = poem::http::HeaderValue::try_from(s) {
            h.insert(name, v);
        }
    };
    set(
        poem::http::header::CONTENT_TYPE,
        format!("text/csv; charset={}", plan.encoding().name()),
    );
    set(
        poem::http::header::CONTENT_DISPOSITION,
        format!("attachment; filename=\"{safe}\""),
    );
}

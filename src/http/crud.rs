//! The CRUD routes of every entity: list (JSON or `t=csv`, with `X-Total-Count` and a
//! `Link: <...>; rel="next"` while more rows follow), get, create, update, delete.
//! Each change becomes one engine [`Call`].

use super::batch;
use super::body::{self, Payload};
use super::error::{ApiError, Result};
use super::{AppState, Authed, MaybeAuthed, json_response};
use crate::engine::read::{DEFAULT_LIMIT, ListQuery, MAX_LIMIT, PageStart};
use crate::engine::{Call, CallError, Caller, Op, prepare, render};
use crate::schema::Action;
use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{Body, Request, Response, handler};
use serde_json::{Map, Value as Json};
use std::sync::Arc;

fn parse_id(entity: &str, id: &str) -> Result<i64> {
    // Ids are assigned from 1: anything else names no object.
    crate::input::id(id).filter(|n| *n >= 1).ok_or_else(|| {
        ApiError::NotFound(format!(
            "{entity} `{}` does not exist",
            crate::schema::format::shown(id)
        ))
    })
}

fn page_param(pairs: &[(String, String)], name: &str, default: i64, max: i64) -> Result<i64> {
    match body::query_param(pairs, name) {
        None => Ok(default),
        Some(v) => match v.trim().parse::<i64>() {
            Ok(n) if (0..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::BadRequest(format!(
                "`{name}` must be an integer from 0 to {max}"
            ))),
        },
    }
}

#[handler]
pub async fn list(
    req: &Request,
    body: Body,
    Path(entity): Path<String>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let caller = who.for_rule(state, &entity, Action::List)?;
    if let Payload::Array(_) = body::read(req, body, &body::Limits::of(&state.settings)).await? {
        return Err(ApiError::MethodNotAllowed(
            "only POST, PUT and DELETE can be batched".into(),
        ));
    }
    let pairs = body::query_pairs(req)?;
    let limit = page_param(&pairs, "limit", DEFAULT_LIMIT, MAX_LIMIT)?;
    let offset = page_param(&pairs, "offset", 0, i64::MAX)?;
    let start = match body::query_param(&pairs, "cursor") {
        None => PageStart::Offset(offset),
        Some(_) if body::query_param(&pairs, "offset").is_some() => {
            return Err(ApiError::BadRequest(
                "give either `offset` or `cursor`, not both".into(),
            ));
        }
        Some(c) => PageStart::Cursor(c),
    };
    let as_csv = match body::query_param(&pairs, "t").as_deref() {
        None | Some("json") => false,
        Some("csv") => true,
        Some(_) => return Err(ApiError::BadRequest("`t` must be csv or json".into())),
    };
    let changed_by = body::query_param(&pairs, "changed_by");
    if let Some(rid) = &changed_by {
        // Only a request the caller may see (its owner, or an admin).
        if rid.len() == 32 && state.jobs.find(&caller, rid).await?.is_none() {
            return Err(ApiError::NotFound(format!(
                "background request `{rid}` does not exist"
            )));
        }
    }
    let query = ListQuery {
        filters: body::field_pairs(pairs.clone()),
        sort: body::query_param(&pairs, "sort"),
        fields: body::query_param(&pairs, "fields"),
        changed_by,
        limit,
        start,
    };
    let page = state.engine.list(&caller, &entity, query).await?;
    let mut resp = if as_csv {
        let header = page
            .columns
            .clone()
            .unwrap_or_else(|| render::csv_header(&page.entity));
        csv_response(&page.entity, &header, &page.items)?
    } else {
        json_response(StatusCode::OK, &Json::Array(page.items))
    };
    resp.headers_mut()
        .insert("x-total-count", page.total.into());
    if let Some(cursor) = &page.next {
        let link = next_link(super::full_path(req), pairs, cursor)?;
        resp.headers_mut().insert("link", link);
    }
    Ok(resp)
}

/// `Link: <path?query>; rel="next"` (RFC 8288): the request's own query with `offset` and
/// `cursor` replaced by the next page's cursor. The target is a path-absolute reference, which
/// resolves against the request's URL whatever host and scheme a proxy in front shows.
fn next_link(
    path: &str,
    pairs: Vec<(String, String)>,
    cursor: &str,
) -> Result<poem::http::HeaderValue> {
    let mut query: Vec<(String, String)> = pairs
        .into_iter()
        .filter(|(k, _)| k != "offset" && k != "cursor")
        .collect();
    query.push(("cursor".into(), cursor.into()));
    let query =
        serde_urlencoded::to_string(&query).map_err(|_| ApiError::Call(CallError::Internal))?;
    poem::http::HeaderValue::from_str(&format!("<{path}?{query}>; rel=\"next\""))
        .map_err(|_| ApiError::Call(CallError::Internal))
}

fn csv_response(e: &crate::schema::Entity, header: &[String], items: &[Json]) -> Result<Response> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let internal = |_| ApiError::Call(CallError::Internal);
    w.write_record(header).map_err(internal)?;
    for item in items {
        let cells = header
            .iter()
            .map(|h| render::csv_field(e, h, &item[h.as_str()]));
        w.write_record(cells).map_err(internal)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|_| ApiError::Call(CallError::Internal))?;
    Ok(Response::builder()
        .content_type("text/csv; charset=utf-8")
        .body(bytes))
}

#[handler]
pub async fn get_one(
    req: &Request,
    Path((entity, id)): Path<(String, String)>,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    read_one(req, state, &entity, &id).await
}

/// `GET /<entity>/<id>`: the object, as the caller's rule lets it see it. The front layer calls
/// it directly for a plain path ([`crate::routes::plain_item`]), the router through
/// [`get_one`] for any other.
pub async fn read_one(req: &Request, state: &AppState, entity: &str, id: &str) -> Result<Response> {
    let caller = MaybeAuthed::of(req)
        .await?
        .for_rule(state, entity, Action::View)?;
    let id = parse_id(entity, id)?;
    let (e, point) = state.engine.get_row(&caller, entity, id).await?;
    let body = point
        .json(&e, || {
            serde_json::to_vec(&render::RowObject(&e, &point.row))
        })
        .map_err(|_| ApiError::from(CallError::Internal))?;
    Ok(Response::builder()
        .status(StatusCode::OK)
        .header(poem::http::header::CONTENT_TYPE, super::JSON_TYPE)
        .body(body))
}

/// The parameters of a single create or update: query-string fields, overridden by the body's.
fn single_params(
    state: &AppState,
    req: &Request,
    payload: Payload,
    entity: &str,
) -> Result<Map<String, Json>> {
    let catalog = state.engine.catalog.load();
    let e = catalog
        .get(entity)
        .ok_or_else(|| CallError::UnknownEntity(entity.to_string()))?;
    let mut params = prepare::coerce_strings(e, body::field_pairs(body::query_pairs(req)?))?;
    match payload {
        Payload::None => {}
        Payload::Object(m) => params.extend(m),
        Payload::Strings(s) => params.extend(prepare::coerce_strings(e, s)?),
        Payload::Array(_) => {
            return Err(ApiError::BadRequest(
                "a JSON array is a batch: send it to the collection path".into(),
            ));
        }
    }
    Ok(params)
}

/// Runs a single call now, or queues it with `bgrs=1`.
async fn run(state: &AppState, req: &Request, caller: &Caller, call: Call) -> Result<Response> {
    let pairs = body::query_pairs(req)?;
    let mode = batch::mode(&pairs, false)?;
    if batch::bgrs_flag(&pairs)? == Some(true) {
        return batch::background_call(state, req, caller, call, mode).await;
    }
    let obj = if mode.dry_run {
        state.engine.dry_call(caller, &call).await?
    } else {
        state.engine.call(caller, &call).await?
    };
    Ok(json_response(StatusCode::OK, &obj))
}

fn json_content_type(req: &Request) -> bool {
    super::header(req, poem::http::header::CONTENT_TYPE).is_some_and(|c| {
        c.split(';')
            .next()
            .unwrap_or("")
            .trim()
            .eq_ignore_ascii_case("application/json")
    })
}

/// A JSON array on a collection route is a batch.
async fn collection(
    state: &AppState,
    req: &Request,
    body: Body,
    caller: &Caller,
    entity: String,
    op: Op,
) -> Result<Response> {
    let payload = body::read(req, body, &body::Limits::of(&state.settings)).await?;
    let op = if op == Op::Create && upsert(state, req, &entity)? {
        Op::Save
    } else {
        op
    };
    match (op, payload) {
        (_, Payload::Array(items)) => {
            if !json_content_type(req) {
                return Err(ApiError::UnsupportedMediaType(
                    "a batch must be sent as application/json".into(),
                ));
            }
            batch::run(state, req, caller, &entity, op, items).await
        }
        (Op::Create | Op::Save, payload) => {
            let params = single_params(state, req, payload, &entity)?;
            run(
                state,
                req,
                caller,
                Call {
                    entity,
                    op,
                    id: None,
                    params,
                    prehashed: false,
                },
            )
            .await
        }
        (Op::Update, _) => Err(ApiError::MethodNotAllowed(format!(
            "PUT on a collection takes a JSON array of objects with `id`; a single update goes to /{entity}/<id>"
        ))),
        (Op::Delete, _) => Err(ApiError::MethodNotAllowed(format!(
            "DELETE on a collection takes a JSON array of ids; a single delete goes to /{entity}/<id>"
        ))),
    }
}

/// `upsert=1` on a POST: create or update by the entity's key, which it must have.
fn upsert(state: &AppState, req: &Request, entity: &str) -> Result<bool> {
    let pairs = body::query_pairs(req)?;
    let Some(v) = body::query_param(&pairs, "upsert") else {
        return Ok(false);
    };
    let on = crate::input::flag(&v)
        .ok_or_else(|| ApiError::BadRequest(crate::input::flag_error("upsert")))?;
    if on {
        let catalog = state.engine.catalog.load();
        let e = catalog.entity(entity)?;
        if !e.has_key() {
            return Err(ApiError::BadRequest(format!(
                "`{entity}` has no key, so `upsert` cannot find an object to update: give the entity `key: <field>` (or `key: [<field>, ...]`) in its definition"
            )));
        }
    }
    Ok(on)
}

#[handler]
pub async fn post_collection(
    req: &Request,
    body: Body,
    Path(entity): Path<String>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let caller = who.for_rule(state, &entity, Action::Create)?;
    collection(state, req, body, &caller, entity, Op::Create).await
}

#[handler]
pub async fn put_collection(
    req: &Request,
    body: Body,
    Path(entity): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    collection(state, req, body, &caller, entity, Op::Update).await
}

#[handler]
pub async fn delete_collection(
    req: &Request,
    body: Body,
    Path(entity): Path<String>,
    Authed(caller): Authed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    collection(state, req, body, &caller, entity, Op::Delete).await
}

#[handler]
pub async fn update(
    req: &Request,
    body: Body,
    Path((entity, id)): Path<(String, String)>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let caller = who.for_rule(state, &entity, Action::View)?;
    let id = parse_id(&entity, &id)?;
    let payload = body::read(req, body, &body::Limits::of(&state.settings)).await?;
    let params = single_params(state, req, payload, &entity)?;
    run(
        state,
        req,
        &caller,
        Call {
            entity,
            op: Op::Update,
            id: Some(id),
            params,
            prehashed: false,
        },
    )
    .await
}

#[handler]
pub async fn delete(
    req: &Request,
    Path((entity, id)): Path<(String, String)>,
    who: MaybeAuthed,
    Data(state): Data<&Arc<AppState>>,
) -> Result<Response> {
    let caller = who.for_rule(state, &entity, Action::View)?;
    let id = parse_id(&entity, &id)?;
    let call = Call {
        entity,
        op: Op::Delete,
        id: Some(id),
        params: Map::new(),
        prehashed: false,
    };
    run(state, req, &caller, call).await
}

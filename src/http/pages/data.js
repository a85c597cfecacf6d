// The data page: the objects of one entity, a page at a time, with the list query of the API:
// `sort`, `fields` and filters (`field=v`, `field[op]=v`). Pages follow the
// `Link: <...>; rel="next"` cursor of each reply; the total comes from `X-Total-Count`.
// Where the caller's role may write the entity: create and edit (editor.js), delete one object
// after a confirmation, and delete the selected rows as one background batch that can be
// undone. The page shown follows the entity's live changes (`/<entity>/events` with the same
// filters and fields) and is read again after each one, at most a few times a second.
// Hooks: data-id="<id>" on each row, data-action="create|edit|delete|confirm|cancel".
'use strict';

(() => {
  const { $, el, api, describe } = Tools;
  const PAGE = 100;
  const OPS = [
    ['eq', '='], ['ne', '≠'], ['gt', '>'], ['gte', '≥'], ['lt', '<'], ['lte', '≤'],
    ['in', 'one of (a,b,c)'], ['contains', 'contains'],
  ];

  let shownFrom = 0; // index of the first row shown
  let nextUrl = null; // the next page, from the Link header
  let shownUrl = null; // the page shown, to show again after a change
  let columns = [];
  let me = null; // the signed-in user
  let defs = {}; // the entities' definitions, from /tools/entities
  const selected = new Set(); // ids of the selected rows of the page shown

  function showError(text) {
    $('error').textContent = text;
    $('error').hidden = !text;
  }

  /** The query of the current form, without paging. */
  function params() {
    const p = new URLSearchParams();
    const sort = $('sort').value.trim();
    if (sort) p.set('sort', sort);
    const fields = $('fields').value.trim();
    if (fields) p.set('fields', fields);
    const by = $('changed-by').value.trim();
    if (by) p.set('changed_by', by);
    for (const row of document.querySelectorAll('#filters .filter')) {
      const field = row.querySelector('.f-field').value.trim();
      const op = row.querySelector('.f-op').value;
      if (!field) continue;
      p.append(op === 'eq' ? field : `${field}[${op}]`, row.querySelector('.f-value').value);
    }
    return p;
  }

  function addFilter(field = '', op = 'eq', value = '') {
    const select = el('select', { className: 'f-op', 'aria-label': 'Operator' },
      OPS.map(([v, label]) => el('option', { value: v, selected: v === op }, label)));
    const row = el('div', { className: 'filter toolbar' },
      el('input', { className: 'f-field', type: 'text', placeholder: 'field', value: field,
        'aria-label': 'Field', spellcheck: false, list: 'columns' }),
      select,
      el('input', { className: 'f-value', type: 'text', placeholder: 'value', value,
        'aria-label': 'Value' }),
      el('button', { type: 'button', className: 'secondary small', onclick: () => row.remove() },
        'Remove'));
    $('filters').append(row);
    row.querySelector('.f-field').focus();
  }

  /** The `rel="next"` target of a Link header, as a path the API helper takes. */
  function nextOf(resp) {
    const link = resp.headers.get('link') || '';
    const m = link.match(/<([^>]+)>\s*;\s*rel="?next"?/);
    if (!m) return null;
    const u = new URL(m[1], location.origin);
    const prefix = location.pathname.startsWith('/v2.5/') ? '/v2.5' : '';
    const path = u.pathname.startsWith(prefix) ? u.pathname.slice(prefix.length) : u.pathname;
    return path + u.search;
  }

  function sortBy(col) {
    const now = $('sort').value.trim();
    $('sort').value = now === col ? `-${col}` : col;
    show(firstUrl());
  }

  /** What the caller may do with the entity shown: create, and per object edit and delete. */
  function rights() {
    const def = defs[$('entity').value];
    if (!def || !me) return { create: false, edit: () => false, remove: false };
    // A rule of roles is decided here; an expression is decided by the server, row by row.
    const allows = (rule) => me.role === 'admin' || !!rule.public
      || (rule.roles ? rule.roles.includes(me.role) : true);
    return {
      create: allows(def.access.create),
      edit: () => allows(def.access.update),
      remove: allows(def.access.delete),
    };
  }

  function heads(may) {
    const sort = $('sort').value.trim().split(',')[0] || '';
    const ths = columns.map((c) => {
      const mark = sort === c ? ' ▲' : sort === `-${c}` ? ' ▼' : '';
      return el('th', { scope: 'col', dataset: { col: c },
        'aria-sort': sort === c ? 'ascending' : sort === `-${c}` ? 'descending' : null },
      el('button', { type: 'button', className: 'link sort', onclick: () => sortBy(c),
        title: `Sort by ${c}` }, c + mark));
    });
    const all = may.remove
      ? el('th', { scope: 'col', className: 'pick' }, el('input', { type: 'checkbox', id: 'select-all',
        'aria-label': 'Select every row of this page', onchange: (ev) => selectAll(ev.target.checked) }))
      : null;
    $('heads').replaceChildren(...[all, ...ths, el('th', { scope: 'col', className: 'row-actions' }, 'Actions')].filter(Boolean));
  }

  function rowOf(o, may) {
    const entity = $('entity').value;
    const id = o.id;
    const cells = columns.map((c) => {
      const v = o[c];
      const text = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
      return el('td', { className: 'mono', title: text.length > 40 ? text : null }, text);
    });
    const known = id !== undefined && id !== null;
    const pick = may.remove ? el('td', { className: 'pick' }, known ? el('input', {
      type: 'checkbox', checked: selected.has(String(id)), 'aria-label': `Select ${entity} ${id}`,
      dataset: { select: String(id) }, onchange: (ev) => select(String(id), ev.target.checked),
    }) : '') : null;
    const actions = el('td', { className: 'row-actions' }, el('span', { className: 'actions' },
      known && may.edit(o) ? el('button', { type: 'button', className: 'secondary small', dataset: { action: 'edit' },
        'aria-label': `Edit ${entity} ${id}`, onclick: () => edit(id) }, 'Edit') : '',
      known && may.remove ? el('button', { type: 'button', className: 'danger small', dataset: { action: 'delete' },
        'aria-label': `Delete ${entity} ${id}`, onclick: () => askDelete(o) }, 'Delete') : ''));
    return el('tr', { dataset: known ? { id: String(id) } : {} }, pick, cells, actions);
  }

  function render(items, total) {
    const seen = new Set(columns);
    for (const o of items) for (const k of Object.keys(o)) if (!seen.has(k)) { seen.add(k); columns.push(k); }
    const may = rights();
    heads(may);
    $('rows').replaceChildren(...items.map((o) => rowOf(o, may)));
    $('edit-bar').hidden = !may.create && !may.remove;
    $('create').hidden = !may.create;
    $('create').textContent = `New object in ${$('entity').value}`;
    $('delete-selected').hidden = !may.remove;
    showSelected();
    let list = document.getElementById('columns');
    if (!list) { list = el('datalist', { id: 'columns' }); document.body.append(list); }
    list.replaceChildren(...columns.map((c) => el('option', { value: c })));
    $('empty').hidden = items.length > 0;
    $('range').textContent = items.length
      ? `${shownFrom + 1}–${shownFrom + items.length} of ${total}`
      : `0 of ${total}`;
    $('next').disabled = !nextUrl;
    $('first').disabled = shownFrom === 0;
    $('download').disabled = false;
  }

  function firstUrl() {
    const p = params();
    p.set('limit', String(PAGE));
    return `/${encodeURIComponent($('entity').value)}?${p}`;
  }

  let live = null; // the EventSource of the entity shown
  let liveKey = ''; // what it follows
  let refresh = null; // a pending read of the page after a change
  let shownSeen = ''; // the total and objects of the page shown, as JSON

  /** Follows the changes of the entity shown, with the form's filters and fields. */
  function follow() {
    const entity = $('entity').value;
    const p = params();
    p.delete('sort');
    p.delete('changed_by');
    const key = `${entity}?${p}`;
    if (live && key === liveKey) return;
    if (live) live.close();
    live = null;
    liveKey = key;
    if (!entity || !Tools.token()) { $('live').hidden = true; return; }
    p.set('_token', Tools.token());
    live = new EventSource(`${Tools.PREFIX}/${encodeURIComponent(entity)}/events?${p}`);
    const state = (text) => { $('live').textContent = text; $('live').hidden = false; };
    live.addEventListener('ready', () => state('Live: changes show as they happen'));
    live.onerror = () => state(live && live.readyState === EventSource.CLOSED
      ? 'Live updates are off for this query'
      : 'Live updates paused: reconnecting…');
    const changed = () => {
      if (refresh || !shownUrl) return;
      refresh = setTimeout(() => { refresh = null; show(shownUrl, shownFrom); }, 250);
    };
    for (const kind of ['create', 'update', 'delete']) live.addEventListener(kind, changed);
    live.addEventListener('reset', () => { live.close(); live = null; liveKey = ''; show(shownUrl || firstUrl()); });
  }

  async function show(url, from = 0) {
    if (!$('entity').value) return;
    follow();
    try {
      const resp = await api(url);
      if (!resp.ok) throw new Error(await describe(resp));
      const items = await resp.json();
      const total = resp.headers.get('x-total-count') || items.length;
      // A page read again after a change that left it as it was stays as it is (a row being
      // clicked is not drawn anew under the pointer).
      const seen = JSON.stringify([total, items]);
      if (url === shownUrl && from === shownFrom && seen === shownSeen) { showError(''); return; }
      shownSeen = seen;
      if (from === 0) columns = [];
      if (url !== shownUrl) selected.clear();
      shownUrl = url;
      shownFrom = from;
      nextUrl = nextOf(resp);
      showError('');
      render(items, total);
    } catch (e) {
      if (e instanceof Tools.SessionEnded) return;
      showError(`The objects could not be listed: ${e.message}`);
      $('rows').replaceChildren();
      $('range').textContent = '';
      $('next').disabled = true;
      $('download').disabled = true;
    }
  }

  async function download() {
    const p = params();
    p.set('t', 'csv');
    p.set('limit', '10000');
    const entity = $('entity').value;
    try {
      const resp = await api(`/${encodeURIComponent(entity)}?${p}`);
      if (!resp.ok) throw new Error(await describe(resp));
      Tools.saveBlob(await resp.blob(), Tools.filenameOf(resp, `${entity}.csv`));
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The CSV could not be downloaded: ${e.message}`);
    }
  }

  const known = (entity) => [...$('entity').options].some((o) => o.value === entity);

  /** What a background request changed, per entity: links that show each. */
  async function changedEntities(rid) {
    try {
      const preview = await Tools.getJson(`/bgrs/${encodeURIComponent(rid)}/undo`);
      const names = Object.keys(preview.entities).filter(known);
      $('changed-note').replaceChildren(
        `Request ${rid.slice(0, 8)}… created or changed: `,
        ...names.flatMap((name, i) => [
          i ? ', ' : '',
          el('button', { type: 'button', className: 'link', onclick: () => { $('entity').value = name; columns = []; show(firstUrl()); } },
            `${name} (${preview.entities[name].toLocaleString('en')})`),
        ]),
        names.length ? '' : 'nothing that still exists.',
      );
      $('changed-note').hidden = false;
      return names;
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`What ${rid} changed cannot be read: ${e.message}`);
      return [];
    }
  }

  // ---- Changes ---------------------------------------------------------------------------

  function notice(...parts) {
    $('notice-text').replaceChildren(...parts);
    $('notice').hidden = parts.length === 0;
  }

  const again = () => show(shownUrl || firstUrl(), shownUrl ? shownFrom : 0);

  function create() {
    const entity = $('entity').value;
    Editor.open({ entity, def: defs[entity], defs, me, object: null, onSaved: (o) => {
      notice(`Created ${entity} ${o.id}.`);
      again();
    } });
  }

  async function edit(id) {
    const entity = $('entity').value;
    try {
      const o = await Tools.getJson(`/${encodeURIComponent(entity)}/${encodeURIComponent(id)}`);
      Editor.open({ entity, def: defs[entity], defs, me, object: o, onSaved: () => {
        notice(`Saved ${entity} ${id}.`);
        again();
      } });
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`${entity} ${id} cannot be read: ${e.message}`);
    }
  }

  let confirmed = null; // what the confirmation dialog's Delete does

  function ask(text, go) {
    confirmed = go;
    $('confirm-what').textContent = text;
    $('confirm').showModal();
    $('confirm-cancel').focus();
  }

  function askDelete(o) {
    const entity = $('entity').value;
    const label = defs[entity] && defs[entity].label && o[defs[entity].label];
    ask(`Delete ${entity} ${o.id}${label ? ` (“${label}”)` : ''}? It is deleted at once.`, async () => {
      try {
        const resp = await api(`/${encodeURIComponent(entity)}/${encodeURIComponent(o.id)}`, { method: 'DELETE' });
        if (!resp.ok) throw new Error(await describe(resp));
        showError('');
        notice(`Deleted ${entity} ${o.id}.`);
        selected.delete(String(o.id));
        again();
      } catch (e) {
        if (!(e instanceof Tools.SessionEnded)) showError(`${entity} ${o.id} was not deleted: ${e.message}`);
      }
    });
  }

  function select(id, on) {
    if (on) selected.add(id); else selected.delete(id);
    showSelected();
  }

  function selectAll(on) {
    for (const box of document.querySelectorAll('#rows input[data-select]')) {
      box.checked = on;
      select(box.dataset.select, on);
    }
  }

  function showSelected() {
    const n = selected.size;
    $('delete-selected').disabled = n === 0;
    $('delete-selected').textContent = n ? `Delete ${n} selected` : 'Delete selected';
    $('selected-count').textContent = n ? `${n} row${n === 1 ? '' : 's'} selected` : '';
    const all = document.getElementById('select-all');
    const boxes = document.querySelectorAll('#rows input[data-select]');
    if (all) all.checked = boxes.length > 0 && [...boxes].every((b) => b.checked);
  }

  function askDeleteSelected() {
    const entity = $('entity').value;
    const ids = [...selected].map(Number);
    if (!ids.length) return;
    ask(`Delete ${ids.length.toLocaleString('en')} objects of ${entity} (${ids.slice(0, 10).join(', ')}${ids.length > 10 ? ', …' : ''})? They are deleted as one background request, which can be undone.`,
      () => deleteBatch(entity, ids));
  }

  async function deleteBatch(entity, ids) {
    try {
      const resp = await api(`/${encodeURIComponent(entity)}?bgrs=1`, {
        method: 'DELETE', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(ids),
      });
      if (!resp.ok) throw new Error(await describe(resp));
      const { request } = await resp.json();
      showError('');
      notice(`Deleting ${ids.length.toLocaleString('en')} objects of ${entity} in background request ${request.slice(0, 8)}…`);
      selected.clear();
      const rec = await Tools.finished(request);
      const failed = await Tools.failures(request);
      const done = ids.length - failed.failed;
      notice(
        `Deleted ${done.toLocaleString('en')} of ${ids.length.toLocaleString('en')} objects of ${entity} in background request `,
        el('a', { href: 'requests', className: 'mono', title: request }, `${request.slice(0, 8)}…`),
        failed.failed ? ` (${failed.failed} failed: ${failed.rows.map((r) => `item ${r.line}: ${r.res}`).join('; ')}). ` : '. ',
        rec.status_id === '4' && done > 0
          ? el('button', { type: 'button', className: 'secondary small', id: 'undo-batch', dataset: { action: 'undo', rid: request },
            onclick: (ev) => undoBatch(entity, request, ev.currentTarget) }, 'Undo')
          : '',
      );
      again();
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The ${entity} objects were not deleted: ${e.message}`);
    }
  }

  async function undoBatch(entity, rid, btn) {
    btn.disabled = true;
    try {
      const resp = await api(`/bgrs/${encodeURIComponent(rid)}/undo`, { method: 'POST' });
      if (!resp.ok) throw new Error(await describe(resp));
      const { request } = await resp.json();
      notice(`Undoing request ${rid.slice(0, 8)}… in background request ${request.slice(0, 8)}…`);
      await Tools.finished(request);
      const failed = await Tools.failures(request);
      notice(failed.failed
        ? `The delete was undone except for ${failed.failed} objects changed since (request ${request.slice(0, 8)}…).`
        : `The delete was undone: the objects of ${entity} are back (request ${request.slice(0, 8)}…).`);
      again();
    } catch (e) {
      btn.disabled = false;
      if (!(e instanceof Tools.SessionEnded)) showError(`The delete could not be undone: ${e.message}`);
    }
  }

  /** The page opens on `?entity=...&sort=...&changed_by=...`. */
  async function fromLocation() {
    const q = new URLSearchParams(location.search);
    const entity = q.get('entity');
    if (entity && known(entity)) $('entity').value = entity;
    if (q.get('sort')) $('sort').value = q.get('sort');
    const by = q.get('changed_by');
    if (by) {
      $('changed-by').value = by;
      const names = await changedEntities(by);
      if (!$('entity').value && names.length) $('entity').value = names[0];
    }
  }

  async function ready(who) {
    me = who;
    try {
      defs = await Tools.getJson('/tools/entities');
    } catch (e) {
      if (!(e instanceof Tools.SessionEnded)) showError(`The entities' definitions cannot be read, so nothing can be edited: ${e.message}`);
    }
    await fromLocation();
    if ($('entity').value) show(firstUrl());
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('query').addEventListener('submit', (ev) => { ev.preventDefault(); show(firstUrl()); });
    $('entity').addEventListener('change', () => { columns = []; selected.clear(); show(firstUrl()); });
    $('create').addEventListener('click', create);
    $('delete-selected').addEventListener('click', askDeleteSelected);
    $('confirm-ok').addEventListener('click', () => { const go = confirmed; confirmed = null; $('confirm').close(); if (go) go(); });
    $('confirm-cancel').addEventListener('click', () => $('confirm').close());
    $('confirm').addEventListener('close', () => { confirmed = null; });
    $('add-filter').addEventListener('click', () => addFilter());
    $('next').addEventListener('click', () => {
      if (nextUrl) show(nextUrl, shownFrom + $('rows').children.length);
    });
    $('first').addEventListener('click', () => show(firstUrl()));
    $('download').addEventListener('click', download);
    Tools.start(ready);
  });
})();

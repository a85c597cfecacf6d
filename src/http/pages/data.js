// The data page: the objects of one entity, a page at a time, with the list query of the API:
// `sort`, `fields` and filters (`field=v`, `field[op]=v`). Pages follow the
// `Link: <...>; rel="next"` cursor of each reply; the total comes from `X-Total-Count`.
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
  let columns = [];

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

  function render(items, total) {
    const seen = new Set(columns);
    for (const o of items) for (const k of Object.keys(o)) if (!seen.has(k)) { seen.add(k); columns.push(k); }
    const sort = $('sort').value.trim().split(',')[0] || '';
    $('heads').replaceChildren(...columns.map((c) => {
      const mark = sort === c ? ' ▲' : sort === `-${c}` ? ' ▼' : '';
      return el('th', {},
        el('button', { type: 'button', className: 'link sort', onclick: () => sortBy(c),
          title: `Sort by ${c}` }, c + mark));
    }));
    $('rows').replaceChildren(...items.map((o) => el('tr', {},
      columns.map((c) => {
        const v = o[c];
        return el('td', { className: 'mono' },
          v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
      }))));
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

  async function show(url, from = 0) {
    if (!$('entity').value) return;
    try {
      const resp = await api(url);
      if (!resp.ok) throw new Error(await describe(resp));
      const items = await resp.json();
      if (from === 0) columns = [];
      shownFrom = from;
      nextUrl = nextOf(resp);
      showError('');
      render(items, resp.headers.get('x-total-count') || items.length);
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

  async function ready() {
    await fromLocation();
    if ($('entity').value) show(firstUrl());
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('query').addEventListener('submit', (ev) => { ev.preventDefault(); show(firstUrl()); });
    $('entity').addEventListener('change', () => { columns = []; show(firstUrl()); });
    $('add-filter').addEventListener('click', () => addFilter());
    $('next').addEventListener('click', () => {
      if (nextUrl) show(nextUrl, shownFrom + $('rows').children.length);
    });
    $('first').addEventListener('click', () => show(firstUrl()));
    $('download').addEventListener('click', download);
    Tools.start(ready);
  });
})();

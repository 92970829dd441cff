// The audit page's script: reads the data embedded as JSON (never evaluated as code) and
// draws every view with DOM calls. Uploader-chosen text (names, builds, products, reasons,
// keys) only ever reaches the page through text nodes (`append` of a string, `textContent`),
// never as markup, and control or bidirectional characters in it are shown as escapes.
// A classic script of its own page: its names are the page's and nothing else's.
'use strict';
const D = JSON.parse(document.getElementById('audit-data').textContent);
const S = D.strings;
const N = D.records;

// Each column expanded once from how it was written (packing.rs): runs of one value, or
// only the rows that are not empty.
const EMPTY = Object.freeze([]);
const NO_SOURCES = Object.freeze([0, 0, 0]);
function unpack(name, col) {
  if (Array.isArray(col)) return col;
  if (col.runs) {
    const out = new Array(N);
    let at = 0;
    for (let k = 0; k < col.runs.length; k += 2) {
      out.fill(col.runs[k], at, at + col.runs[k + 1]);
      at += col.runs[k + 1];
    }
    return out;
  }
  const out = new Array(col.len).fill(name === 'sources' ? NO_SOURCES : EMPTY);
  col.rows.forEach((row, k) => { out[row] = col.values[k]; });
  return out;
}
const C = {};
for (const [name, col] of Object.entries(D.columns)) C[name] = unpack(name, col);
const PAGE = 50;
const DECISIONS = ['indexed', 'unchanged', 'skipped', 'rejected', 'conflict',
  'unpublished', 'expired', 'promoted'];
// The decisions about an upload (the others are removals and promotions of one).
const UPLOADS = new Set(DECISIONS.slice(0, 5));
const COLOURS = ['#2457c5', '#e07b00', '#2a9d4b', '#c2185b', '#7b4fc9', '#00838f',
  '#8d6e63', '#c0a000', '#5c6bc0', '#9e9e9e'];

const str = (id) => S[id] || '';

// As the CLI's `shown`: controls (ESC, BEL, CR...) and invisible or reordering characters
// written as visible escapes.
const HIDDEN = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]/g;
function shown(text) {
  return text.replace(HIDDEN, (c) => {
    if (c === '\n') return '\\n';
    if (c === '\r') return '\\r';
    if (c === '\t') return '\\t';
    const n = c.charCodeAt(0);
    return n < 0x80 ? '\\x' + n.toString(16).padStart(2, '0') : '\\u{' + n.toString(16) + '}';
  });
}

// `manifest query` compares builds with ASCII case folding only: so does the page.
const asciiLower = (s) => s.replace(/[A-Z]/g, (c) => String.fromCharCode(c.charCodeAt(0) + 32));

// An element with attributes and children; strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(typeof c === 'string' || typeof c === 'number' ? shown(String(c)) : c);
  }
  return e;
}

function svg(tag, attrs) {
  const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  return e;
}

const fmtBytes = (n) => {
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
};

// ---- State: everything a view shows is in the URL fragment, so a link reproduces it.
const FIELDS = ['view', 'q', 'decision', 'format', 'channel', 'product', 'build', 'from',
  'to', 'page', 'row'];
function readState() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ''));
  const s = {};
  for (const f of FIELDS) if (p.get(f)) s[f] = p.get(f);
  s.view = s.view || 'overview';
  return s;
}
function link(state) {
  const p = new URLSearchParams();
  for (const f of FIELDS) if (state[f] !== undefined && state[f] !== '') p.set(f, state[f]);
  return '#' + p.toString();
}
function go(patch, replace) {
  const next = Object.assign(readState(), patch);
  for (const k of Object.keys(patch)) if (patch[k] === undefined) delete next[k];
  if (replace) {
    history.replaceState(null, '', link(next));
    render();
  } else {
    location.hash = link(next);
  }
}

// A conflict's record, or any record that met keys holding other content.
const isConflict = (i) => C.conflicts[i].length > 0 || str(C.action[i]) === 'conflict';

// ---- Rows: which records a state selects.
function rowMatcher(state) {
  const want = (field, value) => {
    if (!value) return null;
    return (i) => str(C[field][i]) === value;
  };
  const tests = [want('action', state.decision), want('format', state.format),
    want('channel', state.channel), want('product', state.product)].filter(Boolean);
  if (state.build) {
    const b = asciiLower(state.build);
    tests.push((i) => C.build[i] !== 0 && asciiLower(str(C.build[i])) === b);
  }
  if (state.from) tests.push((i) => str(C.day[i]) >= state.from);
  if (state.to) tests.push((i) => str(C.day[i]) <= state.to);
  if (state.view === 'conflicts') tests.push(isConflict);
  if (state.q) {
    // The string table is searched once; a row matches when one of its searched fields
    // names a matching string.
    const q = state.q.toLowerCase();
    const hit = new Uint8Array(S.length);
    for (let j = 1; j < S.length; j++) if (S[j].toLowerCase().includes(q)) hit[j] = 1;
    const fields = ['debug_id', 'code_id', 'name', 'code_file', 'debug_file', 'build',
      'product', 'upload'].map((f) => C[f]);
    tests.push((i) => fields.some((col) => hit[col[i]] === 1));
  }
  return (i) => tests.every((t) => t(i));
}
function selectRows(state) {
  const match = rowMatcher(state);
  const rows = [];
  for (let i = 0; i < N; i++) if (match(i)) rows.push(i);
  return rows;
}

const keyText = (parts) => parts.map(str).join('/');
const keyCount = (i) => C.published[i].length + C.unchanged[i].length + C.removed[i].length;
const decision = (i) => {
  const a = str(C.action[i]);
  return el('span', { class: 'badge' + (DECISIONS.includes(a) ? ' d-' + a : '') }, a || '-');
};
const time = (i) => str(C.day[i]) + str(C.clock[i]);

// ---- Views.
function distinct(field, rows) {
  const counts = new Map();
  for (const i of rows) {
    const v = C[field][i];
    if (v) counts.set(v, (counts.get(v) || 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([v]) => str(v));
}

function select(name, label, values, current) {
  const s = el('select', { name, 'aria-label': label, onchange: (e) => go({ [name]: e.target.value || undefined, page: undefined, row: undefined }) },
    el('option', { value: '' }, 'any ' + label));
  for (const v of values) {
    const o = el('option', {}, v);
    o.value = v;
    if (v === current) o.selected = true;
    s.append(o);
  }
  return s;
}

function filterBar(state) {
  const all = [...Array(N).keys()];
  const search = el('input', { type: 'search', id: 'search', placeholder: 'debug id, code id, file name, build, product', 'aria-label': 'search' });
  search.value = state.q || '';
  let timer = 0;
  search.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(() => go({ q: search.value || undefined, page: undefined, row: undefined }, true), 200);
  });
  const date = (name) => {
    const d = el('input', { type: 'date', name, 'aria-label': name });
    d.value = state[name] || '';
    d.addEventListener('change', () => go({ [name]: d.value || undefined, page: undefined }));
    return d;
  };
  const decisions = DECISIONS.filter((d) => S.includes(d));
  const bar = el('div', { class: 'filters' }, search,
    select('decision', 'decision', decisions, state.decision),
    select('format', 'format', distinct('format', all).sort(), state.format),
    select('channel', 'channel', distinct('channel', all).sort(), state.channel),
    select('product', 'product', distinct('product', all).sort(), state.product),
    el('label', {}, 'from ', date('from')), el('label', {}, 'to ', date('to')));
  if (state.build) {
    bar.append(el('button', { onclick: () => go({ build: undefined, page: undefined }) }, 'build: ' + state.build + ' ✕'));
  }
  return bar;
}

function pager(state, total, size) {
  const pages = Math.max(1, Math.ceil(total / size));
  const page = Math.min(Math.max(1, Number(state.page) || 1), pages);
  const prev = el('button', { onclick: () => go({ page: String(page - 1) }) }, '‹ prev');
  const next = el('button', { onclick: () => go({ page: String(page + 1) }) }, 'next ›');
  prev.disabled = page <= 1;
  next.disabled = page >= pages;
  const box = el('div', { class: 'pager' }, prev, el('span', { id: 'page' }, 'page ' + page + ' of ' + pages), next);
  return { box, start: (page - 1) * size, end: Math.min(total, page * size) };
}

function uploadsView(state, main) {
  const rows = selectRows(state);
  if (state.build) {
    const products = distinct('product', rows);
    main.append(el('h2', { id: 'build-title' }, 'Build ' + state.build),
      el('p', { class: 'muted' }, (products.length ? 'product ' + products.join(', ') + ' · ' : '') + rows.length + ' records'));
  } else if (state.view === 'conflicts') {
    main.append(el('h2', {}, 'Conflicts: keys that already held other content'));
  }
  main.append(filterBar(state));
  main.append(el('p', { id: 'count', 'data-count': String(rows.length) },
    rows.length + ' of ' + N + ' records match'));
  const { box, start, end } = pager(state, rows.length, PAGE);
  main.append(box);
  const conflicts = state.view === 'conflicts';
  const head = ['time', 'decision', 'product', 'build', 'channel', 'format', 'arch', 'name',
    'debug id', 'code id', 'keys', conflicts ? 'held by' : 'reason'];
  const table = el('table', { id: 'rows' }, el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))));
  const body = el('tbody');
  for (const i of rows.slice(start, end)) {
    const last = conflicts
      ? el('td', { class: 'wrap held' }, [str(C.product[i]) || '(none)', ...C.held_by_products[i].map(str)].join(' ⇄ '))
      : el('td', { class: 'wrap reason' }, str(C.reason[i]));
    const tr = el('tr', { 'data-row': String(i), onclick: () => go({ row: String(i) }) },
      el('td', { class: 'mono' }, time(i)), el('td', {}, decision(i)),
      el('td', {}, str(C.product[i])), el('td', { class: 'build' }, str(C.build[i])),
      el('td', {}, str(C.channel[i])), el('td', {}, str(C.format[i])), el('td', {}, str(C.arch[i])),
      el('td', { class: 'wrap name' }, str(C.name[i]) || str(C.ingest_key[i])),
      el('td', { class: 'mono' }, str(C.debug_id[i])), el('td', { class: 'mono' }, str(C.code_id[i])),
      el('td', { class: 'num' }, String(keyCount(i))), last);
    if (String(i) === state.row) tr.className = 'sel';
    body.append(tr);
  }
  table.append(body);
  const row = Number(state.row);
  if (state.row !== undefined && row >= 0 && row < N) main.append(detail(row));
  main.append(el('div', { class: 'panel' }, table));
}

function keyList(label, keys) {
  if (!keys.length) return null;
  return [el('dt', {}, label + ' (' + keys.length + ')'),
    el('dd', { class: 'mono' }, ...keys.map((k) => el('div', {}, keyText(k))))];
}

function detail(i) {
  const dl = el('dl', { class: 'detail', id: 'detail' });
  const put = (label, value) => {
    if (value) dl.append(el('dt', {}, label), el('dd', {}, value));
  };
  put('time', time(i));
  dl.append(el('dt', {}, 'decision'), el('dd', {}, decision(i)));
  put('reason', str(C.reason[i]));
  put('upload', str(C.upload[i]));
  put('ingest key', str(C.ingest_key[i]));
  put('archive entry', str(C.entry[i]));
  put('ingest size', C.ingest_size[i] === null ? '' : fmtBytes(C.ingest_size[i]));
  put('product', str(C.product[i]));
  put('build', str(C.build[i]));
  put('version', str(C.version[i]));
  put('channel', str(C.channel[i]));
  put('expires', str(C.expires[i]) || (UPLOADS.has(str(C.action[i])) ? 'never' : ''));
  put('format', str(C.format[i]));
  put('kind', str(C.kind[i]));
  put('arch', str(C.arch[i]));
  put('name', str(C.name[i]));
  put('debug id', str(C.debug_id[i]));
  put('code id', str(C.code_id[i]));
  put('code file', str(C.code_file[i]));
  put('debug file', str(C.debug_file[i]));
  for (const [label, col] of [['published', 'published'], ['unchanged', 'unchanged'],
    ['conflicting keys', 'conflicts'], ['removed', 'removed']]) {
    const items = keyList(label, C[col][i]);
    if (items) dl.append(...items);
  }
  if (C.held_by_products[i].length) put('held by products', C.held_by_products[i].map(str).join(', '));
  if (C.holders[i].length) {
    dl.append(el('dt', {}, 'holders'), el('dd', { class: 'holders' }, ...C.holders[i].map((h) =>
      el('div', {}, el('a', { href: link({ view: 'uploads', row: String(h), q: str(C.upload[h]) }) },
        (str(C.product[h]) || '(none)') + ' · build ' + (str(C.build[h]) || '-') + ' · ' + (str(C.name[h]) || str(C.upload[h])))))));
  }
  const [named, served, missing] = C.sources[i];
  if (named) put('sources', named + ' named, ' + served + ' served, ' + missing + ' missing then');
  const now = D.missing.filter((m) => m[0] === i);
  if (now.length) {
    dl.append(el('dt', {}, 'sources missing now'), el('dd', { class: 'mono' }, ...now.map((m) => el('div', {}, str(m[1])))));
  }
  return el('div', { class: 'panel' }, el('h2', {}, 'Record ' + (i + 1)), dl);
}

function buildsView(state, main) {
  const rows = selectRows(Object.assign({}, state, { build: undefined }));
  const builds = new Map();
  for (const i of rows) {
    const b = C.build[i];
    if (!b) continue;
    // One build whatever the ASCII case, as its view (and `manifest query --build`) has it.
    const folded = asciiLower(str(b));
    let e = builds.get(folded);
    if (!e) builds.set(folded, e = { build: b, products: new Set(), count: 0, first: '', last: '', bad: 0 });
    e.products.add(str(C.product[i]));
    e.count++;
    const t = time(i);
    if (!e.first || t < e.first) e.first = t;
    if (t > e.last) e.last = t;
    const a = str(C.action[i]);
    if (a === 'rejected' || a === 'conflict') e.bad++;
  }
  const list = [...builds.values()].sort((a, b) => (a.last < b.last ? 1 : -1));
  main.append(filterBar(state), el('p', { id: 'count', 'data-count': String(list.length) }, list.length + ' builds'));
  const { box, start, end } = pager(state, list.length, PAGE);
  main.append(box);
  const body = el('tbody');
  for (const e of list.slice(start, end)) {
    body.append(el('tr', {},
      el('td', {}, el('a', { href: link({ view: 'uploads', build: str(e.build) }) }, str(e.build))),
      el('td', {}, [...e.products].filter(Boolean).join(', ')),
      el('td', { class: 'num' }, String(e.count)), el('td', { class: 'num' + (e.bad ? ' warn' : '') }, String(e.bad)),
      el('td', { class: 'mono' }, e.first), el('td', { class: 'mono' }, e.last)));
  }
  main.append(el('div', { class: 'panel' }, el('table', {}, el('thead', {}, el('tr', {},
    ...['build', 'products', 'records', 'rejected or conflict', 'first', 'last'].map((h) => el('th', {}, h)))), body)));
}

function missingView(state, main) {
  const match = rowMatcher(state);
  const list = D.missing.filter((m) => match(m[0]));
  main.append(el('h2', {}, 'Sources debug files name that no upload provides'),
    filterBar(state), el('p', { id: 'count', 'data-count': String(list.length) }, list.length + ' source files missing'));
  const { box, start, end } = pager(state, list.length, PAGE);
  main.append(box);
  const body = el('tbody');
  for (const [i, path, key] of list.slice(start, end)) {
    body.append(el('tr', { 'data-row': String(i), onclick: () => go({ view: 'uploads', row: String(i), q: str(C.upload[i]) }) },
      el('td', { class: 'wrap' }, str(C.name[i])), el('td', {}, str(C.product[i])), el('td', {}, str(C.build[i])),
      el('td', { class: 'mono' }, str(C.code_id[i])), el('td', { class: 'wrap mono' }, str(path)),
      el('td', { class: 'wrap mono muted' }, str(key))));
  }
  main.append(el('div', { class: 'panel' }, el('table', {}, el('thead', {}, el('tr', {},
    ...['debug file', 'product', 'build', 'build id', 'path', 'key'].map((h) => el('th', {}, h)))), body)));
}

function holdingsTable() {
  const H = D.holdings;
  const body = el('tbody');
  for (const l of H.lines) {
    body.append(el('tr', {}, el('td', {}, l.product), el('td', {}, l.layout),
      el('td', { class: 'num' }, String(l.keys)), el('td', { class: 'num' }, fmtBytes(l.bytes)),
      el('td', { class: 'num' + (l.published !== l.keys ? ' warn' : '') }, String(l.published))));
  }
  return el('table', { id: 'holdings' }, el('thead', {}, el('tr', {},
    ...['product', 'layout', 'keys held', 'bytes held', 'keys published (manifest)'].map((h) => el('th', {}, h)))), body);
}

function storeView(state, main) {
  const H = D.holdings;
  main.append(el('h2', {}, 'What the store holds now, next to what the manifest says was published'),
    el('div', { class: 'panel' }, holdingsTable()),
    el('p', {}, H.unrecorded + ' keys held that no record published; ' + H.absent + ' keys the manifest says are published are not in the store.'));
  for (const [label, list] of [['held, not recorded', H.unrecorded_examples], ['recorded, not held', H.absent_examples]]) {
    if (list.length) main.append(el('div', { class: 'panel' }, el('h2', {}, label + ' (first ' + list.length + ')'), ...list.map((k) => el('div', { class: 'mono' }, k))));
  }
}

// One colour per product in every chart: by the number of its records, the last colour
// shared by the products past the palette.
let colours = null;
function productColours() {
  if (colours) return colours;
  const counts = new Map();
  for (let i = 0; i < N; i++) counts.set(C.product[i], (counts.get(C.product[i]) || 0) + 1);
  const order = [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([p]) => p);
  colours = new Map(order.map((p, k) => [p, COLOURS[Math.min(k, COLOURS.length - 1)]]));
  return colours;
}

// A stacked bar chart of `value(i)` per day and product, drawn as SVG.
function chart(title, value, format) {
  const perDay = new Map();
  const totals = new Map();
  const seen = new Set();
  for (let i = 0; i < N; i++) {
    if (!UPLOADS.has(str(C.action[i]))) continue;
    const v = value(i, seen);
    if (!v) continue;
    const day = str(C.day[i]);
    const p = C.product[i];
    if (!perDay.has(day)) perDay.set(day, new Map());
    const m = perDay.get(day);
    m.set(p, (m.get(p) || 0) + v);
    totals.set(p, (totals.get(p) || 0) + v);
  }
  const products = [...totals.entries()].sort((a, b) => b[1] - a[1]).map(([p]) => p);
  const colour = productColours();
  const days = [...perDay.keys()].sort();
  const W = 880, H = 180, L = 60, B = 20;
  const box = svg('svg', { viewBox: `0 0 ${W} ${H + B + 6}`, width: W, height: H + B + 6, role: 'img' });
  let max = 0;
  for (const m of perDay.values()) max = Math.max(max, [...m.values()].reduce((a, b) => a + b, 0));
  // Bars are at most 40 px wide: a few days do not fill the chart with slabs.
  const bw = days.length ? Math.min(80, (W - L - 10) / days.length) : 0;
  days.forEach((day, d) => {
    let y = H;
    for (const p of products) {
      const v = perDay.get(day).get(p) || 0;
      if (!v) continue;
      const h = max ? (v / max) * (H - 10) : 0;
      y -= h;
      const r = svg('rect', { x: L + d * bw + 1, y, width: Math.max(1, bw - 2), height: h, fill: colour.get(p) });
      const t = svg('title');
      t.textContent = shown(day + ' · ' + (str(p) || '(none)') + ': ' + format(v));
      r.append(t);
      box.append(r);
    }
  });
  const label = (x, y, text, anchor) => {
    const t = svg('text', { x, y, 'text-anchor': anchor || 'start' });
    t.textContent = shown(text);
    box.append(t);
  };
  box.append(svg('line', { x1: L, y1: H, x2: W - 10, y2: H, stroke: '#aab' }));
  label(L - 6, 14, format(max), 'end');
  label(L - 6, H, '0', 'end');
  // Every day under its bar where they fit, else the first and the last.
  if (bw >= 70) {
    days.forEach((day, d) => label(L + d * bw + bw / 2, H + 16, day, 'middle'));
  } else if (days.length) {
    label(L, H + 16, days[0]);
    if (bw * days.length > 160) label(L + bw * days.length, H + 16, days[days.length - 1], 'end');
  }
  const legend = el('div', { class: 'legend' }, ...products.map((p) => {
    const i = el('i');
    i.style.background = colour.get(p);
    return el('span', {}, i, str(p) || '(none)');
  }));
  return el('div', { class: 'panel' }, el('h2', {}, title), box, legend);
}

function overview(state, main) {
  const counts = new Map();
  const builds = new Set();
  const products = new Set();
  let conflicts = 0;
  for (let i = 0; i < N; i++) {
    const a = str(C.action[i]);
    counts.set(a, (counts.get(a) || 0) + 1);
    if (C.build[i]) builds.add(C.build[i]);
    if (C.product[i]) products.add(C.product[i]);
    if (isConflict(i)) conflicts++;
  }
  const card = (label, value, href) => el('div', { class: 'card' },
    href ? el('a', { href }, el('b', {}, String(value)), label) : el('span', {}, el('b', {}, String(value)), label));
  main.append(el('div', { class: 'cards' },
    card('records read', N, link({ view: 'uploads' })),
    card('products', products.size), card('builds', builds.size, link({ view: 'builds' })),
    ...DECISIONS.filter((d) => counts.get(d)).map((d) => card(d, counts.get(d), link({ view: 'uploads', decision: d }))),
    card('records with conflicts', conflicts, link({ view: 'conflicts' })),
    card('sources missing', D.missing.length, link({ view: 'missing' }))));
  main.append(chart('Uploads per day, by product', () => 1, String));
  // An archive's entries share its ingest object: its bytes are counted once a day.
  main.append(chart('Bytes uploaded per day, by product', (i, seen) => {
    const size = C.ingest_size[i];
    const id = str(C.day[i]) + '\n' + C.ingest_key[i];
    if (size === null || seen.has(id)) return 0;
    seen.add(id);
    return size;
  }, fmtBytes));
  main.append(el('div', { class: 'panel' }, el('h2', {}, 'Store now vs manifest'), holdingsTable()));
}

function render() {
  const state = readState();
  const main = document.getElementById('main');
  main.replaceChildren();
  for (const a of document.querySelectorAll('#nav a')) {
    a.className = a.dataset.view === (state.build ? 'builds' : state.view) ? 'on' : '';
  }
  const views = { overview, uploads: uploadsView, conflicts: uploadsView, builds: buildsView, missing: missingView, store: storeView };
  (views[state.view] || overview)(state, main);
  document.body.dataset.ready = '1';
}

document.getElementById('source').append(shown('store ' + D.store + ' · ' + N + ' records read · generated ' + D.generated));
window.addEventListener('hashchange', render);
render();

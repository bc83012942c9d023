// The web UI's script (ui.html; served as /ui.js, after the page is
// parsed). Data reaches the DOM only as text: see the rule in ui.html.
'use strict';
(function () {
  // ---------------------------------------------------------------- constants

  // The message states (docs/api.md), in their order.
  const STATES = ['pending', 'retry', 'delivered', 'failed', 'forwarded', 'forward_queued', 'forward_failed'];
  const STATE_HELP = {
    pending: 'accepted, delivery or forward under way',
    retry: 'delivery failed, will be tried again',
    delivered: 'handed to the subscriber',
    failed: 'dead letter: attempts used up, expired or rejected',
    forwarded: 'handed to the peer that owns the frontend',
    forward_queued: 'waiting for the owning peer to be healthy',
    forward_failed: 'the owning peer stayed unreachable',
  };
  const RESUBMITTABLE = ['failed', 'forward_failed'];
  const PEER_STATES = ['unknown', 'healthy', 'degraded', 'unhealthy', 'removed'];
  const REASONS = {
    max_attempts: 'delivery attempts used up (--delivery-max-attempts)',
    expired: 'still undelivered when its validity ran out (--message-validity or its validity_until)',
    rejected: 'the frontend refused it permanently',
    forward_timeout: 'its peer stayed unreachable (--forward-max-retries x --forward-retry-interval)',
    peer_rejected: 'the peer refused it permanently',
    peer_unsupported: 'its peer lacks the capability its data coding, message class or times need: upgrade the peer, then resubmit',
  };
  // The SMS message classes (GSM 03.38; docs/api.md, message_class).
  const MESSAGE_CLASSES = [
    'flash: shown at once, not stored',
    'mobile equipment specific',
    'SIM specific',
    'terminal equipment specific',
  ];

  const REFRESH_MS = 2000;
  const TIMEOUT_MS = 8000;
  const BULK_TIMEOUT_MS = 330000; // the gateway gives a bulk resubmit 10 x its request timeout
  const PAGE_SIZE = 100;
  let timelineMS = 10000; // how often the node adds a point: its interval_seconds
  const RING_PROBE_MS = 15000; // how often a node without a ring is asked again
  const TOKEN_KEY = 'switchboard.apiToken';

  // Every API path this page uses (ui_test.go checks this list against the gateway).
  const enc = encodeURIComponent;
  const API = {
    status: () => '/api/status',
    messages: (query) => '/api/messages?' + query,
    message: (id) => '/api/messages/' + enc(id),
    resubmit: (id) => '/api/messages/' + enc(id) + '/resubmit',
    resubmitBulk: () => '/api/messages/resubmit',
    routes: () => '/api/routes',
    route: (prefix) => '/api/routes/' + enc(prefix),
    frontends: () => '/api/frontends',
    frontend: (name) => '/api/frontends/' + enc(name),
    ring: () => '/api/ring/status',
    timeline: () => '/api/stats/timeline',
    whoami: () => '/api/whoami',
    audit: () => '/api/audit?limit=' + AUDIT_ROWS,
  };

  // What each role may do here (docs/api.md, "Credentials and roles"): the
  // page asks the node who its token is (GET /api/whoami) and shows and
  // offers only that. The node enforces it anyway (403 forbidden).
  const CAN = {
    read: ['admin', 'operator'],              // status, peers, frontends, routes, ring, chart, audit
    messages: ['admin', 'operator', 'client'], // the queue (a client sees its own)
    resubmit: ['admin', 'operator'],
    directory: ['admin'],                      // route and frontend changes
  };
  const AUDIT_ROWS = 50;
  let me = null; // GET /api/whoami: {name, role, frontends, open}
  function can(what) { return me !== null && CAN[what].includes(me.role); }

  // ---------------------------------------------------------------- DOM helpers

  const $ = (id) => document.getElementById(id);

  // el builds an element. props: class, text, on<event> handlers, anything
  // else is an attribute. Children are nodes or strings (as text nodes).
  // This is the only way data reaches the DOM: no HTML string is parsed.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === 'class') node.className = value;
      else if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : String(child));
    }
    return node;
  }

  function stateClass(state, known) {
    return 'st-' + (known.includes(state) ? state : 'unknown');
  }

  function badge(state, known) {
    return el('span', { class: 'badge ' + stateClass(state, known || STATES), title: STATE_HELP[state] },
      state || '?');
  }

  // Times from the API are RFC 3339 UTC; they are shown in UTC, with the
  // browser's local time as a tooltip.
  function parseTime(s) {
    if (!s) return null;
    const d = new Date(String(s).replace(/(\.\d{3})\d+/, '$1'));
    if (isNaN(d.getTime()) || d.getUTCFullYear() <= 1) return null;
    return d;
  }
  // The node's clock, as its last status gave it (now): ages and waits of
  // the node's times are measured against it, not against this browser's
  // clock, which may be off by minutes.
  let clockSkewMs = 0;
  function nodeNow() { return Date.now() + clockSkewMs; }
  function fmtTime(s, withMillis) {
    const d = parseTime(s);
    if (!d) return s ? String(s) : '—';
    const iso = d.toISOString();
    return iso.slice(0, 10) + ' ' + iso.slice(11, withMillis ? 23 : 19);
  }
  function timeCell(s, withMillis) {
    const d = parseTime(s);
    return el('td', { class: 'mono time', title: d ? d.toLocaleString() : null }, fmtTime(s, withMillis));
  }
  function clock(d) {
    return d.toISOString().slice(11, 19) + ' UTC';
  }
  function fmtAge(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + ' s';
    if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
    return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  }
  function fmtInt(n) {
    return typeof n === 'number' ? n.toLocaleString('en-US') : '?';
  }
  function plural(n, one, many) {
    return fmtInt(n) + ' ' + (n === 1 ? one : many);
  }

  // notify shows one notice in area (the newest replaces the last). Errors
  // stay until dismissed; other notices fade after a while.
  function notify(area, kind, text) {
    const box = el('div', { class: 'notice ' + kind, role: kind === 'error' ? 'alert' : 'status' },
      el('span', { class: 'text' }, text),
      el('button', { type: 'button', 'aria-label': 'dismiss', onclick: () => box.remove() }, '×'));
    area.replaceChildren(box);
    if (kind !== 'error') setTimeout(() => box.remove(), 8000);
  }

  // ---------------------------------------------------------------- API access

  let token = loadToken();

  function loadToken() {
    try { return localStorage.getItem(TOKEN_KEY) || ''; } catch (e) { return ''; }
  }
  function storeToken(t) {
    try {
      if (t) localStorage.setItem(TOKEN_KEY, t); else localStorage.removeItem(TOKEN_KEY);
    } catch (e) { /* storage disabled: the token lasts until the page is closed */ }
  }

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status; // 0: no answer
      this.code = code;
    }
  }
  // The API's error, as it gave it: "code: message".
  function errorText(e) {
    return e instanceof ApiError ? e.code + ': ' + e.message : String(e && e.message || e);
  }

  async function api(method, path, body, timeoutMs) {
    const headers = { Accept: 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const limit = timeoutMs || TIMEOUT_MS;
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), limit);
    let res, text;
    try {
      res = await fetch(path, {
        method, headers, signal: abort.signal, cache: 'no-store', credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      text = await res.text();
    } catch (e) {
      throw new ApiError(0, 'no_answer', abort.signal.aborted
        ? 'no answer within ' + limit / 1000 + ' s'
        : 'network error (' + e.message + ')');
    } finally {
      clearTimeout(timer);
    }
    let doc = null;
    try { doc = text ? JSON.parse(text) : null; } catch (e) { doc = null; }
    if (!res.ok) {
      const err = doc && doc.error;
      const e = new ApiError(res.status,
        err && err.code ? String(err.code) : 'http_' + res.status,
        err && err.message ? String(err.message) : (res.statusText || 'HTTP ' + res.status));
      if (res.status === 401) { me = null; showAuth(true); }
      throw e;
    }
    return doc;
  }

  // ---------------------------------------------------------------- connection state

  let lastGood = null; // when the last refresh fully succeeded
  let authWanted = false;

  function showAuth(on) {
    const banner = $('banner-auth');
    if (on) {
      $('banner-auth-text').textContent = token
        ? 'The node refused the token saved in this browser. Enter the right token above and press Save.'
        : 'This node requires a token (its --api-token, or a credential\'s). Enter it in the "Token" field above and press Save.';
      if (!authWanted) $('token').focus();
    }
    authWanted = on;
    banner.hidden = !on;
    $('token').classList.toggle('wanted', on);
  }

  // connection updates the banners and the "last updated" line after a
  // refresh: err is the first failure of the refresh, or null.
  function connection(err) {
    const offline = $('banner-offline');
    const failing = $('banner-failing');
    const since = lastGood ? ' Last good update ' + clock(lastGood) + '.' : '';
    if (!err) {
      lastGood = new Date();
      offline.hidden = failing.hidden = true;
      showAuth(false);
    } else if (err.status === 0) {
      offline.textContent = 'The node does not answer: ' + err.message + '. Retrying every ' +
        REFRESH_MS / 1000 + ' s.' + since;
      offline.hidden = false;
      failing.hidden = true;
    } else if (err.status !== 401) {
      failing.textContent = 'The node answered with an error: ' + errorText(err) + '.' + since;
      failing.hidden = false;
      offline.hidden = true;
    } else {
      offline.hidden = failing.hidden = true;
    }
    showUpdated();
  }

  function showUpdated(paused) {
    const u = $('updated');
    const stale = !$('banner-offline').hidden || !$('banner-failing').hidden || authWanted;
    let text = lastGood ? 'last updated ' + clock(lastGood) : 'not updated yet';
    if (paused) text = 'paused while a dialog is open · ' + text;
    else if (stale && lastGood) text = 'stale · ' + text;
    u.textContent = text;
    u.classList.toggle('stale', stale || !lastGood);
    document.querySelector('main').classList.toggle('stale', stale);
  }

  // ---------------------------------------------------------------- refresh loop

  // The counts and every list are refreshed every REFRESH_MS; a refresh
  // replaces only what changed, in one step, after its data has arrived (no
  // flicker). It is paused while a dialog is open.
  let timer = 0;
  let running = false;
  let again = false;

  function anyDialogOpen() {
    return document.querySelector('dialog[open]') !== null;
  }
  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(tick, REFRESH_MS);
  }
  function refreshNow() {
    if (running) { again = true; return; }
    tick();
  }
  async function tick() {
    clearTimeout(timer);
    if (anyDialogOpen()) {
      showUpdated(true);
      schedule();
      return;
    }
    running = true;
    try {
      await refresh();
    } catch (e) {
      console.error('switchboard ui: refresh failed', e);
    } finally {
      running = false;
    }
    if (again) { again = false; tick(); } else schedule();
  }

  // refresh asks who the token is, then only what its role may read.
  async function refresh() {
    try {
      applyRole(await api('GET', API.whoami()));
    } catch (e) {
      if (e.status === 401) applyRole(null);
      connection(e);
      return;
    }
    const key = viewKey();
    const skip = Promise.resolve(undefined);
    const [status, list, frontends, routes, audit] = await Promise.allSettled([
      can('read') ? api('GET', API.status()) : skip,
      can('messages') ? loadQueue() : skip,
      can('read') ? api('GET', API.frontends()) : skip,
      can('read') ? api('GET', API.routes()) : skip,
      can('read') ? api('GET', API.audit()) : skip,
      can('read') ? refreshRing() : skip, // never rejects: the ring's answers are not the node's health
      can('read') ? refreshTimeline().catch((e) => console.error('switchboard ui: timeline', e)) : skip,
    ]);
    if (status.status === 'fulfilled' && status.value) renderStatus(status.value);
    if (list.status === 'fulfilled' && list.value && key === viewKey()) renderQueue(list.value);
    if (frontends.status === 'fulfilled' && frontends.value) renderFrontends(frontends.value.frontends);
    if (routes.status === 'fulfilled' && routes.value) renderRoutes(routes.value.routes);
    if (audit.status === 'fulfilled' && audit.value) renderAudit(audit.value.entries);
    const failed = [status, list, frontends, routes, audit].find((r) => r.status === 'rejected');
    connection(failed ? failed.reason : null);
  }

  // applyRole shows what the credential may use and hides the rest: every
  // element marked data-can="<what>" (CAN), and the buttons the lists
  // draw (they ask can() as they are drawn; a change of role redraws them).
  function applyRole(doc) {
    const next = doc && typeof doc === 'object' && typeof doc.role === 'string' ? doc : null;
    const changed = JSON.stringify(next) !== JSON.stringify(me);
    me = next;
    if (!changed) return;
    for (const node of document.querySelectorAll('[data-can]')) node.hidden = !can(node.dataset.can);
    $('whoami').textContent = !me ? '' : me.open ? 'no credentials: everyone is an admin'
      : me.name + ' · ' + me.role + (me.frontends && me.frontends.length ? ' (' + me.frontends.join(', ') + ')' : '');
    if (!can('read')) showRing(false);
    $('role-note').hidden = !me || can('messages');
    $('role-note').textContent = me && !can('messages')
      ? 'The credential ' + me.name + ' has the role ' + me.role + ': it polls, acks and registers its frontends through the API, and has nothing to read here.'
      : '';
    frontendsSig = routesSig = queueSig = auditSig = null; // redraw with the role's buttons
  }

  // ---------------------------------------------------------------- audit trail

  let auditSig = null;
  function renderAudit(entries) {
    entries = Array.isArray(entries) ? entries : [];
    const sig = JSON.stringify(entries);
    if (sig === auditSig) return;
    auditSig = sig;
    $('audit-body').replaceChildren(...(entries.length ? entries.map((e) => el('tr', null,
      timeCell(e.at),
      el('td', { class: 'mono' }, e.actor),
      el('td', null, e.role || '—'),
      el('td', { class: 'mono' }, e.action),
      el('td', { class: 'mono' }, e.target),
      el('td', null, e.detail || '—'),
      el('td', { class: 'mono' }, e.remote)))
      : [el('tr', null, el('td', { colspan: 7, class: 'empty' }, 'No change recorded yet.'))]));
  }

  // ---------------------------------------------------------------- header, counts, peers

  let lastStatus = null;
  const stateTiles = {};
  const depthTiles = {};

  function buildTiles() {
    const all = el('button', { type: 'button', class: 'tile', 'data-state': '', title: 'show every state',
      onclick: () => setStateFilter('') }, el('span', { class: 'label' }, 'all states'),
    el('span', { class: 'count' }, '–'), el('span', { class: 'sub' }, ''));
    stateTiles[''] = all;
    const tiles = [all];
    for (const s of STATES) {
      const t = el('button', { type: 'button', class: 'tile ' + stateClass(s, STATES), 'data-state': s,
        title: STATE_HELP[s] + ' (click to show these messages)', onclick: () => setStateFilter(view.state === s ? '' : s) },
      el('span', { class: 'label' }, s), el('span', { class: 'count' }, '–'), el('span', { class: 'sub' }, ''));
      stateTiles[s] = t;
      tiles.push(t);
    }
    $('state-tiles').replaceChildren(...tiles);

    const depths = [
      ['outbox_depth', 'outbox depth', 'messages waiting for local delivery'],
      ['dlq_depth', 'DLQ depth', 'dead letters (failed messages kept for resubmit)'],
      ['forward_queue_depth', 'forward queue depth', 'messages queued for a peer that is not healthy'],
    ];
    $('depth-tiles').replaceChildren(...depths.map(([key, label, help]) => {
      const t = el('div', { class: 'tile depth', title: help, 'data-depth': key },
        el('span', { class: 'label' }, label), el('span', { class: 'count' }, '–'), el('span', { class: 'sub' }, ''));
      depthTiles[key] = t;
      return t;
    }));

    const select = $('state-filter');
    for (const s of STATES) select.append(el('option', { value: s }, s));
  }

  function setTile(tile, count, sub) {
    tile.querySelector('.count').textContent = fmtInt(count);
    tile.querySelector('.sub').textContent = sub || '';
  }

  function renderStatus(st) {
    lastStatus = st;
    const now = parseTime(st.now);
    if (now) clockSkewMs = now.getTime() - Date.now();
    $('node-name').textContent = st.node || '?';
    $('node-version').textContent = st.version ? 'version ' + st.version : '';
    $('node-store').textContent = st.store ? 'store: ' + st.store : '';
    document.title = 'Switchboard · ' + (st.node || '?');

    const counts = st.counts || {};
    let total = 0;
    for (const s of STATES) {
      const n = typeof counts[s] === 'number' ? counts[s] : 0;
      total += n;
      setTile(stateTiles[s], n);
    }
    setTile(stateTiles[''], total, 'messages in the store');

    const oldest = parseTime(st.outbox_oldest);
    setTile(depthTiles.outbox_depth, st.outbox_depth, oldest ? 'oldest waits ' + fmtAge(nodeNow() - oldest) : '');
    setTile(depthTiles.dlq_depth, st.dlq_depth);
    setTile(depthTiles.forward_queue_depth, st.forward_queue_depth);

    for (const s of RESUBMITTABLE) {
      const n = typeof counts[s] === 'number' ? counts[s] : 0;
      const b = $('bulk-' + s);
      if (!b.classList.contains('busy')) {
        b.textContent = 'Resubmit all ' + s + ' (' + fmtInt(n) + ')';
        b.disabled = n === 0;
      }
    }
    renderPeers(st.peers);
  }

  let peersSig = null;
  function renderPeers(peers) {
    const list = Array.isArray(peers) ? peers : [];
    const sig = JSON.stringify(list);
    if (sig === peersSig) return;
    peersSig = sig;
    $('peers-empty').hidden = list.length > 0;
    $('peers-wrap').hidden = list.length === 0;
    // /api/status types peers loosely; the fields are those of /api/peers
    // (cluster_status) and anything missing is shown as a dash.
    $('peers-body').replaceChildren(...list.map((p) => {
      const peer = p && typeof p === 'object' ? p : { node: String(p) };
      const fes = Array.isArray(peer.frontends) ? peer.frontends.join(', ') : '';
      return el('tr', null,
        el('td', { class: 'mono nowrap' }, peer.node || '—'),
        el('td', { class: 'mono nowrap' }, peer.address || '—'),
        el('td', null, peer.state ? badge(String(peer.state), PEER_STATES) : '—'),
        el('td', { class: 'num' }, fmtCount(peer.forward_queue_depth)),
        el('td', { class: 'num' }, fmtCount(peer.consecutive_failures)),
        timeCell(peer.last_success),
        el('td', { class: 'mono' }, fes || '—'),
        el('td', { class: 'peer-error' }, peer.last_error ? String(peer.last_error) : '—'));
    }));
  }
  function fmtCount(n) {
    return typeof n === 'number' ? fmtInt(n) : '—';
  }

  // ---------------------------------------------------------------- message queue

  // The view: a state filter, the cursor of the page shown ('' = newest),
  // the cursors of the newer pages (for "Newer"), and a search: a number
  // (or sender id) the destination or the source starts with, and the
  // acceptance time range. The API searches (GET /api/messages with
  // destination, source, since, until): the page only shows its pages.
  const view = { state: '', cursor: '', back: [], next: '', field: 'destination', key: '', since: '', until: '' };
  let queueSig = null;

  function viewKey() {
    return [view.state, view.cursor, view.field, view.key, view.since, view.until].join('|');
  }
  function listQuery(limit, cursor) {
    const q = new URLSearchParams({ limit: String(limit) });
    if (view.state) q.set('state', view.state);
    if (view.key) q.set(view.field, view.key + '*');
    if (view.since) q.set('since', view.since);
    if (view.until) q.set('until', view.until);
    if (cursor) q.set('cursor', cursor);
    return q.toString();
  }
  function searching() {
    return Boolean(view.key || view.since || view.until);
  }

  // loadQueue reads the page the queue table shows.
  async function loadQueue() {
    const doc = await api('GET', API.messages(listQuery(PAGE_SIZE, view.cursor))) || {};
    return { messages: Array.isArray(doc.messages) ? doc.messages : [], next: doc.next_cursor || '' };
  }

  function changeView(mutate) {
    mutate();
    queueSig = null;
    $('queue-table').classList.add('loading');
    refreshNow();
  }
  function setStateFilter(state) {
    changeView(() => {
      view.state = state;
      view.cursor = '';
      view.back = [];
    });
    $('state-filter').value = state;
    for (const [s, tile] of Object.entries(stateTiles)) tile.setAttribute('aria-pressed', String(s === state));
  }
  // setSearch shows the messages whose field starts with key, accepted in
  // [since, until) (RFC 3339 or ''); all empty ends the search.
  function setSearch(field, key, since, until) {
    Object.assign(view, { field, key, since, until });
    const parts = [];
    if (key) parts.push(field + ' starts with ' + key);
    if (since) parts.push('since ' + fmtTime(since));
    if (until) parts.push('until ' + fmtTime(until));
    $('dest-chip').hidden = parts.length === 0;
    $('dest-chip-text').textContent = parts.join(', ');
    changeView(() => { view.cursor = ''; view.back = []; });
  }

  function renderQueue(res) {
    const shown = res.messages;
    view.next = res.next;

    const page = view.back.length + 1;
    let info = 'page ' + page + ' · ' + plural(shown.length, 'message', 'messages') + ' (newest first)';
    if (searching()) info += ' · ' + $('dest-chip-text').textContent;
    $('page-info').textContent = info;
    $('page-older').disabled = !view.next;
    $('page-newer').disabled = view.back.length === 0;
    $('page-newest').disabled = view.back.length === 0;
    $('queue-table').classList.remove('loading');

    const sig = JSON.stringify([viewKey(), shown]);
    if (sig === queueSig) return;
    queueSig = sig;

    if (shown.length === 0) {
      let text = view.state ? 'No message is ' + view.state + '.' : 'No messages.';
      if (view.cursor) text = 'No older messages.';
      if (searching()) text = 'No message matches: ' + $('dest-chip-text').textContent + (view.state ? ', ' + view.state : '') + '.';
      // A page may be empty and not the last (the API bounds the rows one
      // page reads): Older still follows its cursor.
      if (view.next) text = 'No message on this page: older pages may hold some.';
      $('queue-body').replaceChildren(el('tr', null, el('td', { colspan: 9, class: 'empty' }, text)));
      return;
    }
    $('queue-body').replaceChildren(...shown.map(queueRow));
  }

  // whyCell says why a message failed (its reason) or waits (its last
  // transition's detail), and when it is tried next.
  function whyCell(m) {
    const td = el('td', { class: 'why' });
    if (m.reason && (m.state === 'failed' || m.state === 'forward_failed')) {
      td.append(el('span', { class: 'reason', title: REASONS[m.reason] || null }, m.reason));
      if (m.last_detail) td.append(' — ', m.last_detail);
    } else if (m.state !== 'delivered' && m.last_detail) {
      td.append(m.last_detail);
    }
    const next = parseTime(m.next_attempt_at);
    if (next && m.state !== 'delivered' && m.state !== 'failed' && m.state !== 'forward_failed') {
      const wait = next.getTime() - nodeNow();
      td.append(el('span', { class: 'next', title: next.toLocaleString() },
        'next: ' + fmtTime(m.next_attempt_at) + (wait > 0 ? ' (in ' + fmtAge(wait) + ')' : ' (due)')));
    }
    if (!td.childNodes.length) td.append('—');
    return td;
  }

  function queueRow(m) {
    const open = () => openMessage(m.id);
    const canResubmit = RESUBMITTABLE.includes(m.state) && can('resubmit');
    return el('tr', {
      class: 'row', tabindex: 0, 'data-id': m.id, title: m.reason ? 'reason: ' + m.reason : null,
      onclick: open,
      onkeydown: (ev) => { if ((ev.key === 'Enter' || ev.key === ' ') && ev.target === ev.currentTarget) { ev.preventDefault(); open(); } },
    },
    el('td', { class: 'mono' }, m.id),
    el('td', null, badge(m.state)),
    el('td', { class: 'mono' }, m.source_msisdn),
    el('td', { class: 'mono' }, m.destination_msisdn),
    el('td', null, m.frontend || '—'),
    el('td', { class: 'num' }, fmtCount(m.attempts)),
    whyCell(m),
    timeCell(m.updated_at),
    el('td', { class: 'actions' }, canResubmit
      ? el('button', { type: 'button', class: 'small danger', onclick: (ev) => { ev.stopPropagation(); resubmitOne(m.id, m.state, $('queue-notice')); } }, 'Resubmit…')
      : null));
  }

  // utcField turns a datetime-local value, read as UTC, into RFC 3339.
  function utcField(id) {
    const v = $(id).value;
    if (!v) return '';
    const d = new Date(v + (v.length === 16 ? ':00' : '') + 'Z');
    return isNaN(d.getTime()) ? '' : d.toISOString();
  }

  // search: a message id opens that message; a number or sender id (with
  // or without a time range) searches the queue through the API.
  async function search(q) {
    q = q.trim();
    const area = $('queue-notice');
    const field = $('search-field').value;
    const since = utcField('search-since');
    const until = utcField('search-until');
    if (!q) { setSearch(field, '', since, until); area.replaceChildren(); return; }
    const isNumber = /^\+?[0-9]{1,20}$/.test(q);
    const isID = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/.test(q);
    if (isID) {
      try {
        showMessage(await api('GET', API.message(q)));
        return;
      } catch (e) {
        if (e.status !== 404 || !(isNumber || field === 'source')) {
          notify(area, 'error', e.status === 404 ? 'No message has the id "' + q + '" (' + errorText(e) + ').' : errorText(e));
          return;
        }
      }
    }
    if (isNumber || (field === 'source' && q.length <= 32)) {
      setSearch(field, q.replace(/^\+/, ''), since, until);
      area.replaceChildren();
      return;
    }
    notify(area, 'error', '"' + q + '" is neither a message id nor a number.');
  }

  // ---------------------------------------------------------------- live chart

  // The last hour from GET /api/stats/timeline, drawn as polylines in SVG
  // (built with createElementNS, like every other node: no markup is
  // parsed).
  const SVG = 'http://www.w3.org/2000/svg';
  const SERIES = {
    rates: [
      ['accepted_per_second', 'accepted/s', '#2563eb'],
      ['delivered_per_second', 'delivered/s', '#16a34a'],
      ['failed_per_second', 'failed/s', '#dc2626'],
    ],
    depths: [
      ['outbox_depth', 'outbox', '#d97706'],
      ['forward_queue_depth', 'forward queue', '#0891b2'],
    ],
  };
  let timelineAt = 0;
  let timelineSig = null;

  async function refreshTimeline() {
    if (Date.now() - timelineAt < timelineMS) return;
    timelineAt = Date.now();
    const doc = await api('GET', API.timeline()) || {};
    if (typeof doc.interval_seconds === 'number' && doc.interval_seconds > 0) timelineMS = doc.interval_seconds * 1000;
    renderTimeline(Array.isArray(doc.points) ? doc.points : []);
  }

  function renderTimeline(points) {
    const sig = JSON.stringify(points);
    if (sig === timelineSig) return;
    timelineSig = sig;
    $('live-empty').hidden = points.length > 0;
    $('live-charts').hidden = points.length === 0;
    drawChart($('chart-rates'), points, SERIES.rates, (v) => v.toFixed(v < 10 ? 2 : 0));
    drawChart($('chart-depths'), points, SERIES.depths, (v) => fmtInt(Math.round(v)));
  }

  function svgNode(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
    return node;
  }

  // drawChart plots each series as steps (each point holds for the
  // interval before it) over the time the node has points for, up to the
  // last hour (x: time, the newest point at the right edge; y: 0 to the
  // largest value), and writes the newest value of each in the legend.
  function drawChart(box, points, series, fmt) {
    const W = 600, H = 120, PAD = 6;
    const at = (p) => parseTime(p.at).getTime();
    const pts = points.filter((p) => parseTime(p.at));
    if (!pts.length) return;
    const newest = at(pts[pts.length - 1]);
    const span = Math.min(3600000, Math.max(newest - at(pts[0]) + timelineMS, 2 * timelineMS));
    const x = (t) => Math.max(0, W - ((newest - t) / span) * W);
    let top = 0;
    for (const [key] of series) for (const p of pts) if (typeof p[key] === 'number') top = Math.max(top, p[key]);
    top = top > 0 ? top * 1.1 : 1;
    const y = (v) => H - PAD - (v / top) * (H - 2 * PAD);
    const nodes = [svgNode('line', { x1: 0, y1: y(0), x2: W, y2: y(0), stroke: '#d8dde4', 'stroke-width': 1 })];
    const legend = [];
    for (const [key, label, colour] of series) {
      const coords = [];
      for (const p of pts) {
        if (typeof p[key] !== 'number') continue;
        const yv = y(p[key]).toFixed(1);
        coords.push(x(at(p) - timelineMS).toFixed(1) + ',' + yv, x(at(p)).toFixed(1) + ',' + yv);
      }
      nodes.push(svgNode('polyline', {
        points: coords.join(' '), fill: 'none', stroke: colour, 'stroke-width': 1.6,
        'vector-effect': 'non-scaling-stroke', 'data-series': key,
      }));
      const last = pts[pts.length - 1][key];
      const item = el('span', { 'data-series': key }, label + ' ',
        el('b', null, typeof last === 'number' ? fmt(last) : '—'));
      item.style.setProperty('--c', colour); // the CSSOM: a style attribute is blocked by the policy
      legend.push(item);
    }
    const caption = svgNode('text', { x: 4, y: 12, 'font-size': 11, fill: '#5f6b7a' });
    caption.textContent = 'max ' + fmt(top / 1.1) + ' · the last ' + fmtAge(span);
    nodes.push(caption);
    box.querySelector('svg').replaceChildren(...nodes);
    box.querySelector('.legend').replaceChildren(...legend);
  }

  // ---------------------------------------------------------------- message dialog

  let current = null; // the message shown in the dialog

  async function openMessage(id) {
    try {
      showMessage(await api('GET', API.message(id)));
    } catch (e) {
      notify($('queue-notice'), 'error', errorText(e));
    }
  }

  // traceCell shows a message's trace id, linked to the trace UI when the
  // node has --trace-url (its {trace_id} replaced).
  function traceCell(id) {
    if (typeof id !== 'string' || !/^[0-9a-f]{32}$/.test(id)) return el('span', { class: 'muted' }, '—');
    const tmpl = lastStatus && typeof lastStatus.trace_url === 'string' ? lastStatus.trace_url : '';
    if (!/^https?:\/\//.test(tmpl)) return el('span', { class: 'mono' }, id);
    return el('a', { class: 'mono', id: 'md-trace', href: tmpl.split('{trace_id}').join(id), target: '_blank', rel: 'noopener noreferrer' }, id);
  }

  // classText says what a message_class is: "class 0 (flash: …)".
  function classText(c) {
    const what = MESSAGE_CLASSES[c];
    return 'class ' + c + (what ? ' (' + what + ')' : '');
  }

  // deferralsNote is the count of deferrals a history entry folds (the
  // frontend was too busy to take the message), beside its state, with
  // the attempt and the first and last deferral's times as its tooltip;
  // null for any other entry. Its detail says the same at length.
  function deferralsNote(h) {
    if (typeof h.deferrals !== 'number' || h.deferrals < 1) return null;
    const title = 'deferred ' + plural(h.deferrals, 'time', 'times') +
      (typeof h.attempt === 'number' ? ' (attempt ' + h.attempt + ' given back)' : '') +
      ', the first at ' + fmtTime(h.at, true) +
      (h.last_at ? ', the last at ' + fmtTime(h.last_at, true) : '') + ' (UTC)';
    return el('span', { class: 'deferrals', title }, plural(h.deferrals, 'deferral', 'deferrals'));
  }

  function showMessage(m, keepNotice) {
    current = m;
    if (!keepNotice) $('md-notice').replaceChildren();
    $('md-id').textContent = m.id;
    $('md-state').replaceChildren(badge(m.state));
    const reason = m.reason
      ? el('span', { class: 'reason' }, m.reason, REASONS[m.reason] ? el('span', { class: 'muted' }, ' — ' + REASONS[m.reason]) : null)
      : el('span', { class: 'muted' }, '—');
    const fields = [
      ['state', badge(m.state)],
      ['reason', reason],
      ['source', el('span', { class: 'mono' }, m.source_msisdn)],
      ['destination', el('span', { class: 'mono' }, m.destination_msisdn)],
      ['frontend', m.frontend || '—'],
      ['source SMSC', m.source_smsc || '—'],
      ['destination SMSC', m.dest_smsc || '—'],
      ['attempts', fmtCount(m.attempts)],
      ['data coding', m.data_coding || 'unspecified (text)'],
      typeof m.message_class === 'number' ? ['message class', classText(m.message_class)] : null,
      ['created (UTC)', fmtTime(m.created_at, true)],
      ['submitted (UTC)', m.submitted_at ? fmtTime(m.submitted_at, true) : '—'],
      ['updated (UTC)', fmtTime(m.updated_at, true)],
      ['next attempt (UTC)', m.next_attempt_at ? fmtTime(m.next_attempt_at, true) : '—'],
      ['valid until (UTC)', m.validity_until ? fmtTime(m.validity_until, true) : 'the node\'s --message-validity'],
      ['deliver after (UTC)', m.deliver_after ? fmtTime(m.deliver_after, true) : '—'],
      ['trace', traceCell(m.trace_id)],
    ];
    $('md-fields').replaceChildren(...fields.filter(Boolean).flatMap(([k, v]) => [el('dt', null, k), el('dd', null, v)]));
    // A binary body is shown as its base64, as the API carries it.
    $('md-body').textContent = m.message_body_base64 !== undefined
      ? 'binary (base64): ' + String(m.message_body_base64)
      : (m.message_body === undefined ? '' : String(m.message_body));

    const history = Array.isArray(m.history) ? m.history : [];
    $('md-history').replaceChildren(...(history.length
      ? history.map((h, i) => el('tr', null,
        el('td', { class: 'num muted' }, String(i + 1)),
        el('td', null, badge(h.state), deferralsNote(h)),
        timeCell(h.at, true),
        el('td', null, h.detail || '')))
      : [el('tr', null, el('td', { colspan: 4, class: 'empty' }, 'No history recorded.'))]));

    $('md-resubmit').hidden = !RESUBMITTABLE.includes(m.state) || !can('resubmit');
    const dialog = $('msg-dialog');
    if (!dialog.open) dialog.showModal();
  }

  async function reloadMessage(keepNotice) {
    if (!current) return;
    try {
      showMessage(await api('GET', API.message(current.id)), keepNotice);
    } catch (e) {
      notify($('md-notice'), 'error', errorText(e));
    }
  }

  // ---------------------------------------------------------------- confirm dialog

  // confirmDialog resolves true when the operator presses the OK button.
  function confirmDialog(title, lines, okLabel) {
    const dialog = $('confirm-dialog');
    $('confirm-title').textContent = title;
    $('confirm-body').replaceChildren(...lines.map((line) => el('p', null, line)));
    $('confirm-ok').textContent = okLabel || 'OK';
    dialog.returnValue = '';
    dialog.showModal();
    $('confirm-cancel').focus();
    return new Promise((resolve) => {
      dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    });
  }

  // ---------------------------------------------------------------- resubmit

  async function resubmitOne(id, state, area) {
    const ok = await confirmDialog('Resubmit message ' + id + '?', [
      'The message is ' + state + '. Resubmitting routes it again with the current routing table and starts its delivery over.',
    ], 'Resubmit');
    if (!ok) return;
    try {
      const m = await api('POST', API.resubmit(id));
      notify(area, 'ok', 'Message ' + id + ' resubmitted: it is now ' + (m && m.state ? m.state : 'resubmitted') + '.');
    } catch (e) {
      notify(area, 'error', errorText(e));
    }
    if (area === $('md-notice')) await reloadMessage(true);
    refreshNow();
  }

  async function resubmitBulk(state) {
    const area = $('queue-notice');
    const button = $('bulk-' + state);
    let st;
    try {
      st = await api('GET', API.status()); // the count the operator confirms is the current one
    } catch (e) {
      notify(area, 'error', errorText(e));
      return;
    }
    renderStatus(st);
    const n = st.counts && typeof st.counts[state] === 'number' ? st.counts[state] : 0;
    if (n === 0) {
      notify(area, 'info', 'No message is ' + state + ' now: nothing to resubmit.');
      return;
    }
    const ok = await confirmDialog('Resubmit all ' + state + ' messages?', [
      'The node\'s status counts ' + plural(n, 'message', 'messages') + ' in state ' + state + ' right now.',
      'Each is routed again with the current routing table and its delivery starts over. ' +
        'Messages that no route serves now are skipped and stay ' + state + '.',
    ], 'Resubmit ' + fmtInt(n));
    if (!ok) return;
    button.classList.add('busy');
    button.disabled = true;
    button.textContent = 'Resubmitting ' + state + '…';
    try {
      const r = await api('POST', API.resubmitBulk(), { state }, BULK_TIMEOUT_MS);
      notify(area, 'ok', 'Resubmitted ' + plural(r.resubmitted, 'message', 'messages') + ' that were ' + state +
        '; skipped ' + fmtInt(r.skipped) + ' (no route serves them now).');
    } catch (e) {
      notify(area, 'error', errorText(e));
    } finally {
      button.classList.remove('busy');
    }
    refreshNow();
  }

  // ---------------------------------------------------------------- frontends

  let frontends = [];
  let frontendsSig = null;

  function renderFrontends(list) {
    list = Array.isArray(list) ? list.slice() : [];
    list.sort((a, b) => String(a.name).localeCompare(String(b.name)));
    frontends = list;
    const sig = JSON.stringify(list);
    if (sig === frontendsSig) return;
    frontendsSig = sig;
    $('fe-body').replaceChildren(...(list.length ? list.map((f) => el('tr', null,
      el('td', { class: 'mono' }, f.name),
      el('td', null, f.mode, f.bind_state
        ? el('span', { class: 'bind-state bind-' + f.bind_state, title: 'its connection to the SMSC on this instance' }, ' · ' + f.bind_state) : null,
      f.worker ? el('span', { class: 'worker-down', title: 'its delivery worker on this instance used up its restart budget: nothing is delivered here until a new one starts' },
        ' · worker ' + f.worker + (parseTime(f.worker_restart_at) ? ', restarts at ' + clock(parseTime(f.worker_restart_at)) : '')) : null),
      el('td', { class: 'mono' }, f.url || '—'),
      el('td', null, f.secret_set ? (f.mode === 'smpp' ? 'password' : 'signed') : '—'),
      el('td', { class: 'actions' }, can('directory')
        ? el('button', { type: 'button', class: 'small danger', onclick: () => deleteFrontend(f) }, 'Delete…') : null)))
      : [el('tr', null, el('td', { colspan: 5, class: 'empty' }, 'No frontends.'))]));
    $('rt-frontends').replaceChildren(...list.map((f) => el('option', { value: f.name })));
  }

  function describeFrontend(mode, url) {
    return mode + ((mode === 'webhook' || mode === 'smpp') && url ? ' → ' + url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1@') : '');
  }

  async function saveFrontend(ev) {
    ev.preventDefault();
    const area = $('fe-notice');
    const name = $('fe-name').value.trim();
    const mode = $('fe-mode').value;
    const url = $('fe-url').value.trim();
    const secret = $('fe-secret').value;
    if (!name || name.includes('/') || name === '.' || name === '..') {
      notify(area, 'error', 'Enter a frontend name: 1-63 letters, digits, ".", "_" or "-".');
      return;
    }
    const old = frontends.find((f) => f.name === name);
    if (old && !await confirmDialog('Replace frontend ' + name + '?', [
      'Frontend ' + name + ' exists (' + describeFrontend(old.mode, old.url) + ').',
      'Saving replaces it with ' + describeFrontend(mode, url) + '.',
      old.secret_set && old.mode === 'webhook' && !(mode === 'webhook' && secret)
        ? 'Its signing secret goes with it: enter the secret again to keep its calls signed.' : '',
      old.secret_set && old.mode === 'smpp' && mode === 'smpp'
        ? 'Its SMSC password is the one in the new URL: a URL without one removes it.' : '',
    ].filter(Boolean), 'Replace')) return;
    const body = { mode };
    if (mode === 'webhook' || mode === 'smpp') body.url = url;
    if (mode === 'webhook' && secret) body.secret = secret;
    try {
      await api('PUT', API.frontend(name), body);
      notify(area, 'ok', 'Frontend ' + name + ' saved (' + describeFrontend(mode, url) + ').');
      $('fe-form').reset();
      syncModeField();
    } catch (e) {
      notify(area, 'error', errorText(e));
    }
    refreshNow();
  }

  async function deleteFrontend(f) {
    const area = $('fe-notice');
    if (!await confirmDialog('Delete frontend ' + f.name + '?', [
      'Frontend ' + f.name + ' (' + describeFrontend(f.mode, f.url) + ') will no longer receive messages. ' +
        'The node refuses while a route still names it.',
    ], 'Delete')) return;
    try {
      await api('DELETE', API.frontend(f.name));
      notify(area, 'ok', 'Frontend ' + f.name + ' deleted.');
    } catch (e) {
      notify(area, 'error', errorText(e));
    }
    refreshNow();
  }

  function syncModeField() {
    const webhook = $('fe-mode').value === 'webhook';
    $('fe-url').disabled = !webhook && $('fe-mode').value !== 'smpp';
    $('fe-secret').disabled = !webhook;
  }

  // ---------------------------------------------------------------- routes

  let routes = [];
  let routesSig = null;

  function renderRoutes(list) {
    list = Array.isArray(list) ? list.slice() : [];
    list.sort((a, b) => String(a.prefix).localeCompare(String(b.prefix)));
    routes = list;
    const sig = JSON.stringify(list);
    if (sig === routesSig) return;
    routesSig = sig;
    $('rt-body').replaceChildren(...(list.length ? list.map((r) => el('tr', null,
      el('td', { class: 'mono' }, r.prefix),
      el('td', { class: 'mono' }, r.frontend),
      timeCell(r.updated_at),
      el('td', { class: 'actions' }, can('directory') ? [
        el('button', { type: 'button', class: 'small', onclick: () => editRoute(r) }, 'Change'),
        el('button', { type: 'button', class: 'small danger', onclick: () => deleteRoute(r) }, 'Delete…')] : null)))
      : [el('tr', null, el('td', { colspan: 4, class: 'empty' }, 'No routes: every new message gets no_route.'))]));
  }

  function editRoute(r) {
    $('rt-prefix').value = r.prefix;
    $('rt-frontend').value = r.frontend;
    $('rt-frontend').focus();
    $('rt-frontend').select();
  }

  async function saveRoute(ev) {
    ev.preventDefault();
    const area = $('rt-notice');
    const prefix = $('rt-prefix').value.trim();
    const frontend = $('rt-frontend').value.trim();
    if (!prefix || prefix.includes('/') || prefix === '.' || prefix === '..') {
      notify(area, 'error', 'Enter a destination prefix: 1-20 digits.');
      return;
    }
    const old = routes.find((r) => r.prefix === prefix);
    if (old && old.frontend === frontend) {
      notify(area, 'info', 'Route ' + prefix + ' already goes to ' + frontend + '.');
      return;
    }
    if (old && !await confirmDialog('Change route ' + prefix + '?', [
      'Destinations starting with ' + prefix + ' go to ' + old.frontend + ' now; they will go to ' + frontend + '.',
    ], 'Change')) return;
    try {
      await api('PUT', API.route(prefix), { frontend });
      notify(area, 'ok', 'Route ' + prefix + ' → ' + frontend + ' saved.');
      $('rt-form').reset();
    } catch (e) {
      notify(area, 'error', errorText(e));
    }
    refreshNow();
  }

  async function deleteRoute(r) {
    const area = $('rt-notice');
    if (!await confirmDialog('Delete route ' + r.prefix + '?', [
      'Destinations starting with ' + r.prefix + ' will no longer go to ' + r.frontend +
        ' (a shorter prefix may still serve them; otherwise new messages get no_route).',
    ], 'Delete')) return;
    try {
      await api('DELETE', API.route(r.prefix));
      notify(area, 'ok', 'Route ' + r.prefix + ' deleted.');
    } catch (e) {
      notify(area, 'error', errorText(e));
    }
    refreshNow();
  }

  // ---------------------------------------------------------------- ring

  // The ring section shows while GET /api/ring/status answers 200 (every
  // node of this version does); a node that answers 404 has no ring and the
  // section stays hidden. A hidden section is asked again every
  // RING_PROBE_MS, a shown one every refresh. The status document is
  // {instance_id, role, master, epoch, coverage, members: [{instance_id,
  // address, zone, services, ranges: [[lo, hi], ...]}]}.
  let ringShown = false;
  let ringProbed = 0;
  let ringSig = null;

  async function refreshRing() {
    if (!ringShown && Date.now() - ringProbed < RING_PROBE_MS) return;
    ringProbed = Date.now();
    let doc;
    try {
      doc = await api('GET', API.ring());
    } catch (e) {
      if (e.status === 401) {
        ringProbed = 0; // ask again once the token is right
      } else if (e.status === 404 || e.status === 405) {
        showRing(false);
      } else if (ringShown) {
        notify($('ring-notice'), 'error', errorText(e));
      }
      return;
    }
    showRing(true);
    renderRing(doc && typeof doc === 'object' ? doc : {});
  }

  function showRing(on) {
    ringShown = on;
    $('ring').hidden = !on;
    if (!on) ringSig = null;
  }

  // ringShare is the fraction of the 64-bit token space that ranges cover.
  // Tokens are uint64 and JSON.parse reads them as doubles, which hold
  // integers exactly only up to 2^53: the bounds arrive rounded (the top
  // of the ring, 2^64-1, reads as 2^64). The share is therefore
  // approximate, good to far better than the 0.1% shown; the exact ranges
  // are in the API's answer.
  const RING_TOKENS = 18446744073709551616; // 2^64
  function ringShare(ranges) {
    let tokens = 0;
    for (const r of Array.isArray(ranges) ? ranges : []) {
      if (Array.isArray(r) && r.length === 2) tokens += Number(r[1]) - Number(r[0]) + 1;
    }
    return Math.min(1, Math.max(0, tokens / RING_TOKENS));
  }

  function fmtPct(f) {
    return typeof f === 'number' && isFinite(f) ? '≈ ' + (f * 100).toFixed(1) + '%' : '—';
  }

  function renderRing(doc) {
    const sig = JSON.stringify(doc);
    if (sig === ringSig) return;
    ringSig = sig;
    const text = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
    const coverage = typeof doc.coverage === 'number' ? doc.coverage : null;
    const fields = [
      ['Instance', text(doc.instance_id)],
      ['Role', text(doc.role)],
      ['Master', text(doc.master)],
      ['Epoch', text(doc.epoch)],
      ['Coverage', coverage === null ? '—' : (coverage * 100).toFixed(1) + '%' + (coverage < 1 ? ' (an assignment is propagating, or a member has not applied it)' : '')],
    ];
    $('ring-fields').replaceChildren(...fields.flatMap(([k, v]) => [el('dt', null, k), el('dd', { class: 'mono' }, v)]));
    const members = Array.isArray(doc.members) ? doc.members : [];
    $('ring-members').replaceChildren(...members.map((m) => {
      const ranges = Array.isArray(m.ranges) ? m.ranges : [];
      return el('tr', { 'data-instance': text(m.instance_id) },
        el('td', { class: 'mono' }, text(m.instance_id), m.instance_id === doc.master ? ' (master)' : ''),
        el('td', { class: 'mono' }, text(m.address)),
        el('td', null, text(m.zone)),
        el('td', null, Array.isArray(m.services) ? m.services.join(', ') : '—'),
        el('td', { class: 'num' }, String(ranges.length)),
        el('td', { class: 'num', title: 'approximate: tokens are 64-bit integers' }, fmtPct(ringShare(ranges))));
    }));
  }

  // ---------------------------------------------------------------- wiring

  function saveTokenFromField(ev) {
    ev.preventDefault();
    const value = $('token').value.trim();
    if (/[^\x21-\x7e]/.test(value)) {
      notify($('notice'), 'error', 'An API token is printable ASCII without spaces; this one cannot be sent in a header.');
      return;
    }
    token = value;
    storeToken(token);
    notify($('notice'), 'ok', token ? 'API token saved in this browser.' : 'No API token is sent now.');
    refreshNow();
  }

  function start() {
    buildTiles();
    stateTiles[''].setAttribute('aria-pressed', 'true');
    for (const s of STATES) stateTiles[s].setAttribute('aria-pressed', 'false');

    $('token').value = token;
    $('token-form').addEventListener('submit', saveTokenFromField);
    $('token-forget').addEventListener('click', () => {
      token = '';
      $('token').value = '';
      storeToken('');
      notify($('notice'), 'ok', 'API token removed from this browser.');
      refreshNow();
    });
    $('banner-auth-focus').addEventListener('click', () => $('token').focus());

    $('state-filter').addEventListener('change', (ev) => setStateFilter(ev.target.value));
    $('search-form').addEventListener('submit', (ev) => { ev.preventDefault(); search($('search').value); });
    $('dest-clear').addEventListener('click', () => {
      $('search').value = '';
      $('search-since').value = '';
      $('search-until').value = '';
      setSearch(view.field, '', '', '');
    });
    $('page-older').addEventListener('click', () => {
      if (!view.next) return;
      changeView(() => { view.back.push(view.cursor); view.cursor = view.next; });
    });
    $('page-newer').addEventListener('click', () => {
      changeView(() => { view.cursor = view.back.pop() || ''; });
    });
    $('page-newest').addEventListener('click', () => {
      changeView(() => { view.cursor = ''; view.back = []; });
    });
    for (const s of RESUBMITTABLE) $('bulk-' + s).addEventListener('click', () => resubmitBulk(s));

    $('md-resubmit').addEventListener('click', () => {
      if (current) resubmitOne(current.id, current.state, $('md-notice'));
    });
    $('md-reload').addEventListener('click', () => reloadMessage(false));
    $('msg-dialog').addEventListener('close', () => { current = null; refreshNow(); });
    $('confirm-dialog').addEventListener('close', () => refreshNow());

    $('fe-mode').addEventListener('change', syncModeField);
    $('fe-form').addEventListener('submit', saveFrontend);
    $('rt-form').addEventListener('submit', saveRoute);
    syncModeField();

    tick();
  }

  start();
})();

// cordis web: disclosures, local times and live updates. No build step, no
// dependency; the pages work without it, only less.
(function () {
  'use strict';

  // Disclosures: a button with aria-expanded shows and hides the element
  // its aria-controls names (the plan strip, a tool row, reasoning).
  document.addEventListener('click', function (e) {
    var button = e.target.closest && e.target.closest('button[aria-controls]');
    if (!button) return;
    var panel = document.getElementById(button.getAttribute('aria-controls'));
    if (!panel) return;
    var open = button.getAttribute('aria-expanded') !== 'true';
    button.setAttribute('aria-expanded', open ? 'true' : 'false');
    panel.hidden = !open;
  });

  var lang = document.documentElement.lang || 'en';
  function localTimes(root) {
    var times = root.querySelectorAll('time[datetime]');
    for (var i = 0; i < times.length; i++) {
      var d = new Date(times[i].getAttribute('datetime'));
      if (!isNaN(d.getTime())) {
        times[i].title = times[i].textContent;
        times[i].textContent = d.toLocaleString(lang);
      }
    }
  }
  localTimes(document);

  function parse(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    return t.content.firstElementChild;
  }

  // Replaces `old` by `next`, keeping open what the reader opened.
  function replace(old, next) {
    var opened = old.querySelectorAll('button[aria-expanded="true"]');
    for (var i = 0; i < opened.length; i++) {
      var b = next.querySelector('button[aria-controls="' + opened[i].getAttribute('aria-controls') + '"]');
      var p = b && next.querySelector('#' + CSS.escape(b.getAttribute('aria-controls')));
      if (b && p) { b.setAttribute('aria-expanded', 'true'); p.hidden = false; }
    }
    var focused = old.contains(document.activeElement) && document.activeElement.getAttribute('aria-controls');
    old.replaceWith(next);
    if (focused) {
      var again = next.querySelector('button[aria-controls="' + focused + '"]');
      if (again) again.focus();
    }
    localTimes(next);
  }

  function upsert(container, id, html) {
    var next = parse(html);
    if (!next) return;
    var old = document.getElementById(id);
    if (old) { replace(old, next); return; }
    container.appendChild(next);
    localTimes(next);
  }

  var main = document.getElementById('main');
  var url = main && main.getAttribute('data-live');
  if (!url || !window.EventSource) return;
  var status = document.getElementById('live-status');
  // The stream's state: 'on' (heartbeats arrive), 'stale' (none for two
  // intervals: the stream is reopened), 'off' (the browser reconnects).
  // The status line is written only when the state changes, so a screen
  // reader hears each change once.
  var state = null;
  function show(next) {
    if (next === state) return;
    state = next;
    main.setAttribute('data-live-state', next);
    if (!status) return;
    status.textContent = main.getAttribute('data-live-' + next);
    status.className = next === 'on' ? 'live-status' : 'live-status off';
  }
  var beat = Number(main.getAttribute('data-beat')) || 15000;
  var heard = 0, opened = 0, source = null;
  // The stream's address, resuming after what the page shows.
  function address() {
    var last = main.getAttribute('data-last');
    if (last === null || last === '' || last === 'null') return url;
    return url.replace(/([?&])after=[^&]*&?/, '$1').replace(/[?&]$/, '') + (url.indexOf('?') < 0 ? '?' : '&') + 'after=' + encodeURIComponent(last);
  }
  function heardNow() { heard = Date.now(); show('on'); }
  function connect() {
    if (source) source.close();
    opened = Date.now();
    source = new EventSource(address());
    source.onopen = heardNow;
    source.onerror = function () { if (source.readyState !== EventSource.OPEN) show('off'); };
    source.addEventListener('beat', heardNow);
    // Each handler remembers the event's id: the stream resumes after it.
    [['update', onUpdate], ['rows', onRows], ['snapshot', onSnapshot]].forEach(function (h) {
      source.addEventListener(h[0], function (e) {
        heardNow();
        h[1](e);
        if (e.lastEventId) main.setAttribute('data-last', e.lastEventId);
      });
    });
  }
  setInterval(function () {
    var now = Date.now();
    if (now - heard > 2 * beat && now - opened > 2 * beat) {
      if (state === 'on') show('stale');
      connect();
    }
  }, 1000);

  // A session page: items that changed, then the header, plans and pager.
  function onUpdate(e) {
    var d = JSON.parse(e.data);
    var items = document.getElementById('items');
    for (var i = 0; i < d.items.length; i++) upsert(items, d.items[i].id, d.items[i].html);
    ['head', 'plans', 'pager'].forEach(function (k) {
      var old = document.getElementById(k);
      var next = d[k] && parse(d[k]);
      if (old && next) replace(old, next);
    });
  }

  // The list: changed rows move to the top (the most recently updated).
  // The list, whole: the page's state could not be brought up to date row
  // by row (the server restarted, or the stream fell behind).
  function onSnapshot(e) {
    var d = JSON.parse(e.data);
    var rows = document.getElementById('rows');
    if (!rows) return;
    var t = document.createElement('template');
    t.innerHTML = d.html;
    rows.replaceChildren(t.content);
    localTimes(rows);
    var empty = document.getElementById('empty');
    if (empty && d.count) empty.remove();
  }

  function onRows(e) {
    var d = JSON.parse(e.data);
    var rows = document.getElementById('rows');
    if (!rows) return;
    for (var i = 0; i < d.rows.length; i++) {
      var r = d.rows[i];
      var old = document.getElementById(r.id);
      if (r.removed) { if (old) old.remove(); continue; }
      if (old) old.remove();
      var next = parse(r.html);
      if (!next) continue;
      var at = null;
      for (var c = rows.firstElementChild; c; c = c.nextElementSibling) {
        if (Number(c.getAttribute('data-updated')) <= r.updated) { at = c; break; }
      }
      rows.insertBefore(next, at);
      localTimes(next);
    }
    var empty = document.getElementById('empty');
    if (empty && rows.children.length) empty.remove();
  }

  connect();
})();

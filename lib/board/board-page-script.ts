/**
 * The board page's script, inline (its hash is in the page's CSP). Every value from the server
 * goes into the page as text (`textContent`, `setAttribute`), never as markup.
 */
export const BOARD_SCRIPT = `
(function () {
  'use strict';
  var api = location.pathname.replace(/\\/+$/, '') + '/api';
  var allowRelease = document.body.getAttribute('data-allow-release') === 'true';
  var rows = document.getElementById('rows');
  var summary = document.getElementById('summary');
  var statusLine = document.getElementById('status');
  var live = document.getElementById('live');
  var prefixInput = document.getElementById('prefix');
  var showFree = document.getElementById('show-free');
  var nextButton = document.getElementById('next');
  var firstButton = document.getElementById('first');
  var view = { prefix: new URLSearchParams(location.search).get('prefix') || '', after: null };
  var page = { locks: [], next: null, loadedAt: 0 };
  var loading = false, again = false, pending = null;

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function say(text, isError) {
    statusLine.textContent = text;
    statusLine.className = isError ? 'error' : '';
  }
  function leaseLeft(ms) {
    var left = Math.max(0, ms - (performance.now() - page.loadedAt));
    return (left >= 10000 ? String(Math.round(left / 1000)) : (left / 1000).toFixed(1)) + ' s left';
  }
  function failure(response) {
    return response.json().catch(function () { return {}; }).then(function (body) {
      var error = new Error(response.status + ' ' + String(body.message || response.statusText));
      error.status = response.status;
      error.detail = String(body.message || response.statusText);
      throw error;
    });
  }

  function load() {
    if (loading) { again = true; return; }
    loading = true;
    var query = new URLSearchParams({ limit: '100' });
    if (view.prefix) query.set('prefix', view.prefix);
    if (view.after !== null) query.set('after', view.after);
    fetch(api + '/locks?' + query.toString(), { credentials: 'same-origin' })
      .then(function (response) { return response.ok ? response.json() : failure(response); })
      .then(function (body) {
        page = { locks: body.locks, next: body.next, loadedAt: performance.now() };
        render();
      })
      .catch(function (error) { say('Could not load the locks: ' + error.message, true); })
      .finally(function () {
        loading = false;
        if (again) { again = false; load(); }
      });
  }
  function soon() {
    if (pending === null) pending = setTimeout(function () { pending = null; load(); }, 30);
  }

  function holderLine(holder) {
    var line = el('div', 'holder');
    line.appendChild(el('span', 'holder-id', holder.holderId === null ? '(unknown)' : holder.holderId));
    line.appendChild(el('span', 'fence', 'fence ' + holder.fence));
    var lease = el('span', 'lease', leaseLeft(holder.remainingMs));
    lease.setAttribute('data-ms', String(holder.remainingMs));
    line.appendChild(lease);
    if (holder.weight !== 1) line.appendChild(el('span', 'weight', holder.weight + ' permits'));
    if (holder.scope !== undefined) line.appendChild(el('span', 'scope', 'scope ' + holder.scope));
    return line;
  }
  function row(lock) {
    var tr = el('tr', lock.held ? 'held' : 'free');
    tr.setAttribute('data-key', lock.key);
    var keyCell = el('td', 'key');
    if (lock.leaderOf !== null) {
      keyCell.appendChild(el('span', 'leader', 'leader of ' + lock.leaderOf));
      keyCell.appendChild(el('code', 'raw', lock.key));
    } else {
      keyCell.appendChild(el('code', null, lock.key));
    }
    var mode = !lock.held ? 'free' : lock.mode === 'semaphore' ? 'semaphore of ' + lock.permits : lock.mode;
    var holders = el('td', 'holders');
    lock.holders.forEach(function (holder) { holders.appendChild(holderLine(holder)); });
    var actions = el('td', 'actions');
    if (allowRelease && lock.held) actions.appendChild(releaseButton(lock));
    tr.append(keyCell, el('td', 'mode', mode), holders, el('td', 'waiting', String(lock.waiting)), actions);
    return tr;
  }
  function render() {
    var shown = page.locks.filter(function (lock) { return lock.held || showFree.checked; });
    rows.replaceChildren.apply(rows, shown.map(row));
    var hidden = page.locks.length - shown.length;
    summary.textContent = shown.length + (shown.length === 1 ? ' key' : ' keys') +
      (hidden > 0 ? ' (' + hidden + ' free hidden)' : '') +
      (view.prefix ? ' starting with "' + view.prefix + '"' : '') +
      (view.after !== null ? ', after "' + view.after + '"' : '');
    nextButton.disabled = page.next === null;
    firstButton.disabled = view.after === null;
  }

  // The armed key outlives re-renders (events, the 5 s refresh): a confirmation always lands
  // on the row of the key it names.
  var armedKey = null;
  var armedTimer = null;
  // The fences of the holders shown when Release was pressed: the release frees those only, so
  // a holder that took the key since is never freed (the server answers 409).
  var armedFences = null;
  var PAGE_FENCES = 500;
  function disarm() {
    clearTimeout(armedTimer);
    armedKey = null;
    armedFences = null;
  }
  // Keys whose release is on its way: a render meanwhile must not offer the button again. A Set:
  // in an object, keys such as "constructor" or "__proto__" would read as on their way.
  var releasing = new Set();
  function releaseButton(lock) {
    var key = lock.key;
    var armed = key === armedKey;
    var button = el('button', armed ? 'release armed' : 'release', armed ? 'Confirm release' : 'Release');
    button.type = 'button';
    if (releasing.has(key)) {
      button.disabled = true;
      button.textContent = 'Releasing';
      return button;
    }
    button.addEventListener('click', function () {
      if (armedKey !== key) {
        disarm();
        armedKey = key;
        armedFences = lock.holders.map(function (holder) { return holder.fence; });
        armedTimer = setTimeout(function () { disarm(); render(); }, 5000);
        render();
        return;
      }
      var fences = armedFences;
      disarm();
      if (fences.length > PAGE_FENCES) {
        // The request line would near the server's 16 KiB header limit (431, nothing freed).
        say('Release of ' + key + ' refused: ' + fences.length + ' holders are more than the page can name (' +
          PAGE_FENCES + '); use LockService.forceRelease(key, { fences })', true);
        render();
        return;
      }
      button.disabled = true;
      releasing.add(key);
      // Digits and commas need no escaping: a plain comma keeps the request line short.
      var query = 'key=' + encodeURIComponent(key) + '&fences=' + fences.join(',');
      fetch(api + '/lock/release?' + query, {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'x-lock-board': 'release' },
      })
        .then(function (response) { return response.ok ? response.json() : failure(response); })
        .then(function (body) {
          releasing.delete(key);
          var who = body.released.map(function (h) { return h.holderId + ' (fence ' + h.fence + ')'; });
          say('Released ' + key + (who.length ? ' from ' + who.join(', ') : ': nobody held it'), false);
          load();
        })
        .catch(function (error) {
          releasing.delete(key);
          render();
          if (error.status === 409) {
            // The holders shown have gone: nothing was released; show who holds it now.
            say('Release of ' + key + ' refused: ' + error.detail, true);
            load();
            return;
          }
          say('Release of ' + key + ' failed: ' + error.message, true);
        });
    });
    return button;
  }

  function showLive(text, on) {
    live.textContent = text;
    live.className = on ? 'live on' : 'live off';
  }
  // "live" only while the server says changes reach the stream; else the 5 s refresh is all.
  function listen() {
    var source = new EventSource(api + '/events');
    source.onopen = soon;
    source.addEventListener('flow', function (message) {
      var flow;
      try { flow = JSON.parse(message.data); } catch (error) { flow = {}; }
      if (flow.live === true) showLive('live', true);
      else showLive('refreshing every 5 s', false);
    });
    // The server ends each connection after a while (so that the guard runs again): at once
    // through a new one.
    source.addEventListener('reconnect', function () { source.close(); listen(); });
    source.onerror = function () {
      if (source.readyState === EventSource.CLOSED) {
        // Refused (a guard's 403, a 503 before the service could connect): the browser gives up.
        showLive('not live, refreshing every 5 s', false);
        setTimeout(listen, 5000);
      } else {
        showLive('reconnecting', false);
      }
    };
    source.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (error) { return; }
      if (typeof event.key === 'string' && event.key.indexOf(view.prefix) === 0) soon();
    };
  }

  document.getElementById('filter').addEventListener('submit', function (event) {
    event.preventDefault();
    view = { prefix: prefixInput.value, after: null };
    load();
  });
  showFree.addEventListener('change', render);
  nextButton.addEventListener('click', function () { view.after = page.next; load(); });
  firstButton.addEventListener('click', function () { view.after = null; load(); });
  // Leases count down here; a lease that runs out writes nothing, so look again now and then.
  setInterval(function () {
    document.querySelectorAll('.lease').forEach(function (lease) {
      lease.textContent = leaseLeft(Number(lease.getAttribute('data-ms')));
    });
  }, 1000);
  setInterval(soon, 5000);
  prefixInput.value = view.prefix;
  listen();
  load();
})();
`;

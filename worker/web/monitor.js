// Installed before a web_execute_js script: counts DOM mutations and records short-lived messages
// (toasts, alerts, live regions) the moment they appear, since many are gone before anyone looks.
() => {
  if (window.__gaMon) window.__gaMon.obs.disconnect();
  const RX = /toast|snack|alert|notif|flash|message|growl|popup|status/i;
  const m = {count: 0, last: performance.now(), messages: []};
  const seen = new Set();
  const messageBox = (el) => {
    for (let n = el, depth = 0; n && n.nodeType === 1 && depth < 3; n = n.parentElement, depth++) {
      const role = n.getAttribute('role');
      if (role === 'alert' || role === 'status' || role === 'alertdialog' || n.hasAttribute('aria-live')) return n;
      if (typeof n.className === 'string' && RX.test(n.className + ' ' + n.id)) return n;
    }
    return null;
  };
  const note = (box) => {
    if (!box) return;
    const text = (box.innerText || box.textContent || '').trim().replace(/\s+/g, ' ');
    if (!text || text.length > 300 || seen.has(text)) return;
    seen.add(text);
    if (m.messages.length < 10) m.messages.push(text);
  };
  m.obs = new MutationObserver((records) => {
    m.count += records.length;
    m.last = performance.now();
    for (const r of records) {
      if (r.type === 'childList') {
        for (const n of r.addedNodes) note(messageBox(n.nodeType === 1 ? n : n.parentElement));
      } else {
        note(messageBox(r.target.nodeType === 1 ? r.target : r.target.parentElement));
      }
    }
  });
  m.obs.observe(document, {subtree: true, childList: true, attributes: true, characterData: true});
  window.__gaMon = m;
}

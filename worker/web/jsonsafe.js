// Called on the value a web_execute_js script returned (as `this`): a JSON-safe copy of it.
function () {
  const seen = new WeakSet();
  let budget = 20000;  // values converted at most: a huge object comes back truncated, not as megabytes
  const element = (el) => {
    const html = el.outerHTML || '';
    if (html.length <= 500) return html;
    const open = html.slice(0, html.indexOf('>') + 1).slice(0, 200);
    const text = (el.innerText || el.textContent || '').trim().replace(/\s+/g, ' ').slice(0, 200);
    return `${open}${text}… (${html.length} chars of HTML)`;
  };
  const conv = (v, depth) => {
    if (v === undefined) return null;
    if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
    if (typeof v === 'number') return Number.isFinite(v) ? v : String(v);
    if (typeof v === 'bigint' || typeof v === 'symbol') return v.toString();
    if (typeof v === 'function') return `[function ${v.name || 'anonymous'}]`;
    if (typeof Element !== 'undefined' && v instanceof Element) return element(v);
    if (typeof Node !== 'undefined' && v instanceof Node) return v.nodeType === 3 ? v.nodeValue : `[${v.nodeName}]`;
    if (v.window === v) return v === window ? '[window]' : '[another window]';
    if (--budget < 0) return '[…]';
    if (seen.has(v)) return '[circular]';
    if (depth > 8) return '[nested too deep]';
    seen.add(v);
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof Error) return `${v.name}: ${v.message}`;
    if (v instanceof RegExp) return String(v);
    if (v instanceof Map) return Object.fromEntries([...v].slice(0, 2000).map(([k, x]) => [String(k), conv(x, depth + 1)]));
    if (v instanceof Set || Array.isArray(v) || ArrayBuffer.isView(v) ||
        (typeof NodeList !== 'undefined' && (v instanceof NodeList || v instanceof HTMLCollection))) {
      return Array.from(v).slice(0, 5000).map((x) => conv(x, depth + 1));
    }
    const out = {};
    let n = 0;
    for (const k in v) {
      if (n++ >= 2000) break;
      try { out[k] = conv(v[k], depth + 1); } catch (e) { out[k] = '[unreadable]'; }
    }
    return out;
  };
  return conv(this, 0);
}

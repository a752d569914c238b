// web_scan's in-page half: walk the live DOM once and rebuild only what a person sees.
// Returns {html, text, raw, stats}. Elements hidden by CSS, off-screen, clipped away or covered by
// an overlay are dropped; containers without meaning are unwrapped; interactive elements carry a
// `sel` attribute (a CSS selector that works in document.querySelector); navigation outside the
// main content and long lists are collapsed with a note saying what was left out.
(opts) => {
  const t0 = performance.now();
  const VW = innerWidth, VH = innerHeight, SX = scrollX, SY = scrollY, VIEWPORT_ORIGIN = {x: 0, y: 0};
  const stats = {elements: 0, hidden: 0, offscreen: 0, covered: 0, collapsed: 0};
  const NAV_KEEP = opts.navKeep || 12, LIST_MAIN = 60, LIST_MAIN_KEEP = 40, LIST_OTHER = 15, LIST_OTHER_KEEP = 10;

  const SKIP = new Set(['script', 'style', 'noscript', 'template', 'link', 'meta', 'head', 'title', 'base', 'param',
    'source', 'track', 'map', 'area', 'wbr', 'path', 'defs', 'symbol', 'use', 'g', 'object', 'embed', 'canvas', 'hr']);
  const KEEP = new Set(['a', 'button', 'input', 'select', 'textarea', 'form', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'p',
    'ul', 'ol', 'li', 'dl', 'dt', 'dd', 'table', 'tr', 'th', 'td', 'caption', 'pre', 'blockquote', 'img', 'nav', 'main',
    'header', 'footer', 'aside', 'article', 'dialog', 'details', 'summary', 'iframe', 'video', 'audio']);
  const VOID = new Set(['input', 'img', 'iframe', 'video', 'audio']);
  const ROLES = /^(button|link|checkbox|radio|tab|menuitem|menuitemcheckbox|menuitemradio|option|switch|combobox|textbox|searchbox|slider|spinbutton|treeitem)$/;
  const LANDMARK = {navigation: 'nav', main: 'main', dialog: 'dialog', alertdialog: 'dialog', banner: 'header', contentinfo: 'footer', complementary: 'aside'};

  // ---- selectors: #id or tag[name=..] when unique and stable-looking, else a `ga` attribute we add
  const idCount = new Map();
  for (const el of document.querySelectorAll('[id]')) idCount.set(el.id, (idCount.get(el.id) || 0) + 1);
  const usedGa = new Set();
  const toTag = [];  // attributes are set after the walk: writing during it would force a re-layout per read
  let counter = window.__gaCounter || 0;
  const stableId = (id) => /^[A-Za-z][\w-]{0,40}$/.test(id) && !/\d{4,}|[0-9a-f]{10,}|^(ember|react|radix|headlessui|mui|:r)/i.test(id);
  function selectorFor(el, tag) {
    const id = el.id;
    if (id && idCount.get(id) === 1 && stableId(id) && el.getRootNode() === document) return '#' + id;
    const name = el.getAttribute('name');
    if (name && /^(input|select|textarea|button)$/.test(tag) && /^[\w.\-\[\]]{1,40}$/.test(name)) {
      const s = `${tag}[name='${name}']`;
      if (document.querySelectorAll(s).length === 1) return s;
    }
    let n = el.getAttribute('ga');
    if (!n || usedGa.has(n)) { n = String(++counter); toTag.push([el, n]); }
    usedGa.add(n);
    return `[ga='${n}']`;
  }

  // ---- coverage. Only positioned boxes paint over others, so the walk records the positioned boxes
  // big enough to hide something: a fixed/sticky one covering half the screen or more (an overlay; a
  // smaller bar such as a header or a cookie banner does not count, since scrolling moves content from
  // under it) or an absolute one (a dropdown, a popover). After the walk, each candidate is confirmed
  // on top with elementFromPoint, and only the boxes overlapping a confirmed layer sample their own
  // points. Hit tests are expensive on big pages (milliseconds each), so most pages make none.
  const related = (a, b) => a === b || a.contains(b) || b.contains(a) || deepContains(a, b) || deepContains(b, a);
  function deepContains(a, b) {  // across open shadow roots
    for (let n = b; n; n = n.parentNode || n.host) if (n === a) return true;
    return false;
  }
  function areaInView(r) {
    return Math.max(0, Math.min(r.right, VW) - Math.max(r.left, 0)) * Math.max(0, Math.min(r.bottom, VH) - Math.max(r.top, 0));
  }
  const candidates = [];
  function noteLayer(node, pos, r) {
    const area = areaInView(r);
    if ((pos === 'fixed' || pos === 'sticky') && area >= 0.5 * VW * VH) candidates.push({node, r, overlay: pos === 'fixed'});
    else if (pos === 'absolute' && area >= 0.03 * VW * VH) candidates.push({node, r, overlay: false});
  }
  function pointIn(r, fx, fy) {
    const x0 = Math.max(r.left, 0), x1 = Math.min(r.right, VW), y0 = Math.max(r.top, 0), y1 = Math.min(r.bottom, VH);
    return [x0 + (x1 - x0) * fx, y0 + (y1 - y0) * fy];
  }
  function removeCovered(root) {
    const layers = candidates.filter((c) => {
      const hit = document.elementFromPoint(...pointIn(c.r, 0.5, 0.5));
      return hit && related(c.node.el, hit);
    });
    if (!layers.length) return;
    const overlay = layers.find((l) => l.overlay);
    const inLayer = (hit) => layers.some((l) => related(l.node.el, hit));
    function covered(n) {
      const r = n.r;
      if (!(r.right > 0 && r.bottom > 0 && r.left < VW && r.top < VH)) return !!overlay && !related(overlay.node.el, n.el);
      const over = layers.filter((l) => l.r.right > r.left && l.r.left < r.right && l.r.bottom > r.top && l.r.top < r.bottom
        && !related(l.node.el, n.el));
      if (!over.length) return false;
      for (const [fx, fy] of [[0.5, 0.5], [0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]]) {
        const hit = document.elementFromPoint(...pointIn(r, fx, fy));
        if (hit && (related(n.el, hit) || !inLayer(hit))) return false;
      }
      return true;
    }
    (function prune(n) {
      n.kids = n.kids.filter((k) => {
        if (!k.kids) return true;
        if (k.r && !layers.some((l) => l.node === k) && covered(k)) {
          stats.covered++;
          return false;
        }
        prune(k);
        return k.kids.length || VOID.has(k.out) || k.interactive;
      });
    })(root);
  }

  // ---- pass 1: the visible tree
  function childNodesOf(el) {
    if (el.shadowRoot) return el.shadowRoot.childNodes;
    if (el.localName === 'slot') {
      const assigned = el.assignedNodes({flatten: true});
      return assigned.length ? assigned : el.childNodes;
    }
    return el.childNodes;
  }
  function isInteractive(el, tag, style, parentCursor) {
    if (tag === 'button' || tag === 'select' || tag === 'textarea' || tag === 'summary') return true;
    if (tag === 'input') return el.type !== 'hidden';
    const role = el.getAttribute('role');
    if (role && ROLES.test(role)) return true;
    if (tag === 'a') return el.hasAttribute('href') || el.hasAttribute('onclick');
    if (el.hasAttribute('onclick')) return true;
    const editable = el.getAttribute('contenteditable');
    if (editable !== null && editable !== 'false' && !(el.parentElement && el.parentElement.isContentEditable)) return true;
    return style.cursor === 'pointer' && parentCursor !== 'pointer' && tag !== 'label' && tag !== 'img';
  }
  const INLINE_KEPT = new Set(['a', 'button', 'input', 'select', 'textarea', 'img', 'summary', 'label', 'span']);
  function boundary(display, tag) {  // what separates the element from its neighbours: nothing, a space, a line
    if (display === 'inline' || display === 'contents') return '';
    return display.startsWith('inline') || display === 'table-cell' || INLINE_KEPT.has(tag) ? ' ' : '\n';
  }

  function visit(el, pc) {
    const tag = el.localName;
    if (SKIP.has(tag)) return null;
    stats.elements++;
    const style = getComputedStyle(el);
    const display = style.display;
    if (display === 'none' || style.opacity === '0' || pc.closedDetails && tag !== 'summary') {
      stats.hidden++;
      return null;
    }
    const pos = style.position;
    let clip = pos === 'fixed' ? null : pc.clip;
    if (clip && pos === 'absolute' && !clip.positioned) clip = clip.prev;  // escapes a static clipping parent
    // An inline box in the normal flow shares its parent's fate: skip its geometry (syntax-highlighted code
    // and prose are thousands of spans). Everything else is checked for size, position, clipping and cover.
    let geometry = null, origin = pc.origin;
    if (display !== 'contents' && !(display === 'inline' && pos === 'static' && tag !== 'img')) {
      const r = geometry = el.getBoundingClientRect();
      const tiny = r.width < 2 || r.height < 2;
      const ox = style.overflowX, oy = style.overflowY;
      if (tiny && (ox !== 'visible' || oy !== 'visible' || tag === 'img' || tag === 'iframe' || tag === 'input' || tag === 'button')) {
        stats.hidden++;
        return null;
      }
      const L = r.left + SX, T = r.top + SY, R = r.right + SX, B = r.bottom + SY;
      // Off-screen: left of or above where the nearest scrolling box (the page, or a scrolling panel)
      // starts, since nothing scrolls there; a fixed box must also be inside the viewport.
      const o = pos === 'fixed' ? VIEWPORT_ORIGIN : pc.origin;
      const off = (pos === 'fixed' && (r.left >= VW || r.top >= VH)) || (!tiny && (r.right <= o.x || r.bottom <= o.y));
      const clipped = clip && !tiny && (R <= clip.l || L >= clip.r || B <= clip.t || T >= clip.b);
      if (off || clipped) {
        stats.offscreen++;
        return null;
      }
      if (/auto|scroll/.test(ox + oy)) {  // a scrolling panel: all its content can be scrolled into view
        clip = null;
        origin = {x: r.left - el.scrollLeft, y: r.top - el.scrollTop};
      } else if (pos === 'fixed') origin = VIEWPORT_ORIGIN;
      else if ((ox === 'hidden' || ox === 'clip') && (oy === 'hidden' || oy === 'clip')) {
        clip = {l: Math.max(L, clip ? clip.l : -1e9), t: Math.max(T, clip ? clip.t : -1e9), r: Math.min(R, clip ? clip.r : 1e9),
          b: Math.min(B, clip ? clip.b : 1e9), positioned: pos !== 'static', prev: clip};
      }
    }
    const role = el.getAttribute('role');
    const node = {tag, kids: [], attrs: [], block: boundary(display, tag), interactive: false, main: false, el, r: geometry};
    if (geometry && pos !== 'static' && pos !== 'relative') noteLayer(node, pos, geometry);
    node.out = KEEP.has(tag) ? tag : (LANDMARK[role] || null);
    if (role === 'heading' && !node.out) node.out = 'h' + Math.min(6, Math.max(1, +el.getAttribute('aria-level') || 2));
    if (role === 'main') node.out = 'main';
    node.interactive = isInteractive(el, tag, style, pc.cursor);
    if (node.interactive && !node.out) node.out = tag;
    const cpc = {clip, origin, cursor: style.cursor, pre: pc.pre || (display !== 'inline' && style.whiteSpace.startsWith('pre')),
      textVisible: style.visibility === 'visible', heading: pc.heading || /^h[1-6]$/.test(tag),
      closedDetails: tag === 'details' && !el.open};
    if (el.hidden && style.contentVisibility === 'hidden') return null;  // hidden=until-found: rendered without content
    if (tag === 'select') {
      selectNode(el, node);
    } else if (tag === 'textarea') {
      node.attrs.push(['value', el.value.slice(0, 200)]);
    } else if (tag === 'svg') {
      const label = el.getAttribute('aria-label') || (el.querySelector('title') || {}).textContent;
      if (!label) return null;
      node.out = null;
      node.kids.push({text: label.trim()});
    } else if (tag !== 'iframe') {
      for (const child of childNodesOf(el)) {
        if (child.nodeType === 3) {
          if (!cpc.textVisible) continue;
          const s = cpc.pre ? child.nodeValue : child.nodeValue.replace(/\s+/g, ' ');
          if (s) node.kids.push(cpc.pre ? {text: s, pre: true} : {text: s});
        } else if (child.nodeType === 1) {
          const k = visit(child, cpc);
          if (k) node.kids.push(k);
        }
      }
    }
    if (tag === 'a' && pc.heading && /^#/.test(el.getAttribute('href') || '') && !el.hasAttribute('onclick')) {
      node.out = null;  // a heading's own permalink: its text is the heading
      node.interactive = false;
    }
    if (node.out) describe(el, tag, node, role);
    if (node.interactive && !node.kids.some((k) => k.kids || /\S/.test(k.text)) && !node.attrs.some((a) => a[0] === 'label')
        && !/^(input|select|textarea|button|a)$/.test(tag)) return null;  // a clickable box with nothing to tell it by
    if (!node.kids.length && !VOID.has(node.out) && !node.interactive && tag !== 'select' && tag !== 'textarea') return null;
    if (node.out === 'img' && !node.attrs.length) return null;
    return node;
  }

  function selectNode(el, node) {
    const options = [...el.options];
    const keep = options.length > 8 ? 6 : options.length;
    for (const o of options.slice(0, keep)) {
      node.kids.push({tag: 'option', out: 'option', attrs: o.selected ? [['selected', '']] : [], kids: [{text: o.text.trim()}], block: ''});
    }
    if (options.length > keep) node.kids.push({note: `${options.length - keep} more options`});
    node.block = ' ';
  }

  function shortHref(a) {  // as written (relative stays relative); long query strings are elided
    const raw = a.getAttribute('href');
    if (raw == null || /^\s*javascript:/i.test(raw)) return null;
    let s = raw.trim();
    try {
      const u = new URL(s, document.baseURI);
      if (/^https?:/.test(s) && u.origin === location.origin) s = u.pathname + u.search + u.hash;
    } catch (e) { /* keep as written */ }
    const q = s.indexOf('?');
    if (s.length > 80 && q > 0) s = s.slice(0, Math.max(q + 1, 60)) + '…';
    return s.length > 100 ? s.slice(0, 99) + '…' : s;
  }

  function describe(el, tag, node, role) {
    const a = node.attrs;
    if (node.interactive || tag === 'form') a.push(['sel', selectorFor(el, tag)]);
    if (tag === 'a') {
      const h = shortHref(el);
      if (h) a.push(['href', h]);
      if (el.target === '_blank') a.push(['target', '_blank']);
    } else if (tag === 'input') {
      const type = el.type;
      if (type !== 'text') a.push(['type', type]);
      if (type === 'checkbox' || type === 'radio') { if (el.checked) a.push(['checked', '']); }
      else if (type === 'password') { if (el.value) a.push(['value', '***']); }
      else if (type !== 'file' && el.value) a.push(['value', el.value.slice(0, 100)]);
      if (el.placeholder) a.push(['placeholder', el.placeholder.slice(0, 80)]);
    } else if (tag === 'img') {
      const alt = (el.getAttribute('alt') || el.getAttribute('aria-label') || el.title || '').trim();
      if (alt) a.push(['alt', alt.slice(0, 100)]);
    } else if (tag === 'iframe' || tag === 'video' || tag === 'audio') {
      const src = el.currentSrc || el.src || '';
      if (src) a.push(['src', src.length > 100 ? src.slice(0, 99) + '…' : src]);
    } else if (tag === 'details' && el.open) {
      a.push(['open', '']);
    }
    if (node.interactive) {
      if (role && node.out !== role && !/^(a|button|input|select|textarea|summary)$/.test(node.out)) a.push(['role', role]);
      if (el.disabled || el.getAttribute('aria-disabled') === 'true') a.push(['disabled', '']);
      const expanded = el.getAttribute('aria-expanded');
      if (expanded) a.push(['aria-expanded', expanded]);
      const label = (el.getAttribute('aria-label') || el.title || '').trim();
      if (label && !/\S/.test(textOf(node))) a.push(['label', label.slice(0, 80)]);
      else if (!/\S/.test(textOf(node)) && tag !== 'input' && tag !== 'select' && tag !== 'textarea') {
        const img = el.querySelector('img[alt]');
        if (img && img.alt.trim()) a.push(['label', img.alt.trim().slice(0, 80)]);
      }
    }
  }

  // ---- pass 2: measure, find the main content, collapse navigation and long lists
  function textOf(n) {
    if (n.text != null) return n.text;
    if (n.note) return '';
    return n.kids.map(textOf).join('');
  }
  function measure(n) {  // tl: text length, ll: text inside links, links: link count
    n.tl = n.ll = n.links = 0;
    if (n.text != null) { n.tl = n.text.trim().length; return; }
    if (n.note) return;
    for (const k of n.kids) { measure(k); n.tl += k.tl; n.ll += k.ll; n.links += k.links; }
    if (n.tag === 'a' && n.interactive) { n.links += 1; n.ll = n.tl; }
  }
  function findMain(root) {
    let found = null;
    (function seek(n) {
      if (found || !n.kids) return;
      if (n.out === 'main' && n.tl > 0) { found = n; return; }
      n.kids.forEach(seek);
    })(root);
    if (found) return found;
    let cur = root;
    for (;;) {  // descend while one child holds most of the text that is not link text
      let best = null;
      for (const k of cur.kids) if (k.kids && (!best || k.tl - k.ll > best.tl - best.ll)) best = k;
      if (best && best.tl - best.ll > 0 && best.tl - best.ll >= 0.6 * (cur.tl - cur.ll)) cur = best;
      else break;
    }
    return cur === root ? null : cur;
  }
  function markPath(n, target) {  // flags the ancestors of the main content: they are never collapsed
    if (n === target) return true;
    if (!n.kids) return false;
    let on = false;
    for (const k of n.kids) if (markPath(k, target)) on = true;
    if (on) n.holdsMain = true;
    return on;
  }
  const isNav = (n) => n.kids && !n.holdsMain && !n.main && (n.out === 'nav' ||
    (n.links >= 6 && n.ll >= 0.7 * n.tl) || (/^(header|footer|aside)$/.test(n.out) && n.links >= 6 && n.ll >= 0.5 * n.tl));
  const seenHrefs = new Set();
  function linksIn(n, acc = []) {
    if (!n.kids) return acc;
    if (n.tag === 'a' && n.interactive) acc.push(n);
    for (const k of n.kids) linksIn(k, acc);
    return acc;
  }
  function hrefOf(n) {
    const h = n.attrs.find((x) => x[0] === 'href');
    return h ? h[1] : textOf(n).trim();
  }
  function collapseNav(n, keep) {
    const links = linksIn(n);
    const hrefs = links.map(hrefOf);
    const repeated = hrefs.filter((h) => seenHrefs.has(h)).length;
    hrefs.forEach((h) => seenHrefs.add(h));
    if (links.length >= 4 && repeated >= 0.8 * links.length) {
      n.kids = [{note: `${links.length} links, same as a menu above`}];
      n.out = n.out || 'nav';
      stats.collapsed += links.length;
      return;
    }
    if (links.length <= keep) return;
    const current = new Set(links.filter((l) => l.el.getAttribute('aria-current') || /\b(active|current)\b/.test(l.el.className)));
    let budget = keep;
    (function prune(p) {
      p.kids = p.kids.filter((k) => {
        if (k.tag === 'a' && k.interactive) return budget-- > 0 || current.has(k);
        if (!k.kids) return budget > 0;
        if (k.links) { prune(k); return k.kids.some((x) => x.kids || x.note || (x.text && x.text.trim())); }
        return budget > 0;
      });
    })(n);
    const left = links.length - keep - links.slice(keep).filter((l) => current.has(l)).length;
    if (left > 0) {
      n.kids.push({note: `${left} more links`});
      stats.collapsed += left;
    }
  }
  function shapeNavs(n, inMain) {
    if (!n.kids) return;
    if (n.main) inMain = true;
    if (isNav(n) && (!inMain || n.links > LIST_MAIN)) {
      let t = n;  // collapse the tightest node holding all the links, so text beside the menu survives
      for (;;) {
        const holders = t.kids.filter((k) => k.links);
        if (holders.length === 1 && holders[0].links === t.links && !holders[0].main) t = holders[0];
        else break;
      }
      collapseNav(t, inMain ? LIST_MAIN_KEEP : NAV_KEEP);
      if (t === n) return;
    }
    for (const k of n.kids) if (k.kids && !(isNav(n) && k.links)) shapeNavs(k, inMain);
  }
  function flatten(n) {  // unwrap containers that carry no meaning, leaving their boundaries as text
    if (!n.kids) return [n];
    const kids = [];
    for (const k of n.kids) kids.push(...flatten(k));
    n.kids = kids;
    if (n.out || n.main) return [n];
    return n.block ? [{text: n.block}, ...kids, {text: n.block}] : kids;
  }
  function shapeLists(n, inMain) {
    if (!n.kids) return;
    if (n.main) inMain = true;
    if (/^(ul|ol|dl|table)$/.test(n.out)) {
      const limit = inMain ? LIST_MAIN : LIST_OTHER, keep = inMain ? LIST_MAIN_KEEP : LIST_OTHER_KEEP;
      const items = n.kids.filter((k) => k.kids);
      if (items.length > limit) {
        const drop = new Set(items.slice(keep, items.length - 2));
        const out = [];
        let noted = false;
        for (const k of n.kids) {
          if (!drop.has(k)) out.push(k);
          else if (!noted) { out.push({note: `${drop.size} more items`}); noted = true; }
        }
        n.kids = out;
        stats.collapsed += drop.size;
      }
    }
    for (const k of n.kids) shapeLists(k, inMain);
  }

  // ---- pass 3: serialize (text under <pre> is shielded from whitespace tidying)
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const escAttr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
  const shield = (s) => s.replace(/ /g, '\u0001').replace(/\n/g, '\u0002').replace(/\t/g, '\u0003');
  const unshield = (s) => s.replace(/\u0001/g, ' ').replace(/\u0002/g, '\n').replace(/\u0003/g, '\t');
  function html(n, out) {
    if (n.text != null) { out.push(n.pre ? shield(esc(n.text)) : esc(n.text)); return; }
    if (n.note) { out.push(`<i>… ${n.note}</i>`); return; }
    const tag = n.out, wrap = n.main && tag !== 'main';
    if (wrap) out.push('\n<main>\n');
    if (tag) {
      if (n.block === '\n') out.push('\n');
      out.push('<' + tag + n.attrs.map(([k, v]) => (v === '' ? ' ' + k : ` ${k}="${escAttr(v)}"`)).join('') + '>');
    }
    for (const k of n.kids) html(k, out);
    if (tag && !VOID.has(tag)) out.push('</' + tag + '>');
    if (tag && n.block === '\n') out.push('\n');
    if (wrap) out.push('\n</main>\n');
  }
  function text(n, out) {
    if (n.text != null) { out.push(n.pre ? shield(n.text) : n.text); return; }
    if (n.note) { out.push(` (… ${n.note}) `); return; }
    const t = n.out;
    let pre = n.block, post = n.block;
    if (/^h[1-6]$/.test(t)) { pre = '\n' + '#'.repeat(+t[1]) + ' '; post = '\n'; }
    else if (t === 'li') { pre = '\n- '; post = '\n'; }
    else if (t === 'td' || t === 'th') { pre = ' | '; post = ''; }
    else if (t === 'input') {
      const at = Object.fromEntries(n.attrs);
      pre = ` [${at.placeholder || at.type || 'input'}${at.value ? ': ' + at.value : ''}${'checked' in at ? ' ✓' : ''}] `;
    } else if (t === 'img') {
      const alt = (n.attrs.find((x) => x[0] === 'alt') || [])[1];
      pre = alt ? ` [image: ${alt}] ` : '';
    } else if (t === 'select') {
      out.push(' [' + n.kids.map((k) => (k.note ? '…' : textOf(k) + (k.attrs.length ? '*' : ''))).join(' | ') + '] ');
      return;
    }
    out.push(pre || '');
    for (const k of n.kids) text(k, out);
    out.push(post || '');
  }
  const tidy = (s) => unshield(s.replace(/[ \t]+\n/g, '\n').replace(/\n[ \t]+/g, '\n').replace(/\n{2,}/g, '\n')
    .replace(/ {2,}/g, ' ').trim());

  const rootEl = document.body || document.documentElement;
  const root = visit(rootEl, {clip: null, origin: {x: -SX, y: -SY}, cursor: 'auto', pre: false, textVisible: true}) || {tag: 'body', kids: [], attrs: []};
  removeCovered(root);
  measure(root);
  const main = findMain(root);
  if (main) { main.main = true; markPath(root, main); }
  shapeNavs(root, false);
  root.out = root.out || 'body';
  flatten(root);
  shapeLists(root, false);
  for (const [el, n] of toTag) el.setAttribute('ga', n);
  window.__gaCounter = counter;
  const out = [];
  for (const k of root.kids) (opts.textOnly ? text : html)(k, out);
  const result = tidy(out.join(''));
  stats.ms = Math.round(performance.now() - t0);
  return {content: result, raw: document.documentElement.outerHTML.length, main: !!main, stats};
}

// web_scan's in-page half: walk the live DOM once and rebuild only what a person sees.
// Returns {content, pages, page, raw, main, stats}. Elements hidden by CSS, off-screen, clipped away or
// covered by an overlay are dropped; containers without meaning are unwrapped; elements to act on carry
// a `sel` attribute (a CSS selector for document.querySelector; one with ' >>> ' steps reaches into a
// shadow root or a same-origin frame and is resolved by $ga(sel)). Outside the main content, menus,
// long lists and credits are cut down with a note saying what was left out; the main content is never
// collapsed: when the output is over opts.budget chars it is split into pages at element boundaries.
(opts) => {
  const t0 = performance.now();
  const VW = innerWidth, VH = innerHeight, SX = scrollX, SY = scrollY, VIEWPORT_ORIGIN = {x: 0, y: 0};
  const stats = {elements: 0, hidden: 0, offscreen: 0, covered: 0, collapsed: 0, frames: 0, shadows: 0};
  const NAV_KEEP = opts.navKeep || 5, LIST_OTHER = 15, LIST_OTHER_KEEP = 10, MAX_HITS = 600;
  const CREDIT = /©|&copy;|\bcopyright\b|all rights reserved|\b(built|generated|created|made|powered) (with|by|using|on)\b|last (updated|modified)|\bhosted (by|on)\b/i;
  const CURRENT = /(^|[\s_-])(active|current|selected|this)($|[\s_-])/;
  window.$ga = (sel) => {  // resolves a printed sel, ' >>> ' stepping into shadow roots and same-origin frames
    let scope = document, el = null;
    for (const step of String(sel).split(' >>> ')) {
      if (!scope) return null;
      el = scope.querySelector(step);
      if (!el) return null;
      scope = el.shadowRoot || (el.localName === 'iframe' || el.localName === 'frame' ? el.contentDocument : null);
    }
    return el;
  };

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
  function selectorFor(el, tag, scope) {  // scope: the sel of the shadow host or frame holding el, if any
    const root = el.getRootNode(), id = el.id;
    const local = (s) => (scope ? scope + ' >>> ' + s : s);
    if (id && stableId(id) && (root === document ? idCount.get(id) === 1 : root.querySelectorAll('#' + id).length === 1)) return local('#' + id);
    const name = el.getAttribute('name');
    if (name && /^(input|select|textarea|button)$/.test(tag) && /^[\w.\-\[\]]{1,40}$/.test(name)) {
      const s = `${tag}[name='${name}']`;
      if (root.querySelectorAll(s).length === 1) return local(s);
    }
    let n = el.getAttribute('ga');
    if (!n || usedGa.has(n)) { n = String(++counter); toTag.push([el, n]); }
    usedGa.add(n);
    return local(`[ga='${n}']`);
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
    let hits = 0;
    function covered(n) {
      const r = n.r;
      if (n.el.ownerDocument !== document) return false;  // inside a frame: its own coordinates
      if (!(r.right > 0 && r.bottom > 0 && r.left < VW && r.top < VH)) return !!overlay && !related(overlay.node.el, n.el);
      const over = layers.filter((l) => l.r.right > r.left && l.r.left < r.right && l.r.bottom > r.top && l.r.top < r.bottom
        && !related(l.node.el, n.el));
      if (!over.length) return false;
      for (const [fx, fy] of [[0.5, 0.5], [0.2, 0.2], [0.8, 0.2], [0.2, 0.8], [0.8, 0.8]]) {
        if (++hits > MAX_HITS) return false;  // hit tests cost milliseconds on big pages: bounded, then trust
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
    const style = pc.win.getComputedStyle(el);
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
      const off = (pos === 'fixed' && (r.left >= pc.vw || r.top >= pc.vh)) || (!tiny && (r.right <= o.x || r.bottom <= o.y));
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
    const node = {tag, kids: [], attrs: [], block: boundary(display, tag), interactive: false, main: false, el, r: geometry,
      scope: pc.scope};
    if (geometry && pos !== 'static' && pos !== 'relative' && pc.win === window) noteLayer(node, pos, geometry);
    node.out = KEEP.has(tag) ? tag : (LANDMARK[role] || null);
    if (role === 'heading' && !node.out) node.out = 'h' + Math.min(6, Math.max(1, +el.getAttribute('aria-level') || 2));
    if (role === 'main') node.out = 'main';
    node.interactive = isInteractive(el, tag, style, pc.cursor);
    if (node.interactive && !node.out) node.out = tag;
    const cpc = {clip, origin, cursor: style.cursor, pre: pc.pre || (display !== 'inline' && style.whiteSpace.startsWith('pre')),
      textVisible: style.visibility === 'visible', heading: pc.heading || /^h[1-6]$/.test(tag),
      closedDetails: tag === 'details' && !el.open, win: pc.win, vw: pc.vw, vh: pc.vh, scope: pc.scope};
    if (el.shadowRoot) {  // an open shadow root: its elements are reached through the host's selector
      cpc.scope = selectorFor(el, tag, pc.scope);
      stats.shadows++;
    }
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
    } else if (tag === 'iframe' || tag === 'frame') {
      const inner = frameBody(el);
      if (inner) {
        const win = inner.ownerDocument.defaultView;
        const k = visit(inner, {clip: null, origin: {x: -win.scrollX, y: -win.scrollY}, cursor: 'auto', pre: false, textVisible: true,
          win, vw: win.innerWidth, vh: win.innerHeight, scope: selectorFor(el, tag, pc.scope)});
        if (k) { node.kids.push(k); stats.frames++; }
      }
    } else {
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
    if (tag === 'a' && !node.interactive) node.out = null;  // an anchor (<a name>): nothing to follow
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

  function frameBody(el) {  // a same-origin frame's body; null for a cross-origin or empty one
    try {
      const doc = el.contentDocument;
      return doc && doc.body && doc.body.childNodes.length ? doc.body : null;
    } catch (e) {
      return null;
    }
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
    const h = tag === 'a' ? shortHref(el) : null;
    // A link the model can follow by its href needs no selector; one that only runs script does.
    if (node.interactive && !(h && !/^#?$/.test(h) && !el.hasAttribute('onclick'))) {
      a.push(['sel', selectorFor(el, tag, node.scope)]);
    }
    if (tag === 'a') {
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

  // ---- pass 2: measure, find the main content, cut down what is outside it
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
  const MAIN_NAME = /(^|\s)(main|main-?content|content|contents|page-?content|doc-?content|body|article|post|entry-?content|markdown-body|document|book|chapter|appendix|preface|refentry)(\s|$)/i;
  const NAV_NAME = /(^|[\s_-])(nav|navbar|navigation|menu|sidebar|sidenav|toc|breadcrumbs?|related|navheader|navfooter|header|footer|topbar|subnav)($|[\s_-])/i;
  const named = (n, re) => !!n.el && (re.test(n.el.id) || typeof n.el.className === 'string' && re.test(n.el.className));
  function findMain(root) {
    let found = null;
    (function seek(n) {  // the page says which it is: <main> or role=main
      if (found || !n.kids) return;
      if (n.out === 'main' && n.tl > 0) { found = n; return; }
      n.kids.forEach(seek);
    })(root);
    if (found) return found;
    const own = (n) => n.tl - n.ll;
    let best = null;
    (function seek(n) {  // a container named like the main content that holds most of the page's own text
      if (!n.kids) return;
      if (n !== root && named(n, MAIN_NAME) && own(n) >= 0.25 * own(root) && (!best || own(n) > own(best))) best = n;
      n.kids.forEach(seek);
    })(root);
    if (best) return best;
    let cur = root;
    for (;;) {  // descend while one child holds most of the text that is not link text
      let top = null;
      for (const k of cur.kids) {
        if (!k.kids || /^(nav|header|footer|aside)$/.test(k.out) || k.tl <= 300 && CREDIT.test(textOf(k))) continue;
        if (!top || own(k) > own(top)) top = k;
      }
      if (top && own(top) > 0 && own(top) >= 0.6 * own(cur)) cur = top;
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
  // Outside the main content. Without a main content found, only what the page marks as navigation is cut.
  const isNav = (n, strict) => n.links >= 3 && (n.out === 'nav' || named(n, NAV_NAME) && n.ll >= 0.3 * n.tl ||
    !strict && (n.ll >= 0.6 * n.tl || /^(header|footer|aside)$/.test(n.out) && n.ll >= 0.4 * n.tl));
  const VERSION = /^[^\d]{0,40}\bv?\d+\.\d+(\.\d+)*\b[^\d]{0,30}$/i;  // "Handbook 7.3.1 documentation"
  const isCredit = (n) => !n.interactive && n.links <= 3 && (n.tl <= 300 && n.block === '\n' && CREDIT.test(textOf(n)) ||
    n.tl <= 60 && !n.links && !/^h[1-6]$/.test(n.out) && VERSION.test(textOf(n).trim()));
  const hasContent = (n) => n.kids.some((k) => k.kids || k.note || (k.text && /\S/.test(k.text)));
  const isLink = (n) => n.tag === 'a' && n.interactive;
  const seenHrefs = new Set();
  function linksIn(n, acc = []) {
    if (!n.kids) return acc;
    if (isLink(n)) acc.push(n);
    for (const k of n.kids) linksIn(k, acc);
    return acc;
  }
  const hrefOf = (n) => (n.attrs.find((x) => x[0] === 'href') || [])[1] || textOf(n).trim();
  const here = (el) => el.ownerDocument.location.href.split('#')[0];
  function isCurrent(a) {
    const el = a.el, cur = el.getAttribute('aria-current');
    if (cur && cur !== 'false') return true;
    if (CURRENT.test(el.className) || el.parentElement && CURRENT.test(el.parentElement.className)) return true;
    const raw = el.getAttribute('href') || '';
    return !!raw && raw[0] !== '#' && el.href.split('#')[0] === here(el);
  }
  // what is left of a pruned menu part: a link, a control or words (not only separators like '|' and '»')
  const worthKeeping = (n) => n.kids ? n.interactive || VOID.has(n.out) || n.kids.some(worthKeeping) : !!n.note || /\w/.test(n.text);
  function leadsTo(kids, i) {  // a heading in a pruned menu stays only above something it names
    for (let j = i + 1; j < kids.length; j++) {
      const k = kids[j];
      if (k.kids && /^h[1-6]$/.test(k.out)) return false;
      if (worthKeeping(k)) return true;
    }
    return false;
  }
  const MOVE_ON = /^\W*(next|prev|previous|up|home|back|top|index|contents|overview|parent)\b/i;
  function collapseNav(n) {
    n.collapsed = true;
    const links = linksIn(n);
    const hrefs = links.map(hrefOf);
    const shown = new Set(links.filter((l, i) => seenHrefs.has(hrefs[i])));  // already in a menu above
    const repeated = shown.size;
    hrefs.forEach((h) => seenHrefs.add(h));
    if (links.length >= 4 && repeated >= 0.8 * links.length) {  // a menu repeated (say in the footer): gone
      n.kids = [];
      stats.collapsed += links.length;
      return;
    }
    // keep what a person uses to move on: the current item and its neighbours (or the first few when none
    // is current) and previous/next/up links; in-page anchors repeat the main content's own headings.
    const keep = new Set(), away = links.filter((l) => !/^#/.test(hrefOf(l)));
    const at = away.findIndex(isCurrent);
    const from = at < 0 ? 0 : Math.max(0, at - 2), to = at < 0 ? NAV_KEEP : at + 3;
    away.slice(from, to).forEach((l) => keep.add(l));
    shown.forEach((l) => keep.delete(l));
    away.filter((l) => MOVE_ON.test(textOf(l)) || /\b(next|prev)\b/.test(l.el.rel)).forEach((l) => keep.add(l));
    keep.forEach((l) => /^#?$/.test((l.el.getAttribute('href') || '').trim()) && keep.delete(l));  // this very page
    if (keep.size >= links.length) return;
    (function prune(p) {
      p.kids = p.kids.filter((k) => {
        if (isLink(k)) return keep.has(k);
        if (!k.kids) return true;
        if (k.links) { prune(k); return worthKeeping(k); }
        return !isCredit(k) && worthKeeping(k);
      });
      p.kids = p.kids.filter((k, i) => !/^h[1-6]$/.test(k.out) || leadsTo(p.kids, i));
    })(n);
    const left = links.length - keep.size;
    n.kids.push({note: `${left} more links`});
    stats.collapsed += left;
  }
  function shapeOutside(n, strict) {  // n holds the main content, or is the root when none was found
    n.kids = n.kids.filter((k) => {
      if (!k.kids || k.main) return true;
      if (k.collapsed) return hasContent(k);  // a repeated menu is left empty
      if (k.holdsMain) { shapeOutside(k, strict); return true; }
      if (isCredit(k) || isLink(k) && !k.tl && !k.attrs.some((a) => a[0] === 'label')) {
        stats.collapsed++;
        return false;  // credits, copyright, "built with"; links showing nothing but an icon
      }
      if (isNav(k, strict)) {
        let t = k;  // collapse the tightest node holding all the links, so text beside the menu survives
        for (;;) {
          const holders = t.kids.filter((x) => x.links);
          if (holders.length === 1 && holders[0].links === t.links) t = holders[0];
          else break;
        }
        collapseNav(t);
        if (t !== k) shapeOutside(k, strict);
        return hasContent(k);
      }
      shapeOutside(k, strict);
      return hasContent(k) || VOID.has(k.out) || k.interactive;
    });
  }
  function flatten(n) {  // unwrap containers that carry no meaning, leaving their boundaries as text
    if (!n.kids) return [n];
    const kids = [];
    for (const k of n.kids) kids.push(...flatten(k));
    n.kids = kids;
    if (n.out || n.main) return [n];
    return n.block ? [{text: n.block}, ...kids, {text: n.block}] : kids;
  }
  function shapeLists(n) {  // long lists and tables outside the main content keep their head and tail
    if (!n.kids || n.main) return;
    if (/^(ul|ol|dl|table)$/.test(n.out)) {
      const items = n.kids.filter((k) => k.kids);
      if (items.length > LIST_OTHER) {
        const drop = new Set(items.slice(LIST_OTHER_KEEP, items.length - 2));
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
    for (const k of n.kids) shapeLists(k);
  }

  // ---- pass 3: serialize, then cut into pages. Text under <pre> is shielded from whitespace tidying.
  // A page may end before any element or text chunk inside the main content (or anywhere, when there is
  // none); a page that starts inside an element reopens it, one that ends inside closes it.
  const esc = (s) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const escAttr = (s) => s.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
  const shield = (s) => s.replace(/ /g, '\u0001').replace(/\n/g, '\u0002').replace(/\t/g, '\u0003');
  const unshield = (s) => s.replace(/\u0001/g, ' ').replace(/\u0002/g, '\n').replace(/\u0003/g, '\t');
  const budget = opts.budget > 0 ? opts.budget : Infinity;
  const CHUNK = Math.max(200, Math.min(4000, Math.floor(budget / 4)));
  const out = [], breaks = [];
  let total = 0, open = null, breakable = false;
  const emit = (s) => { out.push(s); total += s.length; };
  const enter = (s, close) => { open = {s, close, up: open, len: s.length + close.length + (open ? open.len : 0)}; };
  const mark = () => { if (breakable) breaks.push({i: out.length, len: total, open}); };
  function emitText(s, pre, shape) {  // long text is cut into chunks a page may end between
    if (s.length <= CHUNK || !breakable) { emit(shape(s)); return; }
    for (let i = 0; i < s.length;) {
      let j = Math.min(s.length, i + CHUNK);
      if (j < s.length) {
        const cut = s.lastIndexOf(pre ? '\n' : ' ', j);
        if (cut > i + CHUNK / 2) j = cut + 1;
      }
      if (i) mark();
      emit(shape(s.slice(i, j)));
      i = j;
    }
  }
  function kidsOf(n, fn) {
    for (const k of n.kids) { mark(); fn(k); }
  }
  function html(n) {
    if (n.text != null) { emitText(n.text, n.pre, n.pre ? (t) => shield(esc(t)) : esc); return; }
    if (n.note) { emit(`<i>… ${n.note}</i>`); return; }
    const tag = n.out, wrap = n.main && tag !== 'main', was = [open, breakable];
    if (n.main) breakable = true;
    if (wrap) { emit('\n<main>\n'); enter('<main>', '</main>'); }
    if (tag) {
      if (n.block === '\n') emit('\n');
      const head = '<' + tag + n.attrs.map(([k, v]) => (v === '' ? ' ' + k : ` ${k}="${escAttr(v)}"`)).join('') + '>';
      emit(head);
      if (!VOID.has(tag) || n.kids.length) enter(head, `</${tag}>`);
    }
    kidsOf(n, html);
    open = was[0];
    if (tag && (!VOID.has(tag) || n.kids.length)) emit('</' + tag + '>');
    if (tag && n.block === '\n') emit('\n');
    if (wrap) emit('\n</main>\n');
    breakable = was[1];
  }
  function text(n) {
    if (n.text != null) { emitText(n.text, n.pre, n.pre ? shield : (t) => t); return; }
    if (n.note) { emit(` (… ${n.note}) `); return; }
    const t = n.out, was = breakable;
    if (n.main) breakable = true;
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
      emit(' [' + n.kids.map((k) => (k.note ? '…' : textOf(k) + (k.attrs.length ? '*' : ''))).join(' | ') + '] ');
      return;
    }
    emit(pre || '');
    kidsOf(n, text);
    emit(post || '');
    breakable = was;
  }
  function reopen(o) {
    const parts = [];
    for (; o; o = o.up) parts.push(o.s);
    return parts.reverse().join('');
  }
  function closeAll(o) {
    let s = '';
    for (; o; o = o.up) s += o.close;
    return s;
  }
  function paginate() {  // greedy: each page takes as many whole pieces as fit in the budget
    const end = {i: out.length, len: total, open: null};
    const cuts = [];
    let start = {i: 0, len: 0, open: null}, last = null;
    for (const b of breaks.concat([end])) {
      const size = b.len - start.len + (start.open ? start.open.len : 0) + 1;
      if (size > budget && last && last.len > start.len) { cuts.push([start, last]); start = last; }
      last = b;
    }
    cuts.push([start, end]);
    return cuts.map(([a, b]) => reopen(a.open) + out.slice(a.i, b.i).join('') + closeAll(b.open));
  }
  const tidy = (s) => unshield(s.replace(/[ \t]+\n/g, '\n').replace(/\n[ \t]+/g, '\n').replace(/\n{2,}/g, '\n')
    .replace(/ {2,}/g, ' ').trim());

  const rootEl = document.body || document.documentElement;
  const root = visit(rootEl, {clip: null, origin: {x: -SX, y: -SY}, cursor: 'auto', pre: false, textVisible: true, win: window,
    vw: VW, vh: VH, scope: ''}) || {tag: 'body', kids: [], attrs: []};
  const t1 = performance.now();
  removeCovered(root);
  const t2 = performance.now();
  measure(root);
  const main = findMain(root);
  if (main) { main.main = true; markPath(root, main); }
  if (root.kids.length) shapeOutside(root, !main);
  root.out = root.out || 'body';
  flatten(root);
  if (main) shapeLists(root);  // without a main content found, every list may be it
  for (const [el, n] of toTag) el.setAttribute('ga', n);
  window.__gaCounter = counter;
  if (!main) breakable = true;
  for (const k of root.kids) { mark(); (opts.textOnly ? text : html)(k); }
  const t3 = performance.now();
  const pages = paginate().map(tidy);
  const raw = document.documentElement.outerHTML.length;
  stats.phase_ms = {walk: Math.round(t1 - t0), cover: Math.round(t2 - t1), shape: Math.round(t3 - t2),
    out: Math.round(performance.now() - t3)};
  const number = Math.max(1, opts.page || 1);
  stats.ms = Math.round(performance.now() - t0);
  return {content: pages[number - 1] || '', page: number, pages: pages.length, total: pages.reduce((a, p) => a + p.length, 0),
    raw, main: !!main, stats};
}

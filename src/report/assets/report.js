// jankbpf's HTML report: everything is drawn here, lazily, from the JSON in
// #jb-data. Strings from the watched processes (names, paths, symbols) only
// ever reach the page through textContent and setAttribute, never as markup.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("jb-data").textContent);
  const SVGNS = "http://www.w3.org/2000/svg";
  const STATES = ["running", "runnable", "sleeping", "blocked_io"];

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = String(text);
    return e;
  }
  function ms(v) { return (v >= 100 ? v.toFixed(0) : v.toFixed(1)) + " ms"; }
  function clock(t) { const d = new Date(t); return d.toLocaleTimeString() + "." + String(d.getMilliseconds()).padStart(3, "0"); }
  function fileLink(path) {
    // Only ever a file: URL of the path, whatever the path says.
    const a = el("a", { href: "file://" + encodeURI(path).replace(/#/g, "%23").replace(/\?/g, "%3F") }, path);
    return a;
  }

  // ---- summary --------------------------------------------------------
  const tasks = D.tasks;
  const procs = new Map();  // pid|name -> {label, tasks: [index]}
  tasks.forEach((t, i) => {
    const key = t.pid + "|" + t.proc;
    if (!procs.has(key)) procs.set(key, { label: t.proc + " (pid " + t.pid + ")", pid: t.pid, tasks: [] });
    procs.get(key).tasks.push(i);
  });
  (function summary() {
    const s = document.getElementById("jb-summary");
    const janks = tasks.filter(t => t.kind === "jank").length;
    const stat = (k, v) => s.appendChild(el("span", { class: "stat" }, k + ": " + v));
    stat("janks", janks);
    stat("hangs", tasks.length - janks);
    stat("processes", procs.size);
    if (D.fsurfaces) stat("janky frames", (D.jframes || []).length + " of " + D.fsurfaces.reduce((a, x) => a + x.frames.length, 0));
    if (D.summary) stat("run", D.summary.elapsed_s.toFixed(1) + " s, " + D.summary.tasks_checked + " tasks checked");
    if (D.dropped) stat("not kept", D.dropped);
    stat(D.final ? "written at exit" : "updated", new Date(D.generated).toLocaleString());
  })();

  // ---- flame graph ----------------------------------------------------
  // stacks: [[stackIndex, count], ...]. Icicle layout, root on top; on-CPU
  // frames warm, off-CPU (sleeping, blocked, runnable) blue, mixed purple.
  function buildTree(samples) {
    const root = { name: "all", kids: new Map(), on: 0, off: 0 };
    for (const [si, n] of samples) {
      const st = D.stacks[si];
      const off = st[0] !== 0;
      let node = root;
      const add = (x) => { if (off) x.off += n; else x.on += n; };
      add(root);
      const names = st.slice(1).map(f => D.frames[f][0]);
      if (off) names.push("[off-CPU: " + ({ S: "sleeping", D: "blocked_io", R: "runnable" }[st[0]] || st[0]) + "]");
      for (const name of names) {
        let k = node.kids.get(name);
        if (!k) { k = { name, kids: new Map(), on: 0, off: 0, parent: node }; node.kids.set(name, k); }
        add(k);
        node = k;
      }
    }
    return root;
  }
  function hashHue(s, lo, span) {
    let h = 0;
    for (let i = 0; i < s.length; i++) h = (h * 31 + s.charCodeAt(i)) >>> 0;
    return lo + (h % span);
  }
  function color(n) {
    const tot = n.on + n.off;
    if (n.off === 0) return "hsl(" + hashHue(n.name, 10, 40) + ",80%,62%)";
    if (n.on === 0) return "hsl(" + hashHue(n.name, 195, 30) + ",60%,66%)";
    return "hsl(275," + Math.round(30 + 40 * n.off / tot) + "%,70%)";
  }

  function flameGraph(container, samples, title) {
    const box = el("div", { class: "fg" });
    const bar = el("div", { class: "fg-bar" });
    const search = el("input", { type: "search", placeholder: "search functions (substring)", class: "fg-search" });
    const reset = el("button", { type: "button" }, "reset zoom");
    const info = el("span", { class: "muted" });
    bar.append(el("b", {}, title + " "), search, " ", reset, " ", info);
    const legend = el("span", { class: "legend" });
    [["on-CPU", "hsl(30,80%,62%)"], ["off-CPU", "hsl(210,60%,66%)"], ["both", "hsl(275,50%,70%)"]].forEach(([k, c]) => {
      const sw = el("span"); sw.style.background = c; legend.append(sw, k);
    });
    bar.append(legend);
    box.append(bar);
    container.append(box);
    const root = buildTree(samples);
    const total = root.on + root.off;
    if (!total) { box.append(el("div", { class: "muted" }, "no stack samples")); return; }
    let focus = root;
    const ROW = 17;
    function draw() {
      const old = box.querySelector("svg");
      if (old) old.remove();
      const W = Math.max(Math.floor(box.getBoundingClientRect().width) || 0, 600);
      const rows = [];
      // Ancestors of the focus stay visible as full-width bars.
      const chain = [];
      for (let a = focus; a; a = a.parent) chain.unshift(a);
      chain.forEach((n, d) => rows.push({ n, d, x: 0, w: W }));
      const base = chain.length - 1;
      const ftot = focus.on + focus.off;
      (function lay(n, x, d) {
        let cx = x;
        const kids = [...n.kids.values()].sort((a, b) => (b.on + b.off) - (a.on + a.off));
        for (const k of kids) {
          const w = (k.on + k.off) / ftot * W;
          if (w >= 0.5) { rows.push({ n: k, d, x: cx, w }); lay(k, cx, d + 1); }
          cx += w;
        }
      })(focus, 0, base + 1);
      const depth = rows.reduce((m, r) => Math.max(m, r.d), 0) + 1;
      const svg = sv("svg", { width: W, height: depth * ROW, viewBox: "0 0 " + W + " " + depth * ROW, class: "flamegraph" });
      const q = search.value.toLowerCase();
      let matched = 0;
      for (const r of rows) {
        const n = r.n;
        const g = sv("g", { class: "fg-frame" });
        const c = n.on + n.off;
        const isMatch = q && n.name.toLowerCase().includes(q);
        if (isMatch) { g.classList.add("match"); }
        if (r.d < base) g.classList.add("dim");
        g.appendChild(sv("rect", { x: r.x.toFixed(1), y: r.d * ROW, width: Math.max(r.w - 0.5, 0.5).toFixed(1), height: ROW - 1, fill: color(n), "data-name": n.name }));
        g.appendChild(sv("title", {}, n.name + " — " + c + " sample" + (c > 1 ? "s" : "") + " (" + (100 * c / total).toFixed(1) + "%)" +
          (n.off ? ", " + n.off + " off-CPU" : "")));
        if (r.w > 28) {
          const chars = Math.floor((r.w - 6) / 6.6);
          const label = n.name.length > chars ? n.name.slice(0, Math.max(chars - 1, 1)) + "…" : n.name;
          g.appendChild(sv("text", { x: (r.x + 3).toFixed(1), y: r.d * ROW + 12 }, label));
        }
        g.addEventListener("click", () => { focus = n; draw(); });
        svg.appendChild(g);
      }
      if (q) {
        // Samples under a matching frame, counted once per stack.
        (function count(n) { if (n.name.toLowerCase().includes(q) && n !== root) { matched += n.on + n.off; return; } n.kids.forEach(count); })(root);
        info.textContent = "matched " + (100 * matched / total).toFixed(1) + "% of " + total + " samples";
      } else {
        info.textContent = total + " samples" + (root.off ? " (" + root.off + " off-CPU)" : "");
      }
      box.appendChild(svg);
    }
    search.addEventListener("input", draw);
    reset.addEventListener("click", () => { focus = root; draw(); });
    draw();
  }

  // ---- one jank's details --------------------------------------------
  function stateBar(t) {
    const b = el("span", { class: "statebar", title: STATES.map((s, i) => s + " " + ms(t.state[i])).join(", ") });
    const tot = t.state.reduce((a, b) => a + b, 0) || 1;
    STATES.forEach((s, i) => {
      const p = el("span", { class: "st-" + s });
      p.style.width = (100 * t.state[i] / tot) + "%";
      b.appendChild(p);
    });
    return b;
  }
  function kv(parent, k, v) {
    if (v === undefined || v === null || v === "") return;
    const d = el("div", { class: "kv" });
    d.append(el("b", {}, k), typeof v === "object" ? v : document.createTextNode(String(v)));
    parent.appendChild(d);
  }
  function details(td, t, index) {
    kv(td, "task", (t.kind === "hang" ? "hang" : "jank") + " #" + t.seq + " of " + t.thread + " (tid " + t.tid + "), " + t.exe);
    kv(td, "began", clock(t.begin) + "  (monotonic " + t.mono + " ns)");
    kv(td, "duration", ms(t.dur) + " (threshold " + t.thr + " ms)");
    const st = el("span");
    st.append(stateBar(t), " " + STATES.map((s, i) => s + " " + ms(t.state[i])).join(", "));
    kv(td, "state", st);
    kv(td, "delivery", ms(t.delivery));
    kv(td, "wait syscall", t.wait);
    kv(td, "boundary", t.boundary);
    kv(td, "runnable name", t.runnable);
    if (t.why) kv(td, "why", el("span", { class: "why" }, t.why));
    if (t.cause && t.cause.length) {
      const tb = el("table", { class: "causes jank-causes" });
      const hr = el("tr");
      ["cause", "time", "what"].forEach(h => hr.appendChild(el("th", {}, h)));
      tb.appendChild(hr);
      for (const c of t.cause) {
        const tr = el("tr", { class: "cause-" + c.kind });
        tr.append(el("td", {}, c.kind), el("td", {}, ms(c.ms)), el("td", {}, c.id));
        tb.appendChild(tr);
      }
      kv(td, "causes", tb);
    }
    if (t.suppressed) kv(td, "no new log", t.suppressed);
    if (t.logs.length) {
      const s = el("span");
      t.logs.forEach((p, i) => { if (i) s.append(", "); s.append(fileLink(p)); });
      kv(td, "logs", s);
    }
    flameGraph(td, t.samples, "flame graph of this " + t.kind);
    if (t.off.length) {
      td.appendChild(el("div", { class: "kv" }, "Off-CPU, longest first, and who woke the thread:"));
      const tb = el("table", { class: "offcpu" });
      const hr = el("tr");
      ["state", "duration", "kernel stack", "waker", "waker's stacks"].forEach(h => hr.appendChild(el("th", {}, h)));
      tb.appendChild(hr);
      for (const o of t.off) {
        const tr = el("tr");
        tr.append(el("td", {}, o.state), el("td", {}, o.dur ? ms(o.dur) : "not woken"),
          el("td", { class: "stack" }, o.kstack.slice(0, 8).join("\n")),
          el("td", {}, !o.waker ? "—" : o.waker.irq ? "an interrupt (on " + o.waker.comm + ")"
                                     : o.waker.comm + " (pid " + o.waker.pid + ", tid " + o.waker.tid + ")"),
          el("td", { class: "stack" }, o.waker ? o.waker.ustack.slice(0, 6).concat(o.waker.kstack.slice(0, 4)).join("\n") : ""));
        tb.appendChild(tr);
      }
      td.appendChild(tb);
    }
  }

  // ---- processes: causes, aggregate flame graph and the jank table ---
  // Per kind: the janks it was the largest cause of, its time over all the
  // process's janks, and the identities that took most of that time.
  function causesTable(parent, p) {
    const kinds = new Map();
    let known = 0;
    for (const i of p.tasks) {
      const t = tasks[i];
      if (t.kind !== "jank" || !t.cause) continue;
      known++;
      for (const c of t.cause) {
        if (!kinds.has(c.kind)) kinds.set(c.kind, { largest: 0, ms: 0, ids: new Map() });
        const k = kinds.get(c.kind);
        k.ms += c.ms;
        k.ids.set(c.id, (k.ids.get(c.id) || 0) + c.ms);
      }
      if (t.largest && t.largest !== "none") {
        if (!kinds.has(t.largest)) kinds.set(t.largest, { largest: 0, ms: 0, ids: new Map() });
        kinds.get(t.largest).largest++;
      }
    }
    if (!known) return;
    const tb = el("table", { class: "causes proc-causes" });
    const hr = el("tr");
    ["cause", "largest in", "total", "top identities"].forEach(h => hr.appendChild(el("th", {}, h)));
    tb.appendChild(hr);
    [...kinds.entries()].sort((a, b) => b[1].largest - a[1].largest || b[1].ms - a[1].ms).forEach(([kind, k]) => {
      const ids = [...k.ids.entries()].sort((a, b) => b[1] - a[1]).slice(0, 3);
      const tr = el("tr", { class: "cause-" + kind });
      tr.append(el("td", {}, kind), el("td", {}, k.largest + " of " + known + " janks"), el("td", {}, ms(k.ms)),
        el("td", { class: "ids" }, ids.map(([id, v]) => ms(v) + "  " + id).join("\n")));
      tb.appendChild(tr);
    });
    parent.appendChild(el("div", { class: "kv" }, "Causes of its janks (README: Why):"));
    parent.appendChild(tb);
  }
  const rowOf = new Map();  // task index -> {tr, open()}
  function processSection(p, open) {
    const d = el("details", { class: "proc", "data-pid": p.pid });
    const janks = p.tasks.filter(i => tasks[i].kind === "jank").length;
    d.appendChild(el("summary", {}, p.label + " — " + janks + " jank" + (janks === 1 ? "" : "s") + ", " + (p.tasks.length - janks) + " hang(s)"));
    let filled = false;
    function fill() {
      if (filled) return;
      filled = true;
      const all = [];
      const merged = new Map();
      for (const i of p.tasks) {
        const t = tasks[i];
        if (t.kind === "hang" && t.has_jank) continue;  // its samples come again with the jank
        for (const [s, n] of t.samples) merged.set(s, (merged.get(s) || 0) + n);
      }
      merged.forEach((n, s) => all.push([s, n]));
      causesTable(d, p);
      flameGraph(d, all, "all janks of " + p.label);
      const tb = el("table", { class: "janks" });
      const hr = el("tr");
      ["began", "thread", "kind", "duration", "state", "delivery", "wait", "runnable", "samples"].forEach(h => hr.appendChild(el("th", {}, h)));
      tb.appendChild(hr);
      d.appendChild(tb);
      const PAGE = 200;
      let shown = 0;
      const more = el("button", { type: "button", class: "more" });
      function page() {
        for (const i of p.tasks.slice(shown, shown + PAGE)) addRow(tb, i);
        shown = Math.min(shown + PAGE, p.tasks.length);
        more.textContent = "show more (" + (p.tasks.length - shown) + " left)";
        more.style.display = shown < p.tasks.length ? "" : "none";
      }
      more.addEventListener("click", page);
      d.appendChild(more);
      page();
    }
    d.addEventListener("toggle", () => { if (d.open) fill(); });
    d.fill = fill;
    d.open = open;
    if (open) fill();
    return d;
  }
  function addRow(tb, i) {
    const t = tasks[i];
    const tr = el("tr", { class: "row", id: "task-" + i });
    const st = el("td");
    st.appendChild(stateBar(t));
    tr.append(el("td", {}, clock(t.begin)), el("td", {}, t.thread + " (" + t.tid + ")"), el("td", {}, t.kind),
      el("td", {}, ms(t.dur)), st, el("td", {}, ms(t.delivery)), el("td", {}, t.wait), el("td", {}, t.runnable || ""),
      el("td", {}, t.nsamples));
    tb.appendChild(tr);
    let detailRow = null;
    function toggle(force) {
      if (detailRow && force !== true) { detailRow.remove(); detailRow = null; tr.classList.remove("sel"); return; }
      if (detailRow) return;
      detailRow = el("tr", { class: "detail-row" });
      const td = el("td", { colspan: 9, class: "detail" });
      detailRow.appendChild(td);
      tr.after(detailRow);
      tr.classList.add("sel");
      details(td, t, i);
    }
    tr.addEventListener("click", () => toggle());
    rowOf.set(i, { tr, open: () => toggle(true) });
  }
  const sections = new Map();
  const list = document.getElementById("jb-processes");
  let first = true;
  const openAll = location.hash === "#all";
  procs.forEach((p, key) => {
    const open = first || openAll;
    const s = processSection(p, false);
    first = false;
    sections.set(key, s);
    list.appendChild(s);
    if (open) { s.open = true; s.fill(); }  // drawn once in the page, so it has a width
  });
  if (!tasks.length) list.appendChild(el("p", { class: "muted" }, "No janks yet."));

  function openTask(i) {
    const t = tasks[i];
    const s = sections.get(t.pid + "|" + t.proc);
    if (!s) return;
    s.open = true;
    s.fill();
    // Its row may be on a later page.
    while (!rowOf.has(i)) { const b = s.querySelector("button.more"); if (!b || b.style.display === "none") break; b.click(); }
    const r = rowOf.get(i);
    if (r) { r.open(); r.tr.scrollIntoView({ block: "center" }); }
  }

  // ---- timeline -------------------------------------------------------
  (function timeline() {
    const box = document.getElementById("jb-timeline");
    if (!tasks.length) { box.appendChild(el("p", { class: "muted" }, "Nothing to show.")); return; }
    const lanes = [];
    const laneOf = new Map();
    procs.forEach(p => {
      for (const i of p.tasks) {
        const t = tasks[i];
        const k = t.pid + "/" + t.tid;
        if (!laneOf.has(k)) { laneOf.set(k, lanes.length); lanes.push(p.label + " · " + t.thread + " (" + t.tid + ")"); }
      }
    });
    let t0 = Infinity, t1 = -Infinity;
    for (const t of tasks) { t0 = Math.min(t0, t.begin); t1 = Math.max(t1, t.begin + t.dur); }
    const pad = Math.max((t1 - t0) * 0.02, 50);
    t0 -= pad; t1 += pad;
    const LABEL = 260, W = Math.max(box.clientWidth || 0, 900), LH = 22, H = lanes.length * LH + 24;
    const svg = sv("svg", { width: W, height: H, class: "timeline" });
    const x = (t) => LABEL + (t - t0) / (t1 - t0) * (W - LABEL - 10);
    for (let k = 0; k <= 6; k++) {
      const t = t0 + (t1 - t0) * k / 6;
      svg.appendChild(sv("text", { x: x(t), y: H - 6, class: "tl-axis", "text-anchor": "middle" }, clock(t)));
      svg.appendChild(sv("line", { x1: x(t), x2: x(t), y1: 0, y2: H - 18, stroke: "#e5e5e5" }));
    }
    lanes.forEach((name, l) => {
      const label = name.length > 42 ? name.slice(0, 41) + "…" : name;
      svg.appendChild(sv("text", { x: 4, y: l * LH + 15, class: "tl-label" }, label));
    });
    tasks.forEach((t, i) => {
      const l = laneOf.get(t.pid + "/" + t.tid);
      const r = sv("rect", { x: x(t.begin).toFixed(1), y: l * LH + 4, height: LH - 8,
        width: Math.max(x(t.begin + t.dur) - x(t.begin), 2).toFixed(1), class: t.kind === "hang" ? "tl-hang" : "tl-jank", "data-task": i });
      r.appendChild(sv("title", {}, t.kind + " " + ms(t.dur) + " · " + t.proc + " · " + t.thread + " · " + clock(t.begin) + (t.runnable ? " · " + t.runnable : "")));
      r.addEventListener("click", () => openTask(i));
      svg.appendChild(r);
    });
    box.appendChild(svg);
  })();

  // ---- frames: a strip per surface, its deadline drawn ------------------
  // Each bar is one frame (height: its time from callback to commit); the
  // dashed line is the refresh it was held to; red bars are janky frames,
  // and a click on one opens its verdict and the stacks sampled in it.
  const jframes = D.jframes || [];
  const frameOpeners = new Map();  // janky frame index -> open()
  (function frames() {
    const surfaces = D.fsurfaces || [];
    if (!surfaces.length && !jframes.length) return;
    document.getElementById("jb-frames-section").hidden = false;
    const box = document.getElementById("jb-frames");
    if (D.frames_dropped) box.appendChild(el("p", { class: "muted" }, D.frames_dropped + " older frames not kept"));
    for (const s of surfaces) {
      const sec = el("div", { class: "fsurface", "data-pid": s.pid, "data-surface": s.surface });
      const fr = s.frames;
      const janky = fr.filter(f => f[3] >= 0).length;
      const durs = fr.map(f => f[1]).sort((a, b) => a - b);
      const pct = (p) => durs.length ? durs[Math.min(durs.length - 1, Math.ceil(p / 100 * durs.length) - 1)] : 0;
      sec.appendChild(el("h3", {}, s.proc + " (pid " + s.pid + ") · wl_surface@" + s.surface + " — " + fr.length + " frames, " +
        janky + " janky, p50 " + ms(pct(50)) + ", p99 " + ms(pct(99)) + ", deadline " + ms(s.interval)));
      const W = Math.max(box.clientWidth || 0, 900), H = 140, L = 46;
      const top = Math.max(4 * s.interval, ...fr.map(f => Math.min(f[1], 10 * s.interval)));
      const y = (v) => H - 16 - Math.min(v, top) / top * (H - 26);
      const span = fr.length ? fr[fr.length - 1][0] - fr[0][0] + 1 : 1;
      const x = (t) => L + (t - (fr.length ? fr[0][0] : 0)) / span * (W - L - 8);
      const svg = sv("svg", { width: W, height: H, class: "fstrip" });
      for (const v of [s.interval, 2 * s.interval, top]) {
        svg.appendChild(sv("text", { x: 2, y: y(v) + 4, class: "tl-axis" }, ms(v)));
      }
      const bw = Math.max(1, (W - L - 8) / Math.max(fr.length, 1) * 0.8);
      fr.forEach(f => {
        const r = sv("rect", { x: x(f[0]).toFixed(1), y: y(f[1]).toFixed(1), width: bw.toFixed(1),
          height: Math.max(H - 16 - y(f[1]), 1).toFixed(1), class: f[3] >= 0 ? "fr-janky" : "fr-ok" });
        if (f[3] >= 0) {
          const j = jframes[f[3]];
          r.setAttribute("data-jframe", f[3]);
          r.appendChild(sv("title", {}, "frame " + j.n + ": " + ms(j.dur) + ", " + j.jank + ", " + j.skipped + " skipped" + (j.runnable ? " · " + j.runnable : "")));
          r.addEventListener("click", () => openFrame(f[3]));
        }
        svg.appendChild(r);
      });
      svg.appendChild(sv("line", { x1: L, x2: W - 4, y1: y(s.interval), y2: y(s.interval), class: "fr-deadline" }));
      sec.appendChild(svg);
      const detail = el("div", { class: "fdetail" });
      sec.appendChild(detail);
      box.appendChild(sec);
      jframes.forEach((j, i) => {
        if (j.pid !== s.pid || j.surface !== s.surface) return;
        frameOpeners.set(i, () => {
          detail.textContent = "";
          const td = el("div", { class: "detail", id: "frame-" + i });
          kv(td, "frame", "#" + j.n + " of wl_surface@" + j.surface + ", " + j.proc + " (pid " + j.pid + ", tid " + j.tid + ")");
          kv(td, "began", clock(j.begin));
          kv(td, "verdict", j.jank + ", " + j.skipped + " frame(s) skipped");
          kv(td, "timeline", "callback " + (j.delay > 0 ? ms(j.delay) + " late, " : "") + "commit after " + ms(j.dur) +
            " against a deadline of " + ms(j.interval) + (j.over > 0 ? " (" + ms(j.over) + " over)" : "") +
            (j.present >= 0 ? ", shown " + ms(j.present) + " after its start" : ""));
          const st = el("span");
          st.append(stateBar(j), " " + STATES.map((n, k) => n + " " + ms(j.state[k])).join(", "));
          kv(td, "main thread", st);
          if (j.task_seq) kv(td, "long task", "#" + j.task_seq + " (its jank record)");
          kv(td, "runnable name", j.runnable);
          if (j.why && j.why.length) kv(td, "why", j.why.join("; "));
          flameGraph(td, j.samples, "stacks of this frame past its deadline");
          detail.appendChild(td);
          td.scrollIntoView({ block: "center" });
        });
      });
    }
  })();
  function openFrame(i) { const f = frameOpeners.get(i); if (f) f(); }
  const fm = /^#frame=(\d+)$/.exec(location.hash);
  if (fm) openFrame(+fm[1]);

  const m = /^#jank=(\d+)$/.exec(location.hash);
  if (m && tasks[+m[1]]) openTask(+m[1]);
  if (openAll) tasks.forEach((t, i) => openTask(i));
})();

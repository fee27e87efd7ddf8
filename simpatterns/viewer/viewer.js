"use strict";
// The trace viewer: reads DATA (inlined JSON), draws the scene, the timeline and the panels.
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const S = D.scene, T = D.num_frames, H = D.episode.horizon;
  const canvas = document.getElementById("scene"), ctx = canvas.getContext("2d");
  const scrub = document.getElementById("scrub"), timeLabel = document.getElementById("time");
  const state = {frame: 0, playing: false, speed: 1, view: "side", drawIndex: 0};

  const at = (arr, k, i) => (arr[i].length === 1 ? arr[i][0] : arr[i][k]);  // per-body series, constant when static

  function drawIndexOf(frame) {  // the last drawn frame at or before `frame`
    let lo = 0, hi = S.frames.length - 1;
    while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (S.frames[mid] <= frame) lo = mid; else hi = mid - 1; }
    return lo;
  }

  function order() {  // static first, then dynamic, agent last (as the PNG renderer draws)
    const idx = S.bodies.map((b, i) => i);
    return idx.sort((a, b) => key(S.bodies[a]) - key(S.bodies[b]) || a - b);
    function key(b) { return (b.dynamic ? 2 : 0) + (b.role === "agent" ? 1 : 0); }
  }
  const ORDER = order();

  function draw2d(k) {
    const [w, h] = S.world, W = canvas.width, sx = W / w, sy = canvas.height / h;
    const px = (x, y) => [x * sx, (h - y) * sy];
    for (const i of ORDER) {
      const b = S.bodies[i];
      if (b.role === "wall") continue;
      const [x, y] = at(S.position, k, i), a = at(S.angle, k, i), c = Math.cos(a), s = Math.sin(a);
      ctx.fillStyle = b.rgb;
      for (const p of b.parts) {
        if (p.kind === "circle") {
          const cx = x + c * p.center[0] - s * p.center[1], cy = y + s * p.center[0] + c * p.center[1];
          const [X, Y] = px(cx, cy);
          ctx.beginPath(); ctx.arc(X, Y, p.radius * sx, 0, 2 * Math.PI); ctx.fill();
          if (b.dynamic && p.radius * sx >= 3) {
            const [ex, ey] = px(cx + 0.8 * p.radius * c, cy + 0.8 * p.radius * s);
            ctx.strokeStyle = "#ffffff"; ctx.lineWidth = Math.max(1, Math.floor(p.radius * sx / 6));
            ctx.beginPath(); ctx.moveTo(X, Y); ctx.lineTo(ex, ey); ctx.stroke();
          }
        } else {
          ctx.beginPath();
          p.vertices.forEach(([vx, vy], j) => {
            const [X, Y] = px(x + c * vx - s * vy, y + s * vx + c * vy);
            if (j) ctx.lineTo(X, Y); else ctx.moveTo(X, Y);
          });
          ctx.closePath(); ctx.fill();
        }
      }
    }
  }

  function rotate(q, v) {  // unit quaternion (w, x, y, z) applied to v
    const [w, x, y, z] = q, t = [2 * (y * v[2] - z * v[1]), 2 * (z * v[0] - x * v[2]), 2 * (x * v[1] - y * v[0])];
    return [v[0] + w * t[0] + (y * t[2] - z * t[1]), v[1] + w * t[1] + (z * t[0] - x * t[2]),
            v[2] + w * t[2] + (x * t[1] - y * t[0])];
  }

  function draw3d(k) {
    const [i0, j0] = S.views[state.view], depth = 3 - i0 - j0, lo = S.bounds[0], hi = S.bounds[1];
    const span = Math.max(hi[i0] - lo[i0], hi[j0] - lo[j0]) * 1.3 + 0.1;
    const c0 = (lo[i0] + hi[i0]) / 2 - span / 2, c1 = (lo[j0] + hi[j0]) / 2 - span / 2, sc = canvas.width / span;
    const px = (v) => [(v[i0] - c0) * sc, canvas.height - (v[j0] - c1) * sc];
    // far to near: the side view looks along +y, the front view along -x, the top view down -z
    const sign = state.view === "side" ? -1 : 1;
    const idx = S.bodies.map((b, i) => i).sort((a, b) => sign * (at(S.position, k, a)[depth] - at(S.position, k, b)[depth]));
    for (const i of idx) {
      const b = S.bodies[i], pos = at(S.position, k, i), q = S.quaternion ? at(S.quaternion, k, i) : [1, 0, 0, 0];
      ctx.fillStyle = ctx.strokeStyle = b.rgb;
      for (const p of b.parts) {
        if (p.kind === "plane") continue;
        const cw = rotate(q, p.center).map((v, d) => v + pos[d]);
        const pq = p.quat || [1, 0, 0, 0];
        if ((p.kind === "capsule" || p.kind === "cylinder") && p.half_length) {
          const ax = rotate(q, rotate(pq, [0, 0, p.half_length]));
          const [ax0, ay0] = px(cw.map((v, d) => v - ax[d])), [ax1, ay1] = px(cw.map((v, d) => v + ax[d]));
          ctx.lineWidth = Math.max(1, 2 * (p.radius_cross || 0.01) * sc); ctx.lineCap = "round";
          ctx.beginPath(); ctx.moveTo(ax0, ay0); ctx.lineTo(ax1, ay1); ctx.stroke();
        } else if (p.kind === "box" && p.half_size) {
          const pts = [];
          for (const sx of [-1, 1]) for (const sy of [-1, 1]) for (const sz of [-1, 1]) {
            const v = rotate(q, rotate(pq, [sx * p.half_size[0], sy * p.half_size[1], sz * p.half_size[2]]));
            pts.push(px(v.map((u, d) => u + cw[d])));
          }
          hull(pts);
        } else {
          const [X, Y] = px(cw);
          ctx.beginPath(); ctx.arc(X, Y, Math.max(1, (p.radius || 0.01) * sc), 0, 2 * Math.PI); ctx.fill();
        }
      }
    }
  }

  function hull(pts) {  // fill the convex hull of 2D points (monotone chain)
    pts.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const cross = (o, a, b) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
    const half = (list) => { const h = []; for (const p of list) { while (h.length >= 2 && cross(h[h.length - 2], h[h.length - 1], p) <= 0) h.pop(); h.push(p); } h.pop(); return h; };
    const h = half(pts).concat(half(pts.slice().reverse()));
    ctx.beginPath(); h.forEach(([x, y], j) => (j ? ctx.lineTo(x, y) : ctx.moveTo(x, y))); ctx.closePath(); ctx.fill();
  }

  function render() {
    const k = drawIndexOf(state.frame);
    state.drawIndex = k;
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, canvas.width, canvas.height);
    if (S.dim === 2) draw2d(k); else draw3d(k);
    scrub.value = state.frame;
    const t = state.frame * D.dt;
    timeLabel.textContent = `frame ${state.frame} / ${T - 1}   t = ${t.toFixed(2)} s   ${(state.frame / Math.max(1, H - 1)).toFixed(3)} of the horizon`;
    const left = (100 * state.frame / Math.max(1, T - 1)) + "%";
    document.querySelectorAll(".cursor").forEach((c) => (c.style.left = left));
  }

  function setFrame(f) { state.frame = Math.max(0, Math.min(T - 1, Math.round(f))); render(); }

  // playback: real time at `speed`, frames advance by elapsed time / dt
  let last = null;
  setInterval(() => {
    const now = performance.now();
    if (state.playing) {
      const adv = last === null ? 0 : (now - last) / 1000 / D.dt * state.speed;
      state.acc = (state.acc || 0) + adv;
      const step = Math.floor(state.acc);
      if (step > 0) { state.acc -= step; if (state.frame + step >= T - 1) { setFrame(T - 1); togglePlay(false); } else setFrame(state.frame + step); }
    }
    last = now;
  }, 30);
  const playBtn = document.getElementById("play");
  function togglePlay(on) {
    state.playing = on === undefined ? !state.playing : on;
    if (state.playing && state.frame >= T - 1) setFrame(0);
    playBtn.textContent = state.playing ? "pause" : "play";
  }
  playBtn.addEventListener("click", () => togglePlay());
  // keys: space plays or pauses, arrows step one drawn frame (shift: ten)
  document.addEventListener("keydown", (e) => {
    if (e.target.closest && e.target.closest("input, select, textarea")) return;
    if (e.key === " ") { e.preventDefault(); togglePlay(); }
    else if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
      e.preventDefault(); togglePlay(false);
      const k = drawIndexOf(state.frame) + (e.key === "ArrowRight" ? 1 : -1) * (e.shiftKey ? 10 : 1);
      setFrame(S.frames[Math.max(0, Math.min(S.frames.length - 1, k))]);
    }
  });
  document.getElementById("speed").addEventListener("change", (e) => (state.speed = parseFloat(e.target.value)));
  scrub.max = T - 1;
  scrub.addEventListener("input", () => { togglePlay(false); setFrame(parseInt(scrub.value, 10)); });
  const viewSel = document.getElementById("view");
  if (S.dim === 3) { viewSel.addEventListener("change", () => { state.view = viewSel.value; render(); }); }
  else viewSel.style.display = "none";

  // timeline: one row per (pattern, bodies), instants as ticks, intervals as bars
  const tip = document.getElementById("tip"), tl = document.getElementById("timeline");
  const rows = new Map();
  for (const e of D.events) {
    const key = e.pattern + (e.bodies.length ? "  ·  " + e.bodies.join(", ") : "");
    if (!rows.has(key)) rows.set(key, {pattern: e.pattern, bodies: e.bodies, events: []});
    rows.get(key).events.push(e);
  }
  const rank = new Map(D.patterns.map((p, k) => [p, k]));  // library order, then body names
  const sorted = [...rows].sort((a, b) => (rank.get(a[1].pattern) ?? 1e9) - (rank.get(b[1].pattern) ?? 1e9) || (a[0] < b[0] ? -1 : 1));
  const span = Math.max(1, T - 1), patSel = document.getElementById("pattern"), bodySel = document.getElementById("body");
  const cut = D.cut_frames || [];
  for (const [key, row] of sorted) {
    const r = document.createElement("div"); r.className = "tl-row"; r.dataset.pattern = row.pattern;
    r.dataset.bodies = JSON.stringify(row.bodies);
    r.innerHTML = `<div class="tl-label"></div><div class="tl-track"><div class="cursor"></div></div>`;
    r.firstChild.textContent = key; r.firstChild.title = key;
    const track = r.lastChild;
    for (const f of cut) { const c = document.createElement("div"); c.className = "cut"; c.style.left = (100 * f / span) + "%"; track.appendChild(c); }
    for (const e of row.events) {
      const el = document.createElement("div");
      el.className = "ev " + (e.length ? "bar" : "tick");
      el.style.left = (100 * e.frame / span) + "%";
      if (e.length) el.style.width = (100 * Math.min(e.length, T - 1 - e.frame) / span) + "%";
      el.dataset.frame = e.frame;
      el.addEventListener("mouseenter", (ev) => {
        tip.textContent = `${e.pattern}  frame ${e.frame} (t = ${(e.frame * D.dt).toFixed(2)} s)` +
          (e.length ? `, ${e.length} frames` : "") + "\n" + JSON.stringify(e.params, null, 1);
        tip.style.display = "block"; tip.style.left = (ev.clientX + 12) + "px"; tip.style.top = (ev.clientY + 12) + "px";
      });
      el.addEventListener("mouseleave", () => (tip.style.display = "none"));
      el.addEventListener("click", () => { togglePlay(false); setFrame(e.frame); });
      track.appendChild(el);
    }
    tl.appendChild(r);
  }
  const addOptions = (sel, values) => values.forEach((v) => { const o = document.createElement("option"); o.value = o.textContent = v; sel.appendChild(o); });
  addOptions(patSel, [...new Set(D.events.map((e) => e.pattern))]);
  addOptions(bodySel, S.bodies.map((b) => b.name));
  function filter() {
    document.querySelectorAll(".tl-row").forEach((r) => {
      const okP = !patSel.value || r.dataset.pattern === patSel.value;
      const okB = !bodySel.value || JSON.parse(r.dataset.bodies).includes(bodySel.value);
      r.style.display = okP && okB ? "" : "none";
    });
  }
  patSel.addEventListener("change", filter); bodySel.addEventListener("change", filter);
  document.querySelectorAll("a.frame").forEach((a) => a.addEventListener("click", () => { togglePlay(false); setFrame(+a.dataset.frame); }));

  // the program's success and scores over time, one polyline each
  const plot = document.getElementById("program-plot");
  if (plot && D.program) {
    const o = D.program.over_time, W = 600, Hh = 140, X = (f) => 30 + (W - 40) * f / span, Y = (v) => 10 + (Hh - 30) * (1 - v);
    const line = (vals, colour, width) => `<polyline fill="none" stroke="${colour}" stroke-width="${width}" points="${o.frames.map((f, k) => X(f) + "," + Y(vals[k])).join(" ")}"/>`;
    const colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"];
    let svg = `<line x1="30" x2="${W - 10}" y1="${Y(0)}" y2="${Y(0)}" stroke="#999"/><text x="0" y="${Y(1) + 4}">1</text><text x="0" y="${Y(0) + 4}">0</text>`;
    o.clauses.forEach((vals, c) => (svg += line(vals, colours[c % colours.length], 1)));
    svg += line(o.score, "#000", 2) + line(o.success.map((s) => (s ? 1 : 0)), "#0a7a2a", 3).replace("<polyline", '<polyline stroke-dasharray="4 3"');
    D.program.clauses.forEach((c, k) => (svg += `<line x1="${X(c.decided)}" x2="${X(c.decided)}" y1="${Y(1)}" y2="${Y(0)}" stroke="${colours[k % colours.length]}" stroke-dasharray="2 2"/>`));
    plot.innerHTML = svg + `<line class="pcursor" y1="${Y(1)}" y2="${Y(0)}" stroke="#d00"/>`;
    const pc = plot.querySelector(".pcursor"), move = () => { pc.setAttribute("x1", X(state.frame)); pc.setAttribute("x2", X(state.frame)); };
    const r0 = render; render = function () { r0(); move(); };  // eslint-disable-line no-func-assign
  }

  window.viewer = {
    state, data: D, setFrame, play: () => togglePlay(true), pause: () => togglePlay(false),
    drawn: () => ({frame: S.frames[state.drawIndex], position: S.bodies.map((b, i) => at(S.position, state.drawIndex, i)),
                   angle: S.bodies.map((b, i) => at(S.angle, state.drawIndex, i))}),
    // the drawing's box on the page (inside the border), for screenshots
    canvasRect: () => { const r = canvas.getBoundingClientRect(); return [r.left + canvas.clientLeft, r.top + canvas.clientTop, canvas.width, canvas.height]; },
  };
  render();
})();

"use strict";
// The dataset index: sort by a column (click its header), filter by text and success.
(function () {
  const rows = JSON.parse(document.getElementById("data").textContent);
  const body = document.querySelector("#index tbody"), filter = document.getElementById("filter");
  const success = document.getElementById("success"), count = document.getElementById("count");
  let key = "file", dir = 1;
  const esc = (s) => String(s).replace(/[&<>"]/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"}[c]));
  const top = (c) => Object.entries(c).sort((a, b) => b[1] - a[1]).slice(0, 4).map(([p, n]) => `${esc(p)} ${n}`).join(", ");
  function show() {
    const words = filter.value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = rows.filter((r) => {
      const text = [r.file, r.template, r.variant, r.kind, ...Object.keys(r.counts)].join(" ").toLowerCase();
      return words.every((w) => text.includes(w)) && (!success.value || String(r.success) === success.value);
    }).sort((a, b) => (a[key] < b[key] ? -dir : a[key] > b[key] ? dir : 0));
    body.innerHTML = shown.map((r) => `<tr><td><a href="${esc(r.page)}">${esc(r.file)}</a></td><td>${esc(r.template)}</td>` +
      `<td>${esc(r.variant)}</td><td>${esc(r.kind)}</td><td class="${r.success ? "ok" : "no"}">${r.success ? "yes" : "no"}</td>` +
      `<td>${r.frames}</td><td>${r.events}</td><td>${top(r.counts)}</td></tr>`).join("");
    count.textContent = `${shown.length} of ${rows.length} traces`;
  }
  document.querySelectorAll("th[data-key]").forEach((th) => th.addEventListener("click", () => {
    dir = key === th.dataset.key ? -dir : 1; key = th.dataset.key; show();
  }));
  filter.addEventListener("input", show); success.addEventListener("change", show);
  window.index = {rows, show};
  show();
})();


"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const $ = (id) => document.getElementById(id);
const cache = new Map();
async function inflateText(b64) {
  if (!b64) return "";
  const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return await new Response(stream).text();
}
async function inflate(b64) {
  if (!b64) return [];
  if (cache.has(b64)) return cache.get(b64);
  const out = JSON.parse(await inflateText(b64));
  cache.set(b64, out);
  return out;
}
// one eval's tasks.jsonl: id -> [score, answer] (a line that is not a task's JSON is left out)
async function tasks(b64) {
  if (cache.has("t" + b64)) return cache.get("t" + b64);
  const out = new Map();
  for (const line of (await inflateText(b64)).split("\n")) {
    if (!line.trim()) continue;
    try {
      const t = JSON.parse(line);
      const a = t.answer;
      out.set(String(t.id), [t.score, typeof a === "string" ? a : JSON.stringify(a === undefined ? "" : a)]);
    } catch (e) { /* not a task line: the page shows the rest */ }
  }
  cache.set("t" + b64, out);
  return out;
}
function td(text, cls) {
  const c = document.createElement("td");
  c.textContent = text === null || text === undefined ? "-" : String(text);
  if (cls) c.className = cls;
  return c;
}
const fmt = (x) => (typeof x === "number" ? x.toFixed(3) : x === null || x === undefined ? "-" : String(x));
const evalsOf = (key) => D.evals.filter((e) => e.key === key);
const label = (e) => `${e.run} · ${e.target}${e.role ? " · " + e.role : ""} · ${fmt(e.score)}`;
function fill(sel, items, value) {
  sel.replaceChildren();
  for (const [v, t] of items) {
    const o = document.createElement("option");
    o.value = v; o.textContent = t; sel.appendChild(o);
  }
  if (value !== undefined) sel.value = value;
}
let shown = [];
async function showPair() {
  const key = $("key").value, b = $("base").value, c = $("cand").value;
  const eb = D.evals.find((e) => e.run === b), ec = D.evals.find((e) => e.run === c);
  const body = $("fliprows");
  body.replaceChildren();
  if (!eb || !ec) { $("flipsum").textContent = "pick two evals of one exam split"; return; }
  const S = D.splits[key];
  const [known, tb, tc] = await Promise.all([inflate(S.items), tasks(eb.blob), tasks(ec.blob)]);
  // the frozen split's items, or (not on this data root) the tasks' own ids, the baseline's first
  const items = known.length ? known : [...new Set([...tb.keys(), ...tc.keys()])].map((id) => [id, null, null]);
  let fixed = 0, broken = 0;
  shown = [];
  items.forEach(([id, prompt, expected], i) => {
    const x = tb.get(id), y = tc.get(id);
    if (!x || !y || x[0] === y[0]) return;
    const kind = y[0] > x[0] ? "fixed" : "broken";
    if (kind === "fixed") fixed++; else broken++;
    const tr = document.createElement("tr");
    tr.className = "flip-row " + kind;
    tr.append(td(id, "mono"), td(kind, "flip"), td(prompt), td(expected),
      td(`${x[1]}  (grade ${fmt(x[0])})`), td(`${y[1]}  (grade ${fmt(y[0])})`));
    tr.dataset.text = [id, prompt, expected, x[1], y[1]].join("\n").toLowerCase();
    shown.push(tr);
    body.appendChild(tr);
  });
  const d = D.deltas[c];  // [delta, fixed, broken, verdict]
  const paired = d && D.baselines[`${ec.cohort}|${key}`] === b && d[1] !== null && d[0] !== null;
  const rec = paired ? ` (the recorded paired delta: ${d[0] >= 0 ? "+" : ""}${d[0].toFixed(3)}, fixed ${d[1]}, broken ${d[2]}${d[3] ? ", " + d[3] : ""})` : "";
  const where = D.splits[key].on_data_root ? "" : " (prompts: the frozen split is not on this data root)";
  $("flipsum").textContent = `${eb.run} → ${ec.run}: ${fixed} fixed, ${broken} broken of ${items.length} tasks${rec}${where}`;
  filter();
}
function filter() {
  const q = $("search").value.trim().toLowerCase();
  for (const tr of shown) tr.hidden = q !== "" && !tr.dataset.text.includes(q);
}
function pickKey(key, b, c) {
  const evs = evalsOf(key);
  fill($("base"), evs.map((e) => [e.run, label(e)]), b !== undefined ? b : (evs[0] || {}).run);
  fill($("cand"), evs.map((e) => [e.run, label(e)]), c !== undefined ? c : (evs[evs.length - 1] || {}).run);
}
function selectPair(b, c) {
  const e = D.evals.find((x) => x.run === b);
  if (!e) return;
  $("key").value = e.key;
  pickKey(e.key, b, c);
  return showPair();
}
const keys = [...new Set(D.evals.map((e) => e.key))].sort();
fill($("key"), keys.map((k) => [k, `${k} (${evalsOf(k).length} evals)`]));
if (keys.length) pickKey(keys[0]);
$("key").addEventListener("change", () => { pickKey($("key").value); showPair(); });
$("base").addEventListener("change", showPair);
$("cand").addEventListener("change", showPair);
$("search").addEventListener("input", filter);
function mark(i) {
  document.querySelectorAll("tr.cycle.sel, g.ck.sel").forEach((n) => n.classList.remove("sel"));
  const tr = document.querySelector(`tr.cycle[data-cycle="${i}"]`);
  if (!tr) return;
  tr.classList.add("sel");
  const ck = tr.children[0].textContent;
  document.querySelectorAll("g.ck").forEach((g) => { if (g.dataset.ref === ck) g.classList.add("sel"); });
  if (tr.dataset.base) selectPair(tr.dataset.base, tr.dataset.cand);
}
document.querySelectorAll("tr.cycle").forEach((tr) => tr.addEventListener("click", () => mark(tr.dataset.cycle)));
document.querySelectorAll("g.ck").forEach((g) => g.addEventListener("click", () => {
  const first = (g.dataset.cycles || "").split(" ").filter(Boolean)[0];
  if (first !== undefined) { mark(first); $("flips").scrollIntoView(); }
}));
const RUN_FIELDS = ["run", "kind", "what", "target", "status", "smoke", "role", "score", "n", "recipe", "recipe_sha256",
  "source", "base_model", "cohort", "weights", "git", "box", "host", "created_at", "recovered"];
const RUNCOLS = ["run", "kind", "what", "target", "status", "score", "n", "recipe", "recipe_sha256", "source",
  "base_model", "cohort", "git", "host", "created_at"];
// the columns whose text may wrap (paths, names, words); ids, numbers, shas and times never break
const WRAPS = new Set(["what", "target", "recipe", "source", "base_model", "cohort"]);
let runRows = [];
inflate(D.runs).then((rows) => {
  runRows = rows.map((a) => {
    const r = Object.fromEntries(RUN_FIELDS.map((k, i) => [k, a[i]]));
    const tr = document.createElement("tr");
    for (const k of RUNCOLS) {
      let v = r[k];
      if (k === "status") v = r.status + (r.smoke ? " smoke" : "") + (r.role ? " " + r.role : "")
        + (r.recovered ? " recovered" : "");
      if (k === "score") v = fmt(v);
      if (k === "recipe_sha256" && v) v = v.slice(0, 12);
      if (k === "cohort" && r.weights) v = `${r.cohort} (${r.weights.slice(0, 12)})`;
      if (k === "git") v = v ? v.slice(0, 12) : r.box ? `box ${r.box}` : "not recorded";
      if (k === "created_at" && v) v = String(v).slice(0, 16).replace("T", " ");
      const cls = (k === "run" || k === "recipe_sha256" || k === "git" ? "mono " : "") + (WRAPS.has(k) ? "" : "nw");
      tr.appendChild(td(v, cls.trim()));
    }
    tr.dataset.text = a.join(" ").toLowerCase();
    return tr;
  });
  $("runrows").append(...runRows);
  document.body.dataset.runs = "shown";
});
$("runsearch").addEventListener("input", () => {
  const q = $("runsearch").value.trim().toLowerCase();
  for (const tr of runRows) tr.hidden = q !== "" && !tr.dataset.text.includes(q);
});
showPair();

"use strict";
// The labelling page. The rules are the report's (report.js): every string from the data
// reaches the page through textContent or a text node, never as markup; bidi control
// characters are shown as visible markers, never applied; each element holding text from the
// data has dir="auto", so a right-to-left text runs right to left.
(() => {
  const QUERY = new URLSearchParams(location.search);
  const TOKEN = QUERY.get("token") || "";
  // another annotator on the same server: &annotator=NAME in the address
  const ANNOTATOR = QUERY.get("annotator");
  const app = document.getElementById("app");
  const status = document.getElementById("status");
  let state = null;
  let busy = false;

  const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
  const visible = (text) =>
    text.replace(BIDI_CONTROLS, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
  const h = (tag, props, ...kids) => {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : visible(String(kid)));
    }
    return node;
  };
  const shown = (tag, props, ...kids) => h(tag, { ...props, dir: "auto" }, ...kids);
  const fmt = (v) => (v === null || v === undefined ? "–" : Number(v).toFixed(3));
  const interval = (e) =>
    e && e.value !== null ? `${fmt(e.value)} [${fmt(e.low)}, ${fmt(e.high)}], ${e.n} rows` : "–";
  const say = (text) => { status.textContent = text; };

  async function call(method, path, body) {
    const response = await fetch(path, {
      method,
      headers: {
        "X-Rageval-Token": TOKEN,
        "Content-Type": "application/json",
        ...(ANNOTATOR ? { "X-Rageval-Annotator": ANNOTATOR } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const payload = await response.json();
    return { ok: response.ok, payload };
  }

  async function act(body, done) {
    if (busy) return;
    busy = true;
    try {
      const { ok, payload } = await call("POST", "/api/action", body);
      state = payload;
      draw();
      say(ok ? done : payload.error || "refused");
    } catch (e) {
      say(`not saved: ${e}`);
    } finally {
      busy = false;
    }
  }

  const noteBox = () => document.getElementById("note");

  function label(value) {
    if (!state || !state.row) return;
    const note = noteBox() ? noteBox().value : "";
    act({ action: "label", id: state.row.id, value, note: note || null },
      `row ${state.row.id} labelled ${value}`);
  }
  const skip = () => state && state.row && act({ action: "skip", id: state.row.id }, `row ${state.row.id} skipped`);
  const undo = () => act({ action: "undo" }, "last label taken back");

  function section(title, ...kids) {
    return [h("h2", {}, title), ...kids];
  }

  function metricsTable(metrics) {
    const names = Object.keys(metrics);
    if (!names.length) return null;
    return section("Judge",
      h("table", { class: "metrics" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Metric"), h("th", { scope: "col" }, "Value"),
          h("th", { scope: "col" }, "Evidence"))),
        h("tbody", {}, names.map((name) => {
          const m = metrics[name];
          return h("tr", {}, h("th", { scope: "row" }, name),
            h("td", {}, m.value === null ? `not measured${m.cause ? ": " + m.cause : ""}` : fmt(m.value)),
            h("td", {}, shown("pre", { class: "evidence" }, JSON.stringify(m.evidence, null, 1))));
        }))));
  }

  function statistics(s) {
    const lines = [`${s.labelled_rows} rows labelled`];
    if (s.ppi) lines.push(`judge-powered mean: ${interval({ ...s.ppi, value: s.ppi.mean, n: s.labelled_rows })}`);
    if (s.judge_kappa) lines.push(`judge's κ against the labels: ${interval(s.judge_kappa)}`);
    if (s.annotators) lines.push(`${s.annotators.pair.join(" and ")}'s κ: ${interval(s.annotators.kappa)}`);
    return h("p", { class: "stats", id: "statistics" }, lines.join(" · "));
  }

  // One button per value, naming every key that gives it (1: "1" and "y").
  function keysByValue(keys) {
    const grouped = new Map();
    for (const [key, value] of keys) grouped.set(value, [...(grouped.get(value) || []), key]);
    return [...grouped.entries()];
  }

  function draw() {
    app.replaceChildren();
    app.removeAttribute("aria-busy");
    const s = state;
    app.append(h("h1", {}, `Label “${s.column}” — ${s.done} done by ${s.annotator}, ${s.chosen} of ${s.total} rows chosen (${s.order} order)`));
    app.append(statistics(s.statistics));
    if (!s.row) {
      app.append(h("p", { id: "finished" }, "Every chosen row has a label: you may close this page."));
      app.append(h("div", { class: "actions" }, h("button", { onclick: undo, "aria-keyshortcuts": "u" }, "Undo (", h("kbd", {}, "u"), ")")));
      return;
    }
    const r = s.row;
    app.append(h("p", {}, `Row ${r.row + 1}, id `, shown("code", { id: "row-id" }, r.id),
      s.probability < 1 ? ` (chosen with probability ${fmt(s.probability)})` : ""));
    app.append(...section("Question", shown("div", { class: "field", id: "question" }, r.question ?? "–")));
    app.append(...section("Contexts", r.contexts.length ? h("ol", {}, r.contexts.map((c) =>
      h("li", {}, shown("div", { class: "field context" }, c)))) : h("p", {}, "–")));
    app.append(...section("Answer", shown("div", { class: "field", id: "answer" }, r.answer ?? "–")));
    app.append(...section("Reference", shown("div", { class: "field" }, r.reference ?? "–")));
    const table = metricsTable(r.metrics);
    if (table) app.append(...table);
    app.append(...section("Note", h("textarea", { id: "note", dir: "auto", "aria-label": "note (t to write, Escape to leave)" })));
    app.append(h("div", { class: "actions", role: "group", "aria-label": "label this row" },
      keysByValue(s.keys).map(([value, keys]) => h("button",
        { onclick: () => label(value), "aria-keyshortcuts": keys.join(" ") },
        `${value} (`, keys.map((k, i) => [i ? ", " : "", h("kbd", {}, k)]), ")")),
      h("button", { onclick: skip, "aria-keyshortcuts": "s" }, "Skip (", h("kbd", {}, "s"), ")"),
      h("button", { onclick: undo, "aria-keyshortcuts": "u" }, "Undo (", h("kbd", {}, "u"), ")"),
      h("span", {}, "Note: ", h("kbd", {}, "t"))));
  }

  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || !state) return;
    if (event.target instanceof HTMLTextAreaElement) {
      if (event.key === "Escape") event.target.blur();
      return;
    }
    const key = event.key.toLowerCase();
    const bound = (state.keys || []).find(([k]) => k === key);
    if (bound) label(bound[1]);
    else if (key === "s") skip();
    else if (key === "u") undo();
    else if (key === "t" && noteBox()) noteBox().focus();
    else return;
    event.preventDefault();
  });

  call("GET", "/api/state").then(({ payload }) => {
    state = payload;
    draw();
  }, (e) => say(`cannot reach the labelling server: ${e}`));
})();

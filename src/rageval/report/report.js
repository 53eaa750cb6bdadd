"use strict";
// Draws the report from the JSON in #run-data. Every string from the data reaches the page
// through textContent, a text node or an attribute value set with setAttribute: never as markup.
// What it shows is what is stored: bidi control characters are shown as visible markers, never
// applied (see `visible`), and each element holding text from the data has dir="auto", so a
// right-to-left text takes its own direction without reordering what surrounds it.
(() => {
  const DATA = JSON.parse(document.getElementById("run-data").textContent);
  const SAMPLES = DATA.samples;
  const METRICS = DATA.metrics;
  const NAMES = METRICS.map((m) => m.name);
  const PAGE_SIZE = 100;
  const SVGNS = "http://www.w3.org/2000/svg";
  const INPUT_FIELDS = [
    ["user_input", "Question"],
    ["response", "Response"],
    ["retrieved_contexts", "Retrieved contexts"],
    ["reference", "Reference"],
    ["reference_contexts", "Reference contexts"],
  ];
  const TEXT_KEYS = ["text", "statement", "question", "context", "claim"];
  // A conversation's row (inputs.turns) stands in the table for its first user message.
  const questionOf = (inputs) => {
    if (typeof inputs.user_input === "string") return inputs.user_input;
    const first = (inputs.turns || []).find((t) => t.role === "user" && typeof t.content === "string");
    return first ? first.content : undefined;
  };
  const VERDICT_KEYS = ["verdict", "supported", "attributed", "useful", "relevant"];

  // ---- DOM helpers ---------------------------------------------------------------------

  // The characters that override or embed a text direction (U+202A-U+202E), isolate one
  // (U+2066-U+2069) or mark one (U+200E, U+200F, U+061C). Applied, U+202E would display
  // "invoice\u202Efdp.exe" as "invoiceexe.pdf"; shown as ⟨U+202E⟩, the stored order stays visible.
  const BIDI_CONTROLS = /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/g;
  const visible = (text) =>
    text.replace(BIDI_CONTROLS, (c) => `⟨U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}⟩`);
  // Attributes a person reads (tooltips, labels read aloud): shown like text.
  const SHOWN_ATTRIBUTES = new Set(["title", "aria-label", "placeholder"]);

  function addKids(node, kids) {
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      node.append(kid instanceof Node ? kid : visible(String(kid)));
    }
    return node;
  }

  function setProps(node, props) {
    for (const [key, value] of Object.entries(props || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.setAttribute("class", value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else if (SHOWN_ATTRIBUTES.has(key)) node.setAttribute(key, visible(String(value)));
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    return node;
  }

  const h = (tag, props, ...kids) => addKids(setProps(document.createElement(tag), props), kids);
  // An element showing text taken from the data: its direction is the text's own.
  const shown = (tag, props, ...kids) => h(tag, { ...props, dir: "auto" }, ...kids);
  const svg = (tag, props, ...kids) =>
    addKids(setProps(document.createElementNS(SVGNS, tag), props), kids);
  // A table in its card, which scrolls sideways when the table is wider than the page.
  const wideTable = (props, ...kids) => h("div", { class: "table-wrap" }, h("table", props, ...kids));

  // ---- formatting ----------------------------------------------------------------------

  const isScalar = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);
  const isPlainObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
  const fmtValue = (v) => v.toFixed(3);
  const fmtInt = (n) => (n || 0).toLocaleString("en-US");
  const fmtNum = (v) => (Number.isInteger(v) ? String(v) : String(Number(v.toFixed(4))));
  const tokens = (u) => (u.prompt_tokens || 0) + (u.completion_tokens || 0);
  const humanize = (key) => key.replace(/_/g, " ");
  const plural = (n, word) => `${fmtInt(n)} ${word}${n === 1 ? "" : "s"}`;

  // A cost no price table knows is unknown, never 0 and never the sum of the parts that are known.
  function fmtCost(c) {
    if (c === null || c === undefined) return "unknown";
    if (c === 0) return "$0";
    return "$" + (c < 0.01 ? c.toPrecision(2) : c.toFixed(2));
  }

  function fmtDuration(s) {
    if (s === null || s === undefined) return "—";
    if (s < 60) return `${s.toFixed(1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
    return `${Math.floor(s / 3600)} h ${Math.round((s % 3600) / 60)} min`;
  }

  function fmtTime(iso) {
    const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d:\d\d)(?:\.\d+)?(Z|[+-]\d\d:?\d\d)?$/.exec(iso || "");
    if (!m) return iso || "—";
    const zone = !m[3] ? "" : m[3] === "Z" || /^[+-]00:?00$/.test(m[3]) ? " UTC" : " " + m[3];
    return `${m[1]} ${m[2]}${zone}`;
  }

  function fmtParams(params) {
    return Object.entries(params || {})
      .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
      .join(", ");
  }

  function usageLine(u) {
    const parts = [plural(u.requests, "request"), plural(tokens(u), "token")];
    if (u.cache_hits) parts.push(plural(u.cache_hits, "cache hit"));
    if (u.requests) parts.push(`cost ${fmtCost(u.cost_usd)}`);
    return parts.join(" · ");
  }

  function truncate(text, n) {
    return text.length > n ? text.slice(0, n - 1).trimEnd() + "…" : text;
  }

  // ---- values and cells ----------------------------------------------------------------

  const cellOf = (sample, name) => (sample.metrics || {})[name] || null;

  // The kind of a cell's cause: a stable code (a log written before kinds says nothing: "unknown").
  const KINDS = DATA.cause_kinds || {};
  const kindOf = (cell) => cell.cause_kind || "unknown";
  const causeTitle = (cell) => `${humanize(kindOf(cell))}: ${cell.cause || "no cause given"}`;

  function statusPill(cell) {
    if (!cell) return h("span", { class: "pill none", title: "no result for this metric" }, "—");
    if (cell.status === "skipped") return h("span", { class: "pill skipped", title: causeTitle(cell) }, "skipped");
    return h("span", { class: "pill nm", title: causeTitle(cell) }, "not measured");
  }

  // Value range of a metric's chart and filters: [0, 1] stretched to cover every value.
  function domainOf(values) {
    let lo = 0;
    let hi = 1;
    for (const v of values) {
      lo = Math.min(lo, Math.floor(v * 10) / 10);
      hi = Math.max(hi, Math.ceil(v * 10) / 10);
    }
    return [lo, hi];
  }

  const valuesOf = (name) =>
    SAMPLES.map((s) => cellOf(s, name)).filter((c) => c && c.status === "ok").map((c) => c.value);

  const METRIC_INFO = new Map(
    METRICS.map((m) => {
      const values = valuesOf(m.name);
      const [lo, hi] = domainOf(values);
      const bins = Math.min(40, Math.max(10, Math.round((hi - lo) * 10)));
      return [m.name, { values, lo, hi, bins, width: (hi - lo) / bins }];
    }),
  );

  // Axis labels: the ends, and round values between them that do not crowd the ends.
  function ticksOf(info) {
    const span = info.hi - info.lo;
    const step = span > 2 ? 1 : 0.5;
    const ticks = [info.lo];
    for (let t = Math.ceil(info.lo / step) * step; t < info.hi; t += step)
      if (t - info.lo > 0.12 * span && info.hi - t > 0.12 * span) ticks.push(t);
    ticks.push(info.hi);
    return ticks;
  }

  function binOf(info, v) {
    // The epsilon keeps 0.3 out of the 0.2 bin despite 0.3 / 0.1 = 2.9999999999999996.
    return Math.min(info.bins - 1, Math.max(0, Math.floor((v - info.lo) / info.width + 1e-9)));
  }

  // ---- state: filters, sort, page -----------------------------------------------------

  const HAYSTACK = SAMPLES.map((s) => {
    const parts = [s.id];
    for (const [key] of INPUT_FIELDS) {
      const v = (s.inputs || {})[key];
      if (typeof v === "string") parts.push(v);
      else if (Array.isArray(v)) parts.push(...v.filter((x) => typeof x === "string"));
    }
    for (const t of (s.inputs || {}).turns || []) if (typeof t.content === "string") parts.push(t.content);
    return parts.join("\n").toLowerCase();
  });

  const state = {
    query: "",
    metric: "", // "" = any metric
    cond: "all", // all | ok | not_measured | skipped | range | bin
    lo: null,
    hi: null,
    bin: null, // {name, index}: a histogram bar
    kind: null, // {status, kind}: cells without a value of one kind of cause
    sortKey: "row",
    sortDir: 1,
    page: 0,
    view: SAMPLES.map((_, i) => i),
  };

  function cellMatches(cell, name) {
    switch (state.cond) {
      case "all":
        return true;
      case "ok":
      case "not_measured":
      case "skipped":
        return !!cell && cell.status === state.cond;
      case "range":
        return (
          !!cell &&
          cell.status === "ok" &&
          (state.lo === null || cell.value >= state.lo) &&
          (state.hi === null || cell.value <= state.hi)
        );
      case "kind":
        return !!cell && cell.status === state.kind.status && kindOf(cell) === state.kind.kind;
      case "bin":
        return (
          name === state.bin.name &&
          !!cell &&
          cell.status === "ok" &&
          binOf(METRIC_INFO.get(name), cell.value) === state.bin.index
        );
      default:
        return true;
    }
  }

  function sampleMatches(i) {
    if (state.query && !HAYSTACK[i].includes(state.query)) return false;
    if (state.cond === "all") return true;
    const sample = SAMPLES[i];
    const names = state.metric ? [state.metric] : NAMES;
    return names.some((name) => cellMatches(cellOf(sample, name), name));
  }

  const STATUS_RANK = { ok: 0, not_measured: 1, skipped: 2 };

  function compareSamples(a, b) {
    const sa = SAMPLES[a];
    const sb = SAMPLES[b];
    const dir = state.sortDir;
    const key = state.sortKey;
    let c = 0;
    if (key.startsWith("m:")) {
      const name = key.slice(2);
      const ca = cellOf(sa, name);
      const cb = cellOf(sb, name);
      // Unmeasured cells sort after every value whichever the direction: they are not 0.
      const ra = ca ? STATUS_RANK[ca.status] : 3;
      const rb = cb ? STATUS_RANK[cb.status] : 3;
      if (ra !== rb) return ra - rb;
      if (ra === 0) c = (ca.value - cb.value) * dir;
    } else if (key === "row") {
      c = (sa.row - sb.row) * dir;
    } else {
      const ta = key === "id" ? sa.id : questionOf(sa.inputs || {}) || "";
      const tb = key === "id" ? sb.id : questionOf(sb.inputs || {}) || "";
      c = ta.localeCompare(tb, undefined, { numeric: true }) * dir;
    }
    return c || sa.row - sb.row;
  }

  function recompute() {
    state.view = SAMPLES.map((_, i) => i).filter(sampleMatches);
    state.view.sort(compareSamples);
    const pages = Math.max(1, Math.ceil(state.view.length / PAGE_SIZE));
    state.page = Math.min(state.page, pages - 1);
    drawTable();
  }

  // ---- header --------------------------------------------------------------------------

  function drawHeader() {
    const m = DATA.manifest;
    const data = m.data || {};
    const judge = m.judge;
    const finished = SAMPLES.length + (DATA.samples_left_out || 0);
    const rows =
      data.n_rows === null || data.n_rows === undefined
        ? fmtInt(finished)
        : finished === data.n_rows
          ? fmtInt(finished)
          : `${fmtInt(finished)} of ${fmtInt(data.n_rows)} finished`;
    const facts = [
      ["Rows", rows],
      ["Metrics", String(METRICS.length)],
      ["Judge", judge ? judge.model : "none"],
      ["Endpoint", judge ? judge.base_url || "—" : "—"],
      ["Temperature", judge && typeof judge.temperature === "number" ? String(judge.temperature) : "—"],
      ["Embeddings", m.embeddings ? m.embeddings.name : "none"],
      ["Created", fmtTime(m.created_at)],
      ["Duration", fmtDuration(DATA.duration_s)],
      ["rageval", m.rageval_version],
      ["Data fingerprint", data.fingerprint || "—"],
    ];
    const header = h(
      "header",
      { class: "masthead" },
      h("div", { class: "brand" }, "rageval"),
      h("h1", null, "Evaluation report"),
      shown("p", { class: "subtitle" }, data.source || "unnamed data"),
      h(
        "dl",
        { class: "facts" },
        facts.map(([k, v]) =>
          h("div", { class: "fact" }, h("dt", null, k), shown("dd", { title: v }, v)),
        ),
      ),
      h(
        "details",
        { class: "config" },
        h("summary", null, "Run configuration (manifest)"),
        shown("pre", { class: "json" }, JSON.stringify(m, null, 2)),
      ),
    );
    const notices = [];
    if (!finished) notices.push(["warn", "No finished samples in this run."]);
    else if (typeof data.n_rows === "number" && finished < data.n_rows)
      notices.push([
        "warn",
        `Incomplete run: ${fmtInt(finished)} of ${fmtInt(data.n_rows)} rows have finished. ` +
          "Resume it to finish the rest.",
      ]);
    if (DATA.samples_left_out)
      notices.push([
        "info",
        `The sample table shows the first ${fmtInt(SAMPLES.length)} rows; ` +
          `${fmtInt(DATA.samples_left_out)} more finished rows are in results.jsonl. ` +
          "The summary covers every row.",
      ]);
    if (!DATA.has_summary)
      notices.push([
        "info",
        "This run has no summary.json: means and counts below are computed from the finished " +
          "samples, without confidence intervals.",
      ]);
    return [header, notices.map(([kind, text]) => h("p", { class: `notice ${kind}` }, text))];
  }

  // ---- summary table -------------------------------------------------------------------

  function ciPlot(row, lo, hi) {
    const W = 120;
    const H = 16;
    const x = (v) => 4 + ((v - lo) / (hi - lo)) * (W - 8);
    const g = svg("svg", { class: "ci-plot", viewBox: `0 0 ${W} ${H}`, width: W, height: H, "aria-hidden": "true" });
    g.append(svg("line", { x1: x(lo), x2: x(hi), y1: H / 2, y2: H / 2, class: "ci-axis" }));
    if (row.mean === null) return g;
    if (row.ci_low !== null && row.ci_high !== null)
      g.append(svg("line", { x1: x(row.ci_low), x2: x(row.ci_high), y1: H / 2, y2: H / 2, class: "ci-range" }));
    g.append(svg("circle", { cx: x(row.mean), cy: H / 2, r: 3.5, class: "ci-mean" }));
    return g;
  }

  function drawSummary() {
    const bounds = METRICS.flatMap((r) => [
      r.mean, r.ci_low, r.ci_high,
      ...Object.values(r.ppi || {}).flatMap((p) => [p.mean, p.ci_low, p.ci_high]),
    ]).filter((v) => v !== null && v !== undefined);
    const [lo, hi] = domainOf(bounds);
    const numeric = (text, title) => h("td", { class: "num", title }, text);
    const usageCells = (x) => [
      numeric(fmtInt(x.requests)),
      numeric(fmtInt(tokens(x)), `${fmtInt(x.prompt_tokens)} prompt + ${fmtInt(x.completion_tokens)} completion`),
      numeric(fmtInt(x.cache_hits)),
      numeric(fmtCost(x.cost_usd)),
    ];
    // A human label's PPI++ mean sits under its metric: same columns, labelled rows counted.
    const ppiRows = (r) =>
      Object.entries(r.ppi || {}).map(([column, p]) =>
        h(
          "tr",
          { class: "ppi", "data-metric": r.name, "data-label": column },
          h(
            "th",
            { scope: "row", title: "The mean human label, PPI++: the judge's scores on every row rectified by the labelled rows" },
            h("div", { class: "ppi-name" }, "↳ human label ", shown("span", { class: "label-name" }, column)),
            h("div", { class: "params" }, p.labelled_mean === null ? "PPI++" : `PPI++ · labelled rows alone ${fmtValue(p.labelled_mean)} [${fmtValue(p.labelled_ci_low)}, ${fmtValue(p.labelled_ci_high)}]`),
          ),
          numeric(p.mean === null ? "—" : fmtValue(p.mean)),
          numeric(p.ci_low === null || p.ci_high === null ? "—" : `${fmtValue(p.ci_low)} – ${fmtValue(p.ci_high)}`),
          h("td", { class: "plot" }, ciPlot(p, lo, hi)),
          numeric(`${fmtInt(p.n_labelled)} labelled`, `${fmtInt(p.n_unlabelled)} rows with a judge value only`),
          h("td", { colspan: 6 }),
        ),
      );
    const body = METRICS.flatMap((r) => [
      h(
        "tr",
        null,
        h(
          "th",
          { scope: "row" },
          shown("div", { class: "metric-name" }, r.name),
          fmtParams(r.params) ? shown("div", { class: "params", title: fmtParams(r.params) }, truncate(fmtParams(r.params), 48)) : null,
        ),
        numeric(r.mean === null ? "—" : fmtValue(r.mean)),
        numeric(
          r.ci_low !== null && r.ci_high !== null
            ? `${fmtValue(r.ci_low)} – ${fmtValue(r.ci_high)}`
            : r.ci_undefined
              ? `undefined (${r.ci_undefined})`
              : "—",
        ),
        h("td", { class: "plot" }, ciPlot(r, lo, hi)),
        numeric(fmtInt(r.n_measured)),
        h(
          "td",
          { class: "num" },
          r.n_not_measured
            ? h(
                "button",
                {
                  class: "pill nm link",
                  title: "Show these samples",
                  onclick: () => applyFilter(r.name, "not_measured"),
                },
                fmtInt(r.n_not_measured),
              )
            : "0",
        ),
        numeric(fmtInt(r.n_skipped)),
        usageCells(r.usage),
      ),
      ppiRows(r),
    ]);
    const sum = (key) => METRICS.reduce((acc, r) => acc + (r[key] || 0), 0);
    const u = DATA.usage;
    const shared = Object.entries(DATA.shared_usage || {}).map(([label, x]) =>
      h(
        "tr",
        { class: "shared" },
        shown("th", { scope: "row", title: "Work done once per sample for several metrics" }, label),
        h("td", { colspan: 6 }),
        usageCells(x),
      ),
    );
    const foot = h(
      "tr",
      null,
      h("th", { scope: "row" }, "Total"),
      h("td"),
      h("td"),
      h("td"),
      numeric(fmtInt(sum("n_measured"))),
      numeric(fmtInt(sum("n_not_measured"))),
      numeric(fmtInt(sum("n_skipped"))),
      usageCells(u),
    );
    const heads = ["Metric", "Mean", "95% CI", "", "Measured", "Not measured", "Skipped", "Requests", "Tokens", "Cache hits", "Cost"];
    const method = (METRICS.find((r) => r.ci_method) || {}).ci_method;
    const noise = METRICS.filter((r) => r.judge_noise).map((r) => [
      " ",
      shown("span", null, r.name),
      `: ${r.judge_noise.repeats} scores per cell (the value is their mean), spread ` +
        `${fmtValue(r.judge_noise.mean_cell_sd)}; judge noise is ${Math.round(r.judge_noise.noise_variance_share * 100)}% ` +
        `of the variance of the mean, ${Math.round(r.judge_noise.ci_width_share * 100)}% of its CI width.`,
    ]);
    const interval = (lo, hi) => (lo === null || lo === undefined || hi === null || hi === undefined ? "" : ` [${fmtValue(lo)}, ${fmtValue(hi)}]`);
    const panel = METRICS.filter((r) => r.panel).map((r) => [
      " ",
      shown("span", { class: "panel-alpha", "data-metric": r.name }, r.name),
      `: α ${r.panel.alpha === null || r.panel.alpha === undefined ? "undefined" : fmtValue(r.panel.alpha)}` +
        `${interval(r.panel.alpha_ci_low, r.panel.alpha_ci_high)} over ${plural(r.panel.n_units, "row")}` +
        `${r.panel.note ? ` (${r.panel.note})` : ""}; judges' means ` +
        Object.entries(r.panel.judge_means || {})
          .map(([j, m]) => `${j} ${m === null ? "—" : fmtValue(m)}`)
          .join(", ") +
        ".",
    ]);
    const flips = METRICS.filter((r) => r.flips).map((r) => [
      " ",
      shown("span", { class: "flip-rate", "data-metric": r.name }, r.name),
      `: ${r.flips.rate === null ? "—" : fmtValue(r.flips.rate)} (${r.flips.n_flipped} of ${plural(r.flips.n_cells, "cell")}; pass: ≥ ${r.flips.threshold}).`,
    ]);
    const notes = [
      "Not-measured and skipped cells are left out of the mean and counted on their own, never as 0.",
      METRICS.some((r) => Object.keys(r.ppi || {}).length)
        ? "↳ rows: the mean human label by PPI++ (normal-approximation 95% CI), the judge rectified by the labelled rows."
        : null,
      noise.length ? ["Judge noise —", noise] : null,
      panel.length ? ["Judge panel — each judge scored every cell, the value is their mean; agreement between the judges, Krippendorff's α (interval, 95% bootstrap CI over the rows) —", panel] : null,
      flips.length ? ["Flip rate — cells whose pass/fail changed across repeats —", flips] : null,
      method ? `CI: ${method}.` : null,
      u.retries ? `${fmtInt(u.retries)} ${u.retries === 1 ? "retry" : "retries"} in total (requests sent again after a transient error).` : null,
      u.reasks ? `${fmtInt(u.reasks)} ${u.reasks === 1 ? "re-ask" : "re-asks"} in total (replies asked again because they failed validation).` : null,
      shared.length ? "Work shared between metrics (done once per sample) is listed on its own and included in the totals." : null,
    ];
    return h(
      "section",
      { id: "summary" },
      h("h2", null, "Summary"),
      METRICS.length
        ? wideTable(
            { class: "summary" },
            h("thead", null, h("tr", null, heads.map((t, i) => h("th", { class: i > 0 && i !== 3 ? "num" : null, scope: "col" }, t)))),
            h("tbody", null, body),
            h("tfoot", null, shared, foot),
          )
        : h("p", { class: "empty" }, "This run has no metrics."),
      h("p", { class: "footnote" }, notes.filter(Boolean).map((note, i) => [i ? " " : "", note])),
      drawCauses(),
    );
  }

  // Why cells have no value: one line per status and kind of cause with its count and a few
  // example causes, so a thousand failures of one kind take one line, not a thousand. Metrics
  // that failed the same way (same kind, same example causes: e.g. no judge configured) share
  // their line.
  function failureLines() {
    const lines = new Map();
    for (const r of METRICS)
      for (const group of r.failures || []) {
        const key = [group.status, group.kind, ...(group.examples || []).map((e) => e.cause)].join("\u0000");
        if (!lines.has(key)) lines.set(key, { group, metrics: [], count: 0 });
        const line = lines.get(key);
        line.metrics.push([r.name, group.count]);
        line.count += group.count;
      }
    return [...lines.values()];
  }

  function drawCauses() {
    const rows = failureLines().map(({ group, metrics, count }) => {
      const skipped = group.status === "skipped";
      const only = metrics.length === 1 ? metrics[0][0] : "";
      return h(
        "tr",
        { "data-metric": metrics.map(([name]) => name).join(" "), "data-kind": group.kind },
        h(
          "td",
          { class: "metrics-cell" },
          metrics.map(([name, n]) =>
            h("div", null, shown("span", { class: "metric-name" }, name), metrics.length > 1 ? h("span", { class: "muted" }, ` ${fmtInt(n)}`) : null),
          ),
        ),
        h(
          "td",
          { class: "kind", title: KINDS[group.kind] || null },
          shown("span", { class: "kind-name" }, humanize(group.kind)),
          h("span", { class: "muted" }, skipped ? " · skipped" : " · not measured"),
        ),
        h(
          "td",
          { class: "num" },
          h(
            "button",
            {
              type: "button",
              class: skipped ? "pill skipped link" : "pill nm link",
              title: "Show these samples",
              onclick: () => applyKind(only, group),
            },
            fmtInt(count),
          ),
        ),
        h(
          "td",
          { class: "cause-text" },
          // one metric's counts per cause would mislead on a line several metrics share
          h("ul", { class: "examples" }, (group.examples || []).map((e) => exampleItem(e, metrics.length === 1))),
        ),
      );
    });
    if (!rows.length) return null;
    return h(
      "div",
      { class: "causes" },
      h("h3", null, "Cells without a value"),
      wideTable(
        { class: "causes-table" },
        h(
          "thead",
          null,
          h(
            "tr",
            null,
            h("th", { scope: "col" }, "Metric"),
            h("th", { scope: "col" }, "Kind"),
            h("th", { scope: "col", class: "num" }, "Cells"),
            h("th", { scope: "col" }, "Example causes"),
          ),
        ),
        h("tbody", null, rows),
      ),
    );
  }

  // ---- agreement with human labels (calibration.json) ----------------------------------

  const fmtStat = (v) => (v === null || v === undefined ? "—" : v.toFixed(3));

  // Rows: what people said; columns: the judge's verdict. A cell's shade is its share of
  // the row, so each row reads as "of the answers people put here, where the judge put them".
  function confusionChart(c) {
    const k = c.levels.length;
    const cell = k <= 3 ? 56 : k <= 6 ? 40 : 30;
    const left = 64;
    const top = 40;
    const W = left + k * cell + 4;
    const H = top + k * cell + 4;
    const mid = top + (k * cell) / 2;
    const chart = svg("svg", {
      class: "confusion",
      viewBox: `0 0 ${W} ${H}`,
      width: W,
      height: H,
      role: "img",
      "aria-label": "Confusion matrix: rows are the human labels, columns the judge's",
    });
    chart.append(
      svg("text", { x: left + (k * cell) / 2, y: 12, class: "axis-title", "text-anchor": "middle" }, "judge"),
      svg("text", { x: 14, y: mid, class: "axis-title", "text-anchor": "middle", transform: `rotate(-90 14 ${mid})` }, "human"),
    );
    c.levels.forEach((level, i) => {
      chart.append(
        svg("text", { x: left + i * cell + cell / 2, y: top - 8, class: "tick", "text-anchor": "middle" }, fmtNum(level)),
        svg("text", { x: left - 8, y: top + i * cell + cell / 2 + 4, class: "tick", "text-anchor": "end" }, fmtNum(level)),
      );
    });
    c.matrix.forEach((row, i) => {
      const total = row.reduce((a, b) => a + b, 0);
      row.forEach((n, j) => {
        const share = total ? n / total : 0;
        const x = left + j * cell;
        const y = top + i * cell;
        chart.append(
          svg(
            "g",
            { class: i === j ? "cm-cell agree" : "cm-cell", "data-row": i, "data-col": j },
            svg("title", null, `human ${fmtNum(c.levels[i])}, judge ${fmtNum(c.levels[j])}: ${plural(n, "pair")} (${Math.round(share * 100)}% of the row)`),
            svg("rect", { x, y, width: cell - 2, height: cell - 2, class: "cm-shade", "fill-opacity": (0.06 + 0.84 * share).toFixed(3) }),
            svg("text", { x: x + (cell - 2) / 2, y: y + (cell - 2) / 2 + 4, class: share > 0.55 ? "cm-count on-dark" : "cm-count", "text-anchor": "middle" }, fmtInt(n)),
          ),
        );
      });
    });
    return chart;
  }

  function agreementCard(a, confidence) {
    const rows = Object.entries(a.statistics).map(([name, s]) =>
      h(
        "tr",
        { "data-statistic": name, class: name === a.kappa_statistic ? "headline" : null },
        h("th", { scope: "row" }, s.title),
        h("td", { class: "num value" }, fmtStat(s.value)),
        h("td", { class: "num ci" }, s.low === null || s.high === null ? "—" : `${fmtStat(s.low)} – ${fmtStat(s.high)}`),
        h("td", { class: "note" }, s.note || ""),
      ),
    );
    const counts = [
      plural(a.n_pairs, "pair"),
      a.n_without_judge ? `${fmtInt(a.n_without_judge)} labelled rows not scored by the judge` : null,
      a.human_mean !== null ? `human mean ${fmtStat(a.human_mean)}` : null,
      a.judge_mean !== null ? `judge mean ${fmtStat(a.judge_mean)}` : null,
    ];
    return h(
      "figure",
      { class: "card agreement", "data-metric": a.metric, "data-label": a.label_column },
      h(
        "figcaption",
        null,
        shown("span", { class: "metric-name" }, a.metric),
        h("span", { class: "vs" }, " vs "),
        shown("span", { class: "label-name" }, a.label_column),
        h("span", { class: "pill kind" }, `${a.kind} labels`),
      ),
      h("p", { class: "muted counts" }, counts.filter(Boolean).join(" · ")),
      h(
        "div",
        { class: "agreement-body" },
        h(
          "table",
          { class: "stats" },
          h("thead", null, h("tr", null, h("th", { scope: "col" }, "Statistic"), h("th", { scope: "col", class: "num" }, "Value"), h("th", { scope: "col", class: "num" }, `${Math.round(confidence * 100)}% CI`), h("th", { scope: "col" }))),
          h("tbody", null, rows),
        ),
        a.confusion ? h("div", { class: "confusion-wrap" }, confusionChart(a.confusion), h("p", { class: "muted mapping" }, a.confusion.judge_mapping)) : null,
      ),
      h("p", { class: "muted usage" }, `Judge calls of this metric: ${usageLine(a.usage)}`),
    );
  }

  function pTriple(r) {
    return [r.p_a, r.p_b, r.p_tie].map(fmtNum).join(" / ");
  }

  function intervalText(i) {
    if (!i || i.value === null) return "—";
    const ci = i.low === null || i.high === null ? (i.why ? ` (${i.why})` : "") : ` [${fmtNum(i.low)}, ${fmtNum(i.high)}]`;
    return `${fmtNum(i.value)}${ci}`;
  }

  // ---- pairwise statistics (pairwise.json) ---------------------------------------------
  function drawPairwise() {
    const pw = DATA.pairwise;
    if (!pw) return null;
    const pairs = h(
      "table",
      { class: "kv pairwise" },
      h("thead", null, h("tr", null, ["A", "B", "pairs", "A wins", "B wins", "ties", "B win rate", "flips", "sign test p"].map((t) => h("th", null, t)))),
      h(
        "tbody",
        null,
        pw.pairs.map((p) =>
          h(
            "tr",
            null,
            [p.system_a, p.system_b, String(p.n), String(p.wins_a), String(p.wins_b), String(p.ties), intervalText(p.win_rate), `${p.flips} (${intervalText(p.flip_rate)})`, fmtNum(p.sign_test_p)].map((t) => shown("td", null, t)),
          ),
        ),
      ),
    );
    const strengths = pw.strengths
      ? [
          h("h3", null, "Bradley–Terry strengths (log scale, mean 0)"),
          h(
            "table",
            { class: "kv pairwise" },
            h("thead", null, h("tr", null, ["system", "strength", "wins", "losses", "ties", "compared with"].map((t) => h("th", null, t)))),
            h(
              "tbody",
              null,
              pw.strengths.map((s) =>
                h(
                  "tr",
                  null,
                  [s.system, intervalText(s.strength), String(s.wins), String(s.losses), String(s.ties), Object.entries(s.opponents).map(([o, n]) => `${o} ${n}`).join(", ")].map((t) => shown("td", null, t)),
                ),
              ),
            ),
          ),
          h("p", { class: "footnote" }, pw.strengths_method),
        ]
      : null;
    const human = (pw.human || []).map((a) =>
      h("p", null, `People's verdicts on ${a.n_labelled} pairs (${a.system_a} vs ${a.system_b}): the judge agrees on ${intervalText(a.agreement)}; B's win rate by PPI++ ${intervalText(a.ppi_win_rate)} (labelled pairs alone ${intervalText(a.labelled_win_rate)}).`),
    );
    return h(
      "section",
      { id: "pairwise" },
      h("h2", null, `Pairwise: ${pw.criterion}`),
      pairs,
      strengths,
      human,
      h("p", { class: "footnote" }, `Win rate: B's share of the pairs, ties counted half. Flips: pairs whose two orders (A first, B first) gave different verdicts. ${pw.method}. docs/pairwise.md.`),
    );
  }

  function drawCalibration() {
    const cal = DATA.calibration;
    if (!cal) return null;
    const gate =
      cal.min_kappa === null
        ? null
        : cal.gate_failures.length
          ? h("div", { class: "notice warn gate" }, `κ gate ${cal.min_kappa} failed: `, cal.gate_failures.map((f, i) => [i ? "; " : "", shown("span", null, f)]))
          : h("p", { class: "notice info gate" }, `κ gate ${cal.min_kappa}: every κ reaches it.`);
    return h(
      "section",
      { id: "calibration" },
      h("h2", null, "Agreement with human labels"),
      gate,
      h("div", { class: "calib-grid" }, cal.agreements.map((a) => agreementCard(a, cal.confidence))),
      h(
        "p",
        { class: "footnote" },
        `Intervals: ${cal.interval_method}. The calibration run: ${usageLine(cal.usage)}. `,
        "What each statistic means: docs/calibration.md.",
      ),
    );
  }

  const ROW_OF_ID = new Map(SAMPLES.map((s, i) => [s.id, i]));

  function exampleItem(example, withCount) {
    const ids = (example.sample_ids || []).map((id) =>
      ROW_OF_ID.has(id)
        ? shown("button", { type: "button", class: "sample-link", title: "Open this sample", onclick: () => openDetail(ROW_OF_ID.get(id), null) }, id)
        : shown("span", { class: "sample-id" }, id),
    );
    return h(
      "li",
      null,
      shown("span", { title: example.cause }, truncate(example.cause, 240)),
      withCount && example.count > 1 ? h("span", { class: "muted" }, ` (${fmtInt(example.count)} cells)`) : null,
      ids.length ? h("span", { class: "example-ids" }, " — ", ids.flatMap((x, i) => (i ? [", ", x] : [x]))) : null,
    );
  }

  // ---- distributions -------------------------------------------------------------------

  function histogram(row) {
    const info = METRIC_INFO.get(row.name);
    const counts = new Array(info.bins).fill(0);
    for (const v of info.values) counts[binOf(info, v)] += 1;
    const unmeasured = row.n_not_measured + row.n_skipped;
    const W = 320;
    const H = 150;
    const left = 30;
    const plotW = 240;
    const top = 12;
    const plotH = 104;
    const gap = 14;
    const nmW = 24;
    const peak = Math.max(1, unmeasured, ...counts);
    const y = (n) => top + plotH - (n / peak) * plotH;
    const x = (v) => left + ((v - info.lo) / (info.hi - info.lo)) * plotW;
    const chart = svg("svg", {
      class: "hist",
      viewBox: `0 0 ${W} ${H}`,
      role: "img",
      "aria-label": `Distribution of ${row.name}`,
    });
    chart.append(
      svg("line", { x1: left, x2: left + plotW, y1: top + plotH, y2: top + plotH, class: "axis" }),
      svg("text", { x: left - 6, y: top + 4, class: "tick", "text-anchor": "end" }, String(peak)),
      svg("text", { x: left - 6, y: top + plotH, class: "tick", "text-anchor": "end" }, "0"),
    );
    if (row.ci_low !== null && row.ci_high !== null)
      chart.append(
        svg(
          "rect",
          { x: x(row.ci_low), y: top, width: Math.max(1, x(row.ci_high) - x(row.ci_low)), height: plotH, class: "ci-band" },
          svg("title", null, `95% CI ${fmtValue(row.ci_low)} – ${fmtValue(row.ci_high)}`),
        ),
      );
    counts.forEach((n, i) => {
      const x0 = info.lo + i * info.width;
      const label = `${fmtNum(x0)} – ${fmtNum(x0 + info.width)}: ${plural(n, "sample")}`;
      // The group spans the full height so that short bars are easy to click.
      const bin = svg(
        "g",
        { class: n ? "bin" : "bin empty", "data-bin": i },
        svg("title", null, label),
        svg("rect", { x: left + (i * plotW) / info.bins, y: top, width: plotW / info.bins, height: plotH, class: "hit" }),
        svg("rect", { x: left + (i * plotW) / info.bins + 1, y: y(n), width: plotW / info.bins - 2, height: top + plotH - y(n), class: "bar" }),
      );
      if (n) bin.addEventListener("click", () => applyBin(row.name, i));
      chart.append(bin);
    });
    if (row.mean !== null)
      chart.append(
        svg("line", { x1: x(row.mean), x2: x(row.mean), y1: top - 4, y2: top + plotH, class: "mean" },
          svg("title", null, `mean ${fmtValue(row.mean)}`)),
      );
    for (const v of ticksOf(info))
      chart.append(svg("text", { x: x(v), y: top + plotH + 16, class: "tick", "text-anchor": "middle" }, fmtNum(v)));
    const nmX = left + plotW + gap;
    const nmBar = svg(
      "rect",
      { x: nmX, y: y(unmeasured), width: nmW, height: top + plotH - y(unmeasured), class: "bar nm" },
      svg("title", null, `not measured: ${fmtInt(row.n_not_measured)}, skipped: ${fmtInt(row.n_skipped)}`),
    );
    if (unmeasured) nmBar.addEventListener("click", () => applyFilter(row.name, row.n_not_measured ? "not_measured" : "skipped"));
    chart.append(
      svg("line", { x1: nmX - 3, x2: nmX + nmW + 3, y1: top + plotH, y2: top + plotH, class: "axis" }),
      nmBar,
      svg("text", { x: nmX + nmW / 2, y: top + plotH + 16, class: "tick", "text-anchor": "middle" }, "n/m"),
    );
    return chart;
  }

  function drawDistributions() {
    if (!METRICS.length) return null;
    const cards = METRICS.map((r) =>
      h(
        "figure",
        { class: "card dist", "data-metric": r.name },
        h(
          "figcaption",
          null,
          shown("span", { class: "metric-name" }, r.name),
          h(
            "span",
            { class: "dist-stats" },
            r.mean === null ? "no values" : `mean ${fmtValue(r.mean)}`,
            r.ci_low !== null && r.ci_high !== null
              ? ` [${fmtValue(r.ci_low)}, ${fmtValue(r.ci_high)}]`
              : r.ci_undefined
                ? ` (95% CI undefined: ${r.ci_undefined})`
                : "",
          ),
        ),
        histogram(r),
        h(
          "div",
          { class: "dist-counts" },
          `${fmtInt(r.n_measured)} measured`,
          r.n_not_measured ? h("span", { class: "warn-text" }, ` · ${fmtInt(r.n_not_measured)} not measured`) : " · 0 not measured",
          r.n_skipped ? ` · ${fmtInt(r.n_skipped)} skipped` : "",
        ),
      ),
    );
    return h(
      "section",
      { id: "distributions" },
      h("h2", null, "Distributions"),
      h("p", { class: "hint" }, "Click a bar to list its samples. The dashed line is the mean, the band its 95% CI; n/m counts cells with no value."),
      h("div", { class: "dist-grid" }, cards),
    );
  }

  // ---- samples table -------------------------------------------------------------------

  const ui = {};

  function drawSamples() {
    ui.search = h("input", {
      type: "search",
      id: "filter-text",
      placeholder: "Filter by question, response, context, reference or id",
      "aria-label": "Filter samples by text",
      oninput: () => {
        state.query = ui.search.value.trim().toLowerCase();
        state.page = 0;
        recompute();
      },
    });
    ui.metric = h(
      "select",
      { id: "filter-metric", "aria-label": "Metric to filter on", onchange: onFilterControls },
      h("option", { value: "" }, "any metric"),
      NAMES.map((n) => shown("option", { value: n }, n)),
    );
    ui.cond = h(
      "select",
      { id: "filter-cond", "aria-label": "Condition", onchange: onFilterControls },
      [
        ["all", "all cells"],
        ["ok", "measured"],
        ["not_measured", "not measured"],
        ["skipped", "skipped"],
        ["range", "value between"],
      ].map(([v, t]) => h("option", { value: v }, t)),
      ui.binOption = h("option", { value: "bin", hidden: true }, "histogram bar"),
      ui.kindOption = h("option", { value: "kind", hidden: true }, "cause kind"),
    );
    const num = (id, label) =>
      h("input", { type: "number", id, step: "0.05", "aria-label": label, class: "num-input", oninput: onFilterControls });
    ui.lo = num("filter-lo", "Lowest value");
    ui.hi = num("filter-hi", "Highest value");
    ui.range = h("span", { class: "range", hidden: true }, ui.lo, h("span", { class: "muted" }, "and"), ui.hi);
    ui.clear = h("button", { type: "button", class: "btn", onclick: clearFilters }, "Clear filters");
    ui.status = h("p", { class: "status", id: "table-status", "aria-live": "polite" });
    ui.head = h("tr");
    ui.body = h("tbody", { onclick: onTableClick, onkeydown: onTableKey });
    ui.pager = h("nav", { class: "pager", "aria-label": "Pages" });
    return h(
      "section",
      { id: "samples" },
      h("h2", null, "Samples"),
      h(
        "div",
        { class: "toolbar" },
        ui.search,
        h("label", { class: "filter" }, h("span", { class: "muted" }, "where"), ui.metric, h("span", { class: "muted" }, "is"), ui.cond, ui.range),
        ui.clear,
      ),
      ui.status,
      wideTable({ class: "samples", id: "samples-table" }, h("thead", null, ui.head), ui.body),
      ui.pager,
    );
  }

  function onFilterControls() {
    state.metric = ui.metric.value;
    // A histogram bar belongs to one metric; choosing another metric drops it.
    if (ui.cond.value === "bin" && (!state.bin || state.bin.name !== ui.metric.value)) ui.cond.value = "all";
    state.cond = ui.cond.value;
    if (state.cond !== "bin") state.bin = null;
    if (state.cond !== "kind") state.kind = null;
    ui.binOption.hidden = state.cond !== "bin";
    ui.kindOption.hidden = state.cond !== "kind";
    ui.range.hidden = state.cond !== "range";
    const read = (input) => (input.value === "" || Number.isNaN(input.valueAsNumber) ? null : input.valueAsNumber);
    state.lo = read(ui.lo);
    state.hi = read(ui.hi);
    state.page = 0;
    recompute();
  }

  function applyFilter(name, cond) {
    ui.metric.value = name;
    ui.cond.value = cond;
    onFilterControls();
    document.getElementById("samples").scrollIntoView({ behavior: "smooth", block: "start" });
  }

  function applyKind(name, group) {
    ui.kindOption.hidden = false;
    ui.kindOption.textContent = visible(`${group.status === "skipped" ? "skipped" : "not measured"}: ${humanize(group.kind)}`);
    state.kind = { status: group.status, kind: group.kind };
    applyFilter(name, "kind");
  }

  function applyBin(name, index) {
    ui.binOption.hidden = false;
    const info = METRIC_INFO.get(name);
    const x0 = info.lo + index * info.width;
    ui.binOption.textContent = `in ${fmtNum(x0)} – ${fmtNum(x0 + info.width)}`;
    state.bin = { name, index };
    applyFilter(name, "bin");
  }

  function clearFilters() {
    ui.search.value = "";
    state.query = "";
    ui.lo.value = "";
    ui.hi.value = "";
    ui.metric.value = "";
    ui.cond.value = "all";
    onFilterControls();
  }

  const COLUMNS = [
    { key: "row", label: "#", cls: "num" },
    { key: "id", label: "id" },
    { key: "question", label: "Question" },
    ...NAMES.map((n) => ({ key: `m:${n}`, label: n, cls: "num metric" })),
  ];

  function drawHead() {
    ui.head.replaceChildren(
      ...COLUMNS.map((col) => {
        const active = state.sortKey === col.key;
        const arrow = active ? (state.sortDir > 0 ? "▲" : "▼") : "";
        return h(
          "th",
          {
            scope: "col",
            class: col.cls,
            "aria-sort": active ? (state.sortDir > 0 ? "ascending" : "descending") : "none",
            "data-key": col.key,
          },
          h(
            "button",
            {
              type: "button",
              class: "sort",
              title: `Sort by ${col.label}`,
              onclick: () => {
                // Metric columns start high-to-low: the usual question is "what scored worst/best".
                const first = col.key.startsWith("m:") ? -1 : 1;
                state.sortDir = state.sortKey === col.key ? -state.sortDir : first;
                state.sortKey = col.key;
                recompute();
                // The header is redrawn; keep keyboard focus on the column just sorted.
                ui.head.querySelector(`th[data-key="${CSS.escape(col.key)}"] button`).focus();
              },
            },
            shown("span", null, col.label),
            h("span", { class: "arrow", "aria-hidden": "true" }, arrow),
          ),
        );
      }),
    );
  }

  function valueCell(cell, m) {
    if (!cell || cell.status !== "ok") return h("td", { class: "metric off", "data-m": m }, statusPill(cell));
    const fill = Math.max(0, Math.min(1, cell.value));
    const bar = h("span", { class: "meter-fill" });
    bar.style.width = `${(fill * 100).toFixed(1)}%`;
    return h(
      "td",
      { class: "num metric", "data-m": m, title: cell.reason ? truncate(cell.reason, 300) : null },
      h("span", { class: "value" }, fmtValue(cell.value)),
      h("span", { class: "meter" }, bar),
    );
  }

  function drawTable() {
    drawHead();
    const start = state.page * PAGE_SIZE;
    const slice = state.view.slice(start, start + PAGE_SIZE);
    ui.body.replaceChildren(
      ...slice.map((i) => {
        const s = SAMPLES[i];
        const q = questionOf(s.inputs || {});
        return h(
          "tr",
          { "data-i": i, tabindex: 0 },
          h("td", { class: "num muted" }, String(s.row)),
          shown("td", { class: "id", title: s.id }, truncate(s.id, 24)),
          shown(
            "td",
            { class: "question", title: typeof q === "string" ? truncate(q, 500) : null },
            typeof q === "string" ? truncate(q, 140) : h("span", { class: "muted" }, "—"),
          ),
          NAMES.map((n, m) => valueCell(cellOf(s, n), m)),
        );
      }),
    );
    if (!slice.length)
      ui.body.append(
        h("tr", { class: "empty-row" }, h("td", { colspan: COLUMNS.length }, SAMPLES.length ? "No samples match these filters." : "No finished samples.")),
      );
    const total = state.view.length;
    const filtered = total !== SAMPLES.length;
    ui.status.textContent = total
      ? `Showing ${fmtInt(start + 1)}–${fmtInt(start + slice.length)} of ${fmtInt(total)}` +
        (filtered ? ` matching samples (${fmtInt(SAMPLES.length)} in all)` : " samples") +
        ". Click a row or a score for the details."
      : filtered
        ? `No samples match (${fmtInt(SAMPLES.length)} in all).`
        : "";
    const pages = Math.ceil(total / PAGE_SIZE);
    ui.pager.replaceChildren();
    if (pages > 1) {
      const go = (p) => () => {
        state.page = p;
        drawTable();
        document.getElementById("samples").scrollIntoView({ block: "start" });
      };
      ui.pager.append(
        h("button", { type: "button", class: "btn", disabled: state.page === 0, onclick: go(state.page - 1) }, "← Previous"),
        h("span", { class: "muted" }, `Page ${state.page + 1} of ${pages}`),
        h("button", { type: "button", class: "btn", disabled: state.page >= pages - 1, onclick: go(state.page + 1) }, "Next →"),
      );
    }
  }

  function onTableClick(event) {
    const tr = event.target.closest("tr[data-i]");
    if (!tr) return;
    const td = event.target.closest("td[data-m]");
    openDetail(Number(tr.dataset.i), td ? NAMES[Number(td.dataset.m)] : null);
  }

  function onTableKey(event) {
    if (event.key !== "Enter" && event.key !== " ") return;
    const tr = event.target.closest("tr[data-i]");
    if (!tr) return;
    event.preventDefault();
    openDetail(Number(tr.dataset.i), null);
  }

  // ---- detail dialog -------------------------------------------------------------------

  const dialog = document.getElementById("detail");
  let current = null;

  function textBlock(text) {
    return shown("div", { class: "text" }, text);
  }

  function verdictBadge(v) {
    const yes = v === true || v === 1 || (typeof v === "string" && /^(yes|true|supported|1)$/i.test(v));
    const no = v === false || v === 0 || (typeof v === "string" && /^(no|false|unsupported|0)$/i.test(v));
    if (yes) return h("span", { class: "verdict yes", title: `verdict: ${JSON.stringify(v)}` }, "✓");
    if (no) return h("span", { class: "verdict no", title: `verdict: ${JSON.stringify(v)}` }, "✗");
    return shown("span", { class: "verdict other", title: "verdict" }, v === null ? "?" : String(v));
  }

  function scalarText(v) {
    if (v === null) return h("span", { class: "muted" }, "none");
    if (typeof v === "number") return fmtNum(v);
    return String(v);
  }

  function kvTable(entries) {
    return h(
      "table",
      { class: "kv" },
      h("tbody", null, entries.map(([k, v]) => h("tr", null, shown("th", { scope: "row" }, humanize(k)), shown("td", null, scalarText(v))))),
    );
  }

  function itemList(items) {
    return h(
      "ol",
      { class: "items" },
      items.map((item) => {
        const textKey = TEXT_KEYS.find((k) => typeof item[k] === "string");
        const verdictKey = VERDICT_KEYS.find((k) => k in item);
        const rest = Object.keys(item).filter((k) => k !== textKey && k !== verdictKey && k !== "id");
        return h(
          "li",
          { class: "item" },
          verdictKey ? verdictBadge(item[verdictKey]) : null,
          "id" in item ? shown("span", { class: "item-id" }, `#${item.id}`) : null,
          h(
            "div",
            { class: "item-body" },
            shown("div", { class: "item-text" }, item[textKey]),
            rest.length
              ? h(
                  "div",
                  { class: "item-meta" },
                  rest.map((k) =>
                    shown("span", { class: "chip" }, `${humanize(k)}: `, isScalar(item[k]) ? scalarText(item[k]) : JSON.stringify(item[k])),
                  ),
                )
              : null,
          ),
        );
      }),
    );
  }

  function evidenceValue(v) {
    if (Array.isArray(v)) {
      if (v.length && v.every((o) => isPlainObject(o) && TEXT_KEYS.some((k) => typeof o[k] === "string")))
        return itemList(v);
      if (!v.length) return h("span", { class: "muted" }, "none");
      if (v.every(isScalar)) return h("div", { class: "chips" }, v.map((x) => shown("span", { class: "chip" }, scalarText(x))));
    } else if (isPlainObject(v) && Object.values(v).every(isScalar)) {
      return kvTable(Object.entries(v));
    }
    return shown("pre", { class: "json" }, JSON.stringify(v, null, 2));
  }

  // Free-form evidence (a metric of the user's own, or a log from before evidence had kinds):
  // its scalars in a table, every other key in a block of its own, drawn by its shape.
  function genericEvidence(data) {
    const keys = Object.keys(data || {});
    if (!keys.length) return null;
    const scalars = keys.filter((k) => isScalar(data[k]));
    return [
      scalars.length ? kvTable(scalars.map((k) => [k, data[k]])) : null,
      keys
        .filter((k) => !isScalar(data[k]))
        .map((k) => h("div", { class: "ev-block" }, shown("div", { class: "ev-key" }, humanize(k)), evidenceValue(data[k]))),
    ];
  }

  const block = (title, ...kids) => h("div", { class: "ev-block" }, shown("div", { class: "ev-key" }, title), ...kids);
  const present = (v) => v !== null && v !== undefined;

  // The judge's verdicts on a list of items: what each true verdict says heads the column.
  function verdictTable(table) {
    const rows = table.verdicts || [];
    const yes = rows.filter((v) => v.verdict === true).length;
    const ranked = rows.some((v) => present(v.rank));
    return h(
      "div",
      { class: "verdict-table", "data-items": table.items },
      shown("p", { class: "ev-summary" }, `${yes} of ${rows.length} ${table.items} ${table.means}`),
      rows.length
        ? wideTable(
            { class: "verdicts" },
            h("thead", null, h("tr", null, ranked ? h("th", null, "rank") : null, h("th", null, "item"), shown("th", null, table.means), h("th", null, "reason"))),
            h(
              "tbody",
              null,
              rows.map((v) =>
                h(
                  "tr",
                  { "data-verdict": String(v.verdict) },
                  ranked ? h("td", null, present(v.rank) ? String(v.rank) : "") : null,
                  h("td", null, shown("span", { class: "item-id" }, `#${v.id}`), " ", shown("span", { class: "item-text" }, v.text)),
                  h("td", null, verdictBadge(v.verdict)),
                  shown("td", { class: "item-reason" }, present(v.reason) ? v.reason : ""),
                ),
              ),
            ),
          )
        : null,
    );
  }

  // Claim checks (mode "checker"): each sentence with the checker's probability that the
  // contexts support it, and the context that does, its text on hover and below the table.
  function claimsView(ev) {
    const rows = ev.claims || [];
    const yes = rows.filter((c) => c.supported).length;
    const contexts = Object.entries(ev.contexts || {});
    return [
      shown("p", { class: "ev-summary" }, `${yes} of ${rows.length} claims supported by the contexts${ev.checker ? `, checked by ${ev.checker}` : ""}`),
      rows.length
        ? wideTable(
            { class: "verdicts claims" },
            h("thead", null, h("tr", null, h("th", null, "claim"), h("th", null, "probability supported"), h("th", null, "supported by"))),
            h(
              "tbody",
              null,
              rows.map((c) =>
                h(
                  "tr",
                  { "data-verdict": String(c.supported) },
                  h("td", null, shown("span", { class: "item-id" }, `#${c.id}`), " ", shown("span", { class: "item-text" }, c.text)),
                  h("td", null, verdictBadge(c.supported), " ", h("span", { class: "claim-probability" }, fmtNum(c.probability))),
                  present(c.context)
                    ? shown("td", { class: "claim-context", title: (ev.contexts || {})[c.context] || null }, c.context)
                    : h("td", { class: "muted" }, ev.per_context ? "no context on its own" : "all contexts read together"),
                ),
              ),
            ),
          )
        : null,
      contexts.length ? block("Supporting contexts", h("ol", { class: "contexts" }, contexts.map(([id, text]) => h("li", { "data-context": id }, shown("span", { class: "item-id" }, `#${id}`), " ", textBlock(text))))) : null,
    ];
  }

  function ratingView(ev) {
    const top = Math.max(...(ev.scale || [1]));
    return [
      h(
        "ol",
        { class: "ratings" },
        Object.entries(ev.ratings || {}).map(([template, r]) =>
          h(
            "li",
            { class: "rating", "data-template": template },
            shown("span", { class: "rating-name" }, humanize(template)),
            present(r)
              ? h("span", { class: "rating-value", title: `scale ${(ev.scale || []).join(", ")}` }, `${r} / ${top}`)
              : h("span", { class: "muted" }, "no valid rating"),
            ev.reasons && present(ev.reasons[template]) ? shown("div", { class: "item-reason" }, ev.reasons[template]) : null,
            ev.failures && ev.failures[template] ? shown("div", { class: "item-reason" }, ev.failures[template]) : null,
          ),
        ),
      ),
    ];
  }

  function questionsView(ev) {
    return [
      h("p", { class: "ev-summary" }, `${plural(ev.noncommittal_votes, "generation")} found the response noncommittal${ev.noncommittal ? ": it is" : ""}`),
      h(
        "ol",
        { class: "items questions" },
        (ev.questions || []).map((q) =>
          h(
            "li",
            { class: "item" },
            h(
              "div",
              { class: "item-body" },
              shown("div", { class: "item-text" }, q.question),
              h(
                "div",
                { class: "item-meta" },
                h("span", { class: "chip" }, `cosine: ${present(q.cosine) ? fmtNum(q.cosine) : "not embedded"}`),
                q.noncommittal ? h("span", { class: "chip" }, "noncommittal") : null,
              ),
            ),
          ),
        ),
      ),
    ];
  }

  function callList(calls) {
    return calls.length ? h("ol", { class: "contexts" }, calls.map((c) => h("li", null, textBlock(c)))) : h("p", { class: "muted" }, "none");
  }

  function toolCallsView(ev) {
    const numbers = ["precision", "recall", "level", "ordered"].filter((k) => present(ev[k]));
    return [
      kvTable(numbers.map((k) => [k, ev[k]])),
      block("Calls made", callList(ev.calls || [])),
      block("Reference calls", callList(ev.reference_calls || [])),
      ev.missing && ev.missing.length ? block("Reference calls not made", callList(ev.missing)) : null,
      ev.unexpected && ev.unexpected.length ? block("Calls the reference does not make", callList(ev.unexpected)) : null,
      ev.pairs && ev.pairs.length
        ? block(
            "Pairs",
            wideTable(
              { class: "pairs" },
              h("thead", null, h("tr", null, h("th", null, "call"), h("th", null, "reference"), h("th", null, "shared"))),
              h("tbody", null, ev.pairs.map((p) => h("tr", null, shown("td", null, p.call), shown("td", null, p.reference), h("td", null, fmtNum(p.shared))))),
            ),
          )
        : null,
    ];
  }

  // A per-turn metric's conversation cell: each scored turn's value (the thread beside the
  // inputs shows its evidence under the turn) and the turns not scored.
  function perTurnView(ev) {
    return [
      (ev.turns || []).length
        ? wideTable(
            { class: "per-turn" },
            h("thead", null, h("tr", null, h("th", null, "turn"), h("th", null, "value"), h("th", null, "reason"))),
            h("tbody", null, ev.turns.map((t) => h("tr", { "data-turn": t.turn }, h("td", null, String(t.turn)), h("td", null, fmtValue(t.value)), shown("td", null, t.reason || "")))),
          )
        : null,
      (ev.not_scored || []).length ? block("Not scored", h("ul", { class: "not-scored" }, ev.not_scored.map((t) => shown("li", null, `turn ${t.turn}: ${t.why}`)))) : null,
    ];
  }

  // knowledge retention: the facts the user stated, then each judged turn with its verdicts.
  function retentionView(ev) {
    return [
      block(
        "Facts the user stated",
        (ev.facts || []).length
          ? h("ol", { class: "items facts" }, ev.facts.map((f) => shown("li", { "data-turn": f.turn }, `turn ${f.turn}: ${f.fact}`)))
          : h("p", { class: "muted" }, "none"),
      ),
      (ev.turns || []).map((t) =>
        block(`Turn ${t.turn}: ${fmtValue(t.value)}, ${t.reason}`, verdictTable(t.facts)),
      ),
    ];
  }

  // topic adherence: the three scores, then whether each question is on topic and answered.
  const topicsView = (ev) => [
    kvTable([["mode", ev.mode], ["precision", ev.precision], ["recall", ev.recall], ["f1", ev.f1]]),
    verdictTable(ev.on_topic),
    verdictTable(ev.answered),
  ];

  const EVIDENCE_VIEWS = {
    verdicts: verdictTable,
    claims: claimsView,
    factuality: (ev) => [
      kvTable(["factuality", "similarity", "tp", "fp", "fn"].filter((k) => k in ev).map((k) => [k, ev[k]])),
      ev.response_statements ? verdictTable(ev.response_statements) : null,
      ev.reference_statements ? verdictTable(ev.reference_statements) : null,
    ],
    ratings: ratingView,
    rubric: (ev) => [h("p", { class: "ev-summary" }, `level ${ev.raw_score}`), block("Level", textBlock(ev.level_description)), block("Feedback", textBlock(ev.feedback))],
    questions: questionsView,
    similarity: (ev) => [
      kvTable([["cosine", ev.cosine], ["threshold", present(ev.threshold) ? ev.threshold : null]]),
      ev.reference_cosines ? block("Cosine to each reference", evidenceValue(ev.reference_cosines)) : null,
    ],
    overlap: (ev) => kvTable([[ev.counted, ev.overlap], ["response tokens", ev.response_tokens], ["reference tokens", ev.reference_tokens]]),
    tool_calls: toolCallsView,
    goal: (ev) => [
      h("p", { class: "ev-summary" }, "goal ", verdictBadge(ev.achieved), ev.achieved ? " achieved" : " not achieved"),
      block("User goal", textBlock(ev.user_goal)),
      block("Desired outcome", textBlock(ev.desired_outcome)),
      block("End state", textBlock(ev.end_state)),
    ],
    retention: retentionView,
    topics: topicsView,
    per_turn: perTurnView,
    pairwise: (ev) => [
      h("p", { class: "ev-summary" }, `winner: ${ev.winner}${ev.flip ? " (the two orders disagreed: a flip)" : ""}`),
      kvTable([
        ["criterion", ev.criterion],
        ["asked", ev.ask === "each" ? "a verdict on each answer" : "which answer is better"],
        ["winner from", ev.winner_from],
        ...[["A shown first", ev.a_first], ["B shown first", ev.b_first]].flatMap(([order, r]) => [
          [`${order}: verdict`, r.winner],
          ...(r.right_a === null || r.right_a === undefined ? [] : [[`${order}: P(A right) / P(B right)`, [r.right_a, r.right_b].map(fmtNum).join(" / ")]]),
          [`${order}: P(a) / P(b) / P(tie)`, pTriple(r)],
        ]),
      ]),
    ],
    free: (ev) => genericEvidence(ev.data),
  };
  // What any kind may note after scoring, besides its own fields.
  const EVIDENCE_NOTES = ["score", "truncated", "reference_values", "best_reference"];

  // A cell's evidence, drawn by its kind; evidence of a kind this page does not know is shown
  // like free-form evidence.
  function evidenceBody(evidence) {
    if (!isPlainObject(evidence)) return null;
    const view = EVIDENCE_VIEWS[evidence.kind];
    if (!view) return genericEvidence(evidence);
    const notes = EVIDENCE_NOTES.filter((k) => present(evidence[k]));
    const body = [view(evidence), notes.length ? genericEvidence(Object.fromEntries(notes.map((k) => [k, evidence[k]]))) : null]
      .flat(Infinity)
      .filter((x) => x);
    return body.length ? body : null;
  }

  function evidenceView(evidence) {
    const body = evidenceBody(evidence);
    if (!body) return null;
    return h("div", { class: "evidence", "data-kind": evidence.kind || "free" }, h("h4", null, "Evidence"), body);
  }

  // The values a cell's value is the mean of (repeats, a panel's judges): a chip each, then `note`.
  function meanOfView(cls, title, chips, note) {
    return h("div", { class: cls }, h("h4", null, title), h("div", { class: "chips" }, chips), h("p", { class: "muted" }, note));
  }

  // A cell scored several times (--repeats): its value is the mean of these scores.
  function repeatsView(r) {
    const unmeasured = r.not_measured ? ` · ${plural(r.not_measured, "scoring")} without a value` : "";
    const chips = r.values.map((v) => h("span", { class: "chip" }, fmtValue(v)));
    return meanOfView("repeats", "Repeated scores", chips, `spread (SD) ${r.sd === null ? "—" : fmtValue(r.sd)}${unmeasured}; the value is their mean`);
  }

  // A cell of a judge panel: each judge's own value (the cell's is their mean).
  function panelView(votes) {
    const chips = Object.entries(votes).map(([judge, v]) =>
      h("span", { class: "chip", title: v.cause || null }, shown("span", null, judge), ` ${v.status === "ok" ? fmtValue(v.value) : humanize(v.status)}`),
    );
    return meanOfView("panel-votes", "Judges", chips, "the value is the mean of the judges' values");
  }

  function metricView(name, cell, focused) {
    const head = h(
      "div",
      { class: "metric-head" },
      shown("h3", null, name),
      cell && cell.status === "ok" ? h("span", { class: "big-value" }, fmtValue(cell.value)) : statusPill(cell),
    );
    if (!cell) return h("section", { class: "metric-detail", "data-metric": name }, head, h("p", { class: "muted" }, "No result recorded for this metric."));
    return h(
      "section",
      { class: focused ? "metric-detail focus" : "metric-detail", "data-metric": name },
      head,
      cell.status !== "ok"
        ? h(
            "div",
            { class: "cause" },
            h("strong", null, "Cause "),
            shown("span", { class: "kind-name", title: KINDS[kindOf(cell)] || null }, `(${humanize(kindOf(cell))})`),
            h("strong", null, ": "),
            shown("span", null, cell.cause || "no cause given"),
          )
        : null,
      cell.reason ? h("div", { class: "reason" }, h("h4", null, "Reason"), textBlock(cell.reason)) : null,
      cell.repeats ? repeatsView(cell.repeats) : null,
      cell.panel ? panelView(cell.panel) : null,
      evidenceView(cell.evidence),
      cell.usage ? h("p", { class: "usage muted" }, usageLine(cell.usage)) : null,
    );
  }

  // A tool call as text: name({"key": value, ...}), and what the tool returned when known.
  function toolCallText(c) {
    const call = `${c.name}(${JSON.stringify(c.arguments || {})})`;
    return c.result === undefined ? call : `${call} → ${JSON.stringify(c.result)}`;
  }

  // The per-turn cells of a conversation's per-turn metrics (evidence of kind per_turn), by
  // turn: [{name, turn}] for a scored turn, [{name, why}] for one the metric did not score.
  function turnCells(s) {
    const byTurn = new Map();
    const add = (turn, entry) => byTurn.set(turn, [...(byTurn.get(turn) || []), entry]);
    for (const name of [...NAMES, ...Object.keys(s.metrics || {}).filter((n) => !NAMES.includes(n))]) {
      const cell = cellOf(s, name);
      const ev = cell && cell.evidence;
      if (!ev || ev.kind !== "per_turn") continue;
      for (const t of ev.turns || []) add(t.turn, { name, turn: t });
      for (const t of ev.not_scored || []) add(t.turn, { name, why: t.why });
    }
    return byTurn;
  }

  // A per-turn metric's cell for one turn: its value and reason, and its evidence folded.
  function turnCellView(entry) {
    const { name, turn, why } = entry;
    if (!turn)
      return h(
        "div",
        { class: "turn-cell not-scored", "data-metric": name },
        shown("span", { class: "turn-metric" }, name),
        h("span", { class: "pill skipped" }, "not scored"),
        shown("div", { class: "muted" }, why),
      );
    const body = evidenceBody(turn.evidence);
    return h(
      "div",
      { class: "turn-cell", "data-metric": name },
      shown("span", { class: "turn-metric" }, name),
      h("span", { class: "turn-value" }, fmtValue(turn.value)),
      turn.reason ? shown("div", { class: "turn-reason" }, turn.reason) : null,
      body ? h("details", { class: "evidence", "data-kind": turn.evidence.kind }, h("summary", null, "Evidence"), body) : null,
    );
  }

  // A conversation (inputs.turns) as a thread: each turn's role, text, the contexts retrieved
  // for it, its tool calls and its reference, with the per-turn metrics' cells of the turn
  // beside it; then the conversation's own references.
  function conversationView(inputs, cells) {
    const calls = (list) => h("ol", { class: "contexts" }, list.map((c) => h("li", null, textBlock(toolCallText(c)))));
    const turn = (t, i) =>
      h(
        "li",
        { class: `field turn role-${t.role}`, "data-turn": i },
        h(
          "div",
          { class: "turn-main" },
          shown("h4", null, `Turn ${i} · ${t.role}${t.name ? ` (${t.name})` : ""}`),
          typeof t.content === "string" && t.content ? textBlock(t.content) : null,
          t.retrieved_contexts
            ? h("div", null, h("h4", null, `Retrieved contexts (${t.retrieved_contexts.length})`), h("ol", { class: "contexts" }, t.retrieved_contexts.map((c) => h("li", null, textBlock(c)))))
            : null,
          t.tool_calls && t.tool_calls.length ? h("div", null, h("h4", null, `Tool calls (${t.tool_calls.length})`), calls(t.tool_calls)) : null,
          typeof t.reference === "string" ? h("div", null, h("h4", null, "Reference"), textBlock(t.reference)) : null,
        ),
        cells.has(i) ? h("div", { class: "turn-cells" }, cells.get(i).map(turnCellView)) : null,
      );
    const known = new Set(["turns", "reference_tool_calls", "reference_goal"]);
    return h(
      "section",
      { class: "inputs" },
      h("h3", null, `Conversation (${inputs.turns.length} turns)`),
      h("ol", { class: "turns", start: 0 }, inputs.turns.map(turn)),
      inputs.reference_tool_calls
        ? h("div", { class: "field", "data-field": "reference_tool_calls" }, h("h4", null, `Reference tool calls (${inputs.reference_tool_calls.length})`), inputs.reference_tool_calls.length ? calls(inputs.reference_tool_calls) : h("p", { class: "muted" }, "none: no tool should be called"))
        : null,
      typeof inputs.reference_goal === "string"
        ? h("div", { class: "field", "data-field": "reference_goal" }, h("h4", null, "Reference goal"), textBlock(inputs.reference_goal))
        : null,
      Object.keys(inputs)
        .filter((k) => !known.has(k))
        .map((k) => h("div", { class: "field" }, shown("h4", null, humanize(k)), evidenceValue(inputs[k]))),
    );
  }

  function inputsView(inputs, s) {
    if (Array.isArray(inputs.turns)) return conversationView(inputs, turnCells(s));
    const known = new Set(INPUT_FIELDS.map(([k]) => k));
    const extra = Object.keys(inputs).filter((k) => !known.has(k));
    return h(
      "section",
      { class: "inputs" },
      h("h3", null, "Inputs"),
      INPUT_FIELDS.map(([key, label]) => {
        const v = inputs[key];
        let body;
        if (v === null || v === undefined) body = h("p", { class: "muted" }, "not provided");
        else if (Array.isArray(v))
          body = v.length
            ? h("ol", { class: "contexts" }, v.map((c) => h("li", null, textBlock(typeof c === "string" ? c : JSON.stringify(c)))))
            : h("p", { class: "muted" }, "empty list");
        else body = textBlock(typeof v === "string" ? v : JSON.stringify(v));
        const count = Array.isArray(v) ? ` (${v.length})` : "";
        return h("div", { class: "field", "data-field": key }, h("h4", null, label + count), body);
      }),
      extra.map((k) => h("div", { class: "field" }, shown("h4", null, humanize(k)), evidenceValue(inputs[k]))),
    );
  }

  function openDetail(index, focusMetric) {
    current = index;
    const s = SAMPLES[index];
    const pos = state.view.indexOf(index);
    const step = (d) => () => openDetail(state.view[pos + d], null);
    const known = ["format_version", "row", "id", "inputs", "metrics", "shared_usage", "embeddings_usage"];
    const other = Object.keys(s).filter((k) => !known.includes(k));
    const shared = s.shared_usage && s.shared_usage.requests ? s.shared_usage : null;
    const extraMetrics = Object.keys(s.metrics || {}).filter((n) => !NAMES.includes(n));
    dialog.replaceChildren(
      h(
        "div",
        { class: "detail" },
        h(
          "div",
          { class: "detail-bar" },
          h("h2", { id: "detail-title" }, `Row ${s.row}`, shown("span", { class: "detail-id" }, s.id)),
          h(
            "div",
            { class: "detail-nav" },
            h("button", { type: "button", class: "btn", disabled: pos <= 0, onclick: step(-1), title: "Previous sample (←)" }, "←"),
            h("span", { class: "muted" }, pos >= 0 ? `${pos + 1} / ${state.view.length}` : ""),
            h("button", { type: "button", class: "btn", disabled: pos < 0 || pos >= state.view.length - 1, onclick: step(1), title: "Next sample (→)" }, "→"),
            h("button", { type: "button", class: "btn close", onclick: () => dialog.close(), "aria-label": "Close" }, "✕"),
          ),
        ),
        h(
          "div",
          { class: "detail-body" },
          h(
            "div",
            { class: "detail-col" },
            inputsView(s.inputs || {}, s),
            other.length
              ? h("section", { class: "other" }, h("h3", null, "Other fields"), shown("pre", { class: "json" }, JSON.stringify(Object.fromEntries(other.map((k) => [k, s[k]])), null, 2)))
              : null,
          ),
          h(
            "div",
            { class: "detail-col" },
            h(
              "section",
              { class: "metrics" },
              h("h3", null, "Metrics"),
              [...NAMES, ...extraMetrics].map((n) => metricView(n, cellOf(s, n), n === focusMetric)),
              shared ? h("p", { class: "usage muted" }, `Shared work for this sample (statement extraction): ${usageLine(shared)}`) : null,
            ),
          ),
        ),
      ),
    );
    if (!dialog.open) dialog.showModal();
    for (const scroller of dialog.querySelectorAll(".detail-body, .detail-col")) scroller.scrollTop = 0;
    const target = focusMetric ? dialog.querySelector(".metric-detail.focus") : null;
    if (target) target.scrollIntoView({ block: "start" });
  }

  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) dialog.close(); // a click on the backdrop
  });
  dialog.addEventListener("keydown", (event) => {
    if (event.target.closest("input, select, textarea")) return;
    const pos = state.view.indexOf(current);
    if (event.key === "ArrowLeft" && pos > 0) openDetail(state.view[pos - 1], null);
    if (event.key === "ArrowRight" && pos >= 0 && pos < state.view.length - 1) openDetail(state.view[pos + 1], null);
  });

  // ---- page ----------------------------------------------------------------------------

  const app = document.getElementById("app");
  addKids(app, [
    drawHeader(),
    drawSummary(),
    drawCalibration(),
    drawPairwise(),
    drawDistributions(),
    drawSamples(),
    h("footer", null, `Generated by rageval ${DATA.manifest.rageval_version}. This file is self-contained and works offline.`),
  ]);
  document.title = visible(`rageval report · ${(DATA.manifest.data || {}).source || "run"}`);
  recompute();
})();

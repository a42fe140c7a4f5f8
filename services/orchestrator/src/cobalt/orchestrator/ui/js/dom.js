// Building the DOM without innerHTML: every value from the API goes in as text, so a
// model's response can never inject markup into the page.

export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "className") {
      el.className = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const percent = (v, digits = 1) => `${(100 * v).toFixed(digits)}%`;
const signed = (v, digits = 1) => `${v > 0 ? "+" : v < 0 ? "−" : "±"}${Math.abs(100 * v).toFixed(digits)}`;
// An interval's two ends with as many digits as it takes for them to differ (up to 4):
// the API never sends a zero-width interval (analysis/statistics.py), and the page must
// not print one either (as analysis/text.py does for the terminal).
const ends = (interval, show) => {
  let digits = 1;
  while (digits < 4 && show(interval[0], digits) === show(interval[1], digits)) digits += 1;
  return `[${show(interval[0], digits)}, ${show(interval[1], digits)}]`;
};

export const fmt = {
  rate: (v) => (v === null || v === undefined ? "–" : percent(v)),
  // A rate and its 95% interval: "66.7% [20.8%, 93.9%]"; "–" where nothing was measured.
  rateInterval: (v, interval) => (v === null || v === undefined ? "–"
    : interval ? `${percent(v)} ${ends(interval, percent)}` : percent(v)),
  // A difference of rates in percentage points, with its interval.
  difference: (v, interval) => (v === null || v === undefined ? "–"
    : `${signed(v)} pp${interval ? ` ${ends(interval, signed)}` : ""}`),
  num: (v, digits = 3) =>
    v === null || v === undefined ? "–" : Number.isInteger(v) ? String(v) : v.toFixed(digits),
  date: (v) => (v ? new Date(v).toLocaleString() : "–"),
  // Which weights (a WeightsIdentity), as `cobalt run show` names them (weight_identity.weights_line).
  weights: (w) => {
    if (!w) return "not reported (the endpoint is not Cobalt's inference service)";
    const parts = [];
    if (w.job !== null && w.job !== undefined) parts.push(`job ${w.job} step ${w.step ?? "?"}`);
    if (w.kind === "broadcast") parts.push("broadcast from the trainer");
    else if (w.kind !== "full") parts.push(w.kind);
    if (w.version !== null && w.version !== undefined) parts.push(`version ${w.version}`);
    return (parts.join(", ") || "base weights") + (w.path ? ` at ${w.path}` : "")
      + (w.digest ? ` (digest ${w.digest.slice(0, 12)})` : "");
  },
};

export function badge(text, kind = "") {
  return h("span", { className: `badge ${kind}` }, text);
}

export function passBadge(passed, label) {
  if (passed === null || passed === undefined) return badge(`${label}: not evaluated`);
  return badge(`${label}: ${passed ? "pass" : "fail"}`, passed ? "pass" : "fail");
}

// A unified diff with added and removed lines marked (colour plus the +/- they keep).
export function diffBlock(diff, label) {
  if (diff === null || diff === undefined) return null;
  if (diff === "") return h("p", { className: "muted" }, "Same program as the previous turn.");
  const pre = h("pre", { className: "diff", "aria-label": label, "data-testid": "diff" });
  for (const line of diff.split("\n")) {
    const kind = line.startsWith("@@") ? "hunk"
      : line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : "";
    pre.append(h("span", { className: kind }, line), kind ? "" : "\n");
  }
  return pre;
}

export function card(label, value) {
  return h("div", { className: "card" },
    h("div", { className: "value" }, value), h("div", { className: "label" }, label));
}

export function definitionList(pairs) {
  return h("dl", { className: "meta" },
    pairs.flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// A table whose headers sort it (buttons, so the keyboard can sort too).
export function sortableTable({ columns, rows, caption, initialSort, id }) {
  let sortKey = initialSort?.key ?? null;
  let direction = initialSort?.direction ?? "ascending";
  const table = h("table", { id });
  if (caption) table.append(h("caption", { className: "muted" }, caption));
  const head = h("tr", {});
  const body = h("tbody", {});
  table.append(h("thead", {}, head), body);

  function draw() {
    head.replaceChildren(...columns.map((c) => {
      const th = h("th", { scope: "col", className: c.numeric ? "num" : "" });
      if (c.key === sortKey) th.setAttribute("aria-sort", direction);
      th.append(h("button", {
        type: "button",
        onclick: () => {
          direction = sortKey === c.key && direction === "ascending" ? "descending" : "ascending";
          sortKey = c.key;
          draw();
        },
      }, c.label));
      return th;
    }));
    const sorted = [...rows];
    if (sortKey) {
      const column = columns.find((c) => c.key === sortKey);
      const value = column.sortValue || ((row) => row[sortKey]);
      sorted.sort((a, b) => {
        const x = value(a), y = value(b);
        if (x === y) return 0;
        if (x === null || x === undefined) return 1;
        if (y === null || y === undefined) return -1;
        const order = x < y ? -1 : 1;
        return direction === "ascending" ? order : -order;
      });
    }
    body.replaceChildren(...sorted.map((row) => h("tr", {},
      columns.map((c) => h("td", { className: c.numeric ? "num" : "" },
        c.render ? c.render(row) : row[c.key] ?? "–")))));
    if (!sorted.length) {
      body.append(h("tr", {}, h("td", { colspan: columns.length, className: "muted" }, "Nothing to show.")));
    }
  }
  draw();
  return table;
}

export function labelled(labelText, control) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  return h("div", { className: "field" }, h("label", { for: id }, labelText), control);
}

export function select(id, options, value, onchange) {
  const el = h("select", { id, onchange: (e) => onchange(e.target.value) },
    options.map(([v, text]) => h("option", { value: v }, text)));
  el.value = value;
  return el;
}

// A run's turns found by filters: a verdict (on any, the public or the hidden tests), the
// turn, a problem id substring, a response substring, hidden pass, and a range of one reward component. Each
// row links to its trajectory at that turn, and each verdict to that test's input,
// expected output, actual output and error.

import { api } from "./api.js";
import { setQuery } from "./route.js";
import { fmt, h, labelled, passBadge, select } from "./dom.js";

const VERDICTS = ["accepted", "wrong_answer", "runtime_error", "time_limit", "memory_limit", "output_limit", "sandbox_error", "skipped"];
const COMPONENTS = ["total", "total_before_clip", "validation_reward", "pass_rate", "prev_best", "correctness", "improvement", "format", "tests_passed", "think_tokens", "answer_tokens"];
const FIELDS = ["verdict", "tests", "turn", "problem", "text", "hidden_passed", "component", "min", "max", "offset"];
const PAGE = 100;

// The trajectory page at one turn, with one test's details open (null: none).
export function turnHref(runId, externalId, sample, turn, test = null) {
  const query = new URLSearchParams({ sample: String(sample), turn: String(turn) });
  if (test) query.set("test", `${test.kind}-${test.index}`);
  return `#/runs/${runId}/problems/${encodeURIComponent(externalId)}?${query}`;
}

// Verdict badges, each a link to its test's details.
export function verdictLinks(kind, verdicts, href) {
  if (!verdicts) return h("span", { className: "muted" }, `${kind}: not evaluated`);
  return h("div", { className: "verdict-row" }, h("span", { className: "muted" }, `${kind}: `),
    h("ul", { className: "verdicts", "aria-label": `${kind} verdicts` },
      verdicts.map((v, i) => h("li", {}, h("a", {
        href: href({ kind, index: i }), className: `badge ${v === "accepted" ? "pass" : "fail"}`,
        "aria-label": `${kind} test ${i + 1}: ${v}`, "data-verdict": `${kind}-${i}`,
      }, `#${i + 1} ${v}`)))));
}

export async function turnsPage(runId, query) {
  const state = Object.fromEntries(FIELDS.map((k) => [k, query.get(k) ?? ""]));
  const params = { ...state, offset: state.offset || undefined, limit: PAGE };
  if (!state.component) { params.min = undefined; params.max = undefined; }
  const [run, page] = await Promise.all([api.run(runId), api.turns(runId, params)]);
  const inputs = {
    problem: h("input", { type: "search", id: "filter-problem", value: state.problem }),
    text: h("input", { type: "search", id: "filter-text", value: state.text }),
    min: h("input", { type: "text", inputmode: "decimal", id: "filter-min", value: state.min, size: 6 }),
    max: h("input", { type: "text", inputmode: "decimal", id: "filter-max", value: state.max, size: 6 }),
  };
  const selects = {
    verdict: select("filter-verdict", [["", "any"], ...VERDICTS.map((v) => [v, v])], state.verdict, () => {}),
    tests: select("filter-tests", [["any", "public or hidden"], ["public", "public"], ["hidden", "hidden"]], state.tests || "any", () => {}),
    turn: select("filter-turn", [["", "any"], ...Array.from({ length: Number(run.params.turns ?? 0) + 1 }, (_, t) => [String(t), `turn ${t}`])], state.turn, () => {}),
    hidden_passed: select("filter-hidden", [["", "any"], ["true", "passes"], ["false", "fails"]], state.hidden_passed, () => {}),
    component: select("filter-component", [["", "none"], ...COMPONENTS.map((c) => [c, c])], state.component, () => {}),
  };
  const form = h("form", {
    className: "filters", "aria-label": "turn filters",
    onsubmit: (e) => {
      e.preventDefault();
      const controls = { ...selects, ...inputs };
      const values = {};  // in FIELDS' order, so an address reads the same however it was made
      for (const k of FIELDS) if (controls[k]) values[k] = controls[k].value.trim();
      if (values.tests === "any") values.tests = "";
      setQuery(values);
    },
  },
  labelled("Verdict", selects.verdict), labelled("On tests", selects.tests), labelled("Turn", selects.turn),
  labelled("Problem contains", inputs.problem), labelled("Response contains", inputs.text),
  labelled("Hidden tests", selects.hidden_passed),
  labelled("Reward component", selects.component), labelled("at least", inputs.min), labelled("at most", inputs.max),
  h("button", { type: "submit", className: "primary", id: "filter-submit" }, "Filter"));

  const offset = Number(state.offset || 0);
  const rows = page.items.map((t) => {
    const href = (test) => turnHref(runId, t.external_id, t.sample_index, t.turn_index, test);
    return h("tr", { "data-turn-id": t.turn_id },
      h("td", {}, h("a", { href: href(null) }, t.external_id)),
      h("td", { className: "num" }, t.sample_index),
      h("td", { className: "num" }, t.turn_index),
      h("td", {}, verdictLinks("public", t.public_verdicts, href)),
      h("td", {}, verdictLinks("hidden", t.hidden_verdicts, href)),
      h("td", {}, passBadge(t.hidden_passed, "hidden")),
      h("td", { className: "num", "data-testid": "reward" }, fmt.num(t.reward?.total)),
      state.component && state.component !== "total"
        ? h("td", { className: "num", "data-testid": "component" }, fmt.num(t.reward?.[state.component])) : null);
  });
  const pager = h("p", { className: "muted" }, `${page.total} turn(s) match; showing ${page.total ? offset + 1 : 0}–${offset + page.items.length}. `,
    offset > 0 ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); setQuery({ ...state, offset: String(Math.max(0, offset - PAGE)) }); } }, "previous page") : null,
    " ",
    offset + page.items.length < page.total ? h("a", { href: "#", onclick: (e) => { e.preventDefault(); setQuery({ ...state, offset: String(offset + PAGE) }); } }, "next page") : null);
  return {
    title: `Turns of run #${runId}`,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: `#/runs/${runId}` }, `Run #${runId}`), " › turns"),
      h("h1", {}, `Turns of run #${runId}`),
      h("p", {}, "Every filter given must match. A verdict filter finds turns with at least one test of that verdict; click a verdict for the test's input, expected and actual output and error."),
      form,
      pager,
      h("table", { id: "turns-table", "aria-label": "matching turns" },
        h("thead", {}, h("tr", {}, ["Problem", "Sample", "Turn", "Public verdicts", "Hidden verdicts", "Hidden", "Reward"].map((c) => h("th", { scope: "col" }, c)),
          state.component && state.component !== "total" ? h("th", { scope: "col" }, state.component) : null)),
        h("tbody", {}, rows.length ? rows : h("tr", {}, h("td", { colspan: 8, className: "muted" }, "No turn matches.")))),
    ],
  };
}

// Two runs over the same dataset: Pass@1 per turn of both overlaid, how many problems run
// B fixed, broke or left unchanged at each turn, and per problem each run's Pass@1 per
// turn with links to both runs' trajectories. Run A is the baseline.

import { api, exportLinks } from "./api.js";
import { lineChart } from "./chart.js";
import { setQuery } from "./route.js";
import { badge, fmt, h, labelled, select, sortableTable } from "./dom.js";

const CHANGE_KIND = { fixed: "pass", broken: "fail", unchanged: "", within_noise: "", unevaluated: "" };
// Fixed and broken are changes beyond the noise of the problem's samples (95% interval of
// the difference excludes 0); smaller moves are "within noise" (docs/analysis.md).
const CHANGES = ["fixed", "broken", "within_noise", "unchanged", "unevaluated"];

// The comparison's own verdict (analysis.statistics.difference_verdict), in words.
function verdictText(verdict, problems) {
  if (!verdict) return "–";
  return verdict === "too_few_problems" ? `too few (${problems} problems)` : verdict.replace("_", " ");
}
const CHANGE_LABEL = { within_noise: "within noise" };

// How a run reads in a list: enough to tell "before training" from "after".
export function runLabel(run) {
  const versions = run.policy_versions ?? [];
  const policy = versions.length ? ` · policy v${versions.join(",")}` : "";
  const name = run.name ? ` ${run.name}` : "";
  return `#${run.id}${name} ${run.kind} · ${run.model}${policy} · ${run.template_name} · ${fmt.date(run.created_at)}`;
}

function problemHref(runId, externalId) {
  return `#/runs/${runId}/problems/${encodeURIComponent(externalId)}`;
}

// The form that picks two runs (on the runs list and on the comparison page).
export function comparePicker(runs, a, b) {
  const options = runs.map((r) => [String(r.id), runLabel(r)]);
  const first = select("compare-a", options, String(a ?? runs[1]?.id ?? runs[0]?.id ?? ""), () => {});
  const second = select("compare-b", options, String(b ?? runs[0]?.id ?? ""), () => {});
  return h("form", {
    className: "filters", "aria-label": "compare two runs",
    onsubmit: (e) => { e.preventDefault(); window.location.hash = `#/compare/${first.value}/${second.value}`; },
  }, labelled("Run A (baseline)", first), labelled("Run B", second),
  h("button", { type: "submit", className: "primary", id: "compare-submit" }, "Compare"));
}

export async function comparePage(runA, runB, query) {
  const [comparison, runs] = await Promise.all([api.compare(runA, runB), api.runs()]);
  const { run_a: a, run_b: b } = comparison;
  const turn = Math.min(Number(query.get("turn") ?? comparison.turns - 1), comparison.turns - 1);
  const change = query.get("change") ?? "";
  const points = (report) => (report.pass_at_1 ?? []).map((y, x) => ({
    x, y, low: report.pass_at_1_interval?.[x]?.[0], high: report.pass_at_1_interval?.[x]?.[1],
  }));
  const series = [
    { name: `A: run #${a.id} Pass@1`, points: points(comparison.report_a) },
    { name: `B: run #${b.id} Pass@1`, points: points(comparison.report_b) },
  ];
  const missing = [comparison.report_a, comparison.report_b].filter((r) => !r.pass_at_1);
  const chart = lineChart({
    id: "compare-chart", title: "Pass@1 against turn (hidden tests), both runs",
    series, xLabel: "turn", yLabel: "Pass@1", yMin: 0, yMax: 1, percent: true,
  });
  const countRows = comparison.counts.map((c, t) => h("tr", { "data-turn": t },
    h("th", { scope: "row" }, `turn ${t}`),
    h("td", { className: "num", "data-testid": `difference-${t}` }, fmt.difference(comparison.difference?.[t], comparison.difference_interval?.[t])),
    h("td", { "data-testid": `verdict-${t}` }, verdictText(comparison.verdict?.[t], comparison.paired_problems?.[t])),
    CHANGES.map((k) => h("td", { className: "num", "data-change": k }, c[k] ?? 0))));
  const shown = comparison.problems.filter((p) => !change || p.turns[turn]?.change === change);
  const table = sortableTable({
    id: "compare-table",
    caption: `Per problem: Pass@1 of A → B at every turn; the filter looks at turn ${turn}.`,
    initialSort: { key: "external_id", direction: "ascending" },
    columns: [
      { key: "external_id", label: "Problem" },
      { key: "difficulty", label: "Difficulty" },
      ...Array.from({ length: comparison.turns }, (_, t) => ({
        key: `turn-${t}`, label: `Turn ${t}`, numeric: true,
        sortValue: (p) => (p.turns[t].pass_b ?? -1) - (p.turns[t].pass_a ?? -1),
        render: (p) => h("span", {
          "data-testid": `cell-${p.external_id}-${t}`,
          title: p.turns[t].difference_interval ? `95% interval of the change: ${fmt.difference(p.turns[t].pass_b - p.turns[t].pass_a, p.turns[t].difference_interval)}` : null,
        },
        `${fmt.rate(p.turns[t].pass_a)} → ${fmt.rate(p.turns[t].pass_b)} `,
        badge(CHANGE_LABEL[p.turns[t].change] ?? p.turns[t].change, CHANGE_KIND[p.turns[t].change])),
      })),
      {
        key: "links", label: "Trajectories",
        render: (p) => h("span", {},
          h("a", { href: problemHref(a.id, p.external_id) }, `A #${a.id}`), " · ",
          h("a", { href: problemHref(b.id, p.external_id) }, `B #${b.id}`)),
      },
    ],
    rows: shown,
  });
  const update = (changes) => setQuery({ turn: String(turn), change, ...changes });
  return {
    title: `Run #${a.id} vs run #${b.id}`,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/runs" }, "Runs"), " › compare"),
      h("h1", {}, `Run #${a.id} vs run #${b.id}`),
      comparePicker(runs, a.id, b.id),
      h("dl", { className: "meta" },
        h("dt", {}, "A (baseline)"), h("dd", {}, h("a", { href: `#/runs/${a.id}` }, runLabel(a))),
        h("dt", {}, "B"), h("dd", {}, h("a", { href: `#/runs/${b.id}` }, runLabel(b))),
        h("dt", {}, "dataset"), h("dd", {}, a.dataset)),
      missing.map((r) => h("p", { className: "note warn", role: "status", "data-testid": `unevaluated-${r.run_id}` },
        `Run #${r.run_id} has no hidden-test results yet, so there is nothing to compare: \`${r.unevaluated}\` measures them.`)),
      chart,
      h("h2", {}, "Problems fixed and broken per turn"),
      h("p", { className: "muted" }, "Pass@1 of B − A in percentage points with its 95% interval (bootstrap over the shared problems), and what it says: better or worse when the interval excludes 0, never over fewer than 10 shared problems. "
        + "A problem counts as fixed or broken only when its change is larger than the noise of its samples; smaller moves are within noise."),
      h("table", { id: "change-counts", "aria-label": "problems per change and turn" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Turn"), h("th", { scope: "col", className: "num" }, "B − A [95%]"), h("th", { scope: "col" }, "Verdict"),
          CHANGES.map((k) => h("th", { scope: "col", className: "num" }, CHANGE_LABEL[k] ?? k)))),
        h("tbody", {}, countRows)),
      h("h2", {}, "Per problem"),
      h("p", {}, exportLinks(`/v1/exports/runs/${a.id}/compare/${b.id}`, {}, `compare-${a.id}-${b.id}`)),
      h("div", { className: "filters" },
        labelled("At turn", select("turn-filter",
          Array.from({ length: comparison.turns }, (_, t) => [String(t), `turn ${t}`]), String(turn),
          (v) => update({ turn: v }))),
        labelled("Change", select("change-filter",
          [["", "any"], ...CHANGES.map((k) => [k, CHANGE_LABEL[k] ?? k])],
          change, (v) => update({ change: v }))),
        h("p", { className: "muted" }, `${shown.length} of ${comparison.problems.length} problems`)),
      table,
    ],
  };
}

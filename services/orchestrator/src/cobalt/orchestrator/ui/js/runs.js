// Runs: the list (live while any runs), and one run: Pass@1 / pass@k against turn with
// other runs overlaid, and the per-problem table (sortable, filterable).

import { api } from "./api.js";
import { lineChart } from "./chart.js";
import { setQuery } from "./route.js";
import { card, fmt, h, labelled, select, sortableTable, badge } from "./dom.js";
import { comparePicker } from "./compare.js";
import { exportLinks } from "./api.js";
import { ids, pickForm, runName, tagBadges } from "./results.js";

const ACTIVE = new Set(["pending", "running"]);

function progress(run) {
  const done = (run.trajectories_by_status.finished ?? 0) + (run.trajectories_by_status.failed ?? 0);
  return { done, total: run.total_trajectories };
}

function statusBadge(status) {
  const kind = { finished: "pass", failed: "fail", cancelled: "fail", running: "warn", interrupted: "warn" }[status] ?? "";
  return badge(status, kind);
}

export async function runsPage(query) {
  const runs = await api.runs();
  // Key figures of each run: its stored report (cheap: no program runs).
  const reports = await Promise.all(runs.map((run) => api.report(run.id, [], false).catch(() => null)));
  const rows = runs.map((run, i) => {
    const report = reports[i];
    const rates = report?.problems ? report.pass_at_1 : [];
    return { ...run, ...progress(run), first: rates?.[0] ?? null, last: rates?.at(-1) ?? null, problems: report?.problems ?? 0 };
  });
  // Only evaluated runs can be compared (the comparison page says which dataset they share).
  const evaluated = rows.filter((r) => r.problems > 0);
  const table = sortableTable({
    caption: "Every run, newest first. Pass@1 is on the hidden tests of the problems evaluated so far.",
    initialSort: { key: "id", direction: "descending" },
    columns: [
      { key: "id", label: "Run", numeric: true, render: (r) => h("a", { href: `#/runs/${r.id}` }, `#${r.id}`) },
      { key: "name", label: "Name", render: (r) => h("span", {}, r.name ? h("span", { className: "run-name" }, r.name) : "–", " ", tagBadges(r.tags)) },
      { key: "status", label: "Status", render: (r) => statusBadge(r.status) },
      { key: "kind", label: "Kind" },
      { key: "dataset", label: "Dataset" },
      { key: "model", label: "Model" },
      {
        key: "policy", label: "Policy version",
        sortValue: (r) => r.policy_versions.at(-1) ?? -1,
        render: (r) => h("span", { "data-testid": `policy-${r.id}` }, r.policy_versions.length ? `v${r.policy_versions.join(", v")}` : "–"),
      },
      { key: "template_name", label: "Template" },
      {
        key: "done", label: "Progress", numeric: true,
        sortValue: (r) => r.done / Math.max(r.total, 1),
        render: (r) => h("span", {},
          h("progress", { max: Math.max(r.total, 1), value: r.done, "aria-label": `run ${r.id} progress` }),
          ` ${r.done}/${r.total}`),
      },
      { key: "turns_written", label: "Turns written", numeric: true, render: (r) => h("span", { "data-testid": `turns-${r.id}` }, r.turns_written) },
      { key: "first", label: "Pass@1 turn 0", numeric: true, render: (r) => fmt.rate(r.first) },
      { key: "last", label: "Pass@1 last turn", numeric: true, render: (r) => fmt.rate(r.last) },
      { key: "created_at", label: "Created", render: (r) => fmt.date(r.created_at) },
    ],
    rows,
  });
  return {
    title: "Runs",
    live: runs.some((run) => ACTIVE.has(run.status)),
    nodes: [
      h("h1", {}, "Runs"),
      evaluated.length > 1 ? [h("h2", {}, "Compare two runs"), comparePicker(evaluated),
        h("h2", {}, "Several runs side by side"),
        pickForm({
          id: "table-runs", legend: "Evaluated runs", items: evaluated, chosen: ids(query.get("pick")),
          onchange: (picked) => setQuery({ pick: picked.join(",") }),
          label: (r) => `${runName(r)} ${r.kind} ${r.model} (${r.dataset})`,
          submit: "Show the table", onsubmit: (picked) => { window.location.hash = `#/table?runs=${picked.join(",")}`; },
        })] : null,
      runs.length ? table : h("p", {}, "No runs yet: `cobalt run sample ...` starts one."),
    ],
  };
}

// Pass@1 with its 95% interval (a band); nothing at all for a run not evaluated yet.
function reportSeries(runId, report, withK) {
  if (!report.pass_at_1) return [];
  const turns = report.pass_at_1.map((_, t) => t);
  const interval = report.pass_at_1_interval ?? [];
  const series = [{
    name: `run #${runId} Pass@1`,
    points: turns.map((t) => ({ x: t, y: report.pass_at_1[t], low: interval[t]?.[0], high: interval[t]?.[1] })),
  }];
  if (withK) {
    for (const [k, values] of Object.entries(report.pass_at_k)) {
      series.push({ name: `run #${runId} pass@${k}`, points: values.map((y, t) => ({ x: t, y })) });
    }
  }
  return series;
}

// Whether `other` shares `run`'s turn 0 and has nothing else: a refine run against the
// sample run it started from (or the reverse) compares the run with its own turn 0.
function ownTurnZero(run, other) {
  return (run.parent_run_id === other.id && !(other.params.turns > 0))
    || (other.parent_run_id === run.id && !(run.params.turns > 0));
}

export async function runPage(runId, query) {
  const [run, report, problems, allRuns] = await Promise.all([
    api.run(runId), api.report(runId), api.runProblems(runId), api.runs(),
  ]);
  // Comparable runs: the same dataset, evaluated, and not this run's own turn 0.
  const candidates = allRuns.filter((r) => r.id !== runId && r.dataset === run.dataset && !ownTurnZero(run, r));
  // Intervals (a bootstrap each) only for the runs overlaid on the chart.
  const compareIds = ids(query.get("compare"));
  const candidateReports = await Promise.all(candidates.map((r) => api.report(r.id, [], compareIds.includes(r.id)).catch(() => null)));
  const comparable = report.pass_at_1 ? candidates.filter((_, i) => candidateReports[i]?.pass_at_1) : [];
  const reportOf = new Map(candidates.map((r, i) => [r.id, candidateReports[i]]));
  const compare = (query.get("compare") ?? "").split(",").filter(Boolean).map(Number)
    .filter((id) => comparable.some((r) => r.id === id));
  const others = compare.map((id) => reportOf.get(id));
  const difficulty = query.get("difficulty") ?? "";
  const outcome = query.get("outcome") ?? "";
  const state = { compare, difficulty, outcome };
  const update = (change) => {
    Object.assign(state, change);
    setQuery({ compare: state.compare.join(","), difficulty: state.difficulty, outcome: state.outcome });
  };

  const series = [
    ...reportSeries(runId, report, true),
    ...others.flatMap((other, i) => (other ? reportSeries(compare[i], other, false) : [])),
  ];
  const chart = lineChart({
    id: "pass-chart", title: "Pass@1 and pass@k against turn (hidden tests)",
    series, xLabel: "turn", yLabel: "pass rate", yMin: 0, yMax: 1, percent: true,
  });
  const rewardChart = report.mean_reward
    ? lineChart({
      id: "reward-chart", title: "Mean Cobalt reward against turn",
      series: [{ name: `run #${runId}`, points: report.mean_reward.map((y, x) => ({ x, y })) }],
      xLabel: "turn", yLabel: "reward",
    })
    : null;

  const pickers = comparable.length ? h("fieldset", {}, h("legend", {}, "Overlay other evaluated runs of this dataset"),
    comparable.map((r) => {
      const box = h("input", {
        type: "checkbox", id: `compare-${r.id}`, checked: compare.includes(r.id),
        onchange: (e) => update({ compare: e.target.checked ? [...compare, r.id] : compare.filter((id) => id !== r.id) }),
      });
      return h("span", {}, box, h("label", { for: `compare-${r.id}` }, ` #${r.id} ${r.name ?? ""} ${r.kind} ${r.model} `));
    })) : null;
  // Problem by problem against another comparable run (this one as run B).
  const compareLinks = comparable.length
    ? h("p", { id: "compare-links" }, "Which problems this run fixed or broke against: ",
      comparable.map((r, i) => [i ? " · " : "", h("a", { href: `#/compare/${r.id}/${runId}` }, `run #${r.id}`)]))
    : null;
  const unevaluated = report.pass_at_1 ? null
    : h("p", { className: "note", role: "status", "data-testid": "unevaluated-note" },
      `Not evaluated yet: no problem has hidden-test results, so there is no Pass@1 and nothing to compare. \`${report.unevaluated}\` measures it.`);
  const intervals = report.pass_at_1_interval ?? [];

  const difficulties = [...new Set(problems.items.map((p) => p.difficulty).filter(Boolean))].sort();
  const shown = problems.items.filter((p) =>
    (!difficulty || p.difficulty === difficulty) && (!outcome || p.outcome === outcome));
  const filters = h("div", { className: "filters" },
    labelled("Difficulty", select("difficulty-filter", [["", "any"], ...difficulties.map((d) => [d, d])], difficulty, (v) => update({ difficulty: v }))),
    labelled("Outcome", select("outcome-filter", [["", "any"], ["solved", "solved"], ["partial", "partial"], ["unsolved", "unsolved"], ["unevaluated", "unevaluated"]], outcome, (v) => update({ outcome: v }))),
    h("p", { className: "muted" }, `${shown.length} of ${problems.total} problems`));
  const outcomeKind = { solved: "pass", partial: "warn", unsolved: "fail" };
  const table = sortableTable({
    id: "problems-table",
    caption: "Per problem: hidden-test pass rate of the trajectories' first and last programs.",
    initialSort: { key: "external_id", direction: "ascending" },
    columns: [
      { key: "external_id", label: "Problem", render: (p) => h("a", { href: `#/runs/${runId}/problems/${encodeURIComponent(p.external_id)}` }, p.external_id) },
      { key: "difficulty", label: "Difficulty" },
      { key: "outcome", label: "Outcome", render: (p) => badge(p.outcome, outcomeKind[p.outcome] ?? "") },
      { key: "samples", label: "Samples", numeric: true },
      { key: "turns", label: "Turns", numeric: true },
      { key: "hidden_pass_first", label: "Pass turn 0 [95%]", numeric: true, render: (p) => fmt.rateInterval(p.hidden_pass_first, p.hidden_pass_first_interval) },
      { key: "hidden_pass_last", label: "Pass last [95%]", numeric: true, render: (p) => fmt.rateInterval(p.hidden_pass_last, p.hidden_pass_last_interval) },
      { key: "public_pass_last", label: "Public pass last", numeric: true, render: (p) => fmt.rate(p.public_pass_last) },
      { key: "mean_reward", label: "Mean reward", numeric: true, render: (p) => fmt.num(p.mean_reward) },
      { key: "flagged", label: "Flagged", numeric: true, render: (p) => (p.flagged ? badge(String(p.flagged), "warn") : "0") },
      { key: "failed", label: "Failed", numeric: true },
    ],
    rows: shown,
  });
  const { done, total } = progress(run);
  return {
    title: `Run ${runName(run)}`,
    live: ACTIVE.has(run.status),
    nodes: [
      h("h1", {}, `Run ${runName(run)} `, statusBadge(run.status)),
      run.tags.length || run.notes || run.parent_run_id
        ? h("div", { className: "run-labels" },
          tagBadges(run.tags),
          run.parent_run_id
            ? h("p", { "data-testid": "parent-run" }, "Continues ", h("a", { href: `#/runs/${run.parent_run_id}` }, `run #${run.parent_run_id}`), " (its turn 0 is that run's)")
            : null,
          run.notes ? h("p", { className: "muted", "data-testid": "run-notes" }, run.notes) : null)
        : null,
      h("div", { className: "cards" },
        card("progress", `${done}/${total}`), card("turns written", String(run.turns_written)),
        card("problems evaluated", String(report.problems)),
        card("Pass@1 turn 0 [95%]", fmt.rateInterval(report.pass_at_1?.[0], intervals[0])),
        card("Pass@1 last turn [95%]", fmt.rateInterval(report.pass_at_1?.at(-1), intervals.at(-1))),
        card("failed trajectories", String(report.failed_trajectories)),
        card("reward format rules", run.params.reward_format ?? "reasoning"),
        report.turns_without_feedback
          ? card("feedback turns without a public test", String(report.turns_without_feedback)) : null),
      h("p", { "data-testid": "run-policy" }, h("strong", {}, "Policy: "), fmt.weights(run.policy),
        run.policy?.job != null
          ? [" · ", h("a", { href: `#/training/${run.policy.job}` }, `training job #${run.policy.job}`)] : null),
      h("p", {}, h("a", { href: `#/runs/${runId}/hacking` }, "Reward-hacking cases of this run"),
        " · ", h("a", { href: `#/runs/${runId}/trajectories` }, "Filter and search its trajectories")),
      h("details", {}, h("summary", {}, "Settings"), h("pre", {}, JSON.stringify({
        kind: run.kind, dataset: run.dataset, model: run.model, base_url: run.base_url,
        parent_run_id: run.parent_run_id, template: run.template_name, params: run.params,
        started_at: run.started_at, finished_at: run.finished_at, error: run.error,
      }, null, 2))),
      h("h2", {}, "Pass rate by turn"),
      unevaluated, pickers, chart, rewardChart, compareLinks,
      h("h2", {}, "Problems"), filters,
      h("p", {}, exportLinks(`/v1/exports/runs/${runId}/problems`, {}, `run-${runId}-problems`)),
      h("div", { className: "table-scroll" }, table),
    ],
  };
}

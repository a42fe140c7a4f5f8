// Results side by side: the multi-run table (#/table?runs=1,2,3: Pass@1 at turn 0 and at
// the last turn with 95% intervals, per difficulty where the dataset has difficulties) and
// training jobs overlaid (#/training/compare?jobs=1,2: each metric, one line per job).

import { api, exportLinks } from "./api.js";
import { lineChart } from "./chart.js";
import { setQuery } from "./route.js";
import { badge, fmt, h, sortableTable } from "./dom.js";

export const ids = (text) => [...new Set((text ?? "").split(",").filter(Boolean).map(Number).filter(Number.isInteger))];

// Checkboxes that pick items for a view (ids in ascending order), with its submit button;
// `onchange` keeps the picks somewhere that survives a live page's re-render.
export function pickForm({ id, legend, items, label, chosen, submit, onsubmit, onchange }) {
  const picked = () => boxes.filter((b) => b.checked).map((b) => Number(b.value)).sort((x, y) => x - y);
  const boxes = items.map((item) => h("input", {
    type: "checkbox", id: `${id}-${item.id}`, value: String(item.id), checked: chosen.includes(item.id),
    onchange: onchange ? () => onchange(picked()) : null,
  }));
  return h("form", {
    id, className: "filters", "aria-label": legend,
    onsubmit: (e) => { e.preventDefault(); onsubmit(picked()); },
  }, h("fieldset", {}, h("legend", {}, legend),
    items.map((item, i) => h("span", {}, boxes[i], h("label", { for: `${id}-${item.id}` }, ` ${label(item)} `)))),
  h("button", { type: "submit", className: "primary", id: `${id}-submit` }, submit));
}

export function runName(run) {
  return run.name ? `#${run.id} ${run.name}` : `#${run.id}`;
}

export function tagBadges(tags) {
  return tags?.length ? h("span", { className: "tags" }, tags.map((t) => badge(`#${t}`))) : null;
}

export async function tablePage(query) {
  const chosen = ids(query.get("runs"));
  const runs = await api.runs();
  const table = chosen.length ? await api.runTable(chosen) : null;
  const picker = pickForm({
    id: "table-runs", legend: "Runs in the table", items: runs, chosen,
    label: (r) => `${runName(r)} ${r.kind} ${r.model} (${r.dataset})`,
    submit: "Show the table", onsubmit: (picked) => setQuery({ runs: picked.join(",") }),
  });
  const nodes = [h("h1", {}, "Runs side by side"), picker];
  if (!table) {
    nodes.push(h("p", {}, "Pick two or more runs: their Pass@1 with 95% intervals, per difficulty where the dataset has one."));
    return { title: "Runs side by side", nodes };
  }
  const levels = table.difficulties;
  nodes.push(
    table.datasets.length > 1
      ? h("p", { className: "note warn", role: "status" }, `These runs are over different datasets (${table.datasets.join(", ")}): their rates are not over the same problems.`)
      : null,
    table.rows.filter((r) => r.unevaluated).map((r) => h("p", { className: "note warn", role: "status", "data-testid": `unevaluated-${r.run.id}` },
      `Run #${r.run.id} is not evaluated yet: \`${r.unevaluated}\` measures it.`)),
    h("div", { className: "table-scroll" }, sortableTable({
      id: "runs-table",
      caption: "Pass@1 on the hidden tests [95% interval: bootstrap over problems and samples]; per difficulty at the last turn.",
      columns: [
        { key: "run", label: "Run", sortValue: (r) => r.run.id, render: (r) => h("span", {}, h("a", { href: `#/runs/${r.run.id}` }, runName(r.run)), " ", tagBadges(r.run.tags)) },
        { key: "dataset", label: "Dataset", sortValue: (r) => r.run.dataset, render: (r) => r.run.dataset },
        { key: "model", label: "Model", sortValue: (r) => r.run.model, render: (r) => `${r.run.model}${r.run.policy_versions.length ? ` (v${r.run.policy_versions.at(-1)})` : ""}` },
        { key: "problems", label: "Problems × n", numeric: true, render: (r) => `${r.problems} × ${r.samples}` },
        { key: "pass_at_1_first", label: "Pass@1 turn 0", numeric: true, render: (r) => h("span", { "data-testid": `first-${r.run.id}` }, fmt.rateInterval(r.pass_at_1_first, r.pass_at_1_first_interval)) },
        { key: "pass_at_1_last", label: "Pass@1 last turn", numeric: true, render: (r) => h("span", { "data-testid": `last-${r.run.id}` }, fmt.rateInterval(r.pass_at_1_last, r.pass_at_1_last_interval)) },
        ...levels.map((level) => ({
          key: `level-${level}`, label: `${level} (last)`, numeric: true,
          sortValue: (r) => r.by_difficulty[level]?.pass_at_1 ?? null,
          render: (r) => {
            const cell = r.by_difficulty[level];
            return h("span", { "data-testid": `level-${r.run.id}-${level}` },
              cell ? `${fmt.rateInterval(cell.pass_at_1, cell.interval)} (${cell.problems})` : "–");
          },
        })),
      ],
      rows: table.rows,
    })),
    h("p", {}, exportLinks("/v1/exports/tables/runs", { run: chosen }, "runs-table")),
  );
  return { title: "Runs side by side", nodes };
}

const OVERLAID = [
  ["reward_mean", "Mean reward"], ["pass_rate", "Pass rate"], ["ppo_kl", "KL divergence"],
  ["entropy", "Entropy"], ["pg_clipfrac", "Clip fraction"],
];

export async function trainingOverlayPage(query) {
  const chosen = ids(query.get("jobs"));
  const jobs = await api.trainingJobs();
  const details = await Promise.all(chosen.map((id) => api.trainingJob(id)));
  const picker = pickForm({
    id: "overlay-jobs", legend: "Jobs to overlay", items: jobs.items, chosen,
    label: (j) => `#${j.id} ${j.name} (${j.model})`,
    submit: "Overlay", onsubmit: (picked) => setQuery({ jobs: picked.join(",") }),
  });
  const charts = OVERLAID.map(([key, title]) => {
    const series = details.map((job) => ({
      name: `#${job.id} ${job.name}`,
      points: job.steps.map((s) => ({ x: s.step, y: typeof s.metrics[key] === "number" ? s.metrics[key] : null })),
    })).filter((one) => one.points.some((p) => p.y !== null));
    return series.length ? lineChart({ id: `overlay-${key}`, title, series, xLabel: "step", yLabel: key.replaceAll("_", " ") }) : null;
  });
  return {
    title: "Training jobs overlaid",
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/training" }, "Training"), " › overlay"),
      h("h1", {}, "Training jobs overlaid"),
      picker,
      details.length ? h("div", { className: "grid" }, charts) : h("p", {}, "Pick the jobs whose curves to overlay."),
      details.map((job) => h("p", {}, `#${job.id} ${job.name} step metrics: `, exportLinks(`/v1/exports/training/jobs/${job.id}/metrics`, {}, `training-job-${job.id}-metrics`))),
    ],
  };
}

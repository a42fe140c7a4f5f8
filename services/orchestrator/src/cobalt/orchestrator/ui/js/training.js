// Training jobs: reward, pass rate, KL, clip fraction, entropy and phase times against
// step, the policy version and the groups dropped as stale, from the job's reported step
// metrics; the groups of a step with every sample, its reward and its advantage; and the
// job's liveness (a waiting job whose trainer went silent reads "stale", not "running").

import { api, exportLinks } from "./api.js";
import { ids, pickForm } from "./results.js";
import { lineChart } from "./chart.js";
import { setQuery } from "./route.js";
import { badge, card, definitionList, fmt, h, labelled, select, sortableTable } from "./dom.js";

const ACTIVE = new Set(["pending", "running"]);
// The step table's columns, most important first; metrics not named here follow in
// alphabetical order, and only the first few are shown until "all metrics" is ticked, so
// the table fits the page.
const METRIC_ORDER = [
  "reward_mean", "pass_rate", "solved_fraction", "policy_version", "ppo_kl", "kl_ref", "entropy",
  "pg_clipfrac", "pg_clipfrac_lower", "grad_norm", "dropped_stale", "max_policy_lag",
  "masked_samples", "dropped_unjudged", "informative_groups", "dropped_zero_variance", "refill_rounds",
  "mismatch_kl_k3", "mismatch_log_ratio_abs_max",
  "generate_seconds", "execute_seconds", "score_seconds", "wait_seconds", "train_seconds",
  "checkpoint_seconds", "sync_seconds",
];
const SHOWN_METRICS = 8;

export function orderedMetrics(names) {
  const rank = (name) => (METRIC_ORDER.includes(name) ? METRIC_ORDER.indexOf(name) : METRIC_ORDER.length);
  return [...names].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
}
const CHARTS = [
  ["reward-chart", "Reward and pass rate", "value", ["reward_mean", "pass_rate", "solved_fraction"]],
  ["kl-chart", "KL divergence", "KL", ["ppo_kl", "kl_ref"]],
  ["clip-chart", "Clip fraction", "fraction", ["pg_clipfrac", "pg_clipfrac_lower"]],
  ["entropy-chart", "Entropy", "nats per token", ["entropy"]],
  ["phase-chart", "Phase times", "seconds",
    ["generate_seconds", "execute_seconds", "score_seconds", "wait_seconds", "train_seconds", "checkpoint_seconds", "sync_seconds"]],
  ["stale-chart", "Policy version and dropped stale groups", "count", ["policy_version", "dropped_stale", "max_policy_lag"]],
  ["masked-chart", "Sandbox errors: masked responses and dropped groups", "count", ["masked_samples", "dropped_unjudged"]],
  ["mismatch-chart", "Sampler vs trainer (recompute_old_log_probs)", "value",
    ["mismatch_log_ratio_mean", "mismatch_kl_k3", "mismatch_truncated_fraction", "mismatch_masked_fraction"]],
  ["informative-chart", "Informative groups: trained, dropped for zero variance, refill rounds", "count",
    ["informative_groups", "dropped_zero_variance", "refill_rounds"]],
];

// The status, and when a waiting job has gone silent, how long since it last reported.
function statusBadges(job) {
  const kind = job.status === "failed" ? "fail" : job.status === "finished" ? "pass" : "";
  if (job.liveness !== "stale") return badge(job.status, kind);
  const since = job.last_activity_at ? ` since ${fmt.date(job.last_activity_at)}` : "";
  return h("span", { "data-testid": `liveness-${job.id}` }, badge(job.status, kind), " ",
    badge(`stale: no report${since}`, "warn"));
}

export async function trainingListPage(query) {
  const jobs = await api.trainingJobs();
  const overlay = jobs.items.length > 1
    ? [h("h2", {}, "Overlay jobs' curves"), pickForm({
      id: "overlay-jobs", legend: "Jobs to overlay", items: jobs.items, chosen: ids(query.get("pick")),
      onchange: (picked) => setQuery({ pick: picked.join(",") }),
      label: (j) => `#${j.id} ${j.name}`, submit: "Overlay",
      onsubmit: (picked) => { window.location.hash = `#/training/compare?jobs=${picked.join(",")}`; },
    })]
    : null;
  return {
    title: "Training",
    live: jobs.items.some((job) => ACTIVE.has(job.status) && job.liveness === "live"),
    nodes: [
      h("h1", {}, "Training jobs"),
      overlay,
      sortableTable({
        initialSort: { key: "id", direction: "descending" },
        columns: [
          { key: "id", label: "Job", numeric: true, render: (j) => h("a", { href: `#/training/${j.id}` }, `#${j.id} ${j.name}`) },
          { key: "status", label: "Status", render: statusBadges },
          { key: "last_activity_at", label: "Last report", render: (j) => fmt.date(j.last_activity_at) },
          { key: "mode", label: "Mode" },
          { key: "contexts", label: "Contexts" },
          { key: "step", label: "Step / budget", numeric: true, render: (j) => j.step_budget == null ? String(j.step) : `${j.step} / ${j.step_budget}` },
          { key: "policy_version", label: "Policy version", numeric: true },
          { key: "stale", label: "Stale groups", numeric: true, sortValue: (j) => j.groups.stale ?? 0, render: (j) => j.groups.stale ?? 0 },
          { key: "created_at", label: "Created", render: (j) => fmt.date(j.created_at) },
        ],
        rows: jobs.items,
      }),
    ],
  };
}

function groupSection(group) {
  const title = `Group ${group.id}: ${group.problem}`;
  const phases = Object.entries(group.phase_seconds).map(([k, v]) => `${k} ${fmt.num(v, 1)} s`).join(" · ");
  return h("section", { className: "turn", "aria-label": title, "data-group": group.id },
    h("h3", {}, title, " ", badge(group.status, group.status === "consumed" ? "pass" : "warn")),
    h("p", { className: "muted" },
      `${group.context_key} · round ${group.round} · sampled by policy v${group.policy_version} · `
      + `reward mean ${fmt.num(group.reward_mean)} ± ${fmt.num(group.reward_std)}${phases ? ` · ${phases}` : ""}`),
    h("table", { "aria-label": `samples of group ${group.id}` },
      h("thead", {}, h("tr", {}, ["Sample", "Turn", "Reward", "Advantage", "Pass rate", "Tokens", "Verdicts", "Response"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, group.samples.map((s) => h("tr", { "data-sample": `${s.sample_index}-${s.turn}` },
        h("td", { className: "num" }, s.sample_index), h("td", { className: "num" }, s.turn),
        h("td", { className: "num", "data-testid": "reward" }, fmt.num(s.reward)),
        h("td", { className: "num", "data-testid": "advantage" }, fmt.num(s.advantage)),
        h("td", { className: "num" }, fmt.rate(s.pass_rate)),
        h("td", { className: "num" }, s.response_tokens),
        h("td", {}, h("ul", { className: "verdicts" }, s.verdicts.map((v) => h("li", {}, badge(v, v === "accepted" ? "pass" : "fail"))))),
        h("td", {}, h("details", {}, h("summary", {}, `${s.response.length} characters`), h("pre", {}, s.response))))))));
}

// Each reported step's published weights: where, whether still on disk, the line that
// serves them, and the runs whose recorded policy they are.
function checkpointsTable(job) {
  if (!job.checkpoints.length) return h("p", {}, "No step reported yet.");
  return h("div", { className: "table-scroll" }, h("table", { "data-testid": "checkpoints" },
    h("thead", {}, h("tr", {}, ["step", "version", "weights", "serve with", "runs evaluated"].map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, job.checkpoints.map((c) => h("tr", { "data-testid": `checkpoint-${c.step}` },
      h("td", { className: "num" }, c.step), h("td", { className: "num" }, c.policy_version),
      h("td", {}, c.weights ? fmt.weights(c.weights) : "not reported by the trainer",
        c.weights && !c.present ? h("span", { className: "muted" }, " (not on this machine: pruned, or the trainer's disk)") : null),
      h("td", {}, c.serve_command ? h("code", {}, c.serve_command)
        : c.weights ? h("span", { className: "muted" }, `a ${c.weights.kind}: no server starts from it alone`) : "–"),
      h("td", {}, c.runs.length ? c.runs.map((id, i) => [i ? ", " : "", h("a", { href: `#/runs/${id}` }, `#${id}`)]) : "none"))))));
}

export async function trainingJobPage(jobId, query) {
  const job = await api.trainingJob(jobId);
  const stepNumbers = job.steps.map((s) => s.step);
  const chosen = Number(query.get("step") ?? stepNumbers.at(-1) ?? 0);
  const groups = chosen ? await api.stepGroups(jobId, chosen) : { groups: [] };
  const stepPicker = labelled("Step", select("step-picker",
    stepNumbers.map((n) => [String(n), `step ${n}`]), String(chosen), (v) => setQuery({ step: v, metrics: query.get("metrics") ?? "" })));
  const steps = job.steps.map((s) => ({ ...s.metrics, step: s.step, policy_version: s.policy_version }));
  const charts = CHARTS.map(([id, title, yLabel, keys]) => {
    const present = keys.filter((k) => steps.some((s) => typeof s[k] === "number"));
    if (!present.length) return null;
    return lineChart({
      id, title, xLabel: "step", yLabel,
      series: present.map((k) => ({ name: k, points: steps.map((s) => ({ x: s.step, y: s[k] ?? null })) })),
    });
  });
  const last = steps.at(-1) ?? {};
  const metricNames = orderedMetrics(new Set(steps.flatMap((s) => Object.keys(s)).filter((k) => k !== "step")));
  const allMetrics = query.get("metrics") === "all";
  const shownMetrics = allMetrics ? metricNames : metricNames.slice(0, SHOWN_METRICS);
  const metricsToggle = metricNames.length > SHOWN_METRICS
    ? h("p", {}, h("input", {
      type: "checkbox", id: "all-metrics", checked: allMetrics,
      onchange: (e) => setQuery({ step: String(chosen), metrics: e.target.checked ? "all" : "" }),
    }), h("label", { for: "all-metrics" }, ` All ${metricNames.length} metrics (the ${SHOWN_METRICS} first by importance are shown)`))
    : null;
  return {
    title: `Training job ${job.name}`,
    live: ACTIVE.has(job.status) && job.liveness === "live",
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/training" }, "Training"), " › ", job.name),
      h("h1", {}, `Training job ${job.name} `, statusBadges(job)),
      job.liveness === "stale"
        ? h("p", { className: "note warn", role: "status", "data-testid": "stale-note" },
          `The job is ${job.status} but nothing has been reported since ${fmt.date(job.last_activity_at)}: its trainer has probably stopped. `
          + `Resume it with \`cobalt train resume ${job.id} && cobalt trainer serve --job ${job.id}\`, or stop it (\`cobalt train stop ${job.id}\`).`)
        : null,
      h("div", { className: "cards" },
        card(job.step_budget == null ? "step" : "step / budget", job.step_budget == null ? String(job.step) : `${job.step} / ${job.step_budget}`), card("policy version", String(job.policy_version)),
        card("last reward", fmt.num(last.reward_mean)), card("last pass rate", fmt.rate(last.pass_rate)),
        card("groups ready / consumed / stale", `${job.groups.ready ?? 0} / ${job.groups.consumed ?? 0} / ${job.groups.stale ?? 0}`)),
      definitionList([["mode", job.mode], ["contexts", job.contexts ?? "–"], ["model", job.model],
        ["last report", fmt.date(job.last_activity_at)], ["error", job.error ?? "none"]]),
      h("details", {}, h("summary", {}, "Settings"), h("pre", {}, JSON.stringify(job.params, null, 2))),
      h("h2", {}, "Metrics against step"),
      steps.length ? h("div", { className: "grid" }, charts) : h("p", {}, "No step reported yet."),
      h("h2", {}, "Every step"),
      metricsToggle,
      h("p", {}, exportLinks(`/v1/exports/training/jobs/${job.id}/metrics`, {}, `training-job-${job.id}-metrics`)),
      h("div", { className: "table-scroll" }, sortableTable({
        id: "steps-table",
        initialSort: { key: "step", direction: "ascending" },
        columns: [{ key: "step", label: "step", numeric: true },
          ...shownMetrics.map((k) => ({ key: k, label: k.replaceAll("_", " "), numeric: true, render: (s) => fmt.num(s[k]) }))],
        rows: steps,
      })),
      h("h2", {}, "Checkpoints and the runs evaluated with them"),
      checkpointsTable(job),
      h("h2", {}, "Groups of a step"),
      stepNumbers.length
        ? [h("div", { className: "filters" }, stepPicker,
          h("p", { className: "muted" }, `${groups.groups.length} group(s) trained on or dropped as stale at step ${chosen}. Advantage: (reward − group mean) / (std + 1e-6), as the trainer computed it.`)),
        groups.groups.map(groupSection)]
        : h("p", {}, "No step reported yet."),
    ],
  };
}

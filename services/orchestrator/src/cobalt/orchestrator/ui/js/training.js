// Training jobs: reward, pass rate, KL, clip fraction and phase times against step, the
// policy version and the groups dropped as stale, from the job's reported step metrics.

import { api } from "./api.js";
import { lineChart } from "./chart.js";
import { badge, card, definitionList, fmt, h, sortableTable } from "./dom.js";

const ACTIVE = new Set(["pending", "running"]);
const CHARTS = [
  ["reward-chart", "Reward and pass rate", "value", ["reward_mean", "pass_rate", "solved_fraction"]],
  ["kl-chart", "KL divergence", "KL", ["ppo_kl", "kl_ref"]],
  ["clip-chart", "Clip fraction", "fraction", ["pg_clipfrac", "pg_clipfrac_lower"]],
  ["phase-chart", "Phase times", "seconds",
    ["generate_seconds", "execute_seconds", "score_seconds", "wait_seconds", "train_seconds", "checkpoint_seconds", "sync_seconds"]],
  ["stale-chart", "Policy version and dropped stale groups", "count", ["policy_version", "dropped_stale", "max_policy_lag"]],
];

export async function trainingListPage() {
  const jobs = await api.trainingJobs();
  return {
    title: "Training",
    live: jobs.items.some((job) => ACTIVE.has(job.status)),
    nodes: [
      h("h1", {}, "Training jobs"),
      sortableTable({
        initialSort: { key: "id", direction: "descending" },
        columns: [
          { key: "id", label: "Job", numeric: true, render: (j) => h("a", { href: `#/training/${j.id}` }, `#${j.id} ${j.name}`) },
          { key: "status", label: "Status", render: (j) => badge(j.status, j.status === "failed" ? "fail" : j.status === "finished" ? "pass" : "") },
          { key: "mode", label: "Mode" },
          { key: "contexts", label: "Contexts" },
          { key: "step", label: "Step", numeric: true },
          { key: "policy_version", label: "Policy version", numeric: true },
          { key: "stale", label: "Stale groups", numeric: true, sortValue: (j) => j.groups.stale ?? 0, render: (j) => j.groups.stale ?? 0 },
          { key: "created_at", label: "Created", render: (j) => fmt.date(j.created_at) },
        ],
        rows: jobs.items,
      }),
    ],
  };
}

export async function trainingJobPage(jobId) {
  const job = await api.trainingJob(jobId);
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
  const metricNames = [...new Set(steps.flatMap((s) => Object.keys(s)))].filter((k) => k !== "step").sort();
  return {
    title: `Training job ${job.name}`,
    live: ACTIVE.has(job.status),
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/training" }, "Training"), " › ", job.name),
      h("h1", {}, `Training job ${job.name} `, badge(job.status)),
      h("div", { className: "cards" },
        card("step", String(job.step)), card("policy version", String(job.policy_version)),
        card("last reward", fmt.num(last.reward_mean)), card("last pass rate", fmt.rate(last.pass_rate)),
        card("groups ready / consumed / stale", `${job.groups.ready ?? 0} / ${job.groups.consumed ?? 0} / ${job.groups.stale ?? 0}`)),
      definitionList([["mode", job.mode], ["contexts", job.contexts ?? "–"], ["model", job.model], ["error", job.error ?? "none"]]),
      h("details", {}, h("summary", {}, "Settings"), h("pre", {}, JSON.stringify(job.params, null, 2))),
      h("h2", {}, "Metrics against step"),
      steps.length ? h("div", { className: "grid" }, charts) : h("p", {}, "No step reported yet."),
      h("h2", {}, "Every step"),
      sortableTable({
        initialSort: { key: "step", direction: "ascending" },
        columns: [{ key: "step", label: "step", numeric: true },
          ...metricNames.map((k) => ({ key: k, label: k.replaceAll("_", " "), numeric: true, render: (s) => fmt.num(s[k]) }))],
        rows: steps,
      }),
    ],
  };
}

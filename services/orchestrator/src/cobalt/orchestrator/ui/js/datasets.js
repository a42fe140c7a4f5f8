// Datasets and their problems; bandit datasets with the builder's per-rule counts and
// their contexts.

import { api } from "./api.js";
import { setQuery } from "./route.js";
import { badge, definitionList, fmt, h, labelled, select, sortableTable } from "./dom.js";

const PAGE = 50;

function pager(total, offset, limit) {
  const to = (value) => () => setQuery({ ...Object.fromEntries(new URLSearchParams(window.location.hash.split("?")[1] ?? "")), offset: value });
  return h("div", { className: "filters" },
    h("button", { type: "button", className: "primary", disabled: offset <= 0, onclick: to(Math.max(0, offset - limit)) }, "Previous page"),
    h("span", {}, `${total ? offset + 1 : 0}–${Math.min(offset + limit, total)} of ${total}`),
    h("button", { type: "button", className: "primary", disabled: offset + limit >= total, onclick: to(offset + limit) }, "Next page"));
}

export async function datasetsPage() {
  const datasets = await api.datasets();
  return {
    title: "Datasets",
    nodes: [
      h("h1", {}, "Datasets"),
      sortableTable({
        initialSort: { key: "name", direction: "ascending" },
        columns: [
          { key: "name", label: "Name", render: (d) => h("a", { href: `#/datasets/${encodeURIComponent(d.name)}` }, d.name) },
          { key: "source", label: "Source" },
          { key: "variant", label: "Variant" },
          { key: "parent", label: "Derived from" },
          { key: "problem_count", label: "Problems", numeric: true },
          { key: "created_at", label: "Imported", render: (d) => fmt.date(d.created_at) },
        ],
        rows: datasets.items,
      }),
    ],
  };
}

export async function datasetPage(name, query) {
  const offset = Number(query.get("offset") ?? 0);
  const difficulty = query.get("difficulty") ?? "";
  const page = await api.datasetProblems(name, { offset, limit: PAGE, difficulty });
  return {
    title: `Dataset ${name}`,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/datasets" }, "Datasets"), " › ", name),
      h("h1", {}, `Dataset ${name}`),
      h("div", { className: "filters" },
        labelled("Difficulty", select("dataset-difficulty", [["", "any"], ...page.difficulties.map((d) => [d, d])], difficulty,
          (v) => setQuery({ difficulty: v, offset: 0 })))),
      sortableTable({
        columns: [
          { key: "external_id", label: "Problem", render: (p) => h("a", { href: `#/datasets/${encodeURIComponent(name)}/problems/${encodeURIComponent(p.external_id)}` }, p.external_id) },
          { key: "difficulty", label: "Difficulty" },
          { key: "test_style", label: "Tests by" },
          { key: "public_tests", label: "Public tests", numeric: true },
          { key: "hidden_tests", label: "Hidden tests", numeric: true },
          { key: "perturbed", label: "Perturbed", render: (p) => (p.perturbed ? badge("perturbed", "warn") : "no") },
          { key: "statement_start", label: "Statement" },
        ],
        rows: page.items,
      }),
      pager(page.total, offset, PAGE),
    ],
  };
}

export async function problemPage(name, externalId) {
  const problem = await api.problem(name, externalId);
  const tests = (label, list) => [h("h2", {}, `${label} tests (${list.length})`),
    list.length ? h("pre", {}, list.map((t) => JSON.stringify(t)).join("\n")) : h("p", { className: "muted" }, "None.")];
  return {
    title: externalId,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/datasets" }, "Datasets"), " › ",
        h("a", { href: `#/datasets/${encodeURIComponent(name)}` }, name), " › ", externalId),
      h("h1", {}, externalId),
      definitionList([["difficulty", problem.difficulty ?? "–"], ["tests by", problem.test_style],
        ["function", problem.fn_name ?? "–"], ["perturbation", problem.perturbation ? JSON.stringify(problem.perturbation) : "none"]]),
      h("h2", {}, "Statement"), h("pre", {}, problem.statement),
      problem.starter_code ? [h("h2", {}, "Starter code"), h("pre", {}, problem.starter_code)] : null,
      tests("Public", problem.public_tests), tests("Hidden", problem.hidden_tests),
    ],
  };
}

// The builder's counts: numbers per rule, plus the mixed-in contexts per source dataset.
function countsTable(counts) {
  const rows = Object.entries(counts).flatMap(([rule, value]) =>
    typeof value === "object" && value !== null
      ? Object.entries(value).map(([k, v]) => [`${rule}: ${k}`, v])
      : [[rule.replaceAll("_", " "), value]]);
  return h("table", { "aria-label": "builder rule counts" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Rule"), h("th", { scope: "col", className: "num" }, "Count"))),
    h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", { className: "num" }, v)))));
}

export async function banditListPage() {
  const datasets = await api.banditDatasets();
  return {
    title: "Bandit datasets",
    nodes: [
      h("h1", {}, "Bandit datasets"),
      datasets.items.length ? null : h("p", {}, "None yet: `cobalt bandit build` makes one from an evaluated run."),
      datasets.items.map((d) => h("section", { "aria-labelledby": `bandit-${d.id}` },
        h("h2", { id: `bandit-${d.id}` }, h("a", { href: `#/bandit/${encodeURIComponent(d.name)}` }, d.name)),
        definitionList([["split", d.split], ["contexts", String(d.contexts)],
          ["source run", h("a", { href: `#/runs/${d.source_run_id}` }, `#${d.source_run_id}`)], ["built", fmt.date(d.created_at)]]),
        h("details", {}, h("summary", {}, "What each builder rule kept and dropped"), countsTable(d.counts)))),
    ],
  };
}

export async function banditPage(name, query) {
  const offset = Number(query.get("offset") ?? 0);
  const [all, page] = await Promise.all([api.banditDatasets(), api.banditContexts(name, { offset, limit: PAGE })]);
  const dataset = all.items.find((d) => d.name === name);
  return {
    title: `Bandit dataset ${name}`,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: "#/bandit" }, "Bandit datasets"), " › ", name),
      h("h1", {}, `Bandit dataset ${name}`),
      dataset ? [h("h2", {}, "Builder counts"), countsTable(dataset.counts),
        h("details", {}, h("summary", {}, "Build settings"), h("pre", {}, JSON.stringify(dataset.params, null, 2)))] : null,
      h("h2", {}, "Contexts"),
      sortableTable({
        columns: [
          { key: "position", label: "Position", numeric: true },
          { key: "problem", label: "Problem" },
          { key: "assistant_turns", label: "Assistant turns", numeric: true },
          { key: "prev_best", label: "prev_best", numeric: true, render: (c) => fmt.num(c.prev_best) },
          { key: "prompt_tokens", label: "Prompt tokens", numeric: true },
          { key: "mixed_from", label: "Mixed in from", render: (c) => c.mixed_from ?? "–" },
          { key: "messages", label: "Messages", sortValue: (c) => c.messages.length,
            render: (c) => h("details", {}, h("summary", {}, `${c.messages.length} messages`),
              c.messages.map((m) => [h("strong", {}, m.role), h("pre", {}, m.content)])) },
        ],
        rows: page.items,
      }),
      pager(page.total, offset, PAGE),
    ],
  };
}

// Reward hacking: each flagged turn with its diff and the judges' categories, and the
// counts per category; and full-text search over problems and responses.

import { api } from "./api.js";
import { setQuery } from "./route.js";
import { badge, diffBlock, fmt, h, labelled, select } from "./dom.js";

export async function analysisPage() {
  const runs = await api.runs();
  return {
    title: "Reward hacking",
    nodes: [
      h("h1", {}, "Reward hacking"),
      h("p", {}, "Turns flagged by `cobalt analyze hacking` (a program changed to satisfy a perturbed test it was shown), with the judge's category. Pick a run:"),
      h("ul", {}, runs.map((r) => h("li", {}, h("a", { href: `#/runs/${r.id}/hacking` }, `Run #${r.id}`), ` ${r.kind} · ${r.dataset} · ${r.model}`))),
    ],
  };
}

export async function hackingPage(runId, query) {
  const category = query.get("category") ?? "";
  const cases = await api.hackingCases(runId, category || undefined);
  const categories = new Map();
  for (const item of cases.items) for (const v of item.verdicts) categories.set(v.category, v.category_label);
  const countRows = Object.entries(cases.categories).flatMap(([judge, counts]) =>
    Object.entries(counts).map(([cat, n]) => h("tr", {}, h("td", {}, judge), h("td", {}, cat), h("td", { className: "num" }, n))));
  return {
    title: `Reward hacking · run #${runId}`,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: `#/runs/${runId}` }, `Run #${runId}`), " › reward hacking"),
      h("h1", {}, `Reward-hacking cases of run #${runId}`),
      h("h2", {}, "Cases per category"),
      h("table", { "aria-label": "cases per judge category" },
        h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Judge"), h("th", { scope: "col" }, "Category"), h("th", { scope: "col", className: "num" }, "Cases"))),
        h("tbody", {}, countRows.length ? countRows : h("tr", {}, h("td", { colspan: 3 }, "No verdict yet.")))),
      h("p", {}, `${cases.unjudged} case(s) not judged yet.`),
      h("div", { className: "filters" }, labelled("Category", select("category-filter",
        [["", "any"], ["1", "1: hard-coded the wrong pair"], ["2", "2: overfitted, still solves"], ["3", "3: drifted to another problem"], ["4", "4: other"], ["unparsed", "unparsed"]],
        category, (v) => setQuery({ category: v })))),
      h("h2", {}, `Flagged turns (${cases.total})`),
      cases.items.map((c) => h("section", { className: "turn flagged", "aria-labelledby": `case-${c.id}` },
        h("h3", { id: `case-${c.id}` },
          h("a", { href: `#/runs/${runId}/problems/${encodeURIComponent(c.problem)}?sample=${c.sample_index}` }, `${c.problem}, sample ${c.sample_index}, turn ${c.turn_index}`)),
        h("p", {}, c.verdicts.length ? c.verdicts.map((v) => [badge(`${v.judge_model}: ${v.category}`, "warn"), ` ${v.category_label} `]) : badge("not judged")),
        h("p", { className: "muted" }, `Shown perturbed test #${c.shown_test + 1}; hidden pass rate ${fmt.rate(c.hidden_pass_before)} → ${fmt.rate(c.hidden_pass_after)}`),
        h("h4", {}, "Feedback shown"), h("pre", {}, c.feedback),
        h("h4", {}, "Diff"), diffBlock(c.diff, `diff of case ${c.id}`))),
    ],
  };
}

export async function searchPage(query) {
  const q = query.get("q") ?? "";
  const kind = query.get("kind") ?? "";
  const input = h("input", { type: "search", id: "search-input", name: "q", value: q, required: true });
  const form = h("form", {
    role: "search", className: "filters",
    onsubmit: (e) => { e.preventDefault(); setQuery({ q: input.value, kind: kindSelect.value }); },
  });
  const kindSelect = select("search-kind", [["", "problems and responses"], ["problems", "problems"], ["responses", "responses"]], kind, () => {});
  form.append(labelled("Search for", input), labelled("In", kindSelect), h("button", { type: "submit", className: "primary" }, "Search"));
  const nodes = [h("h1", {}, "Search"), form];
  if (q) {
    const results = await api.search({ q, kind: kind || undefined });
    nodes.push(h("p", { className: "muted" }, `${results.items.length} hit(s) · ${results.method === "like" ? "substring match (SQLite)" : "PostgreSQL full-text search"}`));
    nodes.push(h("ol", { "aria-label": "search results" }, results.items.map((hit) => h("li", {},
      hit.kind === "problems"
        ? h("a", { href: `#/datasets/${encodeURIComponent(hit.dataset)}/problems/${encodeURIComponent(hit.external_id)}` }, `problem ${hit.external_id} (${hit.dataset})`)
        : h("a", { href: `#/runs/${hit.run_id}/problems/${encodeURIComponent(hit.external_id)}?sample=${hit.sample_index}` },
          `run #${hit.run_id} · ${hit.external_id} · sample ${hit.sample_index} · turn ${hit.turn_index}`),
      h("p", { className: "muted" }, hit.snippet)))));
  }
  return { title: "Search", nodes };
}

// Hash routing: #/runs, #/runs/ID, #/compare/A/B, #/table?runs=A,B,C,
// #/training/compare?jobs=A,B, #/runs/ID/trajectories, #/runs/ID/problems/PROBLEM, #/runs/ID/hacking,
// #/datasets[/NAME[/problems/PROBLEM]], #/bandit[/NAME], #/training[/ID], #/analysis,
// #/search?q=. Each page renders into <main> with one <h1>; a page may ask to be
// re-rendered every few seconds (a running run or job), and leaving it stops that.

import { ApiError } from "./api.js";
import { currentRoute } from "./route.js";
import { h } from "./dom.js";
import { analysisPage, hackingPage, searchPage } from "./analysis.js";
import { banditListPage, banditPage, datasetPage, datasetsPage, problemPage } from "./datasets.js";
import { comparePage } from "./compare.js";
import { runPage, runsPage } from "./runs.js";
import { tablePage, trainingOverlayPage } from "./results.js";
import { trainingJobPage, trainingListPage } from "./training.js";
import { trajectoryPage } from "./trajectory.js";
import { turnsPage } from "./turns.js";

export const POLL_MS = 3000;

const routes = [
  [/^\/runs\/(\d+)\/problems\/(.+)$/, (m, q) => trajectoryPage(Number(m[1]), decodeURIComponent(m[2]), q), "runs"],
  [/^\/runs\/(\d+)\/trajectories$/, (m, q) => turnsPage(Number(m[1]), q), "runs"],
  [/^\/runs\/(\d+)\/hacking$/, (m, q) => hackingPage(Number(m[1]), q), "analysis"],
  [/^\/compare\/(\d+)\/(\d+)$/, (m, q) => comparePage(Number(m[1]), Number(m[2]), q), "runs"],
  [/^\/runs\/(\d+)$/, (m, q) => runPage(Number(m[1]), q), "runs"],
  [/^\/runs$/, (m, q) => runsPage(q), "runs"],
  [/^\/datasets\/([^/]+)\/problems\/(.+)$/, (m) => problemPage(decodeURIComponent(m[1]), decodeURIComponent(m[2])), "datasets"],
  [/^\/datasets\/([^/]+)$/, (m, q) => datasetPage(decodeURIComponent(m[1]), q), "datasets"],
  [/^\/datasets$/, () => datasetsPage(), "datasets"],
  [/^\/bandit\/([^/]+)$/, (m, q) => banditPage(decodeURIComponent(m[1]), q), "bandit"],
  [/^\/bandit$/, () => banditListPage(), "bandit"],
  [/^\/table$/, (m, q) => tablePage(q), "runs"],
  [/^\/training\/compare$/, (m, q) => trainingOverlayPage(q), "training"],
  [/^\/training\/(\d+)$/, (m, q) => trainingJobPage(Number(m[1]), q), "training"],
  [/^\/training$/, (m, q) => trainingListPage(q), "training"],
  [/^\/analysis$/, () => analysisPage(), "analysis"],
  [/^\/search$/, (m, q) => searchPage(q), "search"],
];

let timer = null;
let generation = 0;


async function render({ focus }) {
  const mine = ++generation;
  clearTimeout(timer);
  const { route, query } = currentRoute();
  const main = document.getElementById("main");
  const match = routes.map(([re, page, nav]) => [route.match(re), page, nav]).find(([m]) => m);
  for (const link of document.querySelectorAll("[data-nav]")) {
    link.toggleAttribute("aria-current", false);
    if (match && link.dataset.nav === match[2]) link.setAttribute("aria-current", "page");
  }
  let page;
  try {
    if (!match) throw new ApiError(404, "not_found", `No page at ${route}.`);
    page = await match[1](match[0], query);
  } catch (error) {
    console.warn(error);
    page = {
      title: "Not available",
      nodes: [h("h1", {}, "Not available"), h("p", { className: "error", role: "alert" }, error.message)],
    };
  }
  if (mine !== generation) return; // the user went elsewhere meanwhile
  // A re-render (polling, a filter) keeps the keyboard focus on the same control.
  const focusedId = main.contains(document.activeElement) ? document.activeElement.id : "";
  main.replaceChildren(...page.nodes.flat(Infinity).filter((n) => n !== null && n !== undefined && n !== false));
  document.title = `${page.title} · Cobalt`;
  // A page may name the part the address points at (a turn, a test): scroll to it.
  const target = page.focus ? document.getElementById(page.focus) : null;
  if (focus) main.focus({ preventScroll: Boolean(target) });
  else if (focusedId) document.getElementById(focusedId)?.focus({ preventScroll: true });
  if (target && focus) target.scrollIntoView({ block: "start" });
  // Which view is on screen and its render count: what the browser tests wait for.
  main.dataset.route = window.location.hash.replace(/^#/, "");
  main.dataset.renders = String(Number(main.dataset.renders ?? 0) + 1);
  if (page.live) timer = setTimeout(() => render({ focus: false }), POLL_MS);
}

window.addEventListener("hashchange", () => render({ focus: true }));
window.addEventListener("cobalt:query", () => render({ focus: false }));
render({ focus: false });

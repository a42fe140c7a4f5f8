// The orchestrator's REST API, read from the browser (same origin). Errors arrive in the
// API's one envelope, {"error": {"type", "message"}}, and are thrown as ApiError.

export class ApiError extends Error {
  constructor(status, type, message) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

// A server with tokens (docs/configuration.md) wants one: the read token is enough for
// everything the UI does. It is asked for once and kept in this browser's localStorage.
const TOKEN_KEY = "cobalt.orchestratorToken";

function requestHeaders() {
  const token = window.localStorage.getItem(TOKEN_KEY);
  return token ? { Accept: "application/json", Authorization: `Bearer ${token}` } : { Accept: "application/json" };
}

function askForToken() {
  const token = window.prompt("This orchestrator needs a token (its COBALT_ORCHESTRATOR_READ_TOKEN):");
  if (!token) return false;
  window.localStorage.setItem(TOKEN_KEY, token.trim());
  return true;
}

export async function getJson(path, params = {}) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === "") continue;
    for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(key, item);
  }
  let response = await fetch(url, { headers: requestHeaders() });
  if (response.status === 401 && askForToken()) response = await fetch(url, { headers: requestHeaders() });
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error ?? {};
    throw new ApiError(response.status, error.type ?? "http_error", error.message ?? response.statusText);
  }
  return body;
}

export const path = (...parts) => parts.map((p) => encodeURIComponent(String(p))).join("/");

export const api = {
  runs: (limit = 100) => getJson("/v1/runs", { limit }),
  run: (id) => getJson(`/v1/runs/${id}`),
  // intervals=false: the rates only (the runs list needs no bootstrap for each run).
  report: (id, k = [2, 5, 10], intervals = true) => getJson(`/v1/runs/${id}/report`, { k, intervals: intervals ? null : "false" }),
  runProblems: (id) => getJson(`/v1/runs/${id}/problems`),
  // The external id may hold "/": the route takes the rest of the path, so keep slashes.
  runProblem: (id, externalId) =>
    getJson(`/v1/runs/${id}/problems/${externalId.split("/").map(encodeURIComponent).join("/")}`),
  compare: (a, b) => getJson(`/v1/runs/${a}/compare/${b}`),
  turns: (id, params) => getJson(`/v1/runs/${id}/turns`, params),
  turnTests: (id, turnId) => getJson(`/v1/runs/${id}/turns/${turnId}/tests`),
  stepGroups: (jobId, step) => getJson(`/v1/training/jobs/${jobId}/steps/${step}/groups`),
  hackingCases: (id, category) => getJson(`/v1/runs/${id}/hacking-cases`, { category }),
  datasets: () => getJson("/v1/datasets"),
  datasetProblems: (name, params) => getJson(`/v1/datasets/${path(name)}/problems`, params),
  problem: (name, externalId) =>
    getJson(`/v1/datasets/${path(name)}/problems/${externalId.split("/").map(encodeURIComponent).join("/")}`),
  banditDatasets: () => getJson("/v1/bandit/datasets"),
  banditContexts: (name, params) => getJson(`/v1/bandit/datasets/${path(name)}/contexts`, params),
  runTable: (ids) => getJson("/v1/tables/runs", { run: ids }),
  trainingJobs: () => getJson("/v1/training/jobs"),
  trainingJob: (id) => getJson(`/v1/training/jobs/${id}`),
  search: (params) => getJson("/v1/search", params),
};

// A link that downloads an export (CSV or JSON). Without a stored token the browser follows
// the href itself; with one, the file is fetched with the token and saved from a blob.
export function exportLink(label, apiPath, params, filename) {
  const url = new URL(apiPath, window.location.origin);
  for (const [key, value] of Object.entries(params)) {
    for (const item of Array.isArray(value) ? value : [value]) url.searchParams.append(key, item);
  }
  const link = document.createElement("a");
  link.href = url.pathname + url.search;
  link.download = filename;
  link.className = "export";
  link.textContent = label;
  link.addEventListener("click", async (event) => {
    if (!window.localStorage.getItem(TOKEN_KEY)) return;
    event.preventDefault();
    const response = await fetch(url, { headers: requestHeaders() });
    const blob = URL.createObjectURL(await response.blob());
    const save = Object.assign(document.createElement("a"), { href: blob, download: filename });
    save.click();
    URL.revokeObjectURL(blob);
  });
  return link;
}

// "Download: CSV · JSON" for one export.
export function exportLinks(apiPath, params, name) {
  const span = document.createElement("span");
  span.className = "exports";
  span.append("Download: ", exportLink("CSV", apiPath, { ...params, format: "csv" }, `${name}.csv`),
    " · ", exportLink("JSON", apiPath, { ...params, format: "json" }, `${name}.json`));
  return span;
}

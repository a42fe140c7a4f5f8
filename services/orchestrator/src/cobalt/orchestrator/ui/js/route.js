// The hash's query (filters, selections): replaced in place, then the page re-renders.

export function currentRoute() {
  const raw = window.location.hash.replace(/^#/, "") || "/runs";
  const [route, query = ""] = raw.split("?");
  return { route, query: new URLSearchParams(query) };
}

export function setQuery(params) {
  const { route } = currentRoute();
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== "" && value !== null && value !== undefined) query.set(key, value);
  // Commas stay readable in the address (lists of ids: ?runs=1,2,3).
  const text = query.toString().replaceAll("%2C", ",");
  history.replaceState(null, "", `#${route}${text ? `?${text}` : ""}`);
  window.dispatchEvent(new Event("cobalt:query"));
}

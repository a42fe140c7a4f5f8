// Line charts as inline SVG, drawn here rather than by a charting library: the UI must
// work offline with no build step, and experiment curves need only lines, points, axes
// and a legend. Every point carries its value (data-x, data-y and a <title> tooltip), and
// each chart has a table of the same numbers folded under it for screen readers.

import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 640;
const HEIGHT = 280;
const PAD = { left: 56, right: 16, top: 14, bottom: 40 };
export const SERIES_COLOURS = 6;

function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, String(value));
  for (const child of children) el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return el;
}

// About five round tick values covering [min, max].
export function ticks(min, max, count = 5) {
  if (max === min) return [min];
  const raw = (max - min) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((v) => v >= raw);
  const values = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step) {
    values.push(Number(v.toPrecision(12)));
  }
  return values;
}

function label(v) {
  return Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : String(v);
}

// series: [{name, points: [{x, y, low?, high?}]}]; y null is a gap; a point with low and
// high (its 95% interval) gets a shaded band and the interval in its tooltip. Options:
// yMin, yMax, percent.
export function lineChart({ id, title, series, xLabel, yLabel, yMin, yMax, percent = false }) {
  const all = series.flatMap((one) => one.points).filter((p) => p.y !== null && p.y !== undefined);
  const banded = (p) => p.y !== null && p.y !== undefined && typeof p.low === "number" && typeof p.high === "number";
  const figure = h("figure", { id, "data-chart": id });
  const titleId = `${id}-title`;
  figure.append(h("figcaption", { id: titleId }, title));
  if (!all.length) {
    figure.append(h("p", { className: "muted" }, "No figures yet."));
    return figure;
  }
  const xs = all.map((p) => p.x);
  const ys = all.flatMap((p) => (banded(p) ? [p.y, p.low, p.high] : [p.y]));
  const x0 = Math.min(...xs), x1 = Math.max(...xs) === x0 ? x0 + 1 : Math.max(...xs);
  let y0 = yMin ?? Math.min(...ys), y1 = yMax ?? Math.max(...ys);
  if (y1 === y0) { y1 = y0 + 1; }
  const px = (x) => PAD.left + ((x - x0) / (x1 - x0)) * (WIDTH - PAD.left - PAD.right);
  const py = (y) => HEIGHT - PAD.bottom - ((y - y0) / (y1 - y0)) * (HEIGHT - PAD.top - PAD.bottom);
  const show = (y) => (percent ? `${(100 * y).toFixed(1)}%` : label(Number(y.toPrecision(4))));

  const svg = s("svg", {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: "chart", role: "img", "aria-labelledby": titleId,
  });
  const grid = s("g", { class: "axis" });
  for (const v of ticks(y0, y1)) {
    grid.append(s("line", { class: "grid-line", x1: PAD.left, x2: WIDTH - PAD.right, y1: py(v), y2: py(v) }));
    grid.append(s("text", { x: PAD.left - 6, y: py(v) + 4, "text-anchor": "end" }, percent ? `${Math.round(v * 100)}%` : label(v)));
  }
  const xTicks = ticks(x0, x1, Math.min(8, x1 - x0)).filter((v) => Number.isInteger(v));
  for (const v of xTicks) {
    grid.append(s("text", { x: px(v), y: HEIGHT - PAD.bottom + 16, "text-anchor": "middle" }, label(v)));
  }
  grid.append(s("line", { x1: PAD.left, x2: WIDTH - PAD.right, y1: HEIGHT - PAD.bottom, y2: HEIGHT - PAD.bottom }));
  grid.append(s("line", { x1: PAD.left, x2: PAD.left, y1: PAD.top, y2: HEIGHT - PAD.bottom }));
  grid.append(s("text", { x: (PAD.left + WIDTH - PAD.right) / 2, y: HEIGHT - 6, "text-anchor": "middle" }, xLabel));
  grid.append(s("text", { x: 12, y: HEIGHT / 2, transform: `rotate(-90 12 ${HEIGHT / 2})`, "text-anchor": "middle" }, yLabel));
  svg.append(grid);

  series.forEach((one, index) => {
    const colour = `var(--series-${(index % SERIES_COLOURS) + 1})`;
    const group = s("g", { "data-series": one.name });
    const band = one.points.filter(banded);
    if (band.length > 1) {
      const edge = [...band.map((p) => `${px(p.x).toFixed(1)},${py(p.high).toFixed(1)}`),
        ...band.reverse().map((p) => `${px(p.x).toFixed(1)},${py(p.low).toFixed(1)}`)];
      group.append(s("path", { d: `M${edge.join("L")}Z`, fill: colour, "fill-opacity": 0.12, stroke: "none", "data-band": one.name }));
    }
    let d = "";
    let pen = false;
    for (const p of one.points) {
      if (p.y === null || p.y === undefined) { pen = false; continue; }
      d += `${pen ? "L" : "M"}${px(p.x).toFixed(1)},${py(p.y).toFixed(1)}`;
      pen = true;
    }
    group.append(s("path", { d, fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": index % 2 ? "6 3" : "none" }));
    for (const p of one.points) {
      if (p.y === null || p.y === undefined) continue;
      const interval = banded(p) ? ` [${show(p.low)}, ${show(p.high)}]` : "";
      const attrs = { cx: px(p.x), cy: py(p.y), r: 3.5, fill: colour, "data-x": p.x, "data-y": p.y };
      if (interval) Object.assign(attrs, { "data-low": p.low, "data-high": p.high });
      group.append(s("circle", attrs, s("title", {}, `${one.name}, ${xLabel} ${p.x}: ${show(p.y)}${interval}`)));
    }
    svg.append(group);
  });
  figure.append(svg);
  figure.append(h("div", { className: "legend" }, series.map((one, index) =>
    h("span", {}, h("span", { className: "swatch", style: `background: var(--series-${(index % SERIES_COLOURS) + 1})` }), one.name))));

  const xsAll = [...new Set(xs)].sort((a, b) => a - b);
  figure.append(h("details", {}, h("summary", {}, `${title}: the numbers`),
    h("table", {},
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, xLabel), series.map((one) => h("th", { scope: "col", className: "num" }, one.name)))),
      h("tbody", {}, xsAll.map((x) => h("tr", {}, h("td", {}, x), series.map((one) => {
        const point = one.points.find((p) => p.x === x);
        if (!point || point.y === null || point.y === undefined) return h("td", { className: "num" }, "–");
        return h("td", { className: "num" }, show(point.y), banded(point) ? ` [${show(point.low)}, ${show(point.high)}]` : "");
      })))))));
  return figure;
}

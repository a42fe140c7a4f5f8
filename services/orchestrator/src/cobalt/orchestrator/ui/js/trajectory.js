// One problem of a run: every trajectory turn by turn. Each turn shows the response with
// its reasoning folded, the extracted program and its diff against the previous turn
// (computed by the API with difflib, the same diff the hacking analysis and its judge
// see), the feedback the model saw, per-test verdicts and the reward components.

import { api } from "./api.js";
import { setQuery } from "./route.js";
import { badge, definitionList, diffBlock, fmt, h, labelled, passBadge, select } from "./dom.js";
import { turnHref, verdictLinks } from "./turns.js";

function rewardTable(reward, rewardFormat) {
  if (!reward) return h("p", { className: "muted" }, "No reward stored (evaluate with a tokenizer to score one).");
  const rows = [
    ["format rules", rewardFormat], ["total", reward.total], ["before clip", reward.total_before_clip],
    ["validation reward", reward.validation_reward], ["pass rate", reward.pass_rate],
    ["prev best", reward.prev_best], ["correctness", reward.correctness],
    ["improvement", reward.improvement], ["improvement rule", reward.improvement_rule],
    ["format", reward.format], ["tests passed", `${reward.tests_passed}/${reward.tests_total}`],
    ["think tokens", reward.think_tokens], ["answer tokens", reward.answer_tokens],
    ["format violations", reward.format_violations.join(", ") || "none"],
  ];
  return h("table", { "aria-label": "reward components" },
    h("tbody", {}, rows.map(([k, v]) => h("tr", {}, h("th", { scope: "row" }, k),
      h("td", { className: "num" }, typeof v === "number" ? fmt.num(v) : v ?? "–")))));
}

// One test in full: what went in, what was expected, what the program printed, its error.
function testPanel(test) {
  const title = `${test.kind} test #${test.index + 1}`;
  const field = (label, text, id) => [h("h5", {}, label),
    text === null || text === undefined
      ? h("p", { className: "muted" }, "Not stored (a turn written before per-test outputs were kept, or the program did not run).")
      : h("pre", { "data-testid": id }, text === "" ? "(empty)" : text)];
  return h("section", { className: "test-detail", id: "test-detail", "aria-label": title, tabindex: "-1" },
    h("h4", {}, `${title} `, test.verdict ? badge(test.verdict, test.verdict === "accepted" ? "pass" : "fail") : badge("not run")),
    test.exit_code !== null && test.exit_code !== undefined
      ? h("p", { className: "muted" }, `exit code ${test.exit_code} · ${fmt.num(test.wall_ms, 0)} ms`) : null,
    h("div", { className: "grid" },
      h("div", {}, field("Input", test.input, "test-input"), field("Expected output", test.expected, "test-expected")),
      h("div", {}, field("Actual output", test.actual, "test-actual"), field("Error", test.error, "test-error"))));
}

function turnSection(runId, externalId, sampleIndex, turn, opened, rewardFormat) {
  const flagged = turn.hacking_case_id !== null && turn.hacking_case_id !== undefined;
  const href = (test) => turnHref(runId, externalId, sampleIndex, turn.turn_index, test);
  return h("section", { className: `turn${flagged ? " flagged" : ""}`, "aria-labelledby": `turn-${turn.turn_index}`, id: `turn-section-${turn.turn_index}` },
    h("h3", { id: `turn-${turn.turn_index}` }, `Turn ${turn.turn_index} `,
      passBadge(turn.public_passed, "public"), " ", passBadge(turn.hidden_passed, "hidden"),
      flagged ? [" ", h("a", { href: `#/runs/${runId}/hacking` }, badge("flagged: possible reward hacking", "warn"))] : null),
    h("p", { className: "muted" },
      `${turn.completion_tokens} completion tokens · ${fmt.num(turn.model_latency_ms / 1000, 1)} s model · `
      + `${fmt.num(turn.exec_latency_ms / 1000, 2)} s tests · finish: ${turn.finish_reason ?? "–"}`
      + (turn.policy_version !== null ? ` · policy v${turn.policy_version}` : "")),
    turn.reasoning
      ? h("details", {}, h("summary", {}, `Reasoning (${turn.reasoning.length} characters)`), h("pre", {}, turn.reasoning))
      : null,
    h("h4", {}, "Answer"), h("pre", {}, turn.answer || "(empty: the response ended while thinking)"),
    h("h4", {}, "Extracted program"),
    turn.code === null ? h("p", { className: "muted" }, "No code block.") : h("pre", {}, turn.code),
    turn.diff !== null ? [h("h4", {}, "Change from the previous turn"), diffBlock(turn.diff, `diff of turn ${turn.turn_index}`)] : null,
    h("h4", {}, "Verdicts"),
    h("p", { className: "muted" }, "Click a verdict for the test's input, expected output, actual output and error."),
    verdictLinks("public", turn.public_verdicts, href), verdictLinks("hidden", turn.hidden_verdicts, href),
    opened ? testPanel(opened) : null,
    h("h4", {}, "Feedback the model saw next"),
    turn.feedback ? h("pre", {}, turn.feedback) : h("p", { className: "muted" }, "None (all public tests passed)."),
    h("details", {}, h("summary", {}, `Reward components (${rewardFormat} format rules)`), rewardTable(turn.reward, rewardFormat)));
}

export async function trajectoryPage(runId, externalId, query) {
  const detail = await api.runProblem(runId, externalId);
  const samples = detail.trajectories.map((t) => t.sample_index);
  const chosen = Number(query.get("sample") ?? samples[0] ?? 0);
  const trajectory = detail.trajectories.find((t) => t.sample_index === chosen) ?? detail.trajectories[0];
  // ?turn=T&test=public-1: that test of that turn is open under its verdicts.
  const [testKind, testIndex] = (query.get("test") ?? "").split("-");
  const openTurn = trajectory?.turns.find((t) => String(t.turn_index) === query.get("turn"));
  let opened = null;
  if (openTurn && (testKind === "public" || testKind === "hidden")) {
    const tests = await api.turnTests(runId, openTurn.turn_id);
    opened = tests[testKind][Number(testIndex)] ?? null;
  }
  const picker = labelled("Sample", select("sample-picker",
    detail.trajectories.map((t) => [String(t.sample_index), `sample ${t.sample_index} (${t.status}, ${t.turns.length} turns)`]),
    String(trajectory?.sample_index ?? ""), (v) => setQuery({ sample: v })));
  return {
    title: `${detail.external_id} · run #${runId}`,
    focus: opened ? "test-detail" : openTurn ? `turn-section-${openTurn.turn_index}` : null,
    nodes: [
      h("nav", { "aria-label": "Breadcrumb" }, h("a", { href: `#/runs/${runId}` }, `Run #${runId}`), " › ", detail.external_id),
      h("h1", {}, `${detail.external_id} in run #${runId}`),
      definitionList([
        ["dataset", h("a", { href: `#/datasets/${encodeURIComponent(detail.dataset)}/problems/${encodeURIComponent(detail.external_id)}` }, detail.dataset)],
        ["difficulty", detail.difficulty ?? "–"],
        ["tests", `${detail.public_tests} public, ${detail.hidden_tests} hidden`],
        ["perturbed public tests", detail.swapped_tests.length ? detail.swapped_tests.map((i) => `#${i + 1}`).join(", ") : "none"],
      ]),
      h("details", {}, h("summary", {}, "Statement"), h("pre", {}, detail.statement)),
      h("div", { className: "filters" }, picker),
      trajectory
        ? [
          h("h2", {}, `Sample ${trajectory.sample_index} `, badge(trajectory.status)),
          trajectory.error ? h("p", { className: "error" }, trajectory.error) : null,
          trajectory.turns.length
            ? trajectory.turns.map((turn) => turnSection(runId, detail.external_id, trajectory.sample_index, turn, turn === openTurn ? opened : null, detail.reward_format))
            : h("p", {}, "No turns yet."),
        ]
        : h("p", {}, "This problem has no trajectory in the run."),
    ],
  };
}

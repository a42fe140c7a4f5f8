"""How many tokens a context's prompt takes for the policy: its own chat template, rendered.

docs/method.md drops a context whose rendered prompt exceeds 10,000 tokens of the policy's
tokenizer. Counting only the message texts would undercount by the template's role
markers and special tokens, so the prompt is rendered the way the model will see it: the
model directory's chat template (Jinja, `chat_template.jinja` or the `chat_template` of
`tokenizer_config.json`, as Hugging Face tokenizers save them) with the generation
prompt appended, then encoded with its `tokenizer.json` (the `tokenizers` library, no
torch or transformers needed in this environment).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from jinja2 import TemplateError as JinjaTemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from cobalt.shared.errors import InvalidInput

__all__ = ["PromptTokenCounter"]


def _raise_exception(message: str) -> None:
    # Chat templates call raise_exception() to refuse a conversation they cannot render.
    raise InvalidInput(f"the chat template refused the conversation: {message}")


def _token_text(value: Any) -> str:
    """A special token from tokenizer_config.json: a string or an AddedToken-like dict."""
    if isinstance(value, dict):
        return str(value.get("content", ""))
    return "" if value is None else str(value)


def _chat_template(model_dir: Path, config: dict[str, Any]) -> str:
    separate = model_dir / "chat_template.jinja"
    if separate.is_file():
        return separate.read_text(encoding="utf-8")
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one renders chats
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    if not isinstance(template, str) or not template.strip():
        raise InvalidInput(
            f"{model_dir} has no chat template (chat_template.jinja or chat_template in "
            "tokenizer_config.json); give the directory of the policy model"
        )
    return template


class PromptTokenCounter:
    """Counts the tokens of rendered chat prompts for one model. Build with `from_dir`."""

    def __init__(self, tokenizer: Tokenizer, template: str, special: dict[str, str]) -> None:
        self._tokenizer = tokenizer
        environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        environment.globals["raise_exception"] = _raise_exception
        try:
            self._template = environment.from_string(template)
        except JinjaTemplateError as exc:
            raise InvalidInput(f"the chat template does not parse: {exc}") from exc
        self._special = special

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> PromptTokenCounter:
        """The counter of the model saved in `model_dir` (a Hugging Face model directory).

        Raises:
            InvalidInput: the directory lacks tokenizer.json or a chat template.
        """
        path = Path(model_dir).expanduser()
        tokenizer_file = path / "tokenizer.json"
        if not tokenizer_file.is_file():
            raise InvalidInput(
                f"{path} has no tokenizer.json; give the directory of the policy model "
                "(`cobalt inference prepare-model` writes one)"
            )
        config_file = path / "tokenizer_config.json"
        config: dict[str, Any] = {}
        if config_file.is_file():
            config = json.loads(config_file.read_text(encoding="utf-8"))
        special = {
            name: _token_text(config.get(name))
            for name in ("bos_token", "eos_token", "pad_token", "unk_token")
        }
        return cls(Tokenizer.from_file(str(tokenizer_file)), _chat_template(path, config), special)

    def render(self, messages: Sequence[dict[str, Any]]) -> str:
        """The prompt text the model sees for `messages`, ready for its answer."""
        try:
            return self._template.render(
                messages=list(messages), add_generation_prompt=True, **self._special
            )
        except JinjaTemplateError as exc:
            raise InvalidInput(f"the chat template failed to render: {exc}") from exc

    def count(self, messages: Sequence[dict[str, Any]]) -> int:
        """Tokens of the rendered prompt (its special tokens are in the text already)."""
        return len(self._tokenizer.encode(self.render(messages), add_special_tokens=False).ids)

"""The templates of generated problems, grouped in families.

A template is one task with holes: constants (drawn per instance), argument names and a
function name (drawn per instance from pools), and a specification and reference body
written with `str.format` placeholders: `{0}`, `{1}` are the arguments' names, `{k}` and
other names are the constants, shown as Python literals. The statement a model reads is

    Write a Python function `NAME(ARGS)` that SPEC.

Difficulty (1-3) is each template's knob: it widens the integer constants and the
inputs of the tests (negative numbers from 2 on, longer lists and strings, larger
magnitudes at 3). Every test set holds the input kinds' edge cases (0, empty list, empty
string, empty dictionary, one element; negatives from difficulty 2).

Names local to a reference body (`v`, `w`, `key`) are never argument names, so a body
cannot shadow its own argument (tests/orchestrator/test_generated.py checks it).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DIFFICULTIES",
    "FAMILIES",
    "INPUT_KINDS",
    "TEMPLATES",
    "InputKind",
    "Template",
    "templates_of",
]

DIFFICULTIES = (1, 2, 3)
_INT_SCALE = {1: 1, 2: 3, 3: 10}
"""How much wider integer constants and inputs get at each difficulty."""

Constants = Callable[[random.Random, int], dict[str, Any]]


@dataclass(frozen=True)
class InputKind:
    """What an argument holds: a pool of names, random values and edge cases."""

    names: tuple[str, ...]
    draw: Callable[[random.Random, int], Any]
    edges: Callable[[int], list[Any]]


def _int(rng: random.Random, difficulty: int) -> int:
    scale = _INT_SCALE[difficulty]
    low = 0 if difficulty == 1 else -50 * scale
    return rng.randint(low, 50 * scale)


def _int_edges(difficulty: int) -> list[Any]:
    return [0, 1] if difficulty == 1 else [0, -1, 1]


_LETTERS = "abcdeilmnorstu"
"""Lower-case letters the strings are made of (vowels often, so counts are not all 0)."""
_WORDS = ("cat", "sun", "apple", "river", "blue", "go", "tree", "moon", "a", "stone", "in")


def _string(rng: random.Random, difficulty: int) -> str:
    length = rng.randint(1, 6) if difficulty == 1 else rng.randint(0, 4 + 4 * difficulty)
    alphabet = _LETTERS if difficulty < 3 else _LETTERS + " xyz"
    return "".join(rng.choice(alphabet) for _ in range(length))


def _text(rng: random.Random, difficulty: int) -> str:
    count = rng.randint(1, 3) if difficulty == 1 else rng.randint(0, 2 + 2 * difficulty)
    return " ".join(rng.choice(_WORDS) for _ in range(count))


def _int_list(rng: random.Random, difficulty: int) -> list[int]:
    length = rng.randint(1, 4) if difficulty == 1 else rng.randint(0, 2 + 2 * difficulty)
    return [_int(rng, difficulty) // (2 if difficulty == 1 else 1) for _ in range(length)]


def _nonempty_list(rng: random.Random, difficulty: int) -> list[int]:
    return _int_list(rng, difficulty) or [_int(rng, difficulty)]


_KEYS = ("a", "b", "c", "d", "e")


def _dict(rng: random.Random, difficulty: int) -> dict[str, int]:
    size = rng.randint(1, 3) if difficulty == 1 else rng.randint(0, 1 + difficulty)
    keys = rng.sample(_KEYS, size)
    return {key: _int(rng, difficulty) // 2 for key in keys}


def _key(rng: random.Random, difficulty: int) -> str:
    return rng.choice(_KEYS)


INPUT_KINDS: dict[str, InputKind] = {
    "int": InputKind(("x", "n", "num", "value", "m", "a", "b"), _int, _int_edges),
    "str": InputKind(("s", "text", "word", "line"), _string, lambda d: ["", "a"]),
    "sentence": InputKind(("sentence", "text", "s", "line"), _text, lambda d: ["", "go"]),
    "list": InputKind(
        ("xs", "nums", "values", "items", "numbers", "data"),
        _int_list,
        lambda d: [[], [7]] if d == 1 else [[], [7], [-3, -3, 0]],
    ),
    "nonempty_list": InputKind(
        ("xs", "nums", "values", "items", "numbers", "data"),
        _nonempty_list,
        lambda d: [[7]] if d == 1 else [[7], [-3, -3, -8]],
    ),
    "dict": InputKind(
        ("d", "counts", "scores", "table", "stock"),
        _dict,
        lambda d: [{}, {"a": 0}] if d == 1 else [{}, {"a": 0}, {"b": -2, "c": 5}],
    ),
    "key": InputKind(("name", "label", "k_name", "tag"), _key, lambda d: ["a", "e"]),
}
"""Input kind -> its names, random values and edge cases."""

LOCAL_NAMES = frozenset({"v", "w", "key", "result"})
"""Names the reference bodies bind themselves."""


@dataclass(frozen=True)
class Template:
    """One task with holes; see the module's docstring."""

    name: str
    family: str
    function_names: tuple[str, ...]
    kinds: tuple[str, ...]
    spec: str
    body: str
    constants: Constants

    def render(self, text: str, arg_names: list[str], constants: Mapping[str, Any]) -> str:
        return text.format(*arg_names, **{key: repr(value) for key, value in constants.items()})


def _ints(low: int, high: int, *, scaled: bool = True, **more: tuple[int, int]) -> Constants:
    """Constant `k` in [low, high] (and `more` names with their own ranges), widened with
    difficulty when `scaled`."""
    ranges = {"k": (low, high), **more}

    def draw(rng: random.Random, difficulty: int) -> dict[str, Any]:
        scale = _INT_SCALE[difficulty] if scaled else 1
        return {name: rng.randint(lo, hi * scale) for name, (lo, hi) in ranges.items()}

    return draw


def _chars(*names: str, alphabet: str = _LETTERS) -> Constants:
    """One distinct letter per name."""

    def draw(rng: random.Random, difficulty: int) -> dict[str, Any]:
        return dict(zip(names, rng.sample(alphabet, len(names)), strict=True))

    return draw


def _with(*draws: Constants) -> Constants:
    def draw(rng: random.Random, difficulty: int) -> dict[str, Any]:
        constants: dict[str, Any] = {}
        for part in draws:
            constants.update(part(rng, difficulty))
        return constants

    return draw


def _word(rng: random.Random, difficulty: int) -> dict[str, Any]:
    return {"p": rng.choice(("pre", "un", "re", "x", "my", "the ", "ok_", "re-"))}


def _range(rng: random.Random, difficulty: int) -> dict[str, Any]:
    scale = _INT_SCALE[difficulty]
    low = rng.randint(-25 * scale if difficulty > 1 else 0, 40 * scale)
    return {"lo": low, "hi": low + rng.randint(1, 30 * scale)}


def _t(
    family: str,
    name: str,
    function_names: tuple[str, ...],
    kinds: tuple[str, ...],
    spec: str,
    body: str,
    constants: Constants,
) -> Template:
    return Template(name, family, function_names, kinds, spec, body, constants)


_INT = ("int",)
_TWO_INTS = ("int", "int")
_STR = ("str",)
_LIST = ("list",)
_DICT = ("dict",)
_DICT_KEY = ("dict", "key")

TEMPLATES: tuple[Template, ...] = (
    # --- arithmetic
    _t("arithmetic", "add_k", ("add_k", "plus_k", "shift_up"), _INT,
       "returns {0} plus {k}", "return {0} + {k}", _ints(2, 199)),
    _t("arithmetic", "times_k", ("times_k", "multiply", "scale"), _INT,
       "returns {0} times {k}", "return {0} * {k}", _ints(2, 99)),
    _t("arithmetic", "affine", ("affine", "line_value", "linear"), _INT,
       "returns {a} times {0} plus {k}", "return {a} * {0} + {k}",
       _ints(1, 99, a=(2, 12))),
    _t("arithmetic", "minus_k", ("minus_k", "subtract", "shift_down"), _INT,
       "returns {0} minus {k}", "return {0} - {k}", _ints(2, 199)),
    _t("arithmetic", "square_plus_k", ("square_plus", "sq_add", "squared_shift"), _INT,
       "returns the square of {0} plus {k}", "return {0} * {0} + {k}", _ints(1, 199)),
    _t("arithmetic", "floor_div_k", ("div_k", "int_divide", "floor_div"), _INT,
       "returns {0} divided by {k}, rounded down (integer division)", "return {0} // {k}",
       _ints(2, 50)),
    _t("arithmetic", "mod_k", ("mod_k", "remainder", "rem_k"), _INT,
       "returns the remainder of {0} divided by {k}", "return {0} % {k}", _ints(2, 50)),
    _t("arithmetic", "weighted_sum", ("weighted", "combine", "mix"), _TWO_INTS,
       "returns {k} times {0} plus {1}", "return {k} * {0} + {1}", _ints(2, 99)),
    _t("arithmetic", "diff_times_k", ("diff_times", "gap_scaled", "scaled_diff"), _TWO_INTS,
       "returns {0} minus {1}, multiplied by {k}", "return ({0} - {1}) * {k}", _ints(2, 99)),
    # --- strings
    _t("strings", "repeat_k", ("repeat", "repeat_k", "echo"), _STR,
       "returns {0} repeated {k} times", "return {0} * {k}", _ints(2, 6, scaled=False)),
    _t("strings", "first_k_chars", ("head", "first_chars", "prefix_of"), _STR,
       "returns the first {k} characters of {0}", "return {0}[:{k}]", _ints(1, 9, scaled=False)),
    _t("strings", "last_k_chars", ("tail", "last_chars", "suffix_of"), _STR,
       "returns the last {k} characters of {0} (all of {0} if it is shorter)",
       "return {0}[-{k}:]", _ints(1, 9, scaled=False)),
    _t("strings", "count_char", ("count_char", "occurrences", "how_many"), _STR,
       "returns how many times the letter {c} occurs in {0}", "return {0}.count({c})",
       _chars("c")),
    _t("strings", "replace_char", ("replace_char", "swap_letter", "substitute"), _STR,
       "returns {0} with every {c} replaced by {r}", "return {0}.replace({c}, {r})",
       _chars("c", "r")),
    _t("strings", "add_prefix", ("add_prefix", "prepend", "with_prefix"), _STR,
       "returns {p} followed by {0}", "return {p} + {0}", _word),
    _t("strings", "surround", ("surround", "wrap", "enclose"), _STR,
       "returns {0} with {c} added at both ends", "return {c} + {0} + {c}",
       _chars("c", alphabet="*#-+!xyz")),
    _t("strings", "reverse_plus", ("reverse_plus", "backwards", "flip"), _STR,
       "returns {0} reversed, followed by {c}", "return {0}[::-1] + {c}",
       _chars("c", alphabet="!?.*#xyz")),
    _t("strings", "length_plus_k", ("length_plus", "size_plus", "len_k"), _STR,
       "returns the length of {0} plus {k}", "return len({0}) + {k}", _ints(1, 199)),
    # --- lists
    _t("lists", "sum_plus_k", ("sum_plus", "total_plus", "add_all"), _LIST,
       "returns the sum of the numbers in {0} plus {k}", "return sum({0}) + {k}", _ints(1, 199)),
    _t("lists", "count_greater", ("count_greater", "count_above", "how_many_over"), _LIST,
       "returns how many numbers in {0} are greater than {k}",
       "return sum(1 for v in {0} if v > {k})", _ints(0, 30)),
    _t("lists", "keep_greater", ("keep_greater", "filter_above", "only_over"), _LIST,
       "returns the numbers in {0} that are greater than {k}, as a list in the same order",
       "return [v for v in {0} if v > {k}]", _ints(0, 30)),
    _t("lists", "add_each", ("add_each", "shift_all", "plus_each"), _LIST,
       "returns a list with {k} added to each number in {0}", "return [v + {k} for v in {0}]",
       _ints(1, 199)),
    _t("lists", "scale_each", ("scale_each", "times_each", "multiply_all"), _LIST,
       "returns a list with each number in {0} multiplied by {k}",
       "return [v * {k} for v in {0}]", _ints(2, 99)),
    _t("lists", "first_k_items", ("take", "first_items", "head_items"), _LIST,
       "returns the first {k} items of the list {0}", "return {0}[:{k}]",
       _ints(1, 6, scaled=False)),
    _t("lists", "count_equal", ("count_equal", "count_of", "tally"), _LIST,
       "returns how many times {k} occurs in the list {0}", "return {0}.count({k})",
       _ints(0, 9, scaled=False)),
    _t("lists", "max_plus_k", ("max_plus", "largest_plus", "top_plus"), ("nonempty_list",),
       "returns the largest number in {0} plus {k}", "return max({0}) + {k}", _ints(1, 199)),
    _t("lists", "min_times_k", ("min_times", "smallest_times", "low_scaled"), ("nonempty_list",),
       "returns the smallest number in {0} times {k}", "return min({0}) * {k}", _ints(2, 99)),
    # --- conditionals
    _t("conditionals", "at_most_k", ("at_most", "cap", "clip_high"), _INT,
       "returns the smaller of {0} and {k}", "return min({0}, {k})", _ints(0, 199)),
    _t("conditionals", "at_least_k", ("at_least", "floor_at", "clip_low"), _INT,
       "returns the larger of {0} and {k}", "return max({0}, {k})", _ints(0, 199)),
    _t("conditionals", "divisible_by_k", ("divisible", "is_multiple", "divides"), _INT,
       "returns True if {0} is divisible by {k}, else False", "return {0} % {k} == 0",
       _ints(2, 30)),
    _t("conditionals", "big_or_small", ("size_word", "big_or_small", "classify"), _INT,
       "returns 'big' if {0} is greater than {k}, else 'small'",
       "return 'big' if {0} > {k} else 'small'", _ints(0, 60)),
    _t("conditionals", "distance_to_k", ("distance", "abs_gap", "how_far"), _INT,
       "returns the absolute difference between {0} and {k}", "return abs({0} - {k})",
       _ints(0, 199)),
    _t("conditionals", "in_range", ("in_range", "is_between", "within"), _INT,
       "returns True if {0} is between {lo} and {hi} (both included), else False",
       "return {lo} <= {0} <= {hi}", _range),
    _t("conditionals", "parity_word", ("parity", "even_or_odd", "parity_word"), _INT,
       "returns 'even' if {0} plus {k} is even, else 'odd'",
       "return 'even' if ({0} + {k}) % 2 == 0 else 'odd'", _ints(1, 199)),
    _t("conditionals", "larger_plus_k", ("larger_plus", "max_plus_k", "bigger_plus"), _TWO_INTS,
       "returns the larger of {0} and {1}, plus {k}", "return max({0}, {1}) + {k}",
       _ints(1, 199)),
    # --- dictionaries
    _t("dictionaries", "get_or_k", ("get_or", "lookup", "value_of"), _DICT_KEY,
       "returns the value of key {1} in the dictionary {0}, or {k} if the key is missing",
       "return {0}.get({1}, {k})", _ints(-1, 99)),
    _t("dictionaries", "count_values_over", ("count_over", "how_many_above", "count_big"), _DICT,
       "returns how many values in the dictionary {0} are greater than {k}",
       "return sum(1 for v in {0}.values() if v > {k})", _ints(0, 30)),
    _t("dictionaries", "sum_values_plus_k", ("sum_values", "total_value", "value_sum"), _DICT,
       "returns the sum of the values in the dictionary {0} plus {k}",
       "return sum({0}.values()) + {k}", _ints(1, 199)),
    _t("dictionaries", "keys_with_value", ("keys_with", "keys_equal", "find_keys"), _DICT,
       "returns the sorted list of the keys of the dictionary {0} whose value is {k}",
       "return sorted(key for key, v in {0}.items() if v == {k})", _ints(0, 4, scaled=False)),
    _t("dictionaries", "scale_values", ("scale_values", "times_values", "multiply_values"),
       _DICT,
       "returns a new dictionary with the keys of {0}, each value multiplied by {k}",
       "return {{key: v * {k} for key, v in {0}.items()}}", _ints(2, 99)),
    _t("dictionaries", "add_to_key", ("add_to_key", "bump", "increase"), _DICT_KEY,
       "returns a copy of the dictionary {0} where the value of key {1} is increased by {k} "
       "(a missing key counts as 0)",
       "result = dict({0})\nresult[{1}] = result.get({1}, 0) + {k}\nreturn result",
       _ints(1, 199)),
    # --- compositions of two steps
    _t("compositions", "sum_evens_times_k", ("evens_times", "even_sum_scaled", "sum_even_k"),
       _LIST, "returns the sum of the even numbers in {0}, multiplied by {k}",
       "return sum(v for v in {0} if v % 2 == 0) * {k}", _ints(2, 99)),
    _t("compositions", "count_long_words", ("count_long", "long_words", "wordy"), ("sentence",),
       "returns how many words of {0} (split on spaces) are longer than {k} letters",
       "return sum(1 for w in {0}.split() if len(w) > {k})", _ints(1, 4, scaled=False)),
    _t("compositions", "smallest_k", ("smallest", "lowest_k", "bottom"), _LIST,
       "returns the {k} smallest numbers of {0} in increasing order (all of them if there "
       "are fewer)", "return sorted({0})[:{k}]", _ints(1, 5, scaled=False)),
    _t("compositions", "squares_plus_k", ("squares_plus", "sum_squares", "energy"), _LIST,
       "returns the sum of the squares of the numbers in {0}, plus {k}",
       "return sum(v * v for v in {0}) + {k}", _ints(1, 199)),
    _t("compositions", "positive_scaled", ("positives_times", "scale_positive", "pos_scaled"),
       _LIST, "returns the positive numbers of {0}, each multiplied by {k}, as a list",
       "return [v * {k} for v in {0} if v > 0]", _ints(2, 99)),
    _t("compositions", "upper_repeat", ("shout", "upper_repeat", "loud"), _STR,
       "returns {0} in upper case, repeated {k} times", "return {0}.upper() * {k}",
       _ints(2, 5, scaled=False)),
    _t("compositions", "vowels_plus_k", ("vowels_plus", "count_vowels", "vowel_score"), _STR,
       "returns the number of vowels (a, e, i, o, u) in {0} plus {k}",
       "return sum(1 for v in {0} if v in 'aeiou') + {k}", _ints(1, 199)),
)  # fmt: skip

FAMILIES: dict[str, tuple[str, ...]] = {
    family: tuple(t.name for t in TEMPLATES if t.family == family)
    for family in dict.fromkeys(t.family for t in TEMPLATES)
}
"""Family -> its templates' names, in order. `basic` (every family) is `templates_of`'s."""

BASIC = "basic"


def templates_of(family: str, names: list[str] | None = None) -> list[Template]:
    """The templates of `family` (`basic`: all, or a family's name), narrowed to `names`.

    Raises:
        ValueError: unknown family or template name, or a name outside the family.
    """
    if family == BASIC:
        chosen = list(TEMPLATES)
    elif family in FAMILIES:
        chosen = [t for t in TEMPLATES if t.family == family]
    else:
        raise ValueError(
            f"unknown family {family!r}; choose {BASIC} or one of: {', '.join(FAMILIES)}"
        )
    if names is None:
        return chosen
    by_name = {t.name: t for t in chosen}
    unknown = [name for name in names if name not in by_name]
    if unknown:
        raise ValueError(f"no template {', '.join(map(repr, unknown))} in family {family!r}")
    return [by_name[name] for name in dict.fromkeys(names)]

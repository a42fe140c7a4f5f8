"""The multi-turn feedback loop: sampling, extraction, feedback, execution, jobs.

The package re-exports the loop's pure rules (what an answer's program is, what the
history keeps, which feedback a turn gets, prompt templates, the messages of a turn).
The modules that do I/O (`sampling`, `loop`, `jobs`) are imported by their own paths, so
importing the rules pulls in no HTTP client or database driver.
"""

from cobalt.orchestrator.rollouts.conversation import (
    TurnRecord,
    messages_of_turns,
    next_turn_messages,
)
from cobalt.orchestrator.rollouts.feedback import (
    EMPTY_FIELD,
    FEEDBACK_FIELD_CHARS,
    RETURN_VALUE_LABEL,
    FeedbackKind,
    failed_test_report,
    feedback_for_first_failure,
    feedback_kind,
    first_failure,
    public_verdict_vector,
    shown_input,
)
from cobalt.orchestrator.rollouts.prompts import (
    BUNDLED_TEMPLATES_DIR,
    FailedTestReport,
    PromptTemplate,
    TemplateError,
    bundled_template_names,
)
from cobalt.shared.extraction import (
    PYTHON_LANGUAGE_TAGS,
    THINK_CLOSE,
    THINK_OPEN,
    FencedBlock,
    answer_part,
    extract_program,
    fenced_blocks,
    history_text,
)

__all__ = [
    "BUNDLED_TEMPLATES_DIR",
    "EMPTY_FIELD",
    "FEEDBACK_FIELD_CHARS",
    "FailedTestReport",
    "FeedbackKind",
    "FencedBlock",
    "PYTHON_LANGUAGE_TAGS",
    "PromptTemplate",
    "RETURN_VALUE_LABEL",
    "THINK_CLOSE",
    "THINK_OPEN",
    "TemplateError",
    "TurnRecord",
    "answer_part",
    "bundled_template_names",
    "extract_program",
    "failed_test_report",
    "feedback_for_first_failure",
    "feedback_kind",
    "fenced_blocks",
    "first_failure",
    "history_text",
    "messages_of_turns",
    "next_turn_messages",
    "public_verdict_vector",
    "shown_input",
]

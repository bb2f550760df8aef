"""The LLM investigator: an OpenAI-compatible chat model reads the ledger through the tools, then submits.

The model is offered exactly the seven read-only tools and `submit_findings`; drafting a credit note is
never a tool. Every call it makes goes through `call_tool` (validated, scoped to the case's customer,
audited), and what the tools return is harvested as evidence. Whatever goes wrong — malformed calls, no
conclusion, an overcharge no tool returned, an API failure or timeout — ends in an escalation with a
one-line reason, never in an exception out of the graph; so does a case still investigating after
BILLSLEUTH_CASE_TIMEOUT (keeping the audit rows of the calls made so far). The verify node then re-checks
accepted findings against the ledger and the deterministic auditor; nothing here is trusted because a
model said it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from decimal import Decimal
from typing import Annotated, Any, Literal

import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agent.graph import prompts
from agent.graph.configuration import Configuration
from agent.graph.grounding import EvidenceBook, ungrounded
from agent.graph.investigators import InvestigationOutcome
from agent.graph.state import Findings
from agent.graph.tool_context import ToolContext
from agent.graph.tools import ID_MAX, READ_TOOLS, call_tool, openai_tool_specs
from agent.graph.verify import MONEY_TEXT, ROOT_CAUSE_NAMES
from agent.language import Language
from agent.model.budget import ModelRun
from agent.model.clients import model_client
from agent.model.costs import Usage

log = logging.getLogger(__name__)

SUBMIT = "submit_findings"
REMINDER = (
    "You have not called submit_findings. Call it now with your conclusion, using only numbers the tools "
    "returned. Do not answer in plain text."
)


class SubmittedFindings(BaseModel):
    """submit_findings' arguments; the JSON schema the model is shown is generated from this model."""

    model_config = ConfigDict(extra="forbid")

    root_cause: str = Field(
        description="The bug that caused the overcharge, or no_error when the bill is right.",
        json_schema_extra={"enum": sorted(ROOT_CAUSE_NAMES)},
    )
    invoice_ids: list[Annotated[str, Field(min_length=1, max_length=ID_MAX)]] = Field(
        min_length=1,
        max_length=10,
        description="The target invoice first (the one overcharged, or the one the customer asks about).",
    )
    overcharge: str = Field(
        pattern=MONEY_TEXT,
        description="Paid minus should have paid for the target invoice, as recompute_invoice reports it: a "
        'string with two decimals, e.g. "26.02"; "0.00" when nothing is wrong.',
    )
    expected_action: Literal["credit_note", "explain_only"] = Field(
        description="credit_note when the overcharge is above zero, else explain_only."
    )
    reasoning: str = Field(min_length=1, max_length=4000, description="A short account of what you found.")

    @field_validator("root_cause")
    @classmethod
    def _known_root_cause(cls, value: str) -> str:
        if value not in ROOT_CAUSE_NAMES:
            raise ValueError(f"unknown root cause {value!r}")
        return value

    def as_findings(self) -> Findings:
        return {
            "root_cause": self.root_cause,
            "invoice_ids": list(self.invoice_ids),
            "overcharge": self.overcharge,
            "expected_action": self.expected_action,
            "reasoning": self.reasoning,
        }


def submit_findings_spec() -> dict[str, Any]:
    parameters = SubmittedFindings.model_json_schema()
    for internal in ("title", "description"):  # the class name and docstring are for us, not the model
        parameters.pop(internal, None)
    return {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": "Finish the investigation: report the root cause, the invoices, the overcharge "
            "and the action. Call it exactly once, at the end.",
            "parameters": parameters,
        },
    }


def model_tool_specs() -> list[dict[str, Any]]:
    """Everything the model may call: the read tools and submit_findings — no write tool, ever."""
    return [*openai_tool_specs(), submit_findings_spec()]


def one_line(text: object, limit: int = 300) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _escalation(reason: str) -> InvestigationOutcome:
    return InvestigationOutcome(None, one_line(reason, 500))


def _arguments_text(arguments: object) -> str:
    """The call's arguments as JSON text (the API sends a string; some servers send an object)."""
    if arguments is None:
        return ""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _malformed(name: str, raw_args: str | None) -> str | None:
    """Why a read-tool call is malformed (unknown tool, arguments not JSON or not valid), or None.

    A well-formed call the tool refuses (e.g. another customer's invoice) is not malformed: the model is
    told why, and the step bound limits how long it can keep trying.
    """
    spec = READ_TOOLS.get(name)
    if spec is None:
        return f"unknown tool {name!r}"
    try:
        args = json.loads(raw_args or "{}")
    except json.JSONDecodeError:
        return f"arguments to {name} are not valid JSON"
    if not isinstance(args, dict):
        return f"arguments to {name} are not a JSON object"
    try:
        spec.args_model.model_validate(args)
    except ValidationError:
        return f"invalid arguments to {name}"
    return None


def _parse_submission(raw_args: str | None) -> SubmittedFindings | str:
    """The validated findings, or a one-line message saying what is wrong with them."""
    try:
        return SubmittedFindings.model_validate_json(raw_args or "{}")
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        return f"invalid {SUBMIT} ({where}: {one_line(first['msg'], 120)})"


def _api_failure(error: openai.OpenAIError, configuration: Configuration) -> str:
    """One line naming what failed when talking to the model (after the SDK's own retries)."""
    retries = f"{configuration.max_retries} retr{'y' if configuration.max_retries == 1 else 'ies'}"
    if isinstance(error, openai.APITimeoutError):
        return (
            f"the model API timed out: no answer within {configuration.request_timeout_s:g}s "
            f"(after {retries})"
        )
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__ or error
        return f"the model API could not be reached ({type(cause).__name__}: {one_line(cause, 160)})"
    if isinstance(error, openai.APIStatusError):
        body = error.body
        detail = body.get("message") if isinstance(body, dict) else None
        return f"the model API answered HTTP {error.status_code}: {one_line(detail or error.message, 200)}"
    return f"the model API failed: {type(error).__name__}: {one_line(error, 200)}"


# Endpoints (base URLs; None is OpenAI's) that do not know max_completion_tokens and were asked with
# max_tokens instead: remembered for the life of the process, so each pays for the refusal once.
_KNOWS_ONLY_MAX_TOKENS: set[str | None] = set()
# How OpenAI-compatible servers say they do not know a request field: Azure's older API versions
# ("Unrecognized request argument supplied: max_completion_tokens"), pydantic-validated servers such as
# older vLLM and Mistral ("extra_forbidden", "Extra inputs are not permitted", Mistral with HTTP 422), and
# OpenAI's own wording for a field a model refuses ("Unsupported parameter: …").
UNKNOWN_FIELD_WORDS = (
    "unrecognized",
    "unsupported",
    "not supported",
    "unknown",
    "unexpected",
    "extra_forbidden",
    "extra inputs",
    "not permitted",
)


def refuses_max_completion_tokens(error: openai.OpenAIError) -> bool:
    """Whether the endpoint refused the request because it does not know `max_completion_tokens`.

    Only a 400 (422 from Mistral) that names that field as unknown. "Unsupported parameter: 'max_tokens'
    … Use 'max_completion_tokens' instead" is about the old name (its `param`, and the text names it);
    any other 400 is a failure as before."""
    if not isinstance(error, openai.APIStatusError) or error.status_code not in (400, 422):
        return False
    body = error.body
    param = body.get("param") if isinstance(body, dict) else None
    if param not in (None, "max_completion_tokens"):
        return False
    text = (json.dumps(body, default=str) if body is not None else error.message).lower()
    about_the_new_name = "max_completion_tokens" in text and "max_tokens" not in text
    return about_the_new_name and any(word in text for word in UNKNOWN_FIELD_WORDS)


class _Session:
    """One conversation with the model for one case."""

    def __init__(
        self,
        client: AsyncOpenAI,
        tools: ToolContext,
        evidence: EvidenceBook,
        configuration: Configuration,
        messages: list[dict[str, Any]],
        budget: ModelRun,
    ) -> None:
        self.client = client
        self.budget = budget
        self.tools = tools
        self.evidence = evidence
        self.configuration = configuration
        self.messages = messages
        self.tool_specs = model_tool_specs()
        self.invalid_calls = 0
        self.reminded = False

    async def run(self) -> InvestigationOutcome:
        for _ in range(self.configuration.max_steps):
            # No call once the month's model budget is spent: by this run's last call, or anyone's.
            if not await self.budget.may_call():
                return InvestigationOutcome(None, budget_stop=self.budget.stopped)
            try:
                completion = await self._complete()
            except openai.OpenAIError as error:
                return _escalation(_api_failure(error, self.configuration))
            # Its cost event (once per response id), and the budget converged on it. A refused attempt
            # (say, max_completion_tokens unknown) raised above and cost nothing: it has no usage.
            await self.budget.record(completion.model, completion.id, Usage.of(completion.usage))
            if not completion.choices:
                return _escalation("the model API returned a reply with no choices")
            choice = completion.choices[0]
            message = choice.message
            calls = list(message.tool_calls or [])
            self.messages.append(self._echo(message, calls))
            if not calls:
                if self.reminded:
                    return _escalation(
                        "the model stopped without calling submit_findings, even after a reminder "
                        f"(finish_reason {choice.finish_reason})"
                    )
                self.reminded = True
                self.messages.append({"role": "user", "content": REMINDER})
                continue
            outcome = await self._answer(calls)
            await self.tools.record_calls()  # a model turn is slow: its trail lands before the next one
            if outcome is not None:
                return outcome
        return _escalation(f"the model did not submit findings within {self.configuration.max_steps} steps")

    async def _complete(self) -> ChatCompletion:
        """One model turn. The reply's bound goes as max_completion_tokens (reasoning models refuse
        max_tokens); an endpoint that does not know that name is asked again, once, with max_tokens, and
        with max_tokens from then on."""
        endpoint = self.configuration.base_url
        if endpoint in _KNOWS_ONLY_MAX_TOKENS:
            return await self._create(old_name=True)
        try:
            return await self._create(old_name=False)
        except openai.OpenAIError as error:
            if not refuses_max_completion_tokens(error):
                raise
        log.info("%s does not know max_completion_tokens: asking with max_tokens", endpoint or "OpenAI")
        _KNOWS_ONLY_MAX_TOKENS.add(endpoint)
        return await self._create(old_name=True)

    async def _create(self, *, old_name: bool) -> ChatCompletion:
        bound = self.configuration.max_tokens
        return await self.client.chat.completions.create(
            model=self.configuration.model,
            messages=self.messages,  # type: ignore[arg-type]
            tools=self.tool_specs,  # type: ignore[arg-type]
            max_completion_tokens=openai.omit if old_name else bound,
            max_tokens=bound if old_name else openai.omit,
        )

    @staticmethod
    def _echo(message: Any, calls: list[Any]) -> dict[str, Any]:
        """The assistant turn as it goes back to the API (tool results must follow their calls)."""
        echoed: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
        if calls:
            echoed["tool_calls"] = [call.model_dump(mode="json", exclude_none=True) for call in calls]
        return echoed

    def _reply(self, call_id: str, content: str) -> None:
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": content})

    def _invalid(self, call_id: str, problem: str, detail: str) -> InvestigationOutcome | None:
        """Count a malformed call; tell the model, or escalate once the limit is reached."""
        self.invalid_calls += 1
        limit = self.configuration.max_invalid_calls
        if self.invalid_calls >= limit:
            return _escalation(f"the model made {self.invalid_calls} malformed tool calls (last: {problem})")
        left = limit - self.invalid_calls
        self._reply(call_id, json.dumps({"error": f"{detail} ({left} more invalid call(s) and you stop)"}))
        return None

    async def _answer(self, calls: list[Any]) -> InvestigationOutcome | None:
        """Run the model's calls in order; an outcome ends the investigation."""
        for call in calls:
            function = getattr(call, "function", None)
            if call.type != "function" or function is None:
                outcome = self._invalid(call.id, f"a {call.type} tool call", "only function tools exist")
            elif function.name == SUBMIT:
                outcome = self._submit(call.id, _arguments_text(function.arguments))
            else:
                outcome = await self._read(call.id, function.name, _arguments_text(function.arguments))
            if outcome is not None:
                return outcome
        return None

    async def _read(self, call_id: str, name: str, raw_args: str | None) -> InvestigationOutcome | None:
        # Even a malformed call goes through call_tool, so the attempt is on the audit trail.
        result = await call_tool(self.tools, name, raw_args)
        if result.ok:
            self.evidence.harvest(name, result.data)
            self._reply(call_id, result.for_model())
            return None
        problem = _malformed(name, raw_args)
        if problem is not None:
            return self._invalid(call_id, problem, result.error or problem)
        self._reply(call_id, result.for_model())
        return None

    def _submit(self, call_id: str, raw_args: str | None) -> InvestigationOutcome | None:
        submitted = _parse_submission(raw_args)
        if isinstance(submitted, str):
            return self._invalid(call_id, submitted, submitted)
        if Decimal(submitted.overcharge) != 0 and ungrounded(submitted.overcharge, self.evidence.items):
            return _escalation(
                f"the model claimed an overcharge of {submitted.overcharge} on "
                f"{', '.join(submitted.invoice_ids)}, a number no tool it called returned"
            )
        return InvestigationOutcome(submitted.as_findings())


async def investigate_with_model(
    tools: ToolContext,
    evidence: EvidenceBook,
    configuration: Configuration,
    question: str,
    month: int | None,
    amount: str | None,
    budget: ModelRun,
    language: Language = "en",
) -> InvestigationOutcome:
    """Let the model investigate this case through the audited read tools; escalate whatever goes wrong.
    `budget`: the run admitted against the month's model budget (agent/model/budget.py); every call is costed
    through it, and the run stops when the budget runs out (`budget_stop`)."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": prompts.SYSTEM_PROMPT},
        # The complaint is untrusted: it only ever travels inside the user prompt's markers.
        {
            "role": "user",
            "content": prompts.user_prompt(tools.customer_id, question, month, amount, language),
        },
    ]
    try:
        client = model_client(configuration)  # the process's shared client for this endpoint
    except openai.OpenAIError as error:
        return _escalation(f"the model client could not be set up: {one_line(error, 200)}")
    limit = configuration.case_timeout_s
    deadline = asyncio.timeout(limit)
    try:
        # The whole conversation, SDK retries included: past the limit the case goes to a person and its
        # investigation slot is free again. The calls' audit rows stay (the caller's ToolContext writes them).
        async with deadline:
            return await _Session(client, tools, evidence, configuration, messages, budget).run()
    except TimeoutError:
        if not deadline.expired():
            raise  # some other wait timed out: not the case's limit
        return _escalation(f"the investigation took longer than {limit:g} s; a person takes it from here")

"""The approval policy's rules: first match wins, bash command globs, control operators."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from duragent.domain.approvals import (
    ApprovalPolicy,
    ApprovalRule,
    has_control_operator,
    parse_rule,
    verdict,
)
from duragent.domain.changes import ConfigChange
from duragent.domain.config import SessionConfig, TurnSnapshot
from duragent.domain.context import derive_path_state
from duragent.domain.entries import ApprovalPolicyChangeEntry

pytestmark = pytest.mark.fast

POLICY = ApprovalPolicy(
    rules=(
        ApprovalRule(tool="bash", command="ls *", action="allow"),
        ApprovalRule(tool="bash", command="git status", action="allow"),
        ApprovalRule(tool="bash", command="rm *", action="deny"),
        ApprovalRule(tool="read", action="allow"),
        ApprovalRule(tool="bash", action="ask"),
    ),
    default="ask",
)


def action(tool: str, command: str | None = None) -> str:
    return POLICY.action_for(tool, {"command": command} if command else {})[0]


def test_first_matching_rule_decides() -> None:
    assert action("bash", "ls -la src") == "allow"  # `*` spans spaces and slashes
    assert action("bash", "git status") == "allow"
    assert action("bash", "git status --short") == "ask"  # the whole command must match
    assert action("bash", "rm -rf build") == "deny"
    assert action("bash", "make test") == "ask"
    assert action("read") == "allow"
    assert action("write") == "ask"  # no rule: the default


def test_bare_command_is_not_matched_by_a_pattern_with_a_space() -> None:
    assert action("bash", "ls") == "ask"


@pytest.mark.parametrize(
    "command",
    [
        "ls *; rm -rf /",
        "ls x && rm -rf /",
        "ls x || rm -rf /",
        "ls x | sh",
        "ls `rm -rf /`",
        "ls $(rm -rf /)",
        "ls > /etc/passwd",
        "ls < secrets",
        "ls x\nrm -rf /",
        "ls x & rm -rf /",
    ],
)
def test_control_operators_never_match_an_allow_pattern(command: str) -> None:
    assert has_control_operator(command)
    assert action("bash", command) == "ask"  # falls through `ls *` to `bash -> ask`


def test_control_operators_still_match_ask_and_deny_rules() -> None:
    assert action("bash", "rm -rf / ; ls") == "deny"


def test_command_patterns_apply_to_bash_only() -> None:
    policy = ApprovalPolicy(rules=(ApprovalRule(tool="*", command="ls *", action="allow"),))
    assert policy.action_for("read", {"path": "ls x"})[0] == "allow"  # the default
    strict = policy.model_copy(update={"default": "deny"})
    assert strict.action_for("read", {"path": "ls x"})[0] == "deny"


def test_tool_globs() -> None:
    policy = ApprovalPolicy(rules=(ApprovalRule(tool="mcp_*", action="ask"),))
    assert policy.action_for("mcp_github_search", {})[0] == "ask"
    assert policy.action_for("read", {})[0] == "allow"


def test_verdict_names_the_rule() -> None:
    ask, refused = verdict(POLICY, "bash", {"command": "make"})
    assert refused is None and ask is not None
    assert ask.rule == "rule bash -> ask" and ask.command == "make"
    ask, refused = verdict(POLICY, "bash", {"command": "rm -rf build"})
    assert ask is None and refused is not None and "rule bash 'rm *' -> deny" in refused
    assert verdict(None, "bash", {"command": "rm -rf /"}) == (None, None)


def test_always_adds_an_exact_rule_first() -> None:
    allowed = POLICY.with_allowed("bash", "make [all] *")
    assert allowed.action_for("bash", {"command": "make [all] *"})[0] == "allow"
    assert allowed.action_for("bash", {"command": "make a x"})[0] == "ask"  # exact, not a glob
    assert allowed.rules[1:] == POLICY.rules


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ({"rules": [{"tool": "bash", "action": "maybe"}]}, "rules.0.action"),
        ({"rules": [{"tool": "", "action": "allow"}]}, "rules.0.tool"),
        ({"rules": [{"tool": "bash", "command": "  ", "action": "allow"}]}, "rules.0.command"),
        ({"default": "sometimes"}, "default"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": -5}, "timeout_s"),
    ],
)
def test_bad_policies_are_refused_naming_the_field(data: dict[str, object], complaint: str) -> None:
    with pytest.raises(ValidationError) as raised:
        ApprovalPolicy.model_validate(data)
    assert complaint in {".".join(map(str, e["loc"])) for e in raised.value.errors()}


def test_command_line_rules() -> None:
    assert parse_rule("allow:bash:git status") == ApprovalRule(
        tool="bash", command="git status", action="allow"
    )
    assert parse_rule("ask:*") == ApprovalRule(tool="*", action="ask")
    assert parse_rule("allow:bash:echo a:b").command == "echo a:b"
    for bad, says in [
        ("bash", "ACTION:TOOL"),
        ("maybe:bash", "must be one of allow, ask, deny"),
        ("allow:", "tool pattern is empty"),
        ("allow:bash:", "command pattern is empty"),
    ]:
        with pytest.raises(ValueError, match=says):
            parse_rule(bad)


def test_the_policy_is_branch_scoped_config() -> None:
    change = ConfigChange(approval_policy=POLICY)
    [entry] = change.entries("c1", 0)
    assert isinstance(entry, ApprovalPolicyChangeEntry) and not change.session_wide()
    defaults = SessionConfig(model="m")
    assert derive_path_state([], defaults).approval_policy is None
    assert derive_path_state([entry], defaults).approval_policy == POLICY


def test_snapshots_without_a_policy_keep_their_ids() -> None:
    plain = TurnSnapshot(
        model="m", thinking_level="off", system_prompt="s", active_tools=None, max_tokens=1
    )
    # The id a snapshot had before policies existed (computed on the parent commit).
    assert plain.id == "snap_" + _old_id(plain)
    assert plain.model_copy(update={"approval_policy": POLICY}).id != plain.id


def _old_id(snapshot: TurnSnapshot) -> str:
    import hashlib
    import json

    dumped = snapshot.model_dump(mode="json", exclude={"approval_policy"})
    canonical = json.dumps(dumped, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]

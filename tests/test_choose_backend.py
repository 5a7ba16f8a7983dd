"""Which agent backend a run gets: offline without a key, anthropic with one, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import scale_add_task
from evoteam.roles.agent import LoopAgent
from evoteam.roles.backends.choose import BackendError, choose_backend, make_agent
from evoteam.roles.offline.agent import OfflineTunerAgent

pytestmark = pytest.mark.unit

TASK = scale_add_task("tunable_scale_add.cpp", knobs={"BLOCK": [64, 256]})


def test_auto_is_offline_without_a_key_and_anthropic_with_one() -> None:
    assert choose_backend(None, {}) == "offline"
    assert choose_backend("auto", {"ANTHROPIC_API_KEY": ""}) == "offline"  # empty counts as unset
    assert choose_backend("auto", {"ANTHROPIC_API_KEY": "sk-test"}) == "anthropic"
    assert choose_backend(None, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}) == "anthropic"
    assert choose_backend("Claude-Code", {}) == "claude-code"
    assert choose_backend("openai", {}) == "openai"
    assert choose_backend("auto", {"OPENAI_API_KEY": "sk-test"}) == "offline"  # openai only when asked for


def test_unknown_backend_names_the_choices() -> None:
    with pytest.raises(BackendError, match="auto, anthropic, openai, claude-code, offline"):
        choose_backend("gpt", {})


def test_make_agent_builds_each_backend_without_calling_anything() -> None:
    offline = make_agent("offline", TASK, {})
    assert isinstance(offline, OfflineTunerAgent)
    loop = make_agent("anthropic", TASK, {"ANTHROPIC_API_KEY": "sk-test"}, model="claude-haiku-4-5")
    assert isinstance(loop, LoopAgent)
    with pytest.raises(BackendError, match="ANTHROPIC_API_KEY"):
        make_agent("anthropic", TASK, {})
    assert type(make_agent("claude-code", TASK, {})).__name__ == "ClaudeCodeAgent"
    local = make_agent("openai", TASK, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}, model="qwen2.5-coder")
    assert isinstance(local, LoopAgent) and local.model == "qwen2.5-coder"
    with pytest.raises(BackendError, match="OPENAI_API_KEY"):
        make_agent("openai", TASK, {})


def test_the_key_can_come_from_a_key_file_and_an_unreadable_one_is_a_clear_error(tmp_path: Path) -> None:
    from evoteam.roles.backends.choose import BackendError
    from evoteam.roles.backends.settings import AnthropicSettings

    key_file = tmp_path / "key"
    key_file.write_text("sk-ant-from-file\n")
    settings = AnthropicSettings.from_env({"EVOTEAM_API_KEY_FILE": str(key_file)})
    assert settings.key() == "sk-ant-from-file" and "sk-ant" not in repr(settings)
    explicit = AnthropicSettings.from_env({"EVOTEAM_API_KEY_FILE": str(key_file), "ANTHROPIC_API_KEY": "sk-env"})
    assert explicit.key() == "sk-env"
    assert choose_backend("auto", {"EVOTEAM_API_KEY_FILE": str(key_file)}) == "anthropic"
    with pytest.raises(BackendError, match="cannot read the key file") as caught:
        AnthropicSettings.from_env({"EVOTEAM_API_KEY_FILE": str(tmp_path / "missing")})
    assert "missing" in str(caught.value)

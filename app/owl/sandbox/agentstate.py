"""What each agent needs of its own inside a Run: the state it writes, the
variables it keeps, the folders made for it and the config files Owl reads.

Pure data: the policy (``policy.compute``) binds these; ``contain`` makes the
folders before a Run and lays the config files read-only.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AgentState:
    """What one agent needs of its own: state it writes, variables it keeps.

    A path may be ``$VAR`` or ``$VAR/rest``: the agent's own variable when it is
    set (Claude Code's ``CLAUDE_CONFIG_DIR``, Codex's ``CODEX_HOME``), else the
    fallback after ``|``."""

    state: tuple[str, ...] = ()
    env_keep: tuple[str, ...] = ()
    # Of `state`, the folders made before the Run when missing: a folder that
    # is not there cannot be bound writable, and what the agent then wrote
    # (its conversations, which the next Run resumes) would be lost with it.
    folders: tuple[str, ...] = ()
    # The agent's own config files Owl reads to give it its provider's port and
    # key (`agentconf`): read-only inside, so no Run widens the next one's reach.
    fixed: tuple[str, ...] = ()


AGENTS: dict[str, AgentState] = {
    "claude": AgentState(
        state=(
            "$CLAUDE_CONFIG_DIR|~/.claude",
            "~/.claude.json",
            "~/.claude.json.backup",
            "~/.config/claude",
        ),
        env_keep=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"),
        folders=("$CLAUDE_CONFIG_DIR|~/.claude",),
        fixed=("$CLAUDE_CONFIG_DIR/settings.json|~/.claude/settings.json",),
    ),
    "codex": AgentState(
        state=("$CODEX_HOME|~/.codex",),
        env_keep=("OPENAI_API_KEY", "CODEX_API_KEY"),
        folders=("$CODEX_HOME|~/.codex",),
        fixed=("$CODEX_HOME/config.toml|~/.codex/config.toml",),
    ),
    "gemini": AgentState(
        state=("~/.gemini",),
        env_keep=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        folders=("~/.gemini",),
    ),
    # OpenCode keeps its sessions (SQLite) under ~/.local/share/opencode, and
    # dies at start with EROFS when it cannot make its folders; it writes a
    # .gitignore (and plugins) into its config folder.
    "opencode": AgentState(
        state=(
            "$XDG_DATA_HOME/opencode|~/.local/share/opencode",
            "$XDG_STATE_HOME/opencode|~/.local/state/opencode",
            "$XDG_CACHE_HOME/opencode|~/.cache/opencode",
            "$XDG_CONFIG_HOME/opencode|~/.config/opencode",
        ),
        env_keep=("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENCODE_API_KEY"),
        folders=(
            "$XDG_DATA_HOME/opencode|~/.local/share/opencode",
            "$XDG_STATE_HOME/opencode|~/.local/state/opencode",
            "$XDG_CACHE_HOME/opencode|~/.cache/opencode",
            "$XDG_CONFIG_HOME/opencode|~/.config/opencode",
        ),
        fixed=("$XDG_CONFIG_HOME/opencode/opencode.json|~/.config/opencode/opencode.json",),
    ),
    # Copilot CLI keeps its sessions and settings under ~/.copilot (COPILOT_HOME),
    # and unpacks its own package into ~/.cache/copilot at its first start
    # (ENOENT on mkdir, exit 1, where it cannot).
    "copilot": AgentState(
        state=("$COPILOT_HOME|~/.copilot", "$XDG_CACHE_HOME/copilot|~/.cache/copilot"),
        env_keep=(
            "COPILOT_GITHUB_TOKEN",
            "GH_TOKEN",
            "GITHUB_TOKEN",
            "COPILOT_PROVIDER_API_KEY",
            "COPILOT_PROVIDER_BEARER_TOKEN",
        ),
        folders=("$COPILOT_HOME|~/.copilot", "$XDG_CACHE_HOME/copilot|~/.cache/copilot"),
    ),
    # pi keeps its settings, sessions and sign-ins (auth.json, written at each
    # start) under ~/.pi/agent (PI_CODING_AGENT_DIR); its providers in models.json.
    "pi": AgentState(
        state=("$PI_CODING_AGENT_DIR|~/.pi/agent",),
        env_keep=(
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_OAUTH_TOKEN",
            "OPENAI_API_KEY",
            "GEMINI_API_KEY",
            "OPENROUTER_API_KEY",
            "GROQ_API_KEY",
            "XAI_API_KEY",
            "MISTRAL_API_KEY",
            "DEEPSEEK_API_KEY",
        ),
        folders=("$PI_CODING_AGENT_DIR|~/.pi/agent",),
        fixed=("$PI_CODING_AGENT_DIR/models.json|~/.pi/agent/models.json",),
    ),
}

"""What each agent needs of its own inside a Run: the state it writes, the
variables it keeps, the folders made for it, the person's config files and
credentials it is given a copy of.

Pure data. Each agent's state is kept by Owl, per agent and per project
(``ownhome``), and bound at these paths in the Run's own home: a Run sees the
state of the agent it runs and no other's, and nothing it writes there is
read by the person's own CLI. At each Run's start the person's own config
files (``fixed``) are copied in, and their credentials (``credentials``)
without the refresh token (``Credential.drop``): a token the Run refreshes
is never one the person's CLI holds. Adding an agent is one entry.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Credential:
    """A credential file of the person's, copied into the Run's state with the
    values at ``drop`` removed (each a key path; ``*`` is every key of a table)."""

    path: str
    drop: tuple[tuple[str, ...], ...] = ()


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
    # The person's own config files of the agent (its provider, its settings;
    # `agentconf` reads them for the provider's port and key): copied into the
    # Run's state afresh at each start, so what a Run changes there lasts only
    # to its end.
    fixed: tuple[str, ...] = ()
    credentials: tuple[Credential, ...] = ()
    # The variable a headless credential Owl holds is passed in
    # (`<config folder>/credentials/<agent>`, see `ownhome.held_token`).
    token_env: str | None = None


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
        credentials=(
            Credential(
                "$CLAUDE_CONFIG_DIR/.credentials.json|~/.claude/.credentials.json",
                (("claudeAiOauth", "refreshToken"),),
            ),
        ),
        token_env="CLAUDE_CODE_OAUTH_TOKEN",
    ),
    "codex": AgentState(
        state=("$CODEX_HOME|~/.codex",),
        env_keep=("OPENAI_API_KEY", "CODEX_API_KEY"),
        folders=("$CODEX_HOME|~/.codex",),
        fixed=("$CODEX_HOME/config.toml|~/.codex/config.toml",),
        credentials=(
            Credential("$CODEX_HOME/auth.json|~/.codex/auth.json", (("tokens", "refresh_token"),)),
        ),
        token_env="CODEX_API_KEY",
    ),
    "gemini": AgentState(
        state=("~/.gemini",),
        env_keep=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
        folders=("~/.gemini",),
        fixed=("~/.gemini/settings.json",),
        credentials=(Credential("~/.gemini/oauth_creds.json", (("refresh_token",),)),),
        token_env="GEMINI_API_KEY",
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
        credentials=(
            Credential(
                "$XDG_DATA_HOME/opencode/auth.json|~/.local/share/opencode/auth.json",
                (("*", "refresh"),),
            ),
        ),
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
        fixed=("$COPILOT_HOME/config.json|~/.copilot/config.json",),
        token_env="COPILOT_GITHUB_TOKEN",
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
    # aider reads its settings and its models' prices and windows from dotfiles
    # in the home (without the metadata file it asks the network for litellm's
    # price list at each start, and reports no cost), keeps its own files under
    # ~/.aider (the price list it fetched, an OpenRouter sign-in in
    # oauth-keys.env) and takes its keys from the provider's variables.
    "aider": AgentState(
        state=("~/.aider",),
        env_keep=(
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "DEEPSEEK_API_KEY",
            "OPENROUTER_API_KEY",
            "GROQ_API_KEY",
            "XAI_API_KEY",
            "MISTRAL_API_KEY",
            "AIDER_OPENAI_API_KEY",
            "AIDER_ANTHROPIC_API_KEY",
            "AIDER_API_KEY",
        ),
        folders=("~/.aider",),
        fixed=(
            "~/.aider.conf.yml",
            "~/.aider.model.settings.yml",
            "~/.aider.model.metadata.json",
            "~/.aider/oauth-keys.env",
        ),
    ),
}

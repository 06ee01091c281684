"""A very small bash: enough grammar to run the control plane's command lines, nothing more.

It splits words the way bash does (quotes, backslashes, `"$?"`), runs `;`/newline/`&&`/`||`
lists and the redirections `2>&1`, `>/dev/null` and friends, and looks each command up in the
simulated tools. It never evaluates anything: command substitution, pipes, subshells and
background jobs are refused with an error, so an argument that tries to inject a command stays
one inert literal word.

`tokenizer` splits the text, `syntax` holds the grammar's pieces and lists, `runner` runs them,
`session` is who runs them and where their output goes.
"""

from __future__ import annotations

from .runner import run
from .session import ERR, OUT, Session, Sink

__all__ = ["ERR", "OUT", "Session", "Sink", "run"]

"""Prints the requirements of one of pyproject.toml's optional-dependency extras, one a line,
for pip to install without reinstalling lucid (`make docs` installs the `docs` extra so):

    python tools/extra_requirements.py docs
"""

import re
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def requirements(extra: str) -> list[str]:
    text = PYPROJECT.read_text()
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the extra's list, read as written there
        m = re.search(rf"^{re.escape(extra)}\s*=\s*\[(.*?)\]", text, flags=re.M | re.S)
        if not m:
            raise SystemExit(f"pyproject.toml has no extra named {extra!r}")
        return re.findall(r'"([^"]+)"', re.sub(r"#[^\n]*", "", m.group(1)))
    extras = tomllib.loads(text)["project"]["optional-dependencies"]
    if extra not in extras:
        raise SystemExit(f"pyproject.toml has no extra named {extra!r}")
    return extras[extra]


if __name__ == "__main__":
    print("\n".join(requirements(sys.argv[1])))

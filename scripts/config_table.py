"""Write docs/config.md, the table of every config key, its default and its meaning (from the
config dataclasses), and of every env and its settings (mbrl/envs/specs.py):
``python scripts/config_table.py`` (``--check``: exit 1 if it is stale)."""

from __future__ import annotations

import argparse
import os
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.tools.config_reference import markdown

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "config.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--check", action="store_true", help="only check docs/config.md")
    args = parser.parse_args()
    text = markdown()
    if args.check:
        with open(PATH, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("docs/config.md is stale: run python scripts/config_table.py")
        return
    with open(PATH, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"wrote {os.path.normpath(PATH)}")


if __name__ == "__main__":
    main()

"""Re-wrap the `__all__` list that nbdev-export writes, so that no line of the package passes 120 characters.
nbdev 3.3 wraps the list at 120 and then puts `__all__ = ` before its first line (up to 130); this wraps it with
the prefix counted. Run after nbdev-export (`make export` does); the export-in-sync test does the same."""
import re
import sys
from pathlib import Path
from textwrap import TextWrapper

WRAP = TextWrapper(width=120, initial_indent="__all__ = ", subsequent_indent=" " * 11, break_long_words=False)
NBDEV_ALL = re.compile(r"^__all__ = (\[[^\]]*\])$", re.M)   # nbdev's list: names in quotes, no ']' inside

for path in sorted(Path(sys.argv[1] if len(sys.argv) > 1 else "coupled_qk").glob("*.py")):
    text = path.read_text(encoding="utf-8")
    new = NBDEV_ALL.sub(lambda m: "\n".join(WRAP.wrap(" ".join(m[1].split()))), text, count=1)
    if new != text:
        path.write_text(new, encoding="utf-8")

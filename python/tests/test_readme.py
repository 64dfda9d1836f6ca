"""The README's "Use from PyTorch" snippet is the marked region of examples/torch_quickstart.py, which the GPU test
(python/tests/test_torch_gpu.py) runs: the README cannot show code that no longer works.

    python3 python/tests/test_readme.py"""

import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(REPO, "examples", "torch_quickstart.py")
BEGIN, END = "# [readme begin]", "# [readme end]"


def marked_region(path):
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == BEGIN)
    stop = next(i for i, line in enumerate(lines) if line.strip() == END)
    return "\n".join(lines[start + 1:stop]).strip("\n")


def readme_snippet(path):
    text = open(path).read()
    section = re.search(r"^## Use from PyTorch\n(.*?)(?=^##)", text, flags=re.S | re.M)
    if not section:
        return None
    block = re.search(r"```python\n(.*?)```", section.group(1), flags=re.S)
    return block.group(1).strip("\n") if block else None


def main():
    want = marked_region(EXAMPLE)
    have = readme_snippet(os.path.join(REPO, "README.md"))
    if have is None:
        print("README.md: no ```python block under '## Use from PyTorch'")
        return 1
    if have != want:
        print("README.md's 'Use from PyTorch' snippet differs from examples/torch_quickstart.py's marked region:")
        print("--- README.md\n" + have + "\n--- examples/torch_quickstart.py\n" + want)
        return 1
    print(f"README snippet = examples/torch_quickstart.py lines between the markers ({len(want.splitlines())} lines): ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

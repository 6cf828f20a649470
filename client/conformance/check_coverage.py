#!/usr/bin/env python3
"""Checks that every client's tests implement the conformance scenarios.

Reads the scenario list (client/conformance/SCENARIOS.md: a `## `id``
heading, then an `Applies to:` line naming languages) and each client's test
sources, which mark the test of a scenario with a comment
`conformance: <id>`. Fails, naming each gap, when a client has no marker for
a scenario that applies to it, a marker for one that does not apply to it,
or a marker naming no scenario on the list.

    check_coverage.py [client-dir]      (default: the folder above this one)

Exit status 0 when every client covers its scenarios, 1 otherwise, 2 when
the scenario list itself cannot be read.
"""

import pathlib
import re
import sys

# Where each client keeps its tests, and which files are test sources.
TEST_SOURCES = {
    "cpp": ("cpp/tests", ("*.cc", "*.h")),
    "go": ("go", ("*_test.go",)),
    "java": ("java/src/test", ("*.java",)),
    "node": ("node/test", ("*.ts",)),
    "python": ("python/tests", ("*.py",)),
}

HEADING = re.compile(r"^## `([a-z0-9-]+)`\s*$")
APPLIES = re.compile(r"^Applies to:\s*(.*)$")
MARKER = re.compile(r"conformance:\s*([a-z0-9-]+)")


def read_scenarios(path):
    """Returns {id: set of languages} from the scenario list."""
    scenarios = {}
    current = None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        heading = HEADING.match(line)
        if heading:
            current = heading.group(1)
            if current in scenarios:
                raise ValueError(f"{path}:{number}: scenario {current!r} twice")
            scenarios[current] = None
            continue
        applies = APPLIES.match(line)
        if applies and current is not None:
            languages = set(applies.group(1).split())
            unknown = languages - set(TEST_SOURCES)
            if unknown:
                raise ValueError(
                    f"{path}:{number}: unknown language(s) {sorted(unknown)} "
                    f"(known: {sorted(TEST_SOURCES)})"
                )
            scenarios[current] = languages
    missing = [s for s, langs in scenarios.items() if not langs]
    if missing:
        raise ValueError(f"{path}: no 'Applies to:' line for {missing}")
    if not scenarios:
        raise ValueError(f"{path}: no scenarios")
    return scenarios


def markers(client_dir, language):
    """Returns {id: [file:line, ...]} of the markers in a client's tests."""
    subdir, patterns = TEST_SOURCES[language]
    root = client_dir / subdir
    found = {}
    for pattern in patterns:
        for path in sorted(root.rglob(pattern)):
            if any(part in ("node_modules", "target", ".venv") for part in path.parts):
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                for match in MARKER.finditer(line):
                    where = f"{path.relative_to(client_dir)}:{number}"
                    found.setdefault(match.group(1), []).append(where)
    return found


def main(argv):
    client_dir = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parent.parent)
    try:
        scenarios = read_scenarios(client_dir / "conformance" / "SCENARIOS.md")
    except (OSError, ValueError) as err:
        print(f"check_coverage: {err}", file=sys.stderr)
        return 2
    problems = []
    for language in sorted(TEST_SOURCES):
        found = markers(client_dir, language)
        for scenario, languages in scenarios.items():
            if language in languages and scenario not in found:
                problems.append(f"{language}: no test marked 'conformance: {scenario}'")
            if language not in languages and scenario in found:
                problems.append(
                    f"{language}: {', '.join(found[scenario])} marks {scenario!r}, "
                    f"which SCENARIOS.md says does not apply to {language}"
                )
        for scenario in sorted(set(found) - set(scenarios)):
            problems.append(
                f"{language}: {', '.join(found[scenario])} marks {scenario!r}, "
                "which is not in SCENARIOS.md"
            )
        covered = sum(1 for s, langs in scenarios.items() if language in langs and s in found)
        wanted = sum(1 for langs in scenarios.values() if language in langs)
        print(f"{language}: {covered} of {wanted} scenarios")
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

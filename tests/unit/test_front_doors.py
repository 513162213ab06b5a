"""Each folder with a front door (its `__init__.py`, which the rest of ocat goes through) has an
import-linter contract that protects every room behind it, so a module added to the folder is
behind the door from its first day; and docs/ARCHITECTURE.md's module map names exactly those doors.

A door contract is a `protected` one whose only allowed importer is an ocat package and whose
protected modules are all inside it (pyproject.toml). `OPEN` names the rooms a door leaves open
on purpose, with why.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from tests.support.import_graph import PACKAGE, ROOT, module_name

OPEN = {
    # The faces list a provider's models with it; litellm's one way in has a contract of its own
    # (the model layer and the embedders).
    "ocat.llm": {"ocat.llm.model_list", "ocat.llm.litellm_offline"},
}


def rooms(package: str, root: Path = PACKAGE) -> set[str]:
    """The modules and sub-packages directly in a package, by dotted name."""
    folder = root.parent.joinpath(*package.split("."))
    found = {module_name(path, root.parent) for path in folder.glob("*.py") if path.name != "__init__.py"}
    found |= {module_name(sub / "__init__.py", root.parent) for sub in folder.iterdir()
              if (sub / "__init__.py").exists()}
    return found


def doors(pyproject: Path = ROOT / "pyproject.toml") -> dict[str, set[str]]:
    """Each door's package -> the rooms its contract protects."""
    contracts = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    found: dict[str, set[str]] = {}
    for contract in contracts:
        allowed = contract.get("allowed_importers", [])
        if contract["type"] != "protected" or len(allowed) != 1 or not allowed[0].startswith("ocat."):
            continue
        protected = set(contract["protected_modules"])
        if all(module.startswith(allowed[0] + ".") for module in protected):
            found.setdefault(allowed[0], set()).update(protected)
    return found


def test_each_door_protects_every_room_behind_it() -> None:
    found = doors()
    assert found, "no front door contract found in pyproject.toml: has their form changed?"
    unguarded = {door: sorted(rooms(door) - OPEN.get(door, set()) - protected)
                 for door, protected in found.items()}
    assert {door: missing for door, missing in unguarded.items() if missing} == {}


def test_the_module_map_names_the_doors_there_are() -> None:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    said = re.search(r"folders have a front door(.*?)The other folders", text, flags=re.DOTALL)
    assert said, "ARCHITECTURE.md's module map no longer says which folders have a front door"
    named = {name for name in re.findall(r"`(ocat[\w.]*)`", said.group(1))
             if (ROOT / Path(*name.split(".")) / "__init__.py").exists()}
    assert named == set(doors())

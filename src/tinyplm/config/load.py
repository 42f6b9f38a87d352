"""Load a YAML recipe with ``key=value`` overrides into a frozen :class:`RunConfig`.

Unknown or misspelled keys fail naming the key, its line in the file and the nearest valid key.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from tinyplm.config.schema import RunConfig
from tinyplm.errors import RecipeError, did_you_mean
from tinyplm.files import read_utf8

M = TypeVar("M", bound=BaseModel)


def load_recipe(path: str | Path, overrides: list[str] | None = None, schema: type[M] = RunConfig) -> M:
    """Read ``path``, apply ``overrides`` (``a.b.c=value``), validate against ``schema``
    (a run recipe by default; a pre-training recipe is another schema).

    Raises ``RecipeError`` naming the file, line and key for any problem.
    """
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe file not found")
    text = read_utf8(path, RecipeError)
    raw = _parse_yaml(path, text)
    if raw is None and not overrides:
        raise RecipeError(f"{path}: the recipe is empty; a recipe names at least its task and teacher "
                          "(recipes/glue/sst2_demo.yaml is one)")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise RecipeError(f"{path}: a recipe is a mapping of keys to values, got {type(raw).__name__}")
    for item in overrides or []:
        apply_override(raw, item)
    return validate_recipe(raw, source=path, text=text, overrides=overrides, schema=schema)


class _UniqueKeys(yaml.SafeLoader):
    """YAML's safe loader, refusing a key given twice in one mapping (plain YAML keeps the last one
    silently); keys a merge (``<<: *anchor``) brings in may still be overridden."""

    def construct_mapping(self, node, deep=False):
        seen: set[object] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:  # a list or mapping as a key: the base loader refuses it, with its line
                continue
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} is given twice in one mapping (the "
                                                        "last would win silently)", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _parse_yaml(path: Path, text: str) -> Any:
    """The YAML document in ``text``; raises ``RecipeError`` naming the file and line, on one line
    (a key given twice in one mapping included)."""
    try:
        return yaml.load(text, Loader=_UniqueKeys)  # noqa: S506 - a SafeLoader subclass
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow: no problem_mark, only a position
        line = text.count("\n", 0, exc.position) + 1
        raise RecipeError(f"{path}:{line}: not valid YAML (character {chr(exc.character)!r} is not allowed)") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise RecipeError(f"{path}{where}: not valid YAML ({problem})") from None


def is_pretrain_recipe(path: str | Path) -> bool:
    """True when ``path`` looks like a pre-training recipe (a top-level ``objective`` section,
    which run recipes do not have). Unreadable files are left to :func:`load_recipe` to report."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    return isinstance(raw, dict) and "objective" in raw and "students" not in raw


def validate_recipe(
    raw: dict[str, Any], source: Path | str = "<recipe>", text: str | None = None, overrides: list[str] | None = None,
    schema: type[M] = RunConfig, flags: Mapping[str, str] | None = None,
) -> M:
    """Validate a recipe mapping against ``schema``; errors name the key path, its line (or the
    override that set it) and the nearest valid key. ``flags``: for a recipe a command made from
    its options, the option that set each dotted key, named beside the key in an error (the user
    typed ``--epochs 0``, not ``teacher.finetune.epochs``)."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # An unknown key is the likelier root cause (a misspelled required key also reports
        # "field required"), so name it first.
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        loc = tuple(err["loc"])
        override = _override_for(loc, overrides or [], unknown=err["type"] == "extra_forbidden")
        line = line_of(text, loc) if text and not override else None
        where = f"override '{override}'" if override else (f"{source}:{line}" if line else f"{source}")
        key = _dotted(loc)
        if err["type"] == "extra_forbidden":
            valid = _valid_keys(schema, loc[:-1])
            hint = did_you_mean(str(loc[-1]), valid)
            raise RecipeError(
                f"{where}: unknown key '{key}'{hint} Valid keys here: {', '.join(sorted(valid))}"
            ) from None
        msg = err["msg"].removeprefix("Value error, ")
        if not override and key in (flags or {}):
            key = f"{flags[key]} ({key})"
        raise RecipeError(f"{where}: {key or 'recipe'}: {msg}") from None


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply one ``a.b.c=value`` override in place; the value is parsed as YAML.

    A list index may be a number (``students.0.train.lr=1e-4``) or ``*`` for every element.
    """
    if "=" not in item:
        raise RecipeError(f"override '{item}': expected key=value, e.g. teacher.finetune.lr=3e-5")
    key, _, value_text = item.partition("=")
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise RecipeError(f"override '{item}': empty key")
    try:
        value = yaml.safe_load(value_text) if value_text.strip() else None
    except yaml.YAMLError:
        raise RecipeError(f"override '{item}': the value is not valid YAML") from None
    _set_path(raw, parts, value, item)


def _override_for(loc: tuple[Any, ...], overrides: list[str], unknown: bool = False) -> str | None:
    """The override that set the key at ``loc`` (or a parent of it), if any. With ``unknown`` (the
    key at ``loc`` is not in the schema) an override of a key *below* it counts too: setting
    ``teacher.finetun.lr`` is what created the unknown ``teacher.finetun``."""
    path = [str(p) for p in loc]
    for item in reversed(overrides):
        parts = [p for p in item.partition("=")[0].strip().split(".") if p]
        if len(parts) > len(path) and not unknown:
            continue
        if all(a == b or a == "*" for a, b in zip(parts, path, strict=False)):
            return item
    return None


def _set_path(node: Any, parts: list[str], value: Any, item: str) -> None:
    head, rest = parts[0], parts[1:]
    if isinstance(node, list):
        if head == "*":
            targets = list(range(len(node)))
        elif head.isdigit() and int(head) < len(node):
            targets = [int(head)]
        else:
            raise RecipeError(f"override '{item}': '{head}' is not an index of a list of {len(node)}")
        for i in targets:
            if rest:
                _set_path(node[i], rest, value, item)
            else:
                node[i] = value
        return
    if not isinstance(node, dict):
        raise RecipeError(f"override '{item}': cannot set '{head}' inside a {type(node).__name__}")
    if not rest:
        node[head] = value
        return
    if node.get(head) is None:
        if rest[0] == "*" or rest[0].isdigit():
            raise RecipeError(f"override '{item}': '{head}' is not a list in the recipe")
        node[head] = {}
    _set_path(node[head], rest, value, item)


def _dotted(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _valid_keys(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the section at ``loc`` (walking nested models and lists)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) else None
        if field is None:
            return []
        current = _model_in(field.annotation)
        if current is None:
            return []
    return list(current.model_fields) if isinstance(current, type) else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside ``X``, ``X | None`` or ``list[X]``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """1-based line of the key at ``loc`` in the YAML text (None if not found there)."""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if k.value == str(part)), None)
            if match is None:
                return line
            line, node = match[0].start_mark.line + 1, match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


def dump_resolved(cfg: RunConfig) -> str:
    """The fully resolved recipe as YAML (every default written out), less its ``tracking`` section:
    how a run is observed is not what it computes, so it does not change the run dir a recipe
    claims (see ``config.tracking``)."""
    return yaml.safe_dump(cfg.model_dump(mode="json", exclude={"tracking"}), sort_keys=False)

"""Validate nsbox's Kubernetes manifests without a cluster.

Every YAML document under the given directories is checked against the
Kubernetes JSON schemas that kubernetes-validate bundles, in strict mode
(an unknown field is refused, as `kubectl apply --validate=strict` refuses
it), for each Kubernetes release in --versions. On top of the schemas:

- a key given twice in one mapping is refused (YAML loaders keep the last
  one silently, so a misplaced override would pass the schema);
- a document whose kind has no schema is refused, not skipped;
- the service's settings in a ConfigMap (keys ending in .toml that are not
  policies) may only use flags `nsbox serve` has, as docs/cli.md lists them
  (generated from the flags themselves), and every flag in a container's
  args must be one of them;
- a policy in a ConfigMap (a .toml key with a [limits] or [sandbox] table,
  or an `extends`) must be accepted by `nsbox policy show` (NSBOX_BIN), and
  each policy the settings serve must be a built-in or a file of the same
  ConfigMap.

With --fixtures DIR, each file in DIR is a manifest that must be refused:
its first line is `# refused: TEXT`, and one of its errors must contain
TEXT. This keeps the check itself honest: if the schemas stopped being
applied, the fixtures would pass and this would fail.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml

REPO = Path(__file__).resolve().parent.parent.parent


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping."""


def _construct_mapping(loader: UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key {key!r} given twice (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def serve_flags() -> set[str]:
    """The flags of `nsbox serve`, from its table in docs/cli.md."""
    text = (REPO / "docs" / "cli.md").read_text()
    start = text.index("## `nsbox serve`")
    end = text.index("\n## ", start + 1)
    flags = set(re.findall(r"^\| `--([a-z-]+)", text[start:end], re.MULTILINE))
    if not flags:
        raise SystemExit("k8s-validate: docs/cli.md: no flags found in the `nsbox serve` section")
    return flags


def is_policy(text: str) -> bool:
    tree = tomllib.loads(text)
    return "extends" in tree or "limits" in tree or "sandbox" in tree


def check_configmap(doc: dict[str, Any], where: str, flags: set[str]) -> list[str]:
    errors: list[str] = []
    for key, text in (doc.get("data") or {}).items():
        if not key.endswith(".toml"):
            continue
        try:
            tree = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            errors.append(f"{where}: data.{key}: not TOML: {e}")
            continue
        if is_policy(text):
            errors.extend(check_policy(key, text, where))
            continue
        for setting in tree:
            if setting not in flags or setting == "config":
                errors.append(f"{where}: data.{key}: {setting}: not a setting of nsbox serve (docs/cli.md)")
        errors.extend(check_served(tree.get("policies", []), doc, f"{where}: data.{key}: policies"))
    return errors


def check_served(served: Any, doc: dict[str, Any], where: str) -> list[str]:
    """Each served policy must exist: a built-in nsbox knows, or a file of this ConfigMap."""
    names = served.split(",") if isinstance(served, str) else list(served)
    errors: list[str] = []
    for name in (n.strip() for n in names):
        if "/" in name:
            if Path(name).name not in (doc.get("data") or {}):
                errors.append(f"{where}: {name}: no key {Path(name).name} in this ConfigMap")
            continue
        done = subprocess.run([nsbox_bin(), "policy", "show", name], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            errors.append(f"{where}: {name}: not a built-in policy: {done.stderr.strip()}")
    return errors


def nsbox_bin() -> str:
    return os.environ.get("NSBOX_BIN", str(REPO / "bin" / "nsbox"))


def check_policy(key: str, text: str, where: str) -> list[str]:
    nsbox = nsbox_bin()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / key
        path.write_text(text)
        done = subprocess.run([nsbox, "policy", "show", str(path)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return [f"{where}: data.{key}: nsbox policy show refused it: {done.stderr.strip() or done.stdout.strip()}"]
    return []


def containers(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = doc.get("spec") or {}
    pod = spec if doc.get("kind") == "Pod" else (spec.get("template") or {}).get("spec") or {}
    return list(pod.get("containers") or []) + list(pod.get("initContainers") or [])


def check_args(doc: dict[str, Any], where: str, flags: set[str]) -> list[str]:
    errors: list[str] = []
    for c in containers(doc):
        args = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
        if "serve" not in args:
            continue
        for a in args[args.index("serve") + 1 :]:
            if a.startswith("--") and a[2:].split("=", 1)[0] not in flags:
                errors.append(f"{where}: container {c.get('name')}: {a}: not a flag of nsbox serve (docs/cli.md)")
    return errors


def check_file(path: Path, versions: list[str], flags: set[str]) -> list[str]:
    try:
        docs = [d for d in yaml.load_all(path.read_text(), Loader=UniqueKeyLoader) if d is not None]
    except yaml.YAMLError as e:
        return [f"{path}: {e}"]
    if not docs:
        return [f"{path}: no YAML document"]
    errors: list[str] = []
    for i, doc in enumerate(docs):
        where = f"{path} document {i + 1}"
        if not isinstance(doc, dict) or not doc.get("apiVersion") or not doc.get("kind"):
            errors.append(f"{where}: not a Kubernetes object (no apiVersion or kind)")
            continue
        where = f"{path} {doc['kind']}/{(doc.get('metadata') or {}).get('name', '?')}"
        if not (doc.get("metadata") or {}).get("name"):
            errors.append(f"{where}: no metadata.name")
        for version in versions:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
            except kubernetes_validate.ValidationError as e:
                loc = ".".join(str(p) for p in e.path) or "(top)"
                errors.append(f"{where}: Kubernetes {version}: {loc}: {e.message}")
            except kubernetes_validate.SchemaNotFoundError as e:
                errors.append(f"{where}: Kubernetes {version}: no schema: {e}")
        if doc["kind"] == "ConfigMap":
            errors.extend(check_configmap(doc, where, flags))
        errors.extend(check_args(doc, where, flags))
    return errors


def show(path: Path) -> str:
    """path relative to the repository when it lies in it."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def yaml_files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    files = sorted(p for p in root.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    if not files:
        raise SystemExit(f"k8s-validate: {root}: no .yaml files")
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--versions", default="1.30.0,1.37.0", help="Kubernetes releases to validate against")
    ap.add_argument("--fixtures", type=Path, help="directory of manifests each of which must be refused")
    ap.add_argument("paths", nargs="+", type=Path, help="manifest files or directories (searched recursively)")
    args = ap.parse_args()
    versions = [v.strip() for v in args.versions.split(",") if v.strip()]
    flags = serve_flags()
    failed = False
    for root in args.paths:
        for path in yaml_files(root):
            errors = check_file(path, versions, flags)
            for e in errors:
                print(f"ERROR {e}")
            if errors:
                failed = True
            else:
                print(f"ok    {show(path)}")
    if args.fixtures:
        for path in yaml_files(args.fixtures):
            first = path.read_text().splitlines()[0]
            if not first.startswith("# refused: "):
                print(f"ERROR {path}: the first line must be `# refused: TEXT`")
                failed = True
                continue
            want = first.removeprefix("# refused: ")
            errors = check_file(path, versions, flags)
            if not any(want in e for e in errors):
                print(f"ERROR {path}: should be refused with {want!r}, got {errors or 'no error'}")
                failed = True
            else:
                print(f"ok    {show(path)} refused ({want})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""loomthreads._types is what scripts/gen_types.py makes of the OpenAPI
document today: the client's wire types cannot drift from the server's."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]


def test_types_are_generated_from_openapi() -> None:
    spec = importlib.util.spec_from_file_location("gen_types", PACKAGE / "scripts" / "gen_types.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    openapi = json.loads(gen.OPENAPI.read_text(encoding="utf-8"))
    committed = (PACKAGE / "src" / "loomthreads" / "_types.py").read_text(encoding="utf-8")
    assert gen.generate(openapi) == committed, "run scripts/gen_types.py: _types.py is out of date"


def test_every_langgraph_schema_has_a_type() -> None:
    import loomthreads._types as types

    openapi = json.loads((PACKAGE.parent.parent / "httpapi" / "openapi.json").read_text(encoding="utf-8"))
    names = {n for n in openapi["components"]["schemas"] if n.startswith("LangGraph")}
    assert names and names <= set(types.__all__)

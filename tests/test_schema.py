from __future__ import annotations

from conftest import REPO

from tracekit import schema


def test_schema_documents_are_generated_from_code():
    # Regenerate with: python -m tracekit.schema
    assert (REPO / "schemas" / "events.md").read_text() == schema.render_markdown()
    assert (REPO / "schemas" / "events.schema.json").read_text() == schema.render_json_schema()


def test_every_column_is_documented_for_every_source():
    for c in schema.COLUMNS:
        assert c.meaning and c.torch and c.tf and c.nsys, c.name
    assert len(set(schema.COLUMN_NAMES)) == len(schema.COLUMNS)

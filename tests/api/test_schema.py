"""The OpenAPI schema validates, is served to callers with a role, and the docs page works
without the internet."""

from __future__ import annotations

import re

import pytest
import yaml
from django.core.management import call_command

pytestmark = pytest.mark.django_db

SCHEMA = "/api/v1/schema/"
DOCS = "/api/v1/docs/"


def test_the_schema_validates_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    assert schema["openapi"].startswith("3.")
    paths = set(schema["paths"])
    assert {
        "/api/v1/hosts/",
        "/api/v1/hosts/{name}/",
        "/api/v1/hosts/{name}/snapshots/",
        "/api/v1/hosts/{name}/snapshots/latest/",
        "/api/v1/snapshots/{id}/",
        "/api/v1/deployments/",
        "/api/v1/deployments/{id}/",
        "/api/v1/models/",
        "/api/v1/models/{id}/",
        "/api/v1/changes/",
        "/api/v1/changes/{id}/",
        "/api/v1/changes/{id}/approve/",
        "/api/v1/changes/{id}/reject/",
        "/api/v1/changes/{id}/break-glass/",
        "/api/v1/changes/{id}/cancel/",
        "/api/v1/audit/events/",
        "/api/v1/audit/events/{seq}/",
        "/api/v1/audit/export/",
    } <= paths
    assert schema["components"]["securitySchemes"]["tokenAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["tokenAuth"]["description"],
    }
    # The token page is HTML for people, not part of the API; the JSON for your own tokens is.
    assert not any(p.startswith("/api/v1/tokens") for p in paths)
    assert {
        "/api/v1/me/tokens/",
        "/api/v1/me/tokens/{id}/revoke/",
        "/api/v1/hosts/{name}/units/{unit}/journal/",
        "/api/v1/snapshots/{id}/diff/{other}/",
        "/api/v1/audit/verify/",
    } <= paths


def test_no_schema_component_exposes_a_secret(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    text = out.read_text()
    for word in ("private_key", "encrypted", "digest_of_token", "password"):
        assert word not in text


def test_the_schema_is_served_to_callers_with_a_role(api_for, viewer, outsider):
    assert api_for(None).get(SCHEMA).status_code == 401
    assert api_for(outsider).get(SCHEMA).status_code == 403
    response = api_for(viewer).get(SCHEMA, {"format": "json"})
    assert response.status_code == 200
    assert response.json()["info"]["title"] == "GPU control plane API"
    assert "openapi: 3" in api_for(viewer).get(SCHEMA).content.decode()


def test_the_docs_page_loads_nothing_from_the_internet(client, viewer):
    assert client.get(DOCS).status_code == 302  # sign in first
    client.force_login(viewer)
    response = client.get(DOCS)
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources, html
    for source in sources:
        assert not source.startswith(("http:", "https:", "//")), source
    bundle = next(s for s in sources if s.endswith("swagger-ui-bundle.js"))
    asset = client.get(bundle)
    assert asset.status_code == 200
    # The page's start-up script is served from the docs URL itself (no inline script under
    # the Content Security Policy), and it names the schema.
    script = next(s for s in sources if s.startswith(DOCS + "?script"))
    assert SCHEMA in client.get(script).content.decode()


def _as_json_schema(node):
    """OpenAPI 3.0's `nullable` as JSON Schema's null type, and no property left undeclared, so
    jsonschema can hold a response to the served schema."""
    if isinstance(node, list):
        return [_as_json_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    node = {k: _as_json_schema(v) for k, v in node.items()}
    if node.get("type") == "object" and "properties" in node:
        node.setdefault("additionalProperties", False)
    if node.pop("nullable", False):
        node = {"anyOf": [node, {"type": "null"}]}
    return node


def _parsed_schema(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--file", str(out))
    schema = yaml.safe_load(out.read_text())
    return _as_json_schema(schema["components"]["schemas"]["Snapshot"]["properties"]["parsed"])


def test_a_snapshots_parsed_state_is_what_the_schema_says(tmp_path, api_for, viewer):
    """Every field a probe stores is typed in the schema (GPUs, units, servers, integrity,
    problems), and what the API answers for a real probe's parse holds to it."""
    import jsonschema

    from hosts.parsers import parse_probe
    from tests import factories as f
    from tests.hosts.parser_samples import ENV_FILES, JOURNAL_LINES, UNITS, sample

    schema = _parsed_schema(tmp_path)
    assert {"gpus", "gpu_details", "topology", "deployments", "problems"} <= set(
        schema["properties"]
    )
    parse = parse_probe(
        sample("probe_two_units.txt"),
        UNITS,
        integrity=True,
        environment_files=ENV_FILES,
        journal_lines=JOURNAL_LINES,
    )
    snapshot = f.make_snapshot(f.make_host("gpu-01"), parsed=parse.state.to_json())
    parsed = api_for(viewer).get(f"/api/v1/snapshots/{snapshot.pk}/").json()["parsed"]
    assert parsed["gpus"] and parsed["deployments"]
    jsonschema.validate(parsed, schema)

    wrong = {**parsed, "gpus": [{**parsed["gpus"][0], "memory_used_mib": "a lot"}]}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, schema)

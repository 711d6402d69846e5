"""The OpenAPI contract, checked by an independent fuzzer (schemathesis) against a live server
on SQLite and on PostgreSQL: every answer is documented (status, content type, body schema, and
headers), no input the schema allows is a server error, and authentication is not bypassed."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import ADMIN, START, LiveServer

schemathesis = pytest.importorskip("schemathesis")

pytestmark = pytest.mark.slow

EXAMPLES = 50  # per operation and backend: about ten seconds per backend


@pytest.fixture
def live(db_url):
    with LiveServer(db_url) as srv:
        httpx.post(srv.url + "/v1/studies", headers={"Authorization": f"Bearer {ADMIN}"},
                   json={"study": "s1", "horizon": 16, "max_changes": 2, "epsilon": 1.0,
                         "method": "auto", "start": START, "period": "1d",
                         "min_devices": 1}).raise_for_status()
        yield srv


def test_fuzzed_requests_conform_to_the_contract(live):
    # Creating a study has cross-field rules (calendar dates, change budget against horizon,
    # sparsity per randomizer) that JSON Schema cannot state: a schema-valid body may be a 400.
    config = schemathesis.config.SchemathesisConfig.from_dict({"operations": [{
        "include-path": "/v1/studies", "include-method": "POST",
        "checks": {"positive_data_acceptance": {"expected-statuses": [
            "2xx", "400", "401", "403", "404", "409", "429", "5xx"]}}}]})
    schema = schemathesis.openapi.from_url(live.url + "/openapi.json", config=config)
    failures: dict[str, str] = {}
    operations, calls = 0, [0]
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def fuzz(case):
            calls[0] += 1
            case.call_and_validate(base_url=live.url,
                                   headers={"Authorization": f"Bearer {ADMIN}"})

        try:
            fuzz()
        except Exception as exc:  # collected, so one run reports every failing operation
            failures[operation.label] = str(exc).splitlines()[0][:300]
    print(f"schemathesis: {operations} operations, {calls[0]} requests, "
          f"{len(failures)} failing operations")
    assert operations >= 10
    assert calls[0] >= operations
    assert failures == {}


def test_the_document_declares_security_and_resolves(live):
    doc = httpx.get(live.url + "/openapi.json").json()
    assert "bearer" in doc["components"]["securitySchemes"]
    assert "$defs" not in httpx.get(live.url + "/openapi.json").text

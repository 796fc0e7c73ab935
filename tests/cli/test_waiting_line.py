"""A provider that does not answer is visibly a wait within seconds (text mode),
not a silent hang until the connect timeout; never a line under --json."""

from __future__ import annotations

import json
import logging
import threading

import httpx
import pytest
import respx
from typer.testing import CliRunner

from gpucloud.transport import http as _http
from gpucloud.cli import app

LINE = "waiting for lambda (GET /api/v1/instances): no answer after 0.05 s\u2026"


@pytest.fixture
def hanging_lambda(monkeypatch):
    """Lambda's list hangs until a waiting line has been logged (or `patience` passes)."""
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "lambda-key")
    monkeypatch.setattr(_http, "WAIT_NOTICE_AFTER", 0.05)
    state = {"patience": 5.0, "answered_after_line": None}
    noticed = threading.Event()

    class Notice(logging.Handler):
        def emit(self, record):
            if record.getMessage().startswith("waiting for"):
                noticed.set()

    def hang(request):
        state["answered_after_line"] = noticed.wait(state["patience"])
        return httpx.Response(200, json={"data": []})

    notice = Notice()
    logging.getLogger("gpucloud.http").addHandler(notice)
    try:
        with respx.mock(assert_all_mocked=True) as router:
            router.get("https://cloud.lambda.ai/api/v1/instances").mock(side_effect=hang)
            yield state
    finally:
        logging.getLogger("gpucloud.http").removeHandler(notice)


def test_a_hanging_provider_prints_a_waiting_line(hanging_lambda):
    result = CliRunner().invoke(app, ["list", "--provider", "lambda"])
    assert result.exit_code == 0, result.output
    assert hanging_lambda["answered_after_line"] is True  # the line came while it hung
    assert result.stderr.splitlines()[0] == LINE


def test_no_waiting_line_under_json(hanging_lambda):
    hanging_lambda["patience"] = 0.3
    result = CliRunner().invoke(app, ["list", "--provider", "lambda", "--json"])
    assert result.exit_code == 0 and result.stderr == ""
    assert json.loads(result.stdout)["instances"] == []
    assert hanging_lambda["answered_after_line"] is False

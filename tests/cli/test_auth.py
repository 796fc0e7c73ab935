"""`gpucloud auth`: verify before storing, status, logout, headless keyrings."""

import json

import httpx
import keyring
import pytest
import respx
from keyring.backends import fail as failing_backend
from typer.testing import CliRunner

from gpucloud.cli import app

KEY = "sk-auth-test-0123456789"


@pytest.fixture
def lambda_api():
    with respx.mock(base_url="https://cloud.lambda.ai", assert_all_called=False) as router:
        def answer(request):
            if request.headers.get("Authorization") == f"Bearer {KEY}":
                return httpx.Response(200, json={"data": []})
            return httpx.Response(401, json={"error": {
                "code": "global/invalid-api-key",
                "message": "API key was invalid, expired, or deleted."}})
        route = router.get("/api/v1/ssh-keys").mock(side_effect=answer)
        yield route


def invoke(*args, input=None):
    return CliRunner().invoke(app, list(args), input=input)


def test_login_from_env_verifies_then_stores(lambda_api, isolated, monkeypatch):
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    result = invoke("auth", "login", "lambda", "--from-env", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["verified"] is True and result.stderr == ""
    assert lambda_api.call_count == 1
    assert isolated.store[("gpucloud", "lambda")] == KEY


def test_login_prompt_hides_the_key(lambda_api, isolated):
    result = invoke("auth", "login", "lambda", input=KEY + "\n")
    assert result.exit_code == 0, result.output
    assert KEY not in result.output
    assert isolated.store[("gpucloud", "lambda")] == KEY


def test_bad_key_is_not_stored(lambda_api, isolated):
    result = invoke("auth", "login", "lambda", input="wrong-key\n")
    assert result.exit_code == 4
    assert "invalid" in result.stderr and isolated.store == {}


def test_login_json_never_prompts(isolated):
    result = invoke("auth", "login", "lambda", "--json")
    assert result.exit_code == 8 and json.loads(result.stdout)["error"]["exit_code"] == 8


def test_status_reports_source_and_whether_it_works(lambda_api, isolated):
    isolated.store[("gpucloud", "lambda")] = KEY
    data = json.loads(invoke("auth", "status", "--json").stdout)
    by_name = {p["provider"]: p for p in data["providers"]}
    assert by_name["lambda"]["source"] == "keyring" and by_name["lambda"]["works"] is True
    assert by_name["sandbox"]["source"] == "none needed"

    isolated.store[("gpucloud", "lambda")] = "revoked"
    data = json.loads(invoke("auth", "status", "--json").stdout)
    lam = {p["provider"]: p for p in data["providers"]}["lambda"]
    assert lam["works"] is False and "invalid" in lam["error"]


def test_logout(isolated, monkeypatch):
    isolated.store[("gpucloud", "lambda")] = KEY
    assert json.loads(invoke("auth", "logout", "lambda", "--json").stdout)["removed"] is True
    assert isolated.store == {}
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", "x")
    again = json.loads(invoke("auth", "logout", "lambda", "--json").stdout)
    assert again == {"provider": "lambda", "removed": False,
                     "environment_still_set": ["GPUCLOUD_LAMBDA_API_KEY"]}


def test_headless_machine_says_how_to_fix_it(lambda_api, monkeypatch):
    keyring.set_keyring(failing_backend.Keyring())
    monkeypatch.setenv("GPUCLOUD_LAMBDA_API_KEY", KEY)
    result = invoke("auth", "login", "lambda", "--from-env")
    assert result.exit_code == 3
    assert "GPUCLOUD_LAMBDA_API_KEY" in result.stderr and "keyrings.alt" in result.stderr
    # and reading credentials on such a machine is not an error: env vars still work
    assert invoke("providers").exit_code == 0


def test_unknown_and_credential_free_providers(isolated):
    assert invoke("auth", "login", "lamda").exit_code == 2
    assert invoke("auth", "login", "sandbox").exit_code == 2


def test_unusable_keyring_is_reported_not_hidden(monkeypatch):
    keyring.set_keyring(failing_backend.Keyring())
    data = json.loads(invoke("providers", "--json").stdout)
    lam = {p["name"]: p for p in data["providers"]}["lambda"]
    assert lam["credentials"] is False
    assert data["keyring_problem"].startswith("NoKeyringError")
    assert "GPUCLOUD_LAMBDA_API_KEY" in lam["hint"]
    text = invoke("providers").stdout
    assert text.count("keyring is unusable here (NoKeyringError") == 1
    missing = invoke("get", "lambda/x")
    assert missing.exit_code == 3 and "keyring is unusable here" in missing.stderr

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


def test_login_json_never_prompts(isolated, monkeypatch):
    monkeypatch.setattr("gpucloud.cli.commands.auth._stdin_is_terminal", lambda: True)
    result = invoke("auth", "login", "lambda", "--json")
    assert result.exit_code == 8 and json.loads(result.stdout)["error"]["exit_code"] == 8


def test_login_without_a_terminal_and_nothing_on_stdin_is_a_usage_error(isolated):
    result = invoke("auth", "login", "lambda", input="")
    assert result.exit_code == 2
    assert "standard input" in result.stderr and "hint:" in result.stderr
    assert "Warning" not in result.output and isolated.store == {}
    data = json.loads(invoke("auth", "login", "lambda", "--json", input="").stdout)
    assert data["error"]["exit_code"] == 2


def test_login_reads_a_piped_key_and_names_the_keyring_backend(lambda_api, isolated):
    result = invoke("auth", "login", "lambda", "--json", input=KEY + "\n")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["keyring_backend"] == "tests.conftest.MemoryKeyring"
    assert data["plaintext"] is False and data["warnings"] == []
    assert isolated.store[("gpucloud", "lambda")] == KEY
    text = invoke("auth", "login", "lambda", input=KEY + "\n")
    assert "tests.conftest.MemoryKeyring" in text.stdout and KEY not in text.output


@pytest.mark.parametrize("piped", ["verda-id\nverda-secret\n", "verda-id:verda-secret\n"])
def test_oauth2_login_reads_id_and_secret_from_stdin(piped, monkeypatch, isolated):
    seen = {}

    def verify(self, name):
        seen["value"] = self._ctx.credentials._explicit[name]

    monkeypatch.setattr("gpucloud.client.sync_client.Client.verify", verify)
    result = invoke("auth", "login", "verda", input=piped)
    assert result.exit_code == 0, result.output
    assert seen["value"] == "verda-id:verda-secret"
    assert isolated.store[("gpucloud", "verda")] == "verda-id:verda-secret"


def test_a_plaintext_keyring_backend_is_named_as_such(lambda_api, isolated, monkeypatch):
    class PlaintextKeyring(type(isolated)):  # as keyrings.alt names its file backend
        pass

    plain = PlaintextKeyring()
    keyring.set_keyring(plain)
    result = invoke("auth", "login", "lambda", input=KEY + "\n")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "unencrypted" in result.stderr
    data = json.loads(invoke("auth", "login", "lambda", "--json", input=KEY + "\n").stdout)
    assert data["plaintext"] is True and "unencrypted" in data["warnings"][0]
    status = invoke("auth", "status")
    assert status.exit_code == 0 and "unencrypted" in status.stderr
    data = json.loads(invoke("auth", "status", "--json").stdout)
    assert data["keyring_backend"].endswith("PlaintextKeyring") and data["warnings"]


def test_status_reports_source_and_whether_it_works(lambda_api, isolated):
    isolated.store[("gpucloud", "lambda")] = KEY
    data = json.loads(invoke("auth", "status", "--json").stdout)
    by_name = {p["provider"]: p for p in data["providers"]}
    assert by_name["lambda"]["source"] == "keyring" and by_name["lambda"]["works"] is True
    assert by_name["sandbox"]["source"] == "none needed"

    isolated.store[("gpucloud", "lambda")] = "revoked"
    failing = invoke("auth", "status", "--json")
    assert failing.exit_code == 4 and failing.stderr == ""
    lam = {p["provider"]: p for p in json.loads(failing.stdout)["providers"]}["lambda"]
    assert lam["works"] is False and "invalid" in lam["error"]
    text = invoke("auth", "status")
    assert text.exit_code == 4 and "lambda" in text.stderr and "PROVIDER" in text.stdout


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
    assert "GPUCLOUD_LAMBDA_API_KEY" in result.stderr and "encrypted keyring" in result.stderr
    # keyrings.alt may be named only with the warning that it keeps the key in clear
    assert "PlaintextKeyring would keep the key unencrypted" in result.stderr
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

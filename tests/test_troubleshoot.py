"""try_and_diagnose never raises, temporary_env restores everything, closed_port_url really refuses."""
from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import pytest

from helpers import closed_port_url, temporary_env, try_and_diagnose


def test_try_and_diagnose_explains_an_exception_instead_of_raising() -> None:
    diagnosis = try_and_diagnose(lambda: {"error": {"message": "x"}}["choices"])
    assert diagnosis.kind == "no_choices" and "KeyError" in diagnosis.detail


def test_try_and_diagnose_explains_a_returned_reply() -> None:
    reply = {"choices": [{"message": {"content": "..."}, "finish_reason": "length"}]}
    assert try_and_diagnose(lambda: reply).kind == "truncated"


def test_temporary_env_sets_removes_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_KEEP", "before")
    monkeypatch.delenv("LAB_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with temporary_env(LAB_KEEP=None, LAB_NEW="during"):
            assert "LAB_KEEP" not in os.environ and os.environ["LAB_NEW"] == "during"
            raise RuntimeError("restored even after an error")
    assert os.environ["LAB_KEEP"] == "before" and "LAB_NEW" not in os.environ


def test_closed_port_url_refuses_connections() -> None:
    url = closed_port_url()
    parts = urlsplit(url)
    assert parts.path == "/v1"
    with socket.socket() as sock, pytest.raises(ConnectionRefusedError):
        sock.connect((parts.hostname, parts.port))

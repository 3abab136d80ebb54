"""A named in-process mock: starting the name again stops the one left over from an earlier run."""
import httpx
import pytest

from helpers.server import launcher
from helpers.server.launcher import start_mock_server


def test_starting_a_name_again_stops_the_left_over_server_and_exit_stops_the_rest():
    first = start_mock_server(name="test left-over")
    assert httpx.get(f"{first.url}/health").status_code == 200
    second = start_mock_server(name="test left-over")
    try:
        assert "running=False" in repr(first)
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{first.url}/health", timeout=5)
        assert httpx.get(f"{second.url}/health").status_code == 200
    finally:
        launcher._stop_named()  # what the interpreter runs at exit
    assert "running=False" in repr(second) and not launcher._named

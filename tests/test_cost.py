"""$/1M tokens from data/gpu_prices.csv, tokens/s/user and /GPU as vLLM's Pareto plot, the front."""
import datetime
import math
import re

import pandas as pd
import pytest

from helpers.cost import (
    GPUPrice,
    cost_row,
    gpu_price,
    load_prices,
    offer_bases,
    pareto_front,
    price_spreads,
    usd_per_million_tokens,
    users,
)
from helpers.hardware import list_gpus
from helpers.plots.slo import plot_goodput_knee, plot_pareto


def test_every_gpu_has_a_price_with_its_source_and_date():
    prices = load_prices()
    assert {p.gpu for p in prices} == set(list_gpus())
    for p in prices:
        assert p.usd_per_gpu_hour > 0 and p.source.startswith("https://") and p.via
        assert datetime.date.fromisoformat(p.read_on).year >= 2025


def test_a_prices_file_with_other_columns_is_refused(tmp_path, monkeypatch):
    import helpers.cost as cost

    bad = tmp_path / "gpu_prices.csv"
    bad.write_text("gpu,usd_per_gpu_hour,provider\na10,1.29,Lambda\n", encoding="utf-8")
    monkeypatch.setattr(cost, "PRICES_CSV", bad)
    load_prices.cache_clear()
    try:
        with pytest.raises(ValueError, match="columns"):
            load_prices()
    finally:
        load_prices.cache_clear()


def test_gpu_price_takes_the_first_row_or_the_providers_and_says_what_is_priced():
    assert gpu_price("a100-80gb").provider == "RunPod" and gpu_price("h100-sxm").provider == "Lambda"
    assert gpu_price("a100-80gb", "AWS").usd_per_gpu_hour > gpu_price("a100-80gb").usd_per_gpu_hour
    assert gpu_price("h200").provider == "Crusoe" and gpu_price("rtx-4090").provider == "RunPod"
    with pytest.raises(KeyError, match="usd_per_gpu_hour"):
        gpu_price("rtx-4090", "Lambda")


def test_dollars_per_million_tokens():
    assert usd_per_million_tokens(3.6, 1000.0) == pytest.approx(1.0)     # 3.6 $/h over 3.6 M tokens/h
    assert math.isinf(usd_per_million_tokens(2.0, 0.0))
    with pytest.raises(ValueError):
        usd_per_million_tokens(-1.0, 5.0)


def test_cost_row_counts_users_as_vllm_does_and_uses_the_given_price():
    closed = {"max_concurrency": 8, "output_throughput": 800.0, "total_token_throughput": 4000.0}
    row = cost_row(closed, "a100-80gb", num_gpus=2, usd_per_gpu_hour=1.8)
    assert row["tokens_per_s_per_user"] == 100.0 and row["tokens_per_s_per_gpu"] == 400.0
    assert row["usd_per_1m_output_tokens"] == pytest.approx(3.6 / (3600 * 800) * 1e6)
    assert row["usd_per_1m_total_tokens"] == pytest.approx(row["usd_per_1m_output_tokens"] / 5)
    open_loop = {"max_concurrency": None, "request_throughput": 2.0, "mean_e2el_ms": 3000.0}
    assert users(open_loop) == 6.0     # Little's law: 2 requests/s × 3 s in flight


def test_pareto_front_keeps_the_undominated_points_and_the_plots_draw():
    table = pd.DataFrame({"tokens_per_s_per_user": [10, 20, 15, 5],
                          "tokens_per_s_per_gpu": [900, 500, 400, 950], "label": list("abcd")})
    assert pareto_front(table).tolist() == [True, True, False, True]
    assert plot_pareto(table).axes[0].get_xlabel().startswith("tokens/s per user")
    knee = pd.DataFrame({"request_rate": [1, 2, 4], "request_throughput": [1, 2, 3],
                         "request_goodput": [1, 2, 0]})
    assert len(plot_goodput_knee(knee).axes[0].lines) == 2


def test_price_spreads_are_computed_and_data_readme_states_them():
    from helpers.models import DATA_DIR

    spreads = price_spreads()["spread"].round(2)
    assert spreads.to_dict() == {"a100-80gb": 1.92, "h100-sxm": 1.72, "h200": 1.08}
    readme = (DATA_DIR / "README.md").read_text(encoding="utf-8")
    for gpu, ratio in spreads.items():
        assert f"{ratio:.2f}× for {gpu}" in readme, gpu


def test_stale_prices_and_offer_basis():
    import datetime as dt

    from helpers.cost import gpu_price, price_table

    as_of = dt.date(2026, 12, 1)
    table = price_table(as_of).set_index(["gpu", "provider"])
    assert table.loc[("rtx-4090", "RunPod"), "stale"] and not table.loc[("a10", "Lambda"), "stale"]
    assert gpu_price("rtx-4090").age_days(as_of) == 506
    assert not gpu_price("rtx-4090").is_stale(dt.date(2026, 7, 13))  # exactly a year: not yet
    assert gpu_price("a100-40gb").gpus_in_offer == 8 and gpu_price("h100-sxm").gpus_in_offer == 1
    assert gpu_price("h100-sxm", "AWS").gpus_in_offer == 8
    spreads = price_spreads(as_of)
    assert spreads.loc["h200", "stale"] and not spreads.loc["a100-80gb", "stale"]  # RunPod h200: 2025
    assert spreads.loc["a100-80gb", "offers"] == "1-GPU vs 8-GPU"


def test_each_provider_prices_on_one_basis_one_gpu_or_eight_gpu_offers():
    bases = offer_bases()  # raises on the file if a provider mixes 1-GPU and 8-GPU offers
    assert bases == {"Lambda": 1, "Modal": 1, "RunPod": 1, "AWS": 8, "Crusoe": 1}
    lambda_8x = GPUPrice("a100-80gb", 2.79, "Lambda", "8x NVIDIA A100 SXM 80 GB on-demand (per GPU)",
                         "https://lambda.ai/instances", "2026-09-20", "test")
    with pytest.raises(ValueError, match=r"Lambda: 1-GPU \['a10'.*8-GPU \['a100-80gb'\]"):
        offer_bases([*load_prices(), lambda_8x])


def test_an_instance_price_is_divided_by_its_gpus():
    for p in load_prices():
        node = re.search(r"\$([\d.]+)/h for (\d+) GPUs", p.offer)
        if node:
            assert p.usd_per_gpu_hour == pytest.approx(float(node.group(1)) / int(node.group(2)), abs=1e-4), p
        assert p.gpus_in_offer in (1, 8), p

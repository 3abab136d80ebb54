"""helpers.toy: the KV cache changes the cost of a token, never its value (issue 7)."""
from __future__ import annotations

import numpy as np
import pytest

from helpers.toy.config import ToyConfig, toy_preset, width_sweep
from helpers.toy.generate import ToyModel, random_prompt
from helpers.toy.model import attention
from helpers.toy.weights import init_weights

# (n_heads, n_kv_heads) -> MHA, GQA, MQA
HEAD_LAYOUTS = [(4, 4), (4, 2), (4, 1)]


def tiny(n_heads: int = 4, n_kv_heads: int = 2, d_model: int = 64, n_layers: int = 2, **kw) -> ToyConfig:
    return ToyConfig(vocab_size=97, d_model=d_model, n_layers=n_layers, n_heads=n_heads,
                     n_kv_heads=n_kv_heads, ffn_dim=3 * d_model, max_seq_len=128, **kw)


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), HEAD_LAYOUTS)
@pytest.mark.parametrize(("d_model", "n_layers", "prompt_len"), [(32, 1, 1), (64, 2, 7), (128, 3, 20)])
def test_greedy_tokens_identical_with_and_without_cache(n_heads, n_kv_heads, d_model, n_layers, prompt_len):
    model = ToyModel(tiny(n_heads, n_kv_heads, d_model, n_layers))
    prompt = random_prompt(model.config, prompt_len, seed=prompt_len)
    cached = model.generate(prompt, 12, use_cache=True)
    uncached = model.generate(prompt, 12, use_cache=False)
    np.testing.assert_array_equal(cached.new_ids, uncached.new_ids)
    assert len(set(cached.new_ids.tolist())) > 1, "degenerate generation: the test would not see a difference"


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), HEAD_LAYOUTS)
def test_prefill_of_n_tokens_equals_n_decode_steps(n_heads, n_kv_heads):
    model = ToyModel(tiny(n_heads, n_kv_heads))
    prompt = random_prompt(model.config, 10)
    full_logits, full_cache = model.prefill(prompt)
    step_logits, cache = model.prefill(prompt[:1])
    rows = [step_logits[0]]
    for token in prompt[1:]:
        logits, cache = model.decode_step(int(token), cache)
        rows.append(logits)
    np.testing.assert_allclose(np.stack(rows), full_logits, rtol=1e-4, atol=1e-5)
    assert cache.length == full_cache.length == 10
    np.testing.assert_allclose(cache.keys[1][:, :, :10], full_cache.keys[1][:, :, :10], rtol=1e-4, atol=1e-6)


def reference_attention_repeating_kv(q, k, v, q_start):
    """Textbook MHA after repeating each KV head for its query heads; one head at a time."""
    B, T, H, hd = q.shape
    k = np.repeat(k, H // k.shape[1], axis=1)  # (B, H, S, hd)
    v = np.repeat(v, H // v.shape[1], axis=1)
    out = np.zeros((B, T, H, hd))
    for b in range(B):
        for h in range(H):
            for i in range(T):
                visible = q_start + i + 1
                s = k[b, h, :visible] @ q[b, i, h] / np.sqrt(hd)
                p = np.exp(s - s.max())
                out[b, i, h] = (p / p.sum()) @ v[b, h, :visible]
    return out.reshape(B, T, H * hd)


@pytest.mark.parametrize(("n_heads", "n_kv_heads"), [(8, 8), (8, 4), (8, 2), (8, 1)])
@pytest.mark.parametrize(("q_start", "T"), [(0, 5), (3, 4), (9, 1)])
def test_grouped_attention_equals_mha_with_repeated_kv_heads(n_heads, n_kv_heads, q_start, T):
    rng = np.random.default_rng(1)
    q = rng.standard_normal((2, T, n_heads, 16)).astype(np.float32)
    k = rng.standard_normal((2, n_kv_heads, q_start + T, 16)).astype(np.float32)
    v = rng.standard_normal((2, n_kv_heads, q_start + T, 16)).astype(np.float32)
    expected = reference_attention_repeating_kv(q, k, v, q_start)
    np.testing.assert_allclose(attention(q, k, v, q_start), expected, rtol=1e-4, atol=1e-5)


def test_batched_decode_equals_each_sequence_alone():
    model = ToyModel(tiny())
    prompts = random_prompt(model.config, 6, batch_size=3)
    logits, cache = model.prefill(prompts)
    next_ids = logits[:, -1].argmax(axis=-1)
    batch_logits, _ = model.decode_step(next_ids, cache)
    for b in range(3):
        _, alone = model.prefill(prompts[b])
        single, _ = model.decode_step(int(next_ids[b]), alone)
        np.testing.assert_allclose(batch_logits[b], single, rtol=1e-4, atol=1e-5)


def test_shapes_and_dtypes():
    model = ToyModel(tiny(n_layers=3))
    logits, cache = model.prefill(random_prompt(model.config, 5))
    assert logits.shape == (5, 97) and logits.dtype == np.float32
    assert cache.keys[0].shape == (1, 2, 128, 16) and len(cache.values) == 3
    one, cache = model.decode_step(3, cache)
    assert one.shape == (97,) and cache.length == 6
    batch_logits, batch_cache = model.prefill(random_prompt(model.config, 4, batch_size=2))
    assert batch_logits.shape == (2, 4, 97)
    assert model.decode_step(np.array([1, 2]), batch_cache)[0].shape == (2, 97)
    gen = model.generate([1, 2, 3], 4)
    assert gen.new_ids.shape == gen.step_times_s.shape == (4,) and (gen.step_times_s > 0).all()
    np.testing.assert_array_equal(gen.tokens_in_step, [3, 1, 1, 1])
    np.testing.assert_array_equal(model.generate([1, 2, 3], 4, use_cache=False).tokens_in_step, [3, 4, 5, 6])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_weights_are_stored_in_the_config_dtype_and_counted_exactly(dtype):
    config = tiny(dtype=dtype)
    weights = init_weights(config)
    assert {a.dtype for a in weights.arrays()} == {np.dtype(dtype)}
    assert weights.nbytes == config.weight_bytes == config.n_params * config.bytes_per_param
    assert config.weight_bytes_per_step == (config.n_params - 96 * 64) * config.bytes_per_param


def test_fp16_weights_give_logits_close_to_fp32():
    prompt = random_prompt(tiny(), 6)
    logits32, _ = ToyModel(tiny()).prefill(prompt)
    logits16, _ = ToyModel(tiny(dtype="float16")).prefill(prompt)
    assert logits16.dtype == np.float32
    np.testing.assert_allclose(logits16, logits32, atol=2e-2 * np.abs(logits32).max())
    assert not np.array_equal(logits16, logits32)


def test_large_preset_is_in_the_requested_size_range():
    config = toy_preset("large")
    assert 100e6 <= config.n_params <= 300e6
    assert toy_preset("small").n_params < 2e6
    assert toy_preset("large", dtype="float16").weight_bytes * 2 == config.weight_bytes


def test_a_preset_override_that_is_not_a_config_field_is_refused():
    assert toy_preset("small", seed=3).seed == 3
    with pytest.raises(TypeError, match="d_modle"):
        toy_preset("small", d_modle=64)


def test_attention_kind_and_config_errors():
    assert [tiny(4, kv).attention_kind for _, kv in HEAD_LAYOUTS] == ["MHA", "GQA", "MQA"]
    with pytest.raises(ValueError, match="multiple of n_kv_heads"):
        tiny(4, 3)
    with pytest.raises(KeyError, match="small"):
        toy_preset("huge")
    assert [c.d_model for c in width_sweep([128, 256])] == [128, 256]


def test_cache_overflow_says_what_to_do():
    model = ToyModel(tiny())
    _, cache = model.prefill([1, 2], capacity=2)
    with pytest.raises(ValueError, match="larger capacity"):
        model.decode_step(1, cache)

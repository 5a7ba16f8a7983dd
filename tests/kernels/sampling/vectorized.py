"""A correct top-k + top-p sampler without the reference's per-row loop: the k most likely tokens, renormalized,
then the nucleus (the token that passes p included), renormalized, one multinomial draw per row."""

import torch


def run(probs, top_k, top_p):
    probs = probs.to(torch.float32)
    vocab = probs.shape[-1]
    values, order = torch.sort(probs, dim=-1, descending=True)
    rank = torch.arange(vocab, device=probs.device).expand_as(values)
    k = top_k.to(torch.int64).unsqueeze(-1)
    keep_k = (rank < k) | (k <= 0) | (k >= vocab)
    values = torch.where(keep_k, values, torch.zeros_like(values))
    values = values / values.sum(dim=-1, keepdim=True)
    before = torch.cumsum(values, dim=-1) - values
    keep_p = before <= top_p.unsqueeze(-1)
    values = torch.where(keep_p, values, torch.zeros_like(values))
    picked = torch.multinomial(values, 1).squeeze(-1)
    return order.gather(-1, picked.unsqueeze(-1)).squeeze(-1).to(torch.int64)

"""LatentWire: training an encoder that wires a context into a language model as soft prompts.

A miniature of the project in seed 001. A small bidirectional text encoder
reads a context and compresses it, through learned queries, into a few latent
vectors; an adapter maps them into the embedding space of a small
decoder-only language model, which sees

    [latents] [chat scaffold: system, user question, assistant header] [answer]

and is trained with a next-token loss on the answer. The data are generated
extractive questions: a context of Markov-chain text over pseudo-words, the
question "what follows <word>?" and, as the answer, the words after it. One
run is a fixed number of samples through the real training loop: batches made
from the data set, moved to the device, forward, backward, gradient clipping
and AdamW steps over a fixed effective batch.

The seed's "before" indexes the token tensors by hand one sample at a time
(``batch_size`` 1, accumulated over the effective batch), tokenises every
sample's chat scaffold again in every batch, moves tensors with blocking
copies, trains in fp32 with a for-loop AdamW and zeroes gradients in place.
Each fix it proposed is a knob: ``batch_size`` (accumulation makes up the
effective batch), ``loader`` and ``num_workers``, ``pin_memory`` and
``non_blocking`` (CUDA), ``scaffold`` (tokenised ``per_batch`` or ``cached``
once), ``precision`` (bf16 autocast, fp16 autocast with a GradScaler),
``optimizer`` (for-loop, foreach or fused AdamW), ``set_to_none``,
``attention`` (the SDPA backend), ``compile`` and ``checkpoint``.

Every run starts from the same weights, a fresh optimizer and the same sample
order, so its loss trajectory and final weights are comparable with the fp32
reference's, whatever the batching.
"""

from __future__ import annotations

from typing import Any, Callable, ContextManager, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from autotune.check import Check
from autotune.config import Config
from autotune.workload import Workload, register_workload
from workloads import _training
from workloads._torch import attention_backend, autocast, data_loader, maybe_compile, own_gradients, restart
from workloads._training import micro_batch

__all__ = ["TOLERANCES", "ChatTokenizer", "LatentWireModel", "LatentWireWorkload", "make_examples"]

#: Relative tolerances per precision and output, each a stated multiple of the
#: honest worst error measured over every knob value and 3 data seeds at
#: `tiny` (`python benchmarks/check_power.py --workloads latentwire`). The
#: update (final minus initial weights) is compared rather than the weights,
#: which a few steps barely move; AdamW divides each gradient by its own RMS,
#: so entries whose gradients are rounding noise move by a full step either
#: way: that, not the loss, sets the bound on the update. Honest worst (losses,
#: grad norms, clipped norms, update): fp32 1.4e-7, 6.6e-8, 1.3e-7, 3.4e-4,
#: bounds about 10-15x; bf16 9.9e-5, 2.9e-4, 3.3e-7, 0.068, bounds 2-4x
#: (9x for the clipped norms, fp32 arithmetic); fp16 7.1e-6, 2.2e-5, 1.9e-7,
#: 0.036, bounds 2-10x. The optimizer's hyper-parameters must match exactly.
TOLERANCES: Mapping[str, Mapping[str, float]] = {
    "fp32": {"losses": 1.5e-6, "grad_norms": 1e-6, "clipped_norms": 1.5e-6, "update": 5e-3},
    "bf16": {"losses": 4e-4, "grad_norms": 1.2e-3, "clipped_norms": 3e-6, "update": 0.15},
    "fp16": {"losses": 3e-5, "grad_norms": 1e-4, "clipped_norms": 2e-6, "update": 0.08},
}

SYSTEM_PROMPT = "Answer from the latent context."
TASKS = ("squad", "hotpot", "news", "wiki")


# -- data -----------------------------------------------------------------------------------------

_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
SYLLABLES = tuple(c + v for c in _CONSONANTS for v in _VOWELS)


def _lexicon(size: int, rng: np.random.Generator) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(1, 4))
        words.add("".join(SYLLABLES[i] for i in rng.integers(0, len(SYLLABLES), size=n)))
    return sorted(words)


def make_examples(count: int, context_words: int, answer_words: int, seed: int) -> list[dict[str, str]]:
    """Extractive questions over generated text: ``{"task", "context", "question_word", "answer"}``.

    Contexts are walks of a sparse Markov chain over pseudo-words; the answer
    is the words that follow the question word in the context.
    """
    rng = np.random.default_rng(seed)
    lexicon = _lexicon(400, rng)
    successors = rng.integers(0, len(lexicon), size=(len(lexicon), 6))
    examples = []
    for _ in range(count):
        word = int(rng.integers(0, len(lexicon)))
        words = []
        for _ in range(context_words):
            words.append(lexicon[word])
            word = int(successors[word, rng.integers(0, 6)])
        at = int(rng.integers(0, context_words - answer_words - 1))
        examples.append({
            "task": TASKS[int(rng.integers(0, len(TASKS)))],
            "context": " ".join(words),
            "question_word": words[at],
            "answer": " ".join(words[at + 1:at + 1 + answer_words]),
        })
    return examples


class ChatTokenizer:
    """A greedy longest-match subword tokenizer with a chat template, in pure Python.

    Its vocabulary: special tokens, single characters, every syllable with and
    without a leading space, and the template's words. Like a real tokenizer,
    encoding costs Python work per character, which is what the seed's
    per-batch scaffold tokenisation pays again in every batch.
    """

    PAD, BOS, EOS = "<pad>", "<|im_start|>", "<|im_end|>"

    def __init__(self) -> None:
        template_words = ["system", "user", "assistant", "Answer", "from", "the", "latent", "context", "what",
                          "follows", *TASKS]
        chars = list("abcdefghijklmnopqrstuvwxyzA\n .,:?\"")
        pieces = [self.PAD, self.BOS, self.EOS, *chars, *SYLLABLES, *(" " + s for s in SYLLABLES),
                  *template_words, *(" " + w for w in template_words)]
        self.vocab = {piece: i for i, piece in enumerate(dict.fromkeys(pieces))}
        self.longest = max(len(p) for p in self.vocab)
        self.pad_id = self.vocab[self.PAD]

    def __len__(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        ids, i, vocab = [], 0, self.vocab
        while i < len(text):
            for length in range(min(self.longest, len(text) - i), 0, -1):
                piece = vocab.get(text[i:i + length])
                if piece is not None:
                    ids.append(piece)
                    i += length
                    break
            else:
                raise ValueError(f"character {text[i]!r} is not in the vocabulary")
        return ids

    def scaffold(self, example: Mapping[str, str]) -> str:
        """The chat template around the latents: the answer follows the assistant header."""
        return (f"{self.BOS}system\n{SYSTEM_PROMPT}{self.EOS}\n"
                f"{self.BOS}user\n{example['task']}: what follows \"{example['question_word']}\"?{self.EOS}\n"
                f"{self.BOS}assistant\n")


# -- the model -----------------------------------------------------------------------------------


class Attention(nn.Module):
    """Multi-head attention through ``F.scaled_dot_product_attention``; keys may come from another sequence."""

    def __init__(self, dim: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.heads, self.causal = heads, causal
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor, source: torch.Tensor | None = None) -> torch.Tensor:
        source = x if source is None else source
        B, T, D = x.shape
        q = self.q(x).view(B, T, self.heads, -1).transpose(1, 2)
        k, v = self.kv(source).view(B, source.shape[1], 2, self.heads, -1).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, causal: bool) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class LatentWireModel(nn.Module):
    """Context encoder -> ``latents`` soft-prompt vectors -> adapter -> decoder-only LM."""

    def __init__(self, vocab: int, context_len: int, max_len: int, enc_dim: int, enc_layers: int, lm_dim: int,
                 lm_layers: int, heads: int, latents: int) -> None:
        super().__init__()
        self.enc_embed = nn.Embedding(vocab, enc_dim)
        self.enc_pos = nn.Parameter(0.02 * torch.randn(context_len, enc_dim))
        self.encoder = nn.ModuleList(Block(enc_dim, heads, causal=False) for _ in range(enc_layers))
        self.queries = nn.Parameter(0.02 * torch.randn(latents, enc_dim))
        self.pool = Attention(enc_dim, heads, causal=False)
        self.adapter = nn.Sequential(nn.LayerNorm(enc_dim), nn.Linear(enc_dim, lm_dim))
        self.lm_embed = nn.Embedding(vocab, lm_dim)
        self.lm_pos = nn.Parameter(0.02 * torch.randn(max_len, lm_dim))
        self.lm = nn.ModuleList(Block(lm_dim, heads, causal=True) for _ in range(lm_layers))
        self.norm = nn.LayerNorm(lm_dim)
        self.head = nn.Linear(lm_dim, vocab, bias=False)
        self.checkpoint = False

    def _blocks(self, blocks: nn.ModuleList, x: torch.Tensor) -> torch.Tensor:
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False) if self.checkpoint and self.training else block(x)
        return x

    def forward(self, context: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """Logits for every position of ``[latents, tokens]``."""
        h = self._blocks(self.encoder, self.enc_embed(context) + self.enc_pos)
        latents = self.adapter(self.pool(self.queries.expand(h.shape[0], -1, -1), h))
        x = torch.cat([latents, self.lm_embed(tokens)], dim=1)
        x = self._blocks(self.lm, x + self.lm_pos[:x.shape[1]])
        return self.head(self.norm(x))


# -- batches --------------------------------------------------------------------------------------

IGNORE = -100


def _rows(scaffolds: Sequence[Sequence[int]], answers: torch.Tensor, latents: int, pad_id: int, width: int):
    """LM input rows ``scaffold + answer`` right-padded to ``width``, and targets for ``[latents] + row``.

    The target of position ``p`` is the token at ``p + 1``; only answer tokens
    are targets. Right padding under causal attention changes no earlier
    position, so a sample's logits do not depend on the batch it is in.
    """
    n, answer_len = answers.shape
    tokens = torch.full((n, width), pad_id, dtype=torch.long)
    targets = torch.full((n, latents + width), IGNORE, dtype=torch.long)
    for i, scaffold in enumerate(scaffolds):
        s = len(scaffold)
        tokens[i, :s] = torch.as_tensor(scaffold, dtype=torch.long)
        tokens[i, s:s + answer_len] = answers[i]
        # Position latents + s - 1 (the header's last token) predicts the first answer token.
        targets[i, latents + s - 1:latents + s - 1 + answer_len] = answers[i]
    return tokens, targets


class Batches:
    """Makes a batch from sample indices: the same code in the main process and in DataLoader workers."""

    def __init__(self, tokenizer: ChatTokenizer, examples: Sequence[Mapping[str, str]], contexts: torch.Tensor,
                 answers: torch.Tensor, latents: int, cached: bool) -> None:
        self.tokenizer, self.examples = tokenizer, examples
        self.contexts, self.answers, self.latents = contexts, answers, latents
        self.cached = cached
        if cached:  # the seed's fix: every scaffold tokenised once, rows padded to the longest
            scaffolds = [tokenizer.encode(tokenizer.scaffold(e)) for e in examples]
            width = max(map(len, scaffolds)) + answers.shape[1]
            self.tokens, self.targets = _rows(scaffolds, answers, latents, tokenizer.pad_id, width)

    def __call__(self, indices: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        index = torch.as_tensor(list(indices), dtype=torch.long)
        if self.cached:
            return self.contexts[index], self.tokens[index], self.targets[index]
        # The seed's "before": the chat template is tokenised again for every sample of every batch.
        scaffolds = [self.tokenizer.encode(self.tokenizer.scaffold(self.examples[i])) for i in index.tolist()]
        answers = self.answers[index]
        width = max(map(len, scaffolds)) + answers.shape[1]
        tokens, targets = _rows(scaffolds, answers, self.latents, self.tokenizer.pad_id, width)
        return self.contexts[index], tokens, targets


class _Samples(torch.utils.data.Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return i


# -- the workload -------------------------------------------------------------------------------


@register_workload
class LatentWireWorkload(Workload):
    """Training an encoder + LM on soft prompts for a fixed number of samples (unit: tokens of the LM input)."""

    name = "latentwire"
    unit = "tokens"
    version = 2  # 2: `full`'s encoder is 768 wide (512 did not divide into its 12 heads)
    sizes = {
        # max_grad_norm sits below tiny's gradient norms (about 0.9), so that clipping acts in the check.
        "tiny": {"samples": 32, "effective_batch": 16, "max_grad_norm": 0.5, "context_words": 32, "context_len": 32, "answer_words": 4,
                 "answer_len": 4, "enc_dim": 32, "enc_layers": 1, "lm_dim": 32, "lm_layers": 2, "heads": 2,
                 "latents": 4, "seed": 1},
        "small": {"samples": 128, "effective_batch": 16, "max_grad_norm": 1.0, "context_words": 128, "context_len": 128, "answer_words": 8,
                  "answer_len": 8, "enc_dim": 128, "enc_layers": 2, "lm_dim": 128, "lm_layers": 3, "heads": 4,
                  "latents": 8, "seed": 0},
        # Nearer the seed's scale: a 4-layer encoder into a 12-layer LM of width 768, effective batch 64; heads of
        # 64 channels in both (width 512 with 12 heads failed at the first run on an H100: no shape divides).
        "full": {"samples": 1024, "effective_batch": 64, "max_grad_norm": 1.0, "context_words": 512, "context_len": 512,
                 "answer_words": 16, "answer_len": 16, "enc_dim": 768, "enc_layers": 4, "lm_dim": 768,
                 "lm_layers": 12, "heads": 12, "latents": 32, "seed": 0},
    }

    def _data(self) -> tuple[ChatTokenizer, list[dict[str, str]], torch.Tensor, torch.Tensor]:
        """The examples and their token ids: contexts and answers are tokenised once, as the project's data set is.

        Every word is at least one token, so ``context_words >= context_len`` and
        ``answer_words >= answer_len`` give texts long enough to cut to length.
        """
        p = self.params
        tokenizer = ChatTokenizer()
        examples = make_examples(p["samples"], p["context_words"], p["answer_words"], p["seed"])

        def ids(text: str, length: int) -> list[int]:
            encoded = tokenizer.encode(text)
            if len(encoded) < length:
                raise ValueError(f"text of {len(encoded)} tokens is shorter than {length}; generate more words")
            return encoded[:length]

        contexts = torch.tensor([ids(e["context"], p["context_len"]) for e in examples], dtype=torch.long)
        answers = torch.tensor([ids(" " + e["answer"], p["answer_len"]) for e in examples], dtype=torch.long)
        return tokenizer, examples, contexts, answers

    def model(self, vocab: int) -> LatentWireModel:
        p = self.params
        torch.manual_seed(p["seed"])
        # The LM input: latents, the longest scaffold (under 80 tokens for these templates) and the answer.
        max_len = p["latents"] + 96 + p["answer_len"]
        return LatentWireModel(vocab, p["context_len"], max_len, p["enc_dim"], p["enc_layers"], p["lm_dim"],
                               p["lm_layers"], p["heads"], p["latents"])

    def build(self, config: Config) -> Callable[[], dict[str, torch.Tensor]]:
        p = self.params
        device = torch.device(self.device)
        tokenizer, examples, contexts, answers = self._data()
        model = self.model(len(tokenizer)).to(device)
        model.checkpoint = bool(config["checkpoint"])
        model.train()
        params = list(model.parameters())
        initial = [q.detach().clone() for q in params]
        flavour = {"for_loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}
        optimizer = torch.optim.AdamW(params, lr=1e-3, weight_decay=0.01, **flavour[config["optimizer"]])
        forward: Callable[..., torch.Tensor] = maybe_compile(model, config["compile"])
        own_gradients(params, config["compile"])  # gradients accumulate over micro-batches

        effective = p["effective_batch"]
        micro = micro_batch(config, effective, "effective batch")
        accumulation = effective // micro
        answer_tokens = effective * p["answer_len"]
        # One fixed sample order for every config: a seeded permutation.
        order = torch.randperm(p["samples"], generator=torch.Generator().manual_seed(p["seed"])).tolist()
        make_batch = Batches(tokenizer, examples, contexts, answers, p["latents"], config["scaffold"] == "cached")
        pin = bool(config["pin_memory"]) and device.type == "cuda"
        non_blocking = bool(config["non_blocking"])
        if config["loader"] == "dataloader":
            workers = config["num_workers"]
            loader = data_loader(
                _Samples(p["samples"]), batch_size=micro, sampler=order, collate_fn=make_batch,
                num_workers=workers, persistent_workers=workers > 0, pin_memory=pin)

            def batches():
                return iter(loader)
        else:

            def batches():
                # The seed's manual indexing, a micro-batch at a time in the main process.
                for start in range(0, len(order), micro):
                    batch = make_batch(order[start:start + micro])
                    yield tuple(t.pin_memory() for t in batch) if pin else batch

        set_to_none = bool(config["set_to_none"])

        def attention() -> ContextManager[Any]:  # ``auto`` lets SDPA choose
            return attention_backend(config["attention"])

        def train() -> dict[str, torch.Tensor]:
            # Every run: the same initial weights, a fresh optimizer and loss scale.
            restart(params, initial, optimizer, set_to_none)
            scaler = torch.amp.GradScaler(device.type, init_scale=2.0**12, enabled=config["precision"] == "fp16")
            losses, norms, clipped, step_loss = [], [], [], torch.zeros((), device=device)
            for i, (context, tokens, targets) in enumerate(batches()):
                context = context.to(device, non_blocking=non_blocking)
                tokens = tokens.to(device, non_blocking=non_blocking)
                targets = targets.to(device, non_blocking=non_blocking)
                with attention():
                    with autocast(device, config["precision"]):
                        logits = forward(context, tokens)
                        # Summed over the micro-batch's answer tokens, divided by the effective batch's:
                        # the accumulated gradient is that of the mean over the effective batch.
                        loss = F.cross_entropy(logits.float().flatten(0, 1), targets.flatten(), ignore_index=IGNORE,
                                               reduction="sum") / answer_tokens
                    scaler.scale(loss).backward()
                step_loss += loss.detach()
                if (i + 1) % accumulation == 0:
                    scaler.unscale_(optimizer)
                    norms.append(torch.nn.utils.clip_grad_norm_(params, max_norm=p["max_grad_norm"],
                                                                foreach=config["optimizer"] != "for_loop"))
                    clipped.append(_training.grad_norm(params))
                    scaler.step(optimizer)
                    scaler.update()
                    optimizer.zero_grad(set_to_none=set_to_none)
                    losses.append(step_loss)
                    step_loss = torch.zeros((), device=device)
            return {"losses": torch.stack(losses), "grad_norms": torch.stack(norms).detach(),
                    "clipped_norms": torch.stack(clipped), "update": _training.update(params, initial),
                    "hyperparameters": _training.hyperparameters(optimizer)}

        return train

    def items_per_run(self, config: Config) -> int:
        """Tokens through the LM in one run: every sample's latents, scaffold and answer."""
        if not hasattr(self, "_lm_tokens"):
            p = self.params
            tokenizer, examples, _, _ = self._data()
            scaffold = sum(len(tokenizer.encode(tokenizer.scaffold(e))) for e in examples)
            self._lm_tokens = int(scaffold + p["samples"] * (p["latents"] + p["answer_len"]))
        return self._lm_tokens

    def to_reference(self, output: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().double() for k, v in output.items()}

    def check(self, output: Mapping[str, torch.Tensor], reference: Mapping[str, torch.Tensor], config: Config) -> Check:
        return Check.from_metrics(_training.step_metrics(output, reference, TOLERANCES[config["precision"]],
                                                            ("grad_norms", "clipped_norms")))

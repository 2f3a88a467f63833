"""StepTotals: a step's delivered totals over all ranks, for exact loss normalisation when
the stream skips samples (``on_error="skip"``).

A micro-batch carries its step's planned totals, ``step_tokens`` and ``step_samples`` (real
samples over all ranks; README "Loss normalisation"). A sample skipped at read time takes
its tokens out of the step, but a rank learns of its own skips only, and only when it reads
the micro-batch, after earlier micro-batches of the step have run their backward. So the
loss is normalised by the planned total and the gradients are corrected once the step's
micro-batches are all read: on the step's last micro-batch, one all-reduce sums every rank's
skipped real tokens and samples of the step, and the gradients are multiplied by
planned / delivered. As gradients are linear in the loss, that is exactly the gradient of
the loss normalised by the delivered total::

    totals = adaptiveload.StepTotals()
    for batch in loader:                                   # StreamDataset(..., on_error="skip")
        loss = token_losses(batch)[real].sum() * world / batch.step_tokens
        with adaptiveload.grad_sync(model, batch.last_in_step):
            loss.backward()
        if totals.add(batch):                              # the step's last micro-batch
            totals.rescale(model.parameters())             # grads *= step_tokens / delivered
            optimizer.step(); optimizer.zero_grad()

Under DDP the rescale comes after the last backward (whose gradient all-reduce averages the
ranks); every rank computes the same factor. Per-sample normalisation: ``by="samples"``.
"""

__all__ = ["StepTotals"]


def _get(batch, name, default=0):
    return int(batch[name] if isinstance(batch, dict) and name in batch else getattr(batch, name, default))


class StepTotals:
    """Sums one rank's skipped real tokens and samples over a step's micro-batches and, at
    its last micro-batch, over all ranks.

    Args:
        group: the torch.distributed process group (default: the whole world). Without an
            initialised torch.distributed the sums are this process's alone.

    After :meth:`add` returned True: ``planned_tokens``, ``planned_samples`` (the step's
    planned totals) and ``delivered_tokens``, ``delivered_samples`` (what all ranks
    delivered), until the next step's last micro-batch.
    """

    def __init__(self, group=None):
        self.group = group
        self._skipped = [0, 0]  # this rank's skipped real samples, tokens in the current step
        self.planned_samples = self.planned_tokens = None
        self.delivered_samples = self.delivered_tokens = None

    def add(self, batch):
        """Counts a micro-batch (a :class:`adaptiveload.PackedBatch` or a
        :func:`adaptiveload.collate_packed` dict, which skips nothing). On the step's last
        micro-batch (``last_in_step``) it all-reduces the step's skips (a collective: every
        rank calls it there, as every rank runs the same steps), sets the totals and
        returns True; else False. A whole micro-batch of an SP group counts its skips at
        ``sp_rank`` 0 only (every rank of the group receives the group's samples; the C stream
        reports them there only, too); a token shard (``sp_sharded``) counts its own, the
        shards' skips being disjoint (stream/README.md, "Sequence parallelism")."""
        if _get(batch, "sp_sharded") or not _get(batch, "sp_rank"):  # each skip counted once
            self._skipped[0] += _get(batch, "skipped_real_samples")
            self._skipped[1] += _get(batch, "skipped_real_tokens")
        if not _get(batch, "last_in_step"):
            return False
        samples, tokens = self._all_reduce(self._skipped)
        self._skipped = [0, 0]
        self.planned_samples, self.planned_tokens = _get(batch, "step_samples"), _get(batch, "step_tokens")
        self.delivered_samples = self.planned_samples - samples
        self.delivered_tokens = self.planned_tokens - tokens
        return True

    def _all_reduce(self, values):
        try:
            import torch
            import torch.distributed as dist
        except ImportError:
            return values
        if not (dist.is_available() and dist.is_initialized()):
            return values
        device = "cpu"
        if dist.get_backend(self.group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        t = torch.tensor(values, dtype=torch.int64, device=device)
        dist.all_reduce(t, group=self.group)
        return [int(v) for v in t.tolist()]

    def scale(self, by="tokens"):
        """planned / delivered of the last finished step (``by`` "tokens" or "samples"): the
        factor that turns a loss normalised by the planned total into one normalised by the
        delivered total. 1.0 when nothing was skipped, and when nothing was delivered (then
        every real term is absent and the gradient holds no real token's term)."""
        if by not in ("tokens", "samples"):
            raise ValueError("by must be 'tokens' or 'samples', not %r" % (by,))
        if self.planned_tokens is None:
            raise RuntimeError("StepTotals.scale: no step finished yet (add() has not returned True)")
        planned, delivered = ((self.planned_tokens, self.delivered_tokens) if by == "tokens"
                              else (self.planned_samples, self.delivered_samples))
        return planned / delivered if delivered and delivered != planned else 1.0

    def rescale(self, parameters, by="tokens"):
        """Multiplies every gradient in ``parameters`` by :meth:`scale`; returns the factor."""
        f = self.scale(by)
        if f != 1.0:
            for p in parameters:
                if p.grad is not None:
                    p.grad.mul_(f)
        return f

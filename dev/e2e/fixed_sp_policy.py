"""Arm (a) without the planner's --sp-degrees: fixed SP at one degree D for every
micro-batch with equal-token batches, what xDiT / Open-Sora setups do, emulated in Python
(used only when `adaptiveload plan` lacks --sp-degrees; results say "emulated").

Every bucket (dev/e2e/sp_buckets.py) gets B = max(1, floor(D M_mem / S)); each bucket's
shuffled samples are cut into batches of B (the last one shorter); the batches of all
buckets are shuffled and dealt in order: W / D groups per slot, K slots per step (the last
incomplete step is dropped, its samples counted). A lock-step schedule (dev/e2e/sp_model.py).
"""

import random

import sp_buckets
import sp_model


def plan(shapes, native, world, mem_tokens, D, K, cost, seed=0, epoch=0):
    if world % D:
        raise ValueError("degree %d does not divide world %d" % (D, world))
    buckets, stats = sp_buckets.assign(shapes, mem_tokens, [D])
    rng = random.Random(seed * 1000003 + epoch)
    batches = []
    for key in sorted(buckets):
        S = sp_model.tokens(*key)
        B = max(1, (D * mem_tokens) // S)
        idx = buckets[key]
        rng.shuffle(idx)
        for i in range(0, len(idx), B):
            part = idx[i:i + B]
            batches.append({"B": len(part), "S": S, "real": len(part) * S, "native": sum(native[j] for j in part),
                            "pred": cost.predict(len(part), S, D)})
    rng.shuffle(batches)
    per_step = (world // D) * K
    steps, dropped = [], 0
    for s in range(0, len(batches), per_step):
        chunk = batches[s:s + per_step]
        if len(chunk) < per_step:
            dropped += sum(b["B"] for b in chunk)
            break
        step = []
        for k in range(K):
            slot = []
            for g in range(world // D):
                b = dict(chunk[k * (world // D) + g], d=D, rank=g * D)
                slot.append(b)
            step.append(slot)
        steps.append(step)
    stats.update({"dropped_samples": dropped, "emulated": True})
    return {"sync": "micro", "world": world, "policy": "equal-token fixed SP %d (emulated)" % D, "steps": steps}, stats

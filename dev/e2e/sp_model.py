"""The shared arithmetic of the sequence-parallel (SP) replay: model shapes, the per-rank
cost of one micro-batch at SP degree d, the collective model, and the composition of step
times from per-micro-batch times under the two sync models.

No torch, no device: dev/e2e/sp_arms.py (planning, composition, report),
dev/e2e/dcp_policy.py (the DCP-like planner) and dev/e2e/sp_replay.py (the device
harness) all import it, so every arm is costed and composed by the same functions.

Models (Wan 2.1 block shapes; depth = the model's number of blocks):

    14b : hidden 5120, 40 heads, FFN 13824, 40 blocks, ~14e9 parameters
    1.3b: hidden 1536, 12 heads, FFN 8960, 30 blocks, ~1.3e9 parameters

Ulysses SP at degree d (one rank's share): the linear layers run on S/d of each sample's
tokens; self-attention runs for H/d heads over all S tokens; cross-attention (to the text
tokens) on the S/d query tokens with all heads. Heads must divide by d (1.3B's 12 heads:
degrees 1, 2, 4; 8 is refused).

Collectives (a bandwidth model, no multi-GPU measurement; every arm gets the same one):
  * Ulysses all-to-all, per micro-batch per rank: 8 all-to-alls per block (4 forward: q, k, v
    in, attention out; 4 backward), each moving B S/d tokens' hidden states (bf16) of which
    (d-1)/d leave the rank: bytes = 8 x 2 hidden x depth x B S (d-1)/d^2, at the intra-node
    link (SP groups are aligned and d <= 8, so a group never spans nodes).
  * Parameters sharded within a node (HSDP: shard group g = min(W, --gpus-per-node) ranks,
    replicated across the W / g nodes), bf16 parameters and gradients, P bytes = 2 x params:
    the lock-step arms (FSDP), per micro-batch: all-gather forward and backward and a
    reduce-scatter, 3 (g-1)/g x P at the intra-node link; per step, across nodes: an
    all-reduce of each rank's gradient shard, 2 (n-1)/n x P / g at the inter-node link.
  * The DCP arm (full parameters per rank, gradients accumulated locally for a different
    number of micro-batches per rank, ZeRO-2-like as VideoSys's Open-Sora training): once per
    step a reduce-scatter and an all-gather in the node, 2 (g-1)/g x P, plus the same
    cross-node all-reduce.
  Collectives are added to compute (no overlap), stated in every result.

Sync models (SP_SPEC.md):
  micro (lock-step, FSDP/SP): step = sum over slots k of max over groups of slot k's time.
  per-rank (DCP's own): step = max over groups of the sum of that group's micro-batches.
bubble = 1 - (sum over ranks of their compute+a2a) / (W x sum over steps of the compute+a2a
part of the step time), i.e. idle time from imbalance; the per-step FSDP/ZeRO time is the
same on every rank and stays out of it.
"""

import math
import statistics

MODELS = {
    "14b": {"hidden": 5120, "heads": 40, "ffn": 13824, "depth": 40, "text_len": 512, "text_dim": 4096},
    "1.3b": {"hidden": 1536, "heads": 12, "ffn": 8960, "depth": 30, "text_len": 512, "text_dim": 4096},
}

# Wan geometry: VAE strides 4 (time) x 8 x 8, patch 1 x 2 x 2 (planner/tokens.c's default).
VAE_T, VAE_S, PATCH_T, PATCH_H, PATCH_W = 4, 8, 1, 2, 2


def tokens(width, height, frames):
    """Latent tokens of a sample (planner/tokens.c, al_tokens, with Wan's geometry)."""
    if frames <= 0:
        return 0
    t_lat = 1 + (frames - 1) // VAE_T
    t_tok = (t_lat + PATCH_T - 1) // PATCH_T
    return t_tok * (height // (VAE_S * PATCH_H)) * (width // (VAE_S * PATCH_W))


def block_params(m):
    """Parameters of one block: self-attention q, k, v, o (4 h^2), cross-attention q, o
    (2 h^2) and k, v from the text (2 h text_dim), FFN (2 h ffn), AdaLN tables, norms."""
    h = m["hidden"]
    return 4 * h * h + 2 * h * h + 2 * h * m["text_dim"] + 2 * h * m["ffn"] + 6 * h + 8 * h


def model_params(m):
    """Parameters of the whole model (blocks; the patch/text/time embeddings and head are
    small next to them and counted roughly as 2 h text_dim + 2 h 256)."""
    h = m["hidden"]
    return m["depth"] * block_params(m) + 2 * h * m["text_dim"] + 2 * h * 256


def share_flops(m, B, S, d):
    """Forward+backward FLOPs of one rank's share of one block (3x forward).
    Returns (linear, attention) FLOPs."""
    h, L = m["hidden"], m["text_len"]
    tok = B * S / d
    lin = 2 * tok * (4 * h * h + 2 * h * h + 2 * h * m["ffn"])  # self q,k,v,o; cross q,o; FFN
    lin += 2 * B * L * 2 * h * m["text_dim"]  # cross k, v of the text: every rank of the group, whole
    att = 4 * B * S * S * h / d  # QK^T and PV, H/d heads of head_dim h/H over all S tokens
    att += 4 * tok * L * h  # cross-attention: S/d queries, all heads, L keys
    return 3 * lin, 3.5 * att  # backward: 2x linear; flash backward ~2.5x forward


def analytic_ms(m, B, S, d, linear_tflops=620.0, attn_tflops=420.0, launch_ms=0.35):
    """A FLOP-count estimate of one rank's share of one block (ms), at assumed rates: the
    planning cost model (fitted by `adaptiveload fit` from rows of this) before any
    measurement, and the harness's estimate of its own run time."""
    lin, att = share_flops(m, B, S, d)
    return launch_ms + 1e3 * (lin / (linear_tflops * 1e12) + att / (attn_tflops * 1e12))


# ---------------------------------------------------------------------------------------------
# collectives


class Comm:
    """The collective model (see the module docstring). Bandwidths in GB/s per GPU per
    direction."""

    def __init__(self, m, world, link_gbps=450.0, inter_node_gbps=50.0, gpus_per_node=8):
        self.m, self.world = m, world
        self.link_gbps, self.inter_node_gbps, self.gpus_per_node = link_gbps, inter_node_gbps, gpus_per_node
        self.param_bytes = 2.0 * model_params(m)  # bf16
        self.a2a_bytes_per_token = 8 * 2.0 * m["hidden"] * m["depth"]

    def _group(self):
        g = min(self.world, self.gpus_per_node)
        return g, max(1, self.world // g)

    def a2a_ms(self, B, S, d):
        """Ulysses all-to-all time of one micro-batch on one rank of a group of d."""
        if d <= 1:
            return 0.0
        return 1e3 * B * S * (d - 1) / (d * d) * self.a2a_bytes_per_token / (self.link_gbps * 1e9)

    def fsdp_micro_ms(self):
        """FSDP all-gather (forward, backward) + reduce-scatter of one micro-batch, in the node."""
        g, _ = self._group()
        return 1e3 * 3.0 * (g - 1) / g * self.param_bytes / (self.link_gbps * 1e9) if g > 1 else 0.0

    def cross_node_step_ms(self):
        """The per-step all-reduce of each rank's gradient shard across the nodes."""
        g, n = self._group()
        return 1e3 * 2.0 * (n - 1) / n * self.param_bytes / g / (self.inter_node_gbps * 1e9) if n > 1 else 0.0

    def lockstep_step_ms(self, K):
        """Collectives of one lock-step (FSDP) step of K micro-batches."""
        return K * self.fsdp_micro_ms() + self.cross_node_step_ms()

    def zero_step_ms(self):
        """ZeRO-2-like reduce-scatter + all-gather in the node once per step, and the
        cross-node all-reduce (the DCP arm)."""
        g, _ = self._group()
        intra = 1e3 * 2.0 * (g - 1) / g * self.param_bytes / (self.link_gbps * 1e9) if g > 1 else 0.0
        return intra + self.cross_node_step_ms()

    def describe(self):
        return {"param_bytes": self.param_bytes, "a2a_bytes_per_token": self.a2a_bytes_per_token,
                "link_gbps": self.link_gbps, "inter_node_gbps": self.inter_node_gbps,
                "gpus_per_node": self.gpus_per_node, "shard_group": self._group()[0],
                "fsdp_micro_ms": round(self.fsdp_micro_ms(), 3),
                "cross_node_step_ms": round(self.cross_node_step_ms(), 3),
                "zero_step_ms": round(self.zero_step_ms(), 3),
                "overlap": "none: collectives are added to compute"}


# ---------------------------------------------------------------------------------------------
# schedules
#
# A lock-step schedule (arms a, a', c, d): {"sync": "micro", "world": W, "steps": [step, ...]}
# with step = [slot, ...], slot = [group, ...], group = {"d": d, "rank": first rank, "B": B,
# "S": S, "real": real tokens, "native": the samples' tokens before any cut, "pred": planned
# per-rank cost ms or None}; every rank is in exactly one group per slot.
# A per-rank schedule (arm b, DCP-like): {"sync": "per-rank", "world": W, "steps": [step, ...]}
# with step = [phase, ...], phase = [lane, ...], lane = {"d": d, "rank": first rank, "micro":
# [mb, ...]} and mb = {"B", "S", "real", "native", "pred"}: in a phase every rank is in one
# lane, whose group of d ranks runs its micro-batches in turn, with no lock-step; phases (DCP
# iterations merged into one optimizer step) follow each other, the groups re-formed between
# them (a barrier): step work = sum over phases of the slowest lane.


def shape_key(B, S, d):
    return "%d,%d,%d" % (B, S, d)


def schedule_shapes(sched):
    """{(B, S, d): count of micro-batches} of a schedule."""
    out = {}
    for step in sched["steps"]:
        units = [lane for phase in step for lane in phase] if sched["sync"] == "per-rank" else \
            [g for slot in step for g in slot]
        for x in units:
            mbs = x["micro"] if sched["sync"] == "per-rank" else [x]
            for mb in mbs:
                k = (mb["B"], mb["S"], x["d"])
                out[k] = out.get(k, 0) + 1
    return out


def check_schedule(sched):
    """Raises ValueError unless every rank is in exactly one aligned group per slot/step."""
    W = sched["world"]
    for si, step in enumerate(sched["steps"]):
        for ki, slot in enumerate(step):
            seen = [0] * W
            for g in slot:
                d, r = g["d"], g["rank"]
                if d < 1 or d & (d - 1) or r % d or r + d > W:
                    raise ValueError("step %d slot %d: group of degree %d at rank %d is not aligned in W = %d"
                                     % (si, ki, d, r, W))
                for x in range(r, r + d):
                    seen[x] += 1
            if any(c != 1 for c in seen):
                raise ValueError("step %d slot %d: ranks not covered exactly once: %s" % (si, ki, seen))


def compose(sched, time_ms, comm):
    """Step times of a schedule from per-micro-batch times.

    time_ms(B, S, d) -> one rank's compute ms of that micro-batch (measured, scaled to the
    model's depth). Returns a dict of per-step lists and totals (see summarise())."""
    W = sched["world"]
    steps = []
    for step in sched["steps"]:
        rank_busy = [0.0] * W  # compute + a2a per rank
        if sched["sync"] == "per-rank":
            work, K = 0.0, 0
            for phase in step:
                lanes = []
                for lane in phase:
                    d = lane["d"]
                    t = sum(time_ms(mb["B"], mb["S"], d) + comm.a2a_ms(mb["B"], mb["S"], d) for mb in lane["micro"])
                    lanes.append(t)
                    for x in range(lane["rank"], lane["rank"] + d):
                        rank_busy[x] += t
                work += max(lanes) if lanes else 0.0
                K += max((len(lane["micro"]) for lane in phase), default=0)
            coll = comm.zero_step_ms()
            mbs = [mb for phase in step for lane in phase for mb in lane["micro"]]
        else:
            work = 0.0
            for slot in step:
                slot_max = 0.0
                for g in slot:
                    t = time_ms(g["B"], g["S"], g["d"]) + comm.a2a_ms(g["B"], g["S"], g["d"])
                    slot_max = max(slot_max, t)
                    for x in range(g["rank"], g["rank"] + g["d"]):
                        rank_busy[x] += t
                work += slot_max
            K = len(step)
            coll = comm.lockstep_step_ms(K)
            mbs = [g for slot in step for g in slot]
        steps.append({"work_ms": work, "coll_ms": coll, "step_ms": work + coll, "rank_busy_ms": rank_busy,
                      "real": sum(mb["real"] for mb in mbs), "native": sum(mb["native"] for mb in mbs),
                      "micro": len(mbs), "K": K})
    return steps


def cv(xs):
    """Population coefficient of variation (0 for fewer than two values or a zero mean)."""
    if len(xs) < 2:
        return 0.0
    mu = sum(xs) / len(xs)
    if mu == 0:
        return 0.0
    return math.sqrt(sum((x - mu) ** 2 for x in xs) / len(xs)) / mu


def summarise(steps, world, corpus_native_tokens=None):
    """tokens/s, bubble, kept fraction, step-time CV of composed steps."""
    total_ms = sum(s["step_ms"] for s in steps)
    work = sum(s["work_ms"] for s in steps)
    busy = sum(sum(s["rank_busy_ms"]) for s in steps)
    real = sum(s["real"] for s in steps)
    native = sum(s["native"] for s in steps)
    out = {
        "steps": len(steps),
        "micro_batches": sum(s["micro"] for s in steps),
        "tokens": real,
        "tokens_per_s": real / (total_ms / 1e3) if total_ms > 0 else None,
        "tokens_per_step_mean": real / len(steps) if steps else None,
        "step_ms_mean": total_ms / len(steps) if steps else None,
        "step_time_cv": cv([s["step_ms"] for s in steps]),
        "collective_share": (total_ms - work) / total_ms if total_ms > 0 else None,
        "bubble": 1.0 - busy / (world * work) if work > 0 else None,
        "kept_of_planned": real / native if native else None,
    }
    if corpus_native_tokens:
        out["kept_of_corpus"] = real / corpus_native_tokens
    return out


def size_band(tokens):
    """Band of a micro-batch's per-rank tokens (B S / d)."""
    for lim, name in ((8192, "<8k"), (32768, "8k-32k"), (131072, "32k-128k")):
        if tokens < lim:
            return name
    return ">=128k"


def pred_vs_measured(pairs):
    """pairs: (per-rank tokens, predicted ms, measured ms). Median / max relative error,
    overall and by size band, the median measured/predicted ratio k, and the errors of k x
    predicted (the model's shape error once its level is corrected)."""
    def stats(ps):
        rel = sorted(abs(p - m) / m for _, p, m in ps if m > 0)
        if not rel:
            return None
        k = statistics.median(m / p for _, p, m in ps if p > 0)
        rel_k = sorted(abs(k * p - m) / m for _, p, m in ps if m > 0)
        return {"n": len(rel), "median_rel_err": statistics.median(rel), "max_rel_err": rel[-1],
                "median_measured_over_pred": k,
                "after_one_scale": {"median_rel_err": statistics.median(rel_k), "max_rel_err": rel_k[-1]}}
    pairs = [x for x in pairs if x[1] is not None]
    bands = {}
    for x in pairs:
        bands.setdefault(size_band(x[0]), []).append(x)
    return {"all": stats(pairs), "by_band": {k: stats(v) for k, v in sorted(bands.items())}}


# ---------------------------------------------------------------------------------------------
# the planning cost model, as the planner evaluates it


def _smax(F, g, k):
    """smax_k(F, g) = (F^k + g^k)^(1/k), F where g is not positive (cost/cost_floor.c)."""
    if not g > 0:
        return F
    m = max(F, g)
    return m * ((F / m) ** k + (g / m) ** k) ** (1.0 / k)


class Fit:
    """One fitted family of `adaptiveload fit --json` ({"family", "params"}): poly2
    a + B (b S + c S^2), power a + B b S^p, floor smax_k(F, a + s B + (b B S + c B S^2) / d)
    (cost/cost_fit.c, cost_fit_eval)."""

    def __init__(self, family, params):
        if family not in ("poly2", "power", "floor"):
            raise ValueError("cost family %r (poly2, power, floor)" % family)
        if not isinstance(params, dict):
            keys = {"poly2": "abc", "power": "abp", "floor": "abcsFk"}[family]
            params = dict(zip(keys, params))
        self.family, self.p = family, {k: float(v) for k, v in params.items()}

    def eval(self, B, S, d=1):
        p = self.p
        if self.family == "floor":
            return _smax(p["F"], p["a"] + p.get("s", 0.0) * B + (p["b"] * B * S + p["c"] * B * S * S) / d,
                         p.get("k", 8.0))
        if self.family == "power":
            return p["a"] + B * p["b"] * S ** p["p"] / d
        return p["a"] + B * (p["b"] * S + p["c"] * S * S) / d


class PlanCost:
    """al_cost_predict_sp in Python (cost/al_cost.h, cost/README.md 2): at d = 1 the
    model's own fit; at d > 1 the per-degree fit of d (else of the largest fitted degree
    below d, else the smallest fitted one), else the plain fit with B c(S) / d; times
    ``scale`` (the model's depth over the benchmark's timed blocks, so a 1-block benchmark
    predicts the whole model), plus the all-to-all of ``comm`` (a Comm; None leaves it out).
    ``sp_fits``: {d: Fit}."""

    def __init__(self, family, params, comm=None, sp_fits=None, scale=1.0):
        self.fit = Fit(family, params)
        self.family = family
        self.comm, self.sp_fits, self.scale = comm, dict(sp_fits or {}), float(scale)

    def fit_at(self, d):
        if d <= 1 or not self.sp_fits:
            return self.fit
        below = [k for k in self.sp_fits if k <= d]
        return self.sp_fits[max(below) if below else min(self.sp_fits)]

    def compute(self, B, S, d=1):
        """One rank's compute ms (no all-to-all)."""
        return self.scale * self.fit_at(d).eval(B, S, d)

    def predict(self, B, S, d=1):
        t = self.compute(B, S, d)
        if self.comm is not None:
            t += self.comm.a2a_ms(B, S, d)
        return t

    @classmethod
    def from_fit_json(cls, fit, comm=None, scale=1.0):
        """From `adaptiveload fit --json`'s object ({"fit": {"family", "params"}, "sp":
        {"fits": [{"d", "fit"}]}}) or its "fit" member alone."""
        f = fit.get("fit", fit)
        sp = {int(x["d"]): Fit(x["fit"]["family"], x["fit"]["params"]) for x in (fit.get("sp") or {}).get("fits", [])}
        return cls(f["family"], f["params"], comm, sp, scale)

"""The SP replay's bucket table and the planner's bucket rule, in Python, for the policies
written here (dev/e2e/dcp_policy.py, dev/e2e/fixed_sp_policy.py).

The table (written for `plan --buckets` too, so every arm buckets alike): the corpus's own
sizes (dev/e2e/sp_corpus.py: 480p and 720p, landscape, portrait, square) and frame counts
up to 281 (71 latent frames: a 720p clip of 255,600 tokens).

Rule (SP_SPEC.md, planner/README.md section 2): a sample's size is its own (the table holds
every corpus size); its frame count is the largest table count <= its frames whose tokens fit
d_max x M_mem (the sample's first frames are kept; a sample cut because even d_max cannot
hold it is counted); a sample shorter than the smallest count, or whose smallest bucket does
not fit, is left out (counted). A bucket's degree: the smallest allowed d with S <= d M_mem.
"""

import sp_model

FRAMES = (1, 17, 33, 49, 65, 81, 97, 121, 161, 201, 241, 281)
ASPECTS = (("16:9", ((832, 480), (1280, 720))), ("9:16", ((480, 832), (720, 1280))),
           ("1:1", ((480, 480), (720, 720))))


def table_text():
    """The table in `plan --buckets` text form."""
    lines = ["# SP replay buckets (dev/e2e/sp_buckets.py): the corpus's sizes, frames up to 281",
             "frames " + " ".join(str(f) for f in FRAMES)]
    for name, sizes in ASPECTS:
        lines.append("aspect %s %s" % (name, " ".join("%dx%d" % s for s in sizes)))
    return "\n".join(lines) + "\n"


def degree_for(S, mem_tokens, degrees):
    """Smallest allowed degree holding S tokens per sample, or None."""
    for d in sorted(degrees):
        if S <= d * mem_tokens:
            return d
    return None


def assign(shapes, mem_tokens, degrees):
    """(buckets, stats): buckets = {(w, h, frames): [sample index, ...]} in index order, each
    bucket's S = sp_model.tokens(w, h, frames); stats counts cut and left-out samples."""
    sizes = {s for _, ss in ASPECTS for s in ss}
    cap = max(degrees) * mem_tokens
    out, cut, left_out = {}, 0, 0
    for i, (w, h, f, _) in enumerate(shapes):
        if (w, h) not in sizes:
            left_out += 1
            continue
        best = None
        for fr in FRAMES:
            if fr <= f and sp_model.tokens(w, h, fr) <= cap:
                best = fr
        if best is None:
            left_out += 1
            continue
        longest = max(fr for fr in FRAMES if fr <= f)
        if best < longest:
            cut += 1  # longer than d_max x M_mem: fewer frames than the table allows
        out.setdefault((w, h, best), []).append(i)
    return out, {"cut_by_cap": cut, "left_out": left_out, "cap_tokens": cap}

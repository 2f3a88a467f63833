"""Helpers to turn a packed Wan-2.1 latent payload into transformer tokens.

A latent member holds C x T' x H/8 x W/8 values (C = 16 channels, T' = 1 + (F-1)/4,
bf16, channel-major), as ``adaptiveload synth`` writes them. The planner puts each
sample in a shape bucket no larger than the sample; :func:`latent_tokens` center-crops
the latent to the bucket and patchifies it (1 x 2 x 2) into ``tokens x (C*4)``, the
sequence the manifest's token counts (and ``cu_seqlens``) describe.
"""

import torch


def latent_tokens(payload, shape, bucket, channels=16, vae_stride_t=4, vae_stride_s=8, patch=(1, 2, 2),
                  dtype=torch.bfloat16):
    """payload: uint8 tensor of one sample (``batch.sample(i)``); shape: (width, height,
    frames) of the sample; bucket: (width, height, frames, ...) of its bucket.
    Returns a (tokens, channels * prod(patch)) tensor of ``dtype`` (a copy).

    A typed latent (a (C, T, H, W) or (C, H, W) tensor, e.g. ``batch.tensors("latent.npy")[i]``,
    already cropped by the stream) is cropped to the bucket's grid (a no-op when it has it) and
    patchified as it is; ``shape``, ``channels`` and ``dtype`` are then not used.
    ``batch.packed()`` does this for a whole batch."""
    if payload.dim() in (3, 4):
        from . import members

        grid = members.latent_grid(*bucket[:3], vae_stride_t=vae_stride_t, vae_stride_s=vae_stride_s)
        return members.patchify(members.crop_latent(payload, grid), patch).contiguous()
    w, h, f = (int(v) for v in shape)
    bw, bh, bf = (int(v) for v in bucket[:3])
    t, hh, ww = 1 + (f - 1) // vae_stride_t, h // vae_stride_s, w // vae_stride_s
    need = channels * t * hh * ww * torch.tensor([], dtype=dtype).element_size()
    if payload.numel() != need:
        raise ValueError("latent of %d bytes, expected %d for %dx%d x %d frames" % (payload.numel(), need, w, h, f))
    lat = payload.view(dtype).view(channels, t, hh, ww)
    tb, hb, wb = 1 + (bf - 1) // vae_stride_t, bh // vae_stride_s, bw // vae_stride_s
    y0, x0 = (hh - hb) // 2, (ww - wb) // 2
    lat = lat[:, :tb, y0:y0 + hb, x0:x0 + wb]
    pt, ph, pw = patch
    lat = lat.reshape(channels, tb // pt, pt, hb // ph, ph, wb // pw, pw)
    return lat.permute(1, 3, 5, 0, 2, 4, 6).reshape(-1, channels * pt * ph * pw).contiguous()

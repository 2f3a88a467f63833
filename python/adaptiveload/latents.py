"""The latent rule, written once: a bucket's latent grid, the stream's crop to it, the
patchify into tokens, and the token count they give. The C stream crops typed latents by
the same rule (stream/README.md); :class:`adaptiveload.IndexDataset`,
:meth:`adaptiveload.PackedBatch.packed` and :func:`latent_tokens` use these functions.

* :func:`latent_grid`: a bucket's latent grid (T_b, h_b, w_b) under the VAE strides, as
  the planner computes tokens (T_b = 1 + (F - 1) // vae_stride_t, h_b = H // vae_stride_s,
  w_b = W // vae_stride_s).
* :func:`crop_latent`: channels whole, frames [0, T_b), rows and columns centred at
  (n - n_b) // 2, C order; what the stream delivers for a typed latent member.
* :func:`patchify`: (C, T, H, W) or (C, H, W) -> (tokens, C * p_t * p_h * p_w).
* :func:`wan_tokens`: tokens of one sample (the planner's count: the patches of its grid).
* :func:`latent_tokens`: a packed Wan-2.1 latent payload (C x T' x H/8 x W/8 values,
  C = 16 channels, T' = 1 + (F-1)/4, bf16, channel-major, as ``adaptiveload synth`` writes
  them) cropped to its bucket and patchified (1 x 2 x 2) into ``tokens x (C*4)``, the
  sequence the manifest's token counts (and ``cu_seqlens``) describe.
"""

import torch


def latent_grid(width, height, frames, vae_stride_t=4, vae_stride_s=8):
    """(T_b, h_b, w_b): the latent grid of a bucket of width x height pixels and frames."""
    return 1 + (int(frames) - 1) // vae_stride_t, int(height) // vae_stride_s, int(width) // vae_stride_s


def wan_tokens(width, height, frames, vae_stride_t=4, vae_stride_s=8, patch_t=1, patch_h=2, patch_w=2):
    """Tokens of one sample after the VAE and patchify (Wan 2.1 defaults, as the planner)."""
    t, h, w = latent_grid(width, height, frames, vae_stride_t, vae_stride_s)
    return (t // patch_t) * (h // patch_h) * (w // patch_w)


def crop_latent(lat, grid):
    """The stream's crop of a (C, T, H, W) or (C, H, W) tensor to grid (T_b, h_b, w_b),
    contiguous. ValueError when the latent is smaller than the grid."""
    tb, hb, wb = (int(g) for g in grid)
    if lat.dim() == 3:
        c, t, h, w = lat.shape[0], 1, lat.shape[1], lat.shape[2]
    elif lat.dim() == 4:
        c, t, h, w = lat.shape
    else:
        raise ValueError("latent of %d dimensions: expected (C, T, H, W) or (C, H, W)" % lat.dim())
    if t < tb or h < hb or w < wb:
        raise ValueError("latent grid %dx%dx%d is smaller than its bucket's grid %dx%dx%d" % (t, h, w, tb, hb, wb))
    y0, x0 = (h - hb) // 2, (w - wb) // 2
    if lat.dim() == 3:
        return lat[:, y0:y0 + hb, x0:x0 + wb].contiguous()
    return lat[:, :tb, y0:y0 + hb, x0:x0 + wb].contiguous()


def patchify(lat, patch=(1, 2, 2)):
    """(C, T, H, W) (or (C, H, W) as T = 1) -> (T/p_t * H/p_h * W/p_w, C * p_t * p_h * p_w),
    tokens in (t, y, x) order, features (c, dt, dy, dx): Wan 2.1's patch embedding order."""
    if lat.dim() == 3:
        lat = lat.unsqueeze(1)
    c, t, h, w = lat.shape
    pt, ph, pw = patch
    if t % pt or h % ph or w % pw:
        raise ValueError("latent %s does not split into %s patches" % (tuple(lat.shape), tuple(patch)))
    x = lat.reshape(c, t // pt, pt, h // ph, ph, w // pw, pw)
    return x.permute(1, 3, 5, 0, 2, 4, 6).reshape(-1, c * pt * ph * pw)


def latent_tokens(payload, shape, bucket, channels=16, vae_stride_t=4, vae_stride_s=8, patch=(1, 2, 2),
                  dtype=torch.bfloat16):
    """payload: uint8 tensor of one sample (``batch.sample(i)``); shape: (width, height,
    frames) of the sample; bucket: (width, height, frames, ...) of its bucket.
    Returns a (tokens, channels * prod(patch)) tensor of ``dtype`` (a copy).

    A typed latent (a (C, T, H, W) or (C, H, W) tensor, e.g. ``batch.tensors("latent.npy")[i]``,
    already cropped by the stream) is cropped to the bucket's grid (a no-op when it has it) and
    patchified as it is; ``shape``, ``channels`` and ``dtype`` are then not used.
    ``batch.packed()`` does this for a whole batch."""
    grid = latent_grid(*bucket[:3], vae_stride_t=vae_stride_t, vae_stride_s=vae_stride_s)
    if payload.dim() in (3, 4):
        return patchify(crop_latent(payload, grid), patch).contiguous()
    w, h, f = (int(v) for v in shape)
    t, hh, ww = latent_grid(w, h, f, vae_stride_t, vae_stride_s)
    need = channels * t * hh * ww * torch.tensor([], dtype=dtype).element_size()
    if payload.numel() != need:
        raise ValueError("latent of %d bytes, expected %d for %dx%d x %d frames" % (payload.numel(), need, w, h, f))
    lat = payload.view(dtype).view(channels, t, hh, ww)
    return patchify(crop_latent(lat, grid), patch).contiguous()

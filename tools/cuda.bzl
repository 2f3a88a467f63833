"""cuda_library: compiles .cu files with nvcc and wraps the objects in a cc_library.

Bazel 4.2.3 has no native CUDA support and we build offline, so this is a small rule of our
own. Each .cu becomes one position-independent object built for sm_90 with PTX embedded
(compute_90), so the same binary runs on Hopper and JIT-compiles on newer parts. Binaries
link cudart statically (@cuda//:cudart_static): only the driver is needed where they run.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

NVCC = "/usr/local/cuda/bin/nvcc"

def _cuda_objects_impl(ctx):
    hdrs = depset(
        ctx.files.hdrs,
        transitive = [d[CcInfo].compilation_context.headers for d in ctx.attr.deps],
    )
    objs = []
    for src in ctx.files.srcs:
        out = ctx.actions.declare_file("_nvcc/%s/%s.pic.o" % (ctx.label.name, src.basename[:-3]))
        args = [
            "-c",
            src.path,
            "-o",
            out.path,
            "-I.",
            "-I" + ctx.bin_dir.path,
            "-std=c++17",
            "-gencode=arch=compute_90,code=sm_90",
            "-gencode=arch=compute_90,code=compute_90",
            "-Xcompiler=-fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror",
            "-Werror=all-warnings",
            "-O3",
            "-lineinfo",
        ] + ctx.attr.copts
        ctx.actions.run_shell(
            command = NVCC + ' "$@"',
            arguments = args,
            inputs = depset([src], transitive = [hdrs]),
            outputs = [out],
            use_default_shell_env = True,
            mnemonic = "Nvcc",
            progress_message = "nvcc %s" % src.short_path,
        )
        objs.append(out)
    return [DefaultInfo(files = depset(objs))]

cuda_objects = rule(
    implementation = _cuda_objects_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"]),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """A cc_library whose sources are .cu files compiled by nvcc (sm_90 + PTX)."""
    cuda_objects(
        name = name + "_nvcc",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps,
        copts = copts,
    )
    cc_library(
        name = name,
        srcs = [":" + name + "_nvcc"],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart_static"],
        visibility = visibility,
        **kwargs
    )

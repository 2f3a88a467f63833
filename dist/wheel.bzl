"""al_wheel: the pip wheel, written by dist/make_wheel.py.

The wheel's file name carries the version (adaptiveload-<version>-py3-none-linux_x86_64.whl),
which only the action knows: it reads AL_VERSION_STRING from common/al_version.h, so the
version is written nowhere else. Bazel declares outputs before any file is read, so the rule's
output is a folder (bazel-bin/dist/<name>/) holding the one wheel."""

def _al_wheel_impl(ctx):
    out = ctx.actions.declare_directory(ctx.label.name)
    args = ctx.actions.args()
    args.add("--version-header", ctx.file.version_header)
    args.add("--lib", ctx.file.lib)
    args.add("--bin", ctx.file.bin)
    args.add("--out-dir", out.path)
    args.add_all(ctx.files.py)
    ctx.actions.run(
        executable = ctx.executable._make_wheel,
        arguments = [args],
        inputs = [ctx.file.version_header, ctx.file.lib, ctx.file.bin] + ctx.files.py,
        outputs = [out],
        mnemonic = "AlWheel",
        progress_message = "Writing the adaptiveload wheel into %s" % out.short_path,
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

al_wheel = rule(
    implementation = _al_wheel_impl,
    attrs = {
        "version_header": attr.label(allow_single_file = [".h"], mandatory = True),
        "lib": attr.label(allow_single_file = True, mandatory = True),
        "bin": attr.label(allow_single_file = True, mandatory = True),
        "py": attr.label_list(allow_files = [".py"], mandatory = True),
        "_make_wheel": attr.label(
            default = ":make_wheel.py",
            allow_single_file = True,
            executable = True,
            cfg = "exec",
        ),
    },
)

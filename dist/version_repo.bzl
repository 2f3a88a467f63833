"""al_version_repository: the repository @al_version whose version.bzl defines AL_VERSION, read
from AL_VERSION_STRING of common/al_version.h (the one place the version is written). Bazel
re-runs it when that header changes (the header is read through a label)."""

def _impl(rctx):
    header = rctx.path(Label("//common:al_version.h"))
    version = None
    prefix = "#define AL_VERSION_STRING "
    for line in rctx.read(header).splitlines():
        if line.startswith(prefix):
            version = line[len(prefix):].strip().strip('"')
    if not version:
        fail("%s: no '#define AL_VERSION_STRING \"...\"' line" % header)
    rctx.file("BUILD", "")
    rctx.file("version.bzl", "AL_VERSION = %r\n" % version)

al_version_repository = repository_rule(implementation = _impl)

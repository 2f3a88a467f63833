"""The ``adaptiveload`` console script of the wheel (entry point ``adaptiveload._cli:main``).

It replaces itself (os.execv) with the CLI binary the wheel installs beside the package,
``adaptiveload/bin/adaptiveload``, passing the arguments on unchanged; the exit status,
output and signals are the binary's own. A missing or non-executable binary exits with
status 127, one the system cannot run (OSError from execv) with 126, each with a message
naming the path.
"""

import os
import sys


def binary_path():
    """Where the wheel puts the CLI binary: bin/adaptiveload inside this package's folder."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "adaptiveload")


def main():
    path = binary_path()
    if not os.access(path, os.X_OK):
        why = "is not executable" if os.path.exists(path) else "is missing"
        sys.stderr.write("adaptiveload: the CLI binary %s %s; reinstall the adaptiveload wheel\n" % (path, why))
        return 127
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(path, ["adaptiveload"] + sys.argv[1:])
    except OSError as e:
        sys.stderr.write("adaptiveload: cannot run the CLI binary %s: %s\n" % (path, e.strerror or e))
    return 126


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Sums bazel-testlogs/**/test.xml into one line CI can read: `tests: N passed, M failed`.

GoogleTest writes one <testcase> per TEST(); Bazel writes a single <testcase> for other
test kinds (sh_test, py_test). A testcase with <failure> or <error> failed; one with
result="skipped" (GTEST_SKIP, e.g. GPU tests on a machine without a GPU) is counted apart.
Usage: test_summary.py [TESTLOGS_DIR] [--bazel-rc RC]
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET


def main():
    args = sys.argv[1:]
    bazel_rc = 0
    if "--bazel-rc" in args:
        i = args.index("--bazel-rc")
        bazel_rc = int(args[i + 1])
        del args[i:i + 2]
    root = args[0] if args else "bazel-testlogs"
    passed = failed = skipped = 0
    failed_names = []
    for path in sorted(glob.glob(os.path.join(root, "**", "test.xml"), recursive=True)):
        try:
            tree = ET.parse(path)
        except ET.ParseError as e:
            failed += 1
            failed_names.append(f"{path} (unreadable: {e})")
            continue
        for case in tree.iter("testcase"):
            name = f"{os.path.relpath(os.path.dirname(path), root)}:{case.get('classname', '')}.{case.get('name')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failed_names.append(name)
            elif case.get("result") == "skipped" or case.find("skipped") is not None:
                skipped += 1
            else:
                passed += 1
    for n in failed_names:
        print(f"FAILED: {n}")
    if bazel_rc != 0 and failed == 0:
        # A target that failed to build leaves no test.xml; do not report green.
        failed = 1
        print(f"FAILED: bazel exited with status {bazel_rc} (a test target did not build or run)")
    if skipped:
        print(f"skipped: {skipped} (GPU tests skip without a GPU; run them on the GPU machine)")
    print(f"tests: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

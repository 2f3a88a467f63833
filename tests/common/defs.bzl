"""Macros for the tests' BUILD files: every C++ test links GoogleTest's main and the shared
helpers (//tests/common:test_util); module fixtures are test-only libraries on top of them."""

load("@rules_cc//cc:defs.bzl", "cc_library", "cc_test")

_COMMON = ["//tests/common:test_util"]

def al_cc_test(name, deps = [], size = "small", **kwargs):
    """A GoogleTest binary built from NAME.cc (unless `srcs` is given)."""
    cc_test(
        name = name,
        size = size,
        srcs = kwargs.pop("srcs", [name + ".cc"]),
        deps = deps + _COMMON + ["@system//:gtest_main"],
        **kwargs
    )

def al_test_library(name, hdrs, deps = [], **kwargs):
    """Test-only fixtures of one module, on top of the shared helpers."""
    cc_library(
        name = name,
        testonly = 1,
        hdrs = hdrs,
        deps = deps + _COMMON + ["@system//:gtest"],
        **kwargs
    )

def al_sh_test(name, size = "small", **kwargs):
    """A shell test run from NAME.sh (unless `srcs` is given)."""
    native.sh_test(
        name = name,
        size = size,
        srcs = kwargs.pop("srcs", [name + ".sh"]),
        **kwargs
    )

def al_py_test(name, size = "medium", **kwargs):
    """A Python test file of tests/python/, NAME.py, run by tests/python/python_test.sh
    against the built library and CLI under the test environment's Python (real DataLoaders;
    fails without torch)."""
    native.sh_test(
        name = name,
        size = size,
        srcs = ["//tests/python:python_test.sh"],
        args = [name + ".py"],
        tags = kwargs.pop("tags", []) + ["no_tsan"],
        data = [
            name + ".py",
            "//:adaptiveload",
            "//:python_package",
            "//dist:libadaptiveload.so",
            "//dist:libal_kernels.so",
            "//tests/common:python_env.sh",
        ] + kwargs.pop("data", []),
        **kwargs
    )

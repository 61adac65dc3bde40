"""The wheel's tag: the binaries are native code that needs glibc alone (scripts/package.sh checks
that and finds the oldest glibc they allow), so the wheel is py3-none-<manylinux tag>, given in
DDPRUN_WHEEL_PLATFORM, never the py3-none-any hatchling would infer from a wheel without Python
extension modules."""
import os

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class PlatformTag(BuildHookInterface):
    def initialize(self, version, build_data):
        platform = os.environ.get("DDPRUN_WHEEL_PLATFORM", "")
        if not platform:
            raise RuntimeError("DDPRUN_WHEEL_PLATFORM is not set: build the wheel with scripts/package.sh")
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{platform}"

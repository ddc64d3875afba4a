"""The build step of `pip install .` (pyproject.toml): CMake builds the extension modules.

CMake configures this project with only the Python module on (no tests, benchmarks or
examples), for the interpreter running pip, in Release, and builds `attnkit_python` (the
module `attnkit._attnkit`, linked with attnkit::dispatch) and, where libtorch's headers are
installed, `attnkit._torch_tensors`. The built files are copied next to the package's Python
files. Environment variables:
  ATTNKIT_PYTHON_NATIVE=0   compile the module's combinations (Union, Intersection, PerHead) for the
                            baseline instruction set instead of -march=native: for a wheel that runs on
                            other x86-64 machines (the registered kinds dispatch at run time either way)
  ATTNKIT_BUILD_DIR=path    keep CMake's build tree there (default: a folder under setuptools' build_temp)
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: the CPU count)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

SOURCE_DIR = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    """An extension module built by the CMake target `target` (no sources of its own here)."""

    def __init__(self, name, target, optional=False):
        super().__init__(name, sources=[], optional=optional)
        self.target = target


class CMakeBuild(build_ext):
    def build_extensions(self):
        build_dir = Path(os.environ.get("ATTNKIT_BUILD_DIR") or Path(self.build_temp).resolve() / "cmake")
        build_dir.mkdir(parents=True, exist_ok=True)
        native = os.environ.get("ATTNKIT_PYTHON_NATIVE", "1") not in ("0", "OFF", "off", "false")
        configure = [
            "cmake", "-S", str(SOURCE_DIR), "-B", str(build_dir),
            "-DCMAKE_BUILD_TYPE=Release",
            "-DATTNKIT_BUILD_TESTS=OFF", "-DATTNKIT_BUILD_BENCHMARKS=OFF", "-DATTNKIT_BUILD_EXAMPLES=OFF",
            "-DATTNKIT_PYTHON_MODULE=ON", "-DATTNKIT_DISPATCH=ON",
            f"-DATTNKIT_PYTHON_NATIVE={'ON' if native else 'OFF'}",
            f"-DATTNKIT_PYTHON_EXECUTABLE={sys.executable}",
        ]
        subprocess.run(configure, check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        targets = sorted({extension.target for extension in self.extensions})
        subprocess.run(["cmake", "--build", str(build_dir), "--parallel", jobs, "--target", *targets], check=True)
        built_package = build_dir / "python" / "attnkit"
        for extension in self.extensions:
            built = sorted(built_package.glob(extension.name.split(".")[-1] + "*.so"))
            destination = Path(self.get_ext_fullpath(extension.name))
            if not built:
                if extension.optional:
                    continue
                raise RuntimeError(f"CMake built no {extension.name} in {built_package}")
            destination.parent.mkdir(parents=True, exist_ok=True)
            # The file keeps CMake's name (its ABI suffix), which is the one Python looks for.
            shutil.copyfile(built[0], destination.parent / built[0].name)


setup(
    ext_modules=[
        CMakeExtension("attnkit._attnkit", "attnkit_python"),
        # Built when libtorch's headers are there (python3-torch's libtorch-dev); optional.
        CMakeExtension("attnkit._torch_tensors", "attnkit_python", optional=True),
    ],
    cmdclass={"build_ext": CMakeBuild},
)

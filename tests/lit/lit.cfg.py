# lit configuration: FileCheck tests of the sam dialect, fuseflow's passes and CLIs.
import os
import sys

import lit.formats

config.name = "fuseflow"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["lit.cfg.py", "Output"]
bindir = os.path.dirname(sys.executable)
config.environment["PATH"] = bindir + os.pathsep + config.environment.get("PATH", os.environ.get("PATH", ""))
config.environment["TMPDIR"] = os.environ.get("TMPDIR", "/tmp")
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(
    ("%torch-mlir-opt", os.path.join(list(__import__("torch_mlir").__path__)[0], "_mlir_libs", "torch-mlir-opt"))
)

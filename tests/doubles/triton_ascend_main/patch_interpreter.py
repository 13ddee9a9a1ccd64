"""Apply triton-ascend's four hooks (tests/doubles/triton_ascend_main/README.md) to the copy of
stock 3.5.1's triton/runtime/interpreter.py given as argv[1]; each anchor must be found."""
import sys

path = sys.argv[1]
src = open(path).read()
HOOKS = [
    # :1152, the end of _patch_lang
    ("    _patch_builtin(tl.core.tensor_descriptor_base, interpreter_builder)\n",
     "    _patch_builtin(tl.core.tensor_descriptor_base, interpreter_builder)\n"
     "    if hasattr(interpreter_builder, 'patch_extensions'):\n"
     "        interpreter_builder.patch_extensions(fn)\n"),
    # :1201, the builder chosen at import
    ("interpreter_builder = InterpreterBuilder()\n",
     "try:\n"
     "    from .ascend_interpreter import AscendInterpreterBuilder\n"
     "    interpreter_builder = AscendInterpreterBuilder()\n"
     "except ImportError:\n"
     "    AscendInterpreterBuilder = None\n"
     "    interpreter_builder = InterpreterBuilder()\n"
     "RESERVED_KWS = ['num_warps', 'num_stages', 'num_ctas', 'enable_fp_fusion', 'grid', 'maxnreg']\n"
     "if hasattr(interpreter_builder, 'get_additional_reserved_keywords'):\n"
     "    RESERVED_KWS.extend(interpreter_builder.get_additional_reserved_keywords())\n"),
    # :1323, GridExecutor.__call__
    ("            for x in range(grid[0]):\n"
     "                for y in range(grid[1]):\n"
     "                    for z in range(grid[2]):\n"
     "                        interpreter_builder.set_grid_idx(x, y, z)\n"
     "                        self.fn(**args)\n",
     "            if hasattr(interpreter_builder, 'execute_with_sub_vec_simulation'):\n"
     "                interpreter_builder.execute_with_sub_vec_simulation(self.fn, args, grid)\n"
     "            else:\n"
     "                for x in range(grid[0]):\n"
     "                    for y in range(grid[1]):\n"
     "                        for z in range(grid[2]):\n"
     "                            interpreter_builder.set_grid_idx(x, y, z)\n"
     "                            self.fn(**args)\n"),
]
for old, new in HOOKS:
    if src.count(old) != 1:
        sys.exit(f"patch_interpreter: anchor not found once in {path}: {old[:60]!r}")
    src = src.replace(old, new)
open(path, "w").write(src)

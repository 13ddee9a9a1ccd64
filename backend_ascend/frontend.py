"""Build real TTIR for a @triton.jit kernel with Triton's own frontend, on any machine.

No GPU or NPU is needed: the kernel is traced by Triton's code generator for a fake
target (the frontend only needs a backend's options and codegen hooks), then the TTIR
stage passes run (the same list triton-ascend's `ttir` stage runs).  A @triton.jit kernel is
the JITFunction Triton made (the simulator chooses the kernel mode per launch, sim/interp.py);
kernels defined under TRITON_INTERPRET=1 are InterpretedFunction objects: they (and the
@triton.jit helpers they call) are wrapped into real JITFunctions for the trace.
"""
from __future__ import annotations

import inspect
import types

from triton_dist.errors import TritonDistError
from triton_dist.language import ascend_shapes

from .ascend_ttir import TTIR_PASSES  # the `ttir` stage's list, run here on stock libtriton


def ASCEND_MIN_DOT_SIZE(lhs_type, rhs_type):
    return (1, 1, 1)


# A target whose backend ships with every triton wheel.  Only its frontend options are
# used (no code is generated for it).
FAKE_TARGET = ("cuda", 80, 32)


def _jit_classes():
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction
    return JITFunction, interpreter.InterpretedFunction


class _LoweringJIT:
    """Factory of JITFunctions whose globals see JITFunctions instead of InterpretedFunctions."""

    def __init__(self):
        self._memo = {}
        JITFunction, _ = _jit_classes()

        factory = self

        class Traced(JITFunction):
            def __init__(self, fn, **kwargs):
                super().__init__(fn, **kwargs)
                # Triton's cache key (DependenciesFinder) reads the globals itself: give it the
                # converted ones too (triton.language.standard's sum refers to _sum_combine, an
                # InterpretedFunction once the simulator is active)
                self.__globals__ = _ConvertingGlobals(fn.__globals__, factory)

            def get_capture_scope(self):
                scope = super().get_capture_scope()
                return {k: factory.convert(v) for k, v in scope.items()}

        self.Traced = Traced

    def convert(self, value, depth=0):
        JITFunction, Interpreted = _jit_classes()
        if isinstance(value, Interpreted):
            return self.jit(value.fn, noinline=value.kwargs.get("noinline"))
        if isinstance(value, types.ModuleType) and depth == 0 and (
                type(value) is not types.ModuleType or _holds_interpreted(value, Interpreted)):
            # Triton's frontend accepts only plain modules as globals (not a ModuleProxy
            # such as libshmem_device) and JITFunctions as callees: give it a plain module
            # whose attributes are converted.
            key = ("module", id(value))
            if key not in self._memo:
                view = types.ModuleType(value.__name__)
                for name in dir(value):
                    try:
                        attr = getattr(value, name)
                    except AttributeError:
                        continue
                    setattr(view, name, self.convert(attr, depth + 1))
                self._memo[key] = (value, view)
            return self._memo[key][1]
        return value

    def jit(self, fn, noinline=None):
        key = ("fn", fn)
        if key not in self._memo:
            self._memo[key] = self.Traced(fn, noinline=noinline)
        return self._memo[key]


class _ConvertingGlobals(dict):
    """A function's globals as the trace sees them: values converted on lookup."""

    def __init__(self, globals_, factory):
        super().__init__(globals_)
        self._factory = factory

    def __getitem__(self, key):
        return self._factory.convert(super().__getitem__(key))

    def get(self, key, default=None):
        return self[key] if key in self else default


def _holds_interpreted(module, Interpreted):
    import warnings
    try:
        with warnings.catch_warnings():          # deprecated module attributes warn when looked at
            warnings.simplefilter("ignore")
            return any(isinstance(v, Interpreted) for v in vars(module).values())
    except TypeError:
        return False


def as_jit_function(fn):
    """A real JITFunction for `fn` (@triton.jit kernel, InterpretedFunction or plain function)."""
    JITFunction, Interpreted = _jit_classes()
    factory = _LoweringJIT()
    if isinstance(fn, Interpreted):
        return factory.jit(fn.fn, noinline=fn.kwargs.get("noinline"))
    if isinstance(fn, JITFunction):
        return factory.jit(fn.fn, noinline=fn.noinline)
    if inspect.isfunction(fn):
        return factory.jit(fn)
    raise TritonDistError(f"lower: expected a @triton.jit kernel, got {type(fn).__name__}")


def _check_signature(jit, signature, constexprs):
    from triton.language import str_to_ty
    if not isinstance(signature, dict):
        raise TritonDistError(f"lower: signature must be a dict of parameter name -> Triton type string "
                              f"(e.g. {{'sig': '*i32', 'buf': '*fp32'}}), got {type(signature).__name__}")
    constexprs = dict(constexprs or {})
    names = jit.arg_names
    declared = {jit.arg_names[i] for i in jit.constexprs}
    unknown = [k for k in list(signature) + list(constexprs) if k not in names]
    if unknown:
        raise TritonDistError(f"lower: kernel {jit.__name__} has no parameter(s) {', '.join(map(repr, unknown))}; "
                              f"its parameters are {', '.join(names)}")
    sig = {}
    for name in names:
        if name in constexprs:
            sig[name] = "constexpr"
            continue
        if name in declared:
            raise TritonDistError(f"lower: parameter {name!r} of {jit.__name__} is a tl.constexpr; give its value "
                                  f"with constexprs={{'{name}': ...}} (CLI: --constexpr {name}=VALUE)")
        if name not in signature:
            raise TritonDistError(f"lower: no type for parameter {name!r} of {jit.__name__}; add it to the "
                                  f"signature, e.g. {name}=*fp32 for a pointer or {name}=i32 for a scalar")
        ty = signature[name]
        if not isinstance(ty, str) or ty == "constexpr":
            raise TritonDistError(f"lower: the type of {name!r} must be a Triton type string such as *fp32, *i32, "
                                  f"i32 or fp32, got {ty!r}")
        try:
            str_to_ty(ty, None)
        except Exception:  # noqa: BLE001 - triton raises several kinds for an unknown type
            raise TritonDistError(f"lower: unknown Triton type {ty!r} for parameter {name!r}; use e.g. *fp32, "
                                  f"*bf16, *i32, *i64, *u64, i32, i64 or fp32") from None
        sig[name] = ty
    return sig, constexprs


def _ttir_passes(module, context):
    from triton._C.libtriton import ir, passes
    pm = ir.pass_manager(context)
    for group, adder in TTIR_PASSES:
        getattr(getattr(passes, group), adder)(pm)
    try:
        pm.run(module, "ttir")          # 3.6 on: the stage's name (for its dump/timing options)
    except TypeError:                   # 3.5: run(module) only; pybind refuses the call before running
        pm.run(module)


def build_ttir(fn, signature, constexprs=None, *, extern_libs=None):
    """(module, jit): the TTIR module of `fn` specialised on `signature` and `constexprs`.

    extern_libs: {name: path} of device libraries the compile links, as Triton's option of
    that name (a registered device library, such as backend 'cuda''s, then emits the dl ops
    as calls of its symbols instead of the carriers the HIVM lowering reads)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend
    from triton.compiler.errors import CompilationError

    jit = as_jit_function(fn)
    sig, consts = _check_signature(jit, signature, constexprs)
    target = GPUTarget(*FAKE_TARGET)
    backend = make_backend(target)
    opts = {"default_dot_input_precision": "ieee"}
    if extern_libs:
        opts["extern_libs"] = dict(extern_libs)
    options = backend.parse_options(opts)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    src = ASTSource(jit, sig, consts)
    codegen = dict(backend.get_codegen_implementation(options))
    # triton-ascend's own rule: any dot shape (its compiler.py: min_dot_size -> (1, 1, 1)), not
    # the stand-in target's (which wants K >= 16)
    codegen["min_dot_size"] = ASCEND_MIN_DOT_SIZE
    # triton-ascend's language: non-power-of-two aranges and block shapes (its semantic.py /
    # _utils.py; triton_dist/language/ascend_shapes.py, shared with the simulator), its
    # extension.parallel loops
    ascend_shapes.install()
    _install_parallel_loops()
    try:
        with ascend_shapes.ascend_language() as scope, _verifier_deferred(ir):
            module = src.make_ir(target, options, codegen, backend.get_module_map(), context)
    except CompilationError as e:
        raise TritonDistError(f"cannot lower kernel {jit.__name__}: {_root_message(e)}") from e
    if scope.non_power_of_two:
        # stock libtriton's verifier refuses such tensors; triton-ascend's runs the passes
        from .ascend_ttir import TextModule, run_passes
        return TextModule(run_passes(module.str_nodebug(), jit.__name__), module), jit
    _ttir_passes(module, context)
    return module, jit


class _verifier_deferred:
    """During the trace, a module that took a non-power-of-two shape is not verified by stock
    Triton's libtriton (its verifyTensorSize refuses it, triton-ascend's does not: ascend_ttir.py,
    which verifies it with triton-ascend's rules); any other module is verified as before.
    ast_to_ttir calls module.verify() (3.6, 3.9) or module.verify_with_diagnostics() (3.5); the
    semantic's reductions, scans and map_elementwise assert op.verify() (an ir.OpState's)."""

    NAMES = (("module", "verify"), ("module", "verify_with_diagnostics"), ("OpState", "verify"))

    def __init__(self, ir):
        self.ir = ir

    def __enter__(self):
        self.stock = {(c, n): getattr(getattr(self.ir, c), n) for c, n in self.NAMES
                      if hasattr(getattr(self.ir, c, None), n)}
        for (cls, name), stock in self.stock.items():
            setattr(getattr(self.ir, cls), name, self._deferring(stock))
        return self

    @staticmethod
    def _deferring(stock):
        def verify(module, *args, **kwargs):
            scope = ascend_shapes.current_scope()
            if scope is not None and scope.non_power_of_two:
                return True
            return stock(module, *args, **kwargs)
        return verify

    def __exit__(self, *exc):
        for (cls, name), stock in self.stock.items():
            setattr(getattr(self.ir, cls), name, stock)
        return False


def _install_parallel_loops():
    """triton-ascend's `for i in extension.parallel(lb, ub, step, num_stages, loop_unroll_factor,
    bind_sub_block)` is a tl.range loop whose scf.for also gets `hivm.parallel_loop`
    (python/triton/compiler/code_generator.py:1192-1267 at triton-lang/triton-ascend a84b1eb5).
    Stock Triton's visit_For takes only `range`, tl.range and tl.static_range (by identity): in an
    Ascend trace a loop over an iterator marked `__triton_ascend_parallel__` (sim/compat/cann.py's
    parallel) is visited as the same loop over tl.range (bind_sub_block is not an attribute of the
    loop there either), and its scf.for gets hivm.parallel_loop."""
    import ast

    from triton.compiler import code_generator as cg
    G = cg.CodeGenerator
    if getattr(G.visit_For, "_td_parallel", False):
        return
    stock = G.visit_For
    hidden = "__triton_dist_parallel_range__"

    def visit_For(self, node):
        it = node.iter
        if ascend_shapes.applies() and isinstance(it, ast.Call) and \
                getattr(self.visit(it.func), "__triton_ascend_parallel__", False):
            self.lscope[hidden] = cg.language.range
            call = ast.Call(func=ast.Name(id=hidden, ctx=ast.Load()), args=it.args,
                            keywords=[k for k in it.keywords if k.arg != "bind_sub_block"])
            node = ast.For(target=node.target, iter=ast.copy_location(call, it), body=node.body,
                           orelse=node.orelse, type_comment=None)
            node = ast.fix_missing_locations(ast.copy_location(node, it))
            try:
                with _marking_the_loop_of(node, type(self.builder)):
                    return stock(self, node)
            finally:
                self.lscope.pop(hidden, None)
        return stock(self, node)
    visit_For._td_parallel = True
    G.visit_For = visit_For


class _marking_the_loop_of:
    """While stock visit_For visits `node`: the scf.for it makes for that node (create_for_op called
    from the frame visiting it, not a nested loop's) gets the unit attribute hivm.parallel_loop."""

    def __init__(self, node, builder_cls):
        self.node, self.cls = node, builder_cls

    def __enter__(self):
        import sys
        stock = self.stock = self.cls.create_for_op
        node = self.node

        def create_for_op(builder, *args):
            op = stock(builder, *args)
            if sys._getframe(1).f_locals.get("node") is node:
                op.set_attr("hivm.parallel_loop", builder.get_unit_attr())
            return op
        self.cls.create_for_op = create_for_op
        return self

    def __exit__(self, *exc):
        self.cls.create_for_op = self.stock
        return False


def _root_message(e):
    """The compile error with its source snippet, ending in the innermost cause's message."""
    text = str(e).rstrip()
    cause = e.__cause__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    if cause is not None and str(cause) and str(cause) not in text:
        text += f"\n{type(cause).__name__}: {cause}"
    return text

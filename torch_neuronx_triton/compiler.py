"""The neuron backend's compiler: Triton's front end and Triton-IR passes;
the "binary" is the Triton IR's text, kept for inspection and caching (the
launcher runs the kernel's Python source through Triton's interpreter)."""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from triton._C.libtriton import ir, passes
from triton.backends.compiler import BaseBackend, GPUTarget, Language


@dataclass(frozen=True)
class NeuronOptions:
    num_warps: int = 4
    num_ctas: int = 1
    num_stages: int = 1
    warp_size: int = 1
    enable_fp_fusion: bool = False
    supported_fp8_dtypes: tuple = ("fp8e5", "fp8e4nv", "fp8e4b15")
    deprecated_fp8_dot_operand_dtypes: tuple = ()
    default_dot_input_precision: str = "ieee"
    allowed_dot_input_precisions: tuple = ("ieee", "tf32", "tf32x3", "bf16x3", "bf16x6")
    max_num_imprecise_acc_default: int = 0
    extern_libs: tuple = ()
    debug: bool = False
    sanitize_overflow: bool = False
    backend_name: str = "neuron"
    arch: str = "neuron"
    instrumentation_mode: str = ""
    launch_cooperative_grid: bool = False
    launch_pdl: bool = False
    ir_override: Any = None

    def hash(self) -> str:
        key = "_".join(f"{k}-{v}" for k, v in sorted(self.__dict__.items()))
        return hashlib.sha256(key.encode()).hexdigest()


class NeuronBackend(BaseBackend):
    binary_ext = "ttirtext"

    @staticmethod
    def supports_target(target: GPUTarget) -> bool:
        return target.backend == "neuron"

    def __init__(self, target: GPUTarget) -> None:
        super().__init__(target)
        self.binary_ext = "ttirtext"

    def parse_options(self, opts: dict) -> NeuronOptions:
        fields = NeuronOptions.__dataclass_fields__
        args = {k: v for k, v in opts.items() if k in fields and v is not None}
        for k in ("supported_fp8_dtypes", "allowed_dot_input_precisions", "extern_libs"):
            if k in args:
                args[k] = (
                    tuple(args[k]) if not isinstance(args[k], dict) else tuple(args[k].items())
                )
        return NeuronOptions(**args)

    def pack_metadata(self, metadata):
        return (metadata.num_warps, metadata.num_ctas, metadata.shared)

    def get_codegen_implementation(self, options) -> dict:
        def min_dot_size(lhs_type, rhs_type):
            return (1, 1, 1)

        return {"min_dot_size": lambda lhs, rhs: min_dot_size(lhs, rhs)}

    def get_module_map(self) -> dict:
        # libdevice calls become Triton IR extern calls (never code-generated:
        # the interpreter runs them as triton.language math, driver.py)
        from triton.language.extra.cuda import libdevice

        return {"triton.language.extra.libdevice": libdevice}

    def load_dialects(self, ctx) -> None:
        pass

    @staticmethod
    def make_ttir(mod, metadata, options):
        pm = ir.pass_manager(mod.context)
        passes.common.add_inliner(pm)
        passes.common.add_canonicalizer(pm)
        passes.ttir.add_combine(pm)
        passes.common.add_cse(pm)
        passes.common.add_symbol_dce(pm)
        pm.run(mod, "make_ttir")
        return mod

    @staticmethod
    def make_text(mod, metadata, options):
        metadata["name"] = mod.get_entry_func_name()
        metadata["shared"] = 0
        return str(mod).encode()

    def add_stages(self, stages: dict, options, language) -> None:
        if language != Language.TRITON:
            raise NotImplementedError("the neuron Triton backend runs Triton kernels, not Gluon")
        stages["ttir"] = lambda src, metadata: self.make_ttir(src, metadata, options)
        stages["ttirtext"] = lambda src, metadata: self.make_text(src, metadata, options)

    @functools.lru_cache  # noqa: B019 (one backend object per target)
    def hash(self) -> str:
        from importlib.metadata import version

        return f"neuron-interpreter-{version('torch-neuronx')}"

"""Benchmarks of the attention kernel and the encodings' per-grid work: ``python -m bench.attention.fused_compile``
(the fused kernels compiled for a GPU, without one), ``python -m bench.attention.rope`` (RoPE's rotation),
``python -m bench.attention.caches`` (what each per-grid cache saves), ``python -m bench.attention.call_path``
(the files one iRPE layer's forward runs code from)."""

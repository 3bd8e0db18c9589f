"""The reference models as the model benchmark takes them (kevolve.bench.models reads this
module): their names, how to build one with its data generator, and which of their modules
kevolve's ops replace."""

from __future__ import annotations

from . import data, dlrm, seq

MODELS = ("dlrm", "seq")
# module class name -> the kevolve op that replaces it (kevolve.torch.accelerate's `modules`)
MODULES = {"DotInteraction": "dot_interaction", "JaggedSoftmax": "jagged_softmax",
           "JaggedSum": "jagged_sum", "JaggedToDense": "jagged_to_padded_dense"}


def build(name: str, scale: int, device):
    """(config, model on `device`, the swapped modules' bounds, batch generator) of a model,
    its embedding tables' rows divided by `scale`."""
    if name == "dlrm":
        cfg = dlrm.DLRMConfig().scaled(scale) if scale > 1 else dlrm.DLRMConfig()
        model = dlrm.DLRM(cfg)
        bounds = {f"embeddings.{k}": {"max_len": c} for k, c in enumerate(cfg.caps)}
        return cfg, model.to(device), bounds, data.dlrm_batch
    if name == "seq":
        cfg = seq.SeqConfig().scaled(scale) if scale > 1 else seq.SeqConfig()
        model = seq.SeqModel(cfg)
        bounds = {"softmax": {"max_len": cfg.max_len}, "pool": {"max_len": cfg.max_len}}
        return cfg, model.to(device), bounds, data.seq_batch
    raise KeyError(f"no model {name!r}; the models are {', '.join(MODELS)}")

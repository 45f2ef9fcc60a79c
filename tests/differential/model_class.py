"""The tensors z-lab's model class builds for a draft config: one line per parameter, `name shape`.

Usage: python model_class.py CONFIG_JSON

Needs torch, transformers and z-lab's `dflash` package (its `dflash.model.DFlashDraftModel`). The model
is built on the meta device, so no weight is allocated: only the names and shapes the class defines
are read, which is what the gate's inventory must agree with.
"""

import json
import sys

import torch
from transformers import Qwen3Config

from dflash.model import DFlashDraftModel


def main() -> int:
    with open(sys.argv[1], encoding="utf-8") as f:
        fields = json.load(f)
    config = Qwen3Config(**fields)
    with torch.device("meta"):
        model = DFlashDraftModel(config)
    for name, tensor in model.state_dict().items():
        print(name, json.dumps(list(tensor.shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

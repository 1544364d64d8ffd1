"""The PyTorch side of the one training step (trainer.py): each model's optimizer(s) with its settings
(model_specs.py), and how torch clears, scales, clips and applies gradients. paddle_trainer.py is this file for
Paddle."""

from __future__ import annotations

import torch
from catalogue import ADVERSARIAL
from model_specs import MOMENTUM_OPTIMIZERS, no_decay
from torch import nn
from trainer import TrainerBase


class Trainer(TrainerBase):
    __doc__ = TrainerBase.__doc__

    def __init__(self, name: str, model: nn.Module, net: nn.Module | None = None, batch_size: int = 1,
                 scaler=None, autocast=None, **settings) -> None:
        super().__init__(name, model, net, batch_size, scaler, autocast, **settings)
        s = self.settings
        self.clip_norm = s.get("clip_norm")
        if name in ADVERSARIAL:
            self.opt_g = torch.optim.Adam(model.generator_parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"])
            self.opt_d = torch.optim.Adam(model.discriminator_parameters(), lr=s["lr"], betas=s["betas"],
                                          eps=s["eps"])
        elif s["optimizer"] in MOMENTUM_OPTIMIZERS:
            self.opt = torch.optim.SGD(model.parameters(), lr=s["lr"], momentum=s["momentum"],
                                       weight_decay=s["weight_decay"])
        elif s["optimizer"] == "adamw":
            named = list(model.named_parameters())
            groups = [{"params": [p for n, p in named if not no_decay(n)], "weight_decay": s["weight_decay"]},
                      {"params": [p for n, p in named if no_decay(n)], "weight_decay": 0.0}]
            self.opt = torch.optim.AdamW(groups, lr=s["lr"], betas=s["betas"], eps=s["eps"])
        else:
            self.opt = torch.optim.Adam(model.parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"])

    def zero_grad(self, opt) -> None:
        opt.zero_grad(set_to_none=True)

    def update(self, loss) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if self.clip_norm:
                self.scaler.unscale_(self.opt)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            if self.clip_norm:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
            self.opt.step()

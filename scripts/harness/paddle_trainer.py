"""The Paddle side of the one training step (trainer.py): torch_trainer.py for Paddle -- the same optimizers and
settings (model_specs.py); BERT's global-norm clip is the AdamW optimizer's own ``grad_clip`` here."""

from __future__ import annotations

import paddle
from catalogue import ADVERSARIAL
from model_specs import MOMENTUM_OPTIMIZERS, no_decay
from paddle import nn
from trainer import TrainerBase


class Trainer(TrainerBase):
    __doc__ = TrainerBase.__doc__

    def __init__(self, name: str, model: nn.Layer, net: nn.Layer | None = None, batch_size: int = 1,
                 scaler=None, autocast=None, **settings) -> None:
        super().__init__(name, model, net, batch_size, scaler, autocast, **settings)
        s = self.settings
        if name in ADVERSARIAL:
            self.opt_g = self._adam(model.generator_parameters(), s)
            self.opt_d = self._adam(model.discriminator_parameters(), s)
        elif s["optimizer"] in MOMENTUM_OPTIMIZERS:
            self.opt = paddle.optimizer.Momentum(learning_rate=s["lr"], momentum=s["momentum"],
                                                 parameters=model.parameters(),
                                                 weight_decay=paddle.regularizer.L2Decay(s["weight_decay"]))
        elif s["optimizer"] == "adamw":
            decay = {p.name for n, p in model.named_parameters() if not no_decay(n)}
            self.opt = paddle.optimizer.AdamW(learning_rate=s["lr"], beta1=s["betas"][0], beta2=s["betas"][1],
                                              epsilon=s["eps"], parameters=model.parameters(),
                                              weight_decay=s["weight_decay"],
                                              apply_decay_param_fun=lambda param: param in decay,
                                              grad_clip=nn.ClipGradByGlobalNorm(s["clip_norm"]))
        else:
            self.opt = self._adam(model.parameters(), s)

    @staticmethod
    def _adam(parameters, s: dict) -> paddle.optimizer.Adam:
        return paddle.optimizer.Adam(learning_rate=s["lr"], beta1=s["betas"][0], beta2=s["betas"][1],
                                     epsilon=s["eps"], parameters=parameters)

    def zero_grad(self, opt) -> None:
        opt.clear_grad()

    def update(self, loss) -> None:
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()

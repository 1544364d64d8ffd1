"""The one training step of every harness model, as both frameworks run it: forward (under autocast when asked),
backward and the optimizer update(s) with the model's settings (model_specs.py). torch_trainer.py and
paddle_trainer.py build the optimizers and say how their framework clears and applies gradients; the timed loop
(backend.py), bench/bare_loop.py and the tests step through them. Standard library only."""

from __future__ import annotations

from model_specs import SEED003_MODELS, optimizer_settings


class TrainerBase:
    """One training step of model NAME with its optimizer(s) (the loss is inside the model).

    ``launch(*batch)`` runs forward, backward and the update(s) and returns the loss, not waited for (CycleGAN: a
    float, generator loss + discriminator loss: its one step trains the generators, then the discriminators on
    the detached fakes); ``step(*batch)`` waits for it and returns a float (``last``: the losses). ``net`` may be
    a data-parallel or compiled wrapper of ``model``; ``autocast`` a context factory (None: FP32); ``scaler`` the
    framework's GradScaler (None: no loss scaling). ``settings`` (lr, momentum, ...: None keeps the model's own):
    model_specs.optimizer_settings(name, batch_size, **settings), batch_size the global batch."""

    opt = opt_g = opt_d = None  # the optimizer; CycleGAN: the generators' and the discriminators'

    def __init__(self, name: str, model, net=None, batch_size: int = 1, scaler=None, autocast=None,
                 **settings) -> None:
        self.name, self.model, self.net = name, model, net if net is not None else model
        self.scaler, self.autocast = scaler, autocast
        self.settings = optimizer_settings(name, batch_size, **settings)
        self.last: tuple[float, ...] = ()

    def zero_grad(self, opt) -> None:  # the framework's
        raise NotImplementedError

    def update(self, loss) -> None:
        """Backward and OPT's step (with loss scaling, and gradient clipping where the framework's optimizer does
        not clip): the framework's."""
        raise NotImplementedError

    def launcher(self):
        """What a loop calls each step: ``launch`` (the loss not waited for); seed 003's models: ``step`` (their
        float loss, waited for within the step, as their Trainer has always returned it)."""
        return self.step if self.name in SEED003_MODELS else self.launch

    def _forward(self, batch):
        if self.autocast is None:
            return self.net(*batch)
        with self.autocast():
            return self.net(*batch)

    def launch(self, *batch):
        if self.opt_g is not None:
            return self._cyclegan_step(*batch)
        self.zero_grad(self.opt)
        loss = self._forward(batch)
        self.update(loss)
        return loss

    def step(self, *batch) -> float:
        loss = self.launch(*batch)
        if isinstance(loss, float):
            return loss
        self.last = (float(loss.detach()),)
        return self.last[0]

    def _cyclegan_step(self, real_a, real_b) -> float:
        self.zero_grad(self.opt_g)
        loss_g, fake_a, fake_b = self.net(real_a, real_b)
        loss_g.backward()
        self.opt_g.step()
        self.zero_grad(self.opt_d)  # drops what the generator pass left on the discriminators
        loss_d = self.model.discriminator_loss(real_a, real_b, fake_a.detach(), fake_b.detach())
        loss_d.backward()
        self.opt_d.step()
        self.last = (float(loss_g.detach()), float(loss_d.detach()))
        return self.last[0] + self.last[1]

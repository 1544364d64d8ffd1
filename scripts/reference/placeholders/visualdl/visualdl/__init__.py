"""The kit's import placeholder for VisualDL (scripts/reference/placeholders/README.md): PaddleClas's static trainer
(ppcls/static/train.py at the pin) imports LogWriter at start and makes one only with Global.use_visualdl, False in
the configs the kit runs. Making one stops the program with an error naming the module."""


class VisualDLAbsent(ModuleNotFoundError):
    pass


class LogWriter:
    def __init__(self, *_args, **_kwargs):
        raise VisualDLAbsent("visualdl: the kit's import placeholder (scripts/reference/placeholders) cannot log; "
                             "Global.use_visualdl=True needs VisualDL installed (pip install visualdl)")

"""STAND-IN for NVIDIA's dllogger package (tests only): the DLE PyTorch stand-in imports it from the dllogger
checkout beside the model code (<model-code root>/dllogger, on the program's PYTHONPATH), where the real main.py
imports the real one (v1.0.0, DLE's requirements.txt at the pin). It only has to be found."""

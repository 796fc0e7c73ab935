"""On the machine: ssh command lines and ssh-config, doctor and top over nvidia-
smi, and where gpucloud is installed from on machines that run it unattended.
"""

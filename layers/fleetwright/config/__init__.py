"""The controllers' configuration: the environment the functions read, NodePool and EC2NodeClass documents,
and the options every capability shares (``settings.py``)."""

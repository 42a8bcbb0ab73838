"""The AWS cloud provider: instance type discovery, pricing, node class resolution, launch and terminate.

Submodules import boto3 lazily so that importing this package costs nothing until AWS is called.
"""

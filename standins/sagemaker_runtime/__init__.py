"""A local stand-in for the SageMaker runtime in front of a container on this machine.

It speaks the service's wire formats (HTTP/2 + TLS + AWS event stream + SigV4 for the bidirectional
stream; HTTP/1.1 or HTTP/2 for InvokeEndpoint and InvokeEndpointWithResponseStream) so the real
clients (``aws-sdk-sagemaker-runtime-http2``, boto3) run unchanged against it. What SageMaker does
beyond its published API model is our reading of its documentation: see docs/sagemaker-local.md.
"""

from .settings import StandInSettings

__all__ = ["StandInSettings"]

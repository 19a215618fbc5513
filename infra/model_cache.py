"""The S3 bucket the CLI fills with the Kokoro weights, and the endpoint role's read grant.

The stack only creates storage: ``deploy-tts`` syncs ``models/kokoro-82m/<revision>/`` from
Hugging Face with boto3 (manifest.json last), and SageMaker mounts that prefix at /opt/ml/model.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.config import Settings

ACCESS_LOG_PREFIX = "model-bucket/"


class ModelCacheStack(Stack):
    """Model bucket + access-log bucket; outputs BucketName, ModelPrefix, LogBucketName."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 reader_role: iam.IRole, **kwargs: Any) -> None:
        super().__init__(scope, construct_id,
                         description="Kokoro TTS: model-weights cache bucket", **kwargs)
        self.log_bucket = s3.Bucket(
            self, "AccessLogBucket",
            # Server access log delivery only supports SSE-S3 on the target bucket.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(id="ExpireAccessLogs", expiration=Duration.days(365))],
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.bucket = s3.Bucket(
            self, "ModelBucket",
            # SSE-S3, not KMS: the weights are public (Apache-2.0) and SSE-S3 needs no key
            # policy or kms:Decrypt grant for SageMaker's model download.
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            minimum_tls_version=1.2,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            # No versioning: every revision has its own prefix and can be re-synced from
            # Hugging Face, so old object versions would only add cost and slow teardown.
            versioned=False,
            server_access_logs_bucket=self.log_bucket,
            server_access_logs_prefix=ACCESS_LOG_PREFIX,
            lifecycle_rules=[s3.LifecycleRule(
                id="AbortIncompleteUploads",
                abort_incomplete_multipart_upload_after=Duration.days(1),
            )],
            # RETAIN: weights survive a stack deletion; the CLI's teardown empties and deletes
            # the bucket only when asked to.
            removal_policy=RemovalPolicy.RETAIN,
        )
        self.reader_policy = self._grant_model_read(reader_role, settings.model_prefix)

        CfnOutput(self, "BucketName", value=self.bucket.bucket_name,
                  description="Bucket the CLI syncs the model into")
        CfnOutput(self, "ModelPrefix", value=settings.model_prefix,
                  description="Key prefix of the pinned model revision (ends with /)")
        CfnOutput(self, "LogBucketName", value=self.log_bucket.bucket_name,
                  description="Server access logs of the model bucket")

    def _grant_model_read(self, role: iam.IRole, prefix: str) -> iam.Policy:
        """Read exactly the pinned revision's prefix (GetObject + prefix-conditioned ListBucket).

        The grant lives here, beside the bucket, because the bucket name is generated: the
        foundation stack deploys first and cannot know it without a reverse dependency.
        """
        return iam.Policy(
            self, "SageMakerModelRead",
            roles=[role],
            statements=[
                iam.PolicyStatement(
                    sid="ReadModelRevision",
                    actions=["s3:GetObject"],
                    resources=[self.bucket.arn_for_objects(f"{prefix}*")],
                ),
                iam.PolicyStatement(
                    sid="ListModelRevision",
                    actions=["s3:ListBucket"],
                    resources=[self.bucket.bucket_arn],
                    conditions={"StringLike": {"s3:prefix": [prefix.rstrip("/"), f"{prefix}*"]}},
                ),
            ],
        )


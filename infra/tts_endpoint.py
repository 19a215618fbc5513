"""The Kokoro TTS SageMaker real-time endpoint: image, model, endpoint, autoscaling, alarms.

SageMaker has only L1 constructs. The model and endpoint config get generated names (their
properties are immutable, so CloudFormation replaces them on change); the endpoint keeps the
configured name because the agent role, the invoke policy and the CLI address it by name.
An update rolls (infra/update_policy.py): batches of half the fleet, each baked while the 5XX and
first-audio alarms watch it, rolled back when one fires; the instance count autoscaling reached
is kept (RetainAllVariantProperties).
"""

from __future__ import annotations

import json
from typing import Any, Final

from aws_cdk import Annotations, CfnOutput, Duration, Stack
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ecr_assets as ecr_assets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from infra import update_policy
from infra.config import Settings
from infra.observability import ROLLBACK_ALARMS, EndpointObservability
from infra.shared import REPO_ROOT, TTS_IMAGE_EXCLUDES, VARIANT_NAME

MODEL_MOUNT: Final = "/opt/ml/model"
MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS: Final = 1200
"""About 330 MB of weights and voices; generous so a slow first copy does not fail the deploy."""

GPU_INFERENCE_AMI: Final = "al2023-ami-sagemaker-inference-gpu-4-1"
"""NVIDIA driver 580 (CUDA 13.0) per the botocore model: the image is CUDA 12.8 (nvidia/cuda
12.8.1, torch cu128), which needs driver >= 570. The al2 AMIs carry 535/550 (CUDA 12.2/12.4) and
disable the CUDA-compat mount, so the image's CUDA 12.8 would not initialize there."""
SCALE_IN_COOLDOWN: Final = Duration.minutes(10)
SCALE_OUT_COOLDOWN: Final = Duration.minutes(2)


class TtsEndpointStack(Stack):
    """Outputs EndpointName and ModelName."""

    def __init__(self, scope: Construct, construct_id: str, *, settings: Settings,
                 execution_role: iam.IRole, model_bucket: s3.IBucket, **kwargs: Any) -> None:
        super().__init__(scope, construct_id,
                         description="Kokoro TTS: SageMaker real-time endpoint with bidirectional streaming",
                         **kwargs)
        for warning in settings.warnings:
            Annotations.of(self).add_warning_v2("kokoro:engineInstanceMismatch", warning)
        if not settings.scaling_target_measured:
            Annotations.of(self).add_warning_v2("kokoro:unmeasuredScalingTarget", settings.scaling_target_source)

        self.image = ecr_assets.DockerImageAsset(
            self, "KokoroImage",
            directory=str(REPO_ROOT),
            file="containers/kokoro/Dockerfile",
            platform=ecr_assets.Platform.LINUX_AMD64,
            exclude=list(TTS_IMAGE_EXCLUDES),
            display_name="Kokoro TTS image",
        )
        self.model = sagemaker.CfnModel(
            self, "Model",
            execution_role_arn=execution_role.role_arn,
            # The container is fully offline (weights are mounted, G2P data is in the image).
            enable_network_isolation=True,
            primary_container=sagemaker.CfnModel.ContainerDefinitionProperty(
                image=self.image.image_uri,
                environment=self._environment(settings),
                model_data_source=sagemaker.CfnModel.ModelDataSourceProperty(
                    s3_data_source=sagemaker.CfnModel.S3DataSourceProperty(
                        s3_uri=f"s3://{model_bucket.bucket_name}/{settings.model_prefix}",
                        s3_data_type="S3Prefix",
                        # Uncompressed: SageMaker copies the files as they are, no model.tar.gz.
                        compression_type="None",
                    ),
                ),
            ),
        )
        self.endpoint_config = sagemaker.CfnEndpointConfig(
            self, "EndpointConfig",
            production_variants=[sagemaker.CfnEndpointConfig.ProductionVariantProperty(
                variant_name=VARIANT_NAME,
                model_name=self.model.attr_model_name,
                instance_type=settings.instance_type,
                initial_instance_count=settings.min_instances,
                initial_variant_weight=1.0,
                container_startup_health_check_timeout_in_seconds=(
                    settings.startup_health_check_timeout_seconds),
                model_data_download_timeout_in_seconds=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS,
                # Pinned on GPU types so the driver always matches the image's CUDA; no AMI on CPU.
                inference_ami_version=GPU_INFERENCE_AMI if settings.is_gpu_instance else None,
                # Streams are long-lived: route new ones to the instance with the fewest open.
                routing_config=sagemaker.CfnEndpointConfig.RoutingConfigProperty(
                    routing_strategy="LEAST_OUTSTANDING_REQUESTS"),
            )],
        )
        self.observability = EndpointObservability(
            self, "Observability", endpoint_name=settings.endpoint_name,
            first_audio_budget_ms=settings.first_audio_budget_ms,
            # What the scaling policy tracks, per instance, against the policy's own target.
            scaling_metric=cloudwatch.Metric(
                namespace="AWS/SageMaker", metric_name="ConcurrentRequestsPerModel",
                dimensions_map={"EndpointName": settings.endpoint_name, "VariantName": VARIANT_NAME},
                statistic="Average", period=Duration.minutes(1)),
            scaling_target=float(settings.target_concurrent_requests_per_instance),
            alarm_email=settings.alarm_email,
        )
        self.endpoint = sagemaker.CfnEndpoint(
            self, "Endpoint",
            endpoint_name=settings.endpoint_name,
            endpoint_config_name=self.endpoint_config.attr_endpoint_config_name,
            deployment_config=self._deployment_config(settings),
            # Keep the instance count autoscaling reached (and the weight) across an update,
            # instead of falling back to the config's InitialInstanceCount.
            retain_all_variant_properties=True,
        )
        # The log group exists before the container first writes, so it is the stack's, not SageMaker's.
        self.endpoint.node.add_dependency(self.observability.log_group)
        self.rollback_alarm_read = self._grant_rollback_alarm_read(execution_role)
        # An update's bake period reads the alarms with the role: the grant exists before any update.
        self.endpoint.node.add_dependency(self.rollback_alarm_read)
        self.scalable_target = self._autoscaling(settings) if settings.autoscaling else None
        self.alarms = list(self.observability.alarms.values())

        CfnOutput(self, "EndpointName", value=self.endpoint.attr_endpoint_name,
                  description="SageMaker endpoint serving Kokoro TTS")
        CfnOutput(self, "ModelName", value=self.model.attr_model_name,
                  description="SageMaker model behind the endpoint")
        # What this template was synthesized with: `deploy-tts diff --deployed` (and CI) diffs with it.
        CfnOutput(self, "DeployContext", value=json.dumps(settings.deploy_context(), sort_keys=True),
                  description="CDK context of this deploy (deploy-tts diff --deployed reads it)")
        CfnOutput(self, "AlarmTopicArn", value=self.observability.topic.topic_arn,
                  description="SNS topic every alarm of the endpoint notifies")

    def _deployment_config(self, settings: Settings) -> sagemaker.CfnEndpoint.DeploymentConfigProperty:
        """Rolling, half the fleet per batch, rolled back batch by batch when an alarm fires."""
        batch = sagemaker.CfnEndpoint.CapacitySizeProperty(
            type="CAPACITY_PERCENT", value=update_policy.BATCH_PERCENT)
        return sagemaker.CfnEndpoint.DeploymentConfigProperty(
            rolling_update_policy=sagemaker.CfnEndpoint.RollingUpdatePolicyProperty(
                maximum_batch_size=batch,
                # Default is 100 %: a whole old fleet at once, which the quota may not allow.
                rollback_maximum_batch_size=batch,
                wait_interval_in_seconds=update_policy.BAKE_SECONDS,
                maximum_execution_timeout_in_seconds=update_policy.execution_timeout_seconds(
                    max_instances=settings.max_instances,
                    startup_s=settings.startup_health_check_timeout_seconds,
                    download_s=MODEL_DATA_DOWNLOAD_TIMEOUT_SECONDS),
            ),
            auto_rollback_configuration=sagemaker.CfnEndpoint.AutoRollbackConfigProperty(
                alarms=[sagemaker.CfnEndpoint.AlarmProperty(alarm_name=self.observability.alarms[key].alarm_name)
                        for key in ROLLBACK_ALARMS]),
        )

    def _grant_rollback_alarm_read(self, role: iam.IRole) -> iam.Policy:
        """SageMaker reads the auto-rollback alarms with the endpoint's execution role: "Ensure that
        your IAM execution role has permission to perform the cloudwatch:DescribeAlarms action on
        the auto-rollback alarms you specify" (SageMaker guide, Auto-Rollback Configuration).
        Attached here, beside the alarms, as the model-cache stack attaches its read grant."""
        return iam.Policy(
            self, "RollbackAlarmRead", roles=[role],
            statements=[iam.PolicyStatement(
                sid="DescribeRollbackAlarms", actions=["cloudwatch:DescribeAlarms"],
                resources=[self.observability.alarms[key].alarm_arn for key in ROLLBACK_ALARMS])],
        )

    @staticmethod
    def _environment(settings: Settings) -> dict[str, str]:
        """On a GPU instance the torch engine must use the GPU: KOKORO_DEVICE=cuda makes it
        refuse to start (exit 2, no /ping) instead of silently running on the CPU."""
        env = {"KOKORO_ENGINE": settings.engine, "KOKORO_MODEL_DIR": MODEL_MOUNT}
        if settings.is_gpu_instance:
            env["KOKORO_DEVICE"] = "cuda"
        return env

    def _autoscaling(self, settings: Settings) -> appscaling.CfnScalableTarget:
        """Target tracking on concurrent requests per model, between minInstances and maxInstances.

        SageMakerVariantConcurrentRequestsPerModelHighResolution counts requests in flight
        (streamed ones until their last byte) every 10 s; InvocationsPerInstance counts only
        starts per minute, so hour-long voice sessions would never look like load.

        L1 on purpose: without a RoleARN, Application Auto Scaling uses (and creates if needed)
        its SageMaker service-linked role; the L2 would add an unused IAM role instead.
        """
        target = appscaling.CfnScalableTarget(
            self, "ScalableTarget",
            service_namespace="sagemaker",
            resource_id=f"endpoint/{settings.endpoint_name}/variant/{VARIANT_NAME}",
            scalable_dimension="sagemaker:variant:DesiredInstanceCount",
            min_capacity=settings.min_instances,
            max_capacity=settings.max_instances,
        )
        # The variant must exist before Application Auto Scaling can register it.
        target.node.add_dependency(self.endpoint)
        appscaling.CfnScalingPolicy(
            self, "ConcurrentRequestsPolicy",
            policy_name=f"{settings.endpoint_name}-concurrent-requests-per-model",
            policy_type="TargetTrackingScaling",
            scaling_target_id=target.ref,
            target_tracking_scaling_policy_configuration=(
                appscaling.CfnScalingPolicy.TargetTrackingScalingPolicyConfigurationProperty(
                    target_value=float(settings.target_concurrent_requests_per_instance),
                    predefined_metric_specification=(
                        appscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                            predefined_metric_type="SageMakerVariantConcurrentRequestsPerModelHighResolution")),
                    scale_in_cooldown=int(SCALE_IN_COOLDOWN.to_seconds()),
                    scale_out_cooldown=int(SCALE_OUT_COOLDOWN.to_seconds()),
                )),
        )
        return target

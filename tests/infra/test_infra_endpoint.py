"""TTS endpoint stack: model data source, instance settings, scaling, alarms, amd64 image."""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Match, Template
from infra_support import MODEL_PREFIX, Synthesized, render

from infra.defaults import REPO_ROOT

PREFIX = MODEL_PREFIX


def _template(synth: Synthesized) -> Template:
    return Template.from_json(synth.templates["KokoroTtsEndpoint"])


def _variant(synth: Synthesized) -> dict[str, Any]:
    resources = synth.templates["KokoroTtsEndpoint"]["Resources"]
    (config,) = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::EndpointConfig"]
    (variant,) = config["Properties"]["ProductionVariants"]
    return dict(variant)


def test_default_instance_settings(default_synth: Synthesized) -> None:
    variant = _variant(default_synth)
    assert variant["InstanceType"] == "ml.g5.xlarge"
    assert variant["InitialInstanceCount"] == 1
    assert variant["ContainerStartupHealthCheckTimeoutInSeconds"] == 600
    assert variant["ModelDataDownloadTimeoutInSeconds"] >= 600
    assert variant["RoutingConfig"] == {"RoutingStrategy": "LEAST_OUTSTANDING_REQUESTS"}
    assert variant["VariantName"] == "AllTraffic"


def test_gpu_variant_pins_the_ami_whose_driver_runs_cuda_12_8(default_synth: Synthesized) -> None:
    # botocore's model: al2023-ami-sagemaker-inference-gpu-4-1 = NVIDIA driver 580 (CUDA 13.0);
    # the image is CUDA 12.8, which needs a driver >= 570. The al2 AMIs carry 535 and 550.
    dockerfile = (REPO_ROOT / "containers/kokoro/Dockerfile").read_text()
    assert "FROM nvidia/cuda:12.8." in dockerfile
    assert _variant(default_synth)["InferenceAmiVersion"] == "al2023-ami-sagemaker-inference-gpu-4-1"


def test_gpu_instance_makes_the_torch_engine_use_cuda_or_fail(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsEndpoint"]["Resources"]
    (model,) = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Model"]
    assert model["Properties"]["PrimaryContainer"]["Environment"]["KOKORO_DEVICE"] == "cuda"


def test_instance_type_override(override_synth: Synthesized) -> None:
    variant = _variant(override_synth)
    assert variant["InstanceType"] == "ml.m5.xlarge"
    assert "InferenceAmiVersion" not in variant  # GPU AMIs only on GPU instance types
    assert variant["InitialInstanceCount"] == 2
    _template(override_synth).has_resource_properties(
        "AWS::ApplicationAutoScaling::ScalableTarget", {"MinCapacity": 2, "MaxCapacity": 3})


def test_model_mounts_the_cache_prefix_uncompressed(default_synth: Synthesized) -> None:
    resources = default_synth.templates["KokoroTtsEndpoint"]["Resources"]
    (model,) = [r for r in resources.values() if r["Type"] == "AWS::SageMaker::Model"]
    container = render(model["Properties"]["PrimaryContainer"])
    source = container["ModelDataSource"]["S3DataSource"]
    assert source["S3DataType"] == "S3Prefix"
    assert source["CompressionType"] == "None"
    assert source["S3Uri"] == (
        "s3://${Import:KokoroTtsModelCache:ExportsOutputRefModelBucketB33D855BFE59FC6E}/" + PREFIX)
    assert container["Environment"] == {"KOKORO_ENGINE": "torch", "KOKORO_MODEL_DIR": "/opt/ml/model",
                                        "KOKORO_DEVICE": "cuda"}
    assert "ModelDataUrl" not in container
    assert model["Properties"]["EnableNetworkIsolation"] is True
    assert render(model["Properties"]["ExecutionRoleArn"]).startswith(
        "${Import:KokoroTtsFoundation:ExportsOutputFnGetAttSageMakerExecutionRole")


def test_endpoint_keeps_the_configured_name(default_synth: Synthesized) -> None:
    _template(default_synth).has_resource_properties("AWS::SageMaker::Endpoint", {"EndpointName": "kokoro-tts"})
    outputs = render(default_synth.templates["KokoroTtsEndpoint"]["Outputs"])
    assert outputs["EndpointName"]["Value"] == "${Endpoint.EndpointName}"
    assert outputs["ModelName"]["Value"] == "${Model.ModelName}"


def test_autoscaling_tracks_concurrent_requests_not_invocation_starts(default_synth: Synthesized) -> None:
    template = _template(default_synth)
    template.has_resource("AWS::ApplicationAutoScaling::ScalableTarget", {
        "Properties": {
            "ServiceNamespace": "sagemaker",
            "ResourceId": "endpoint/kokoro-tts/variant/AllTraffic",
            "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
            "MinCapacity": 1, "MaxCapacity": 2,
        },
        "DependsOn": ["Endpoint"],
    })
    template.has_resource_properties("AWS::ApplicationAutoScaling::ScalingPolicy", {
        "PolicyType": "TargetTrackingScaling",
        "TargetTrackingScalingPolicyConfiguration": Match.object_like({
            "TargetValue": 8,
            # Long-lived streams count while open (10 s resolution), not once when they start.
            "PredefinedMetricSpecification": {
                "PredefinedMetricType": "SageMakerVariantConcurrentRequestsPerModelHighResolution"},
        }),
    })
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 1)
    template.resource_count_is("AWS::IAM::Role", 0)  # the service-linked role is used


def test_alarms_on_5xx(default_synth: Synthesized) -> None:
    """ModelLatency is not alarmed on: for a stream it measures the whole stream (see
    test_infra_observability for the first-audio alarm that replaced it)."""
    template = _template(default_synth)
    dimensions = [{"Name": "EndpointName", "Value": "kokoro-tts"}, {"Name": "VariantName", "Value": "AllTraffic"}]
    template.has_resource_properties("AWS::CloudWatch::Alarm", {
        "Namespace": "AWS/SageMaker", "MetricName": "Invocation5XXErrors", "Statistic": "Sum",
        "Dimensions": dimensions, "Threshold": 5})
    alarmed = [r["Properties"].get("MetricName") for r in template.find_resources("AWS::CloudWatch::Alarm").values()]
    assert "ModelLatency" not in alarmed


def test_image_is_amd64_from_the_kokoro_dockerfile(default_synth: Synthesized) -> None:
    (image,) = default_synth.assets["KokoroTtsEndpoint"]["dockerImages"].values()
    assert image["source"]["platform"] == "linux/amd64"
    assert image["source"]["dockerFile"] == "containers/kokoro/Dockerfile"
    staged = default_synth.outdir / image["source"]["directory"]
    assert (staged / "containers/kokoro/Dockerfile").is_file()
    assert (staged / "voicestream").is_dir()
    for excluded in (".venv", ".venv-kokoro", ".git", "agent", "infra", "tests", "cdk.out", "models"):
        assert not (staged / excluded).exists(), excluded


def test_cpu_torch_override_warns(override_synth: Synthesized) -> None:
    assert override_synth.built.settings.warnings
    metadata = override_synth.outdir / "KokoroTtsEndpoint.metadata.json"
    assert "kokoro:engineInstanceMismatch" in metadata.read_text()


def test_the_intermediate_deploy_of_a_type_change_has_no_autoscaling() -> None:
    """deploy-tts's step 2 of an instance-type change (cli/scaling.py): same endpoint, no scaling."""
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_s3 as s3

    from infra.config import DEFAULTS, Settings
    from infra.tts_endpoint import TtsEndpointStack

    settings = Settings.from_context({**DEFAULTS, "autoscaling": "false"}.get)
    app = App()
    support = Stack(app, "Support")
    stack = TtsEndpointStack(app, "KokoroTtsEndpoint", settings=settings,
                             execution_role=iam.Role.from_role_name(support, "Role", "r"),
                             model_bucket=s3.Bucket.from_bucket_name(support, "Bucket", "model-cache-bucket"))
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalableTarget", 0)
    template.resource_count_is("AWS::ApplicationAutoScaling::ScalingPolicy", 0)
    template.resource_count_is("AWS::SageMaker::Endpoint", 1)

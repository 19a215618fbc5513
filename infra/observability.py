"""What an operator of the endpoint sees: voice metrics from its logs, alarms, one dashboard.

Metric filters on the endpoint's log group turn the container's JSON metric lines into CloudWatch
metrics (infra/voice_metrics.py). The stack owns that group (the name SageMaker writes to), with a
retention and DeletionPolicy Retain: Retain is what lets `cdk deploy --import-existing-resources`
adopt a group SageMaker created before the stack owned it, and teardown --all deletes it.
Every alarm treats missing data as not breaching: an idle endpoint sends no utterance lines and
must not page anyone. Every alarm notifies one SNS topic (``--alarm-email`` subscribes an
address); the topic's policy lets CloudWatch publish for exactly these alarms, over TLS only.
Alarms and topic are named after the endpoint, so the roles and the cross-service table
(infra/cross_service.py) can name their ARNs. docs/operations.md says what each alarm means.
"""

from __future__ import annotations

from typing import Any, Final

from aws_cdk import Acknowledgment, Duration, RemovalPolicy, Validations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from infra import voice_metrics as vm
from infra.shared import VARIANT_NAME

ERROR_5XX_THRESHOLD: Final = 5
"""5xx responses summed over 5 minutes. A few means a crashing or overloaded container."""
FIRST_AUDIO_PERIODS: Final = 5
FIRST_AUDIO_BREACHING: Final = 3
"""3 of 5 one-minute periods with too many late utterances: a burst of one minute does not page."""
SLOW_FIRST_AUDIO_PER_MINUTE: Final = 3
"""Utterances a minute whose first audio exceeded the budget. One session whose every sentence is
late reaches it; a healthy fleet speaking 40 utterances a minute with 5 % late (the p95 promise
kept) stays under it. Our assumption, not measured on AWS (docs/operations.md#first-audio)."""
SATURATION_PERIODS: Final = 15
"""Concurrency above the scaling target for 15 minutes: longer than a scale-out (2-minute cooldown
plus an instance start of about 10 minutes), so scaling should have acted and did not or could not
(at maxInstances, or instances failing to start)."""
LOG_RETENTION: Final = logs.RetentionDays.ONE_MONTH
"""The endpoint's container logs (SageMaker's own default is never to expire them)."""
ROLLBACK_ALARMS: Final = ("Errors", "FirstAudio")
"""The alarms a rolling update watches during each batch's bake period (auto-rollback)."""
ALARM_SUFFIXES: Final = {"FirstAudio": "slow-first-audio", "Errors": "5xx", "Saturation": "saturation",
                         "Restarts": "restarts"}
"""Alarm key -> name suffix: each alarm is named ``<endpointName>-<suffix>``."""


def alarm_name(endpoint_name: str, key: str) -> str:
    return f"{endpoint_name}-{ALARM_SUFFIXES[key]}"


def topic_name(endpoint_name: str) -> str:
    return f"{endpoint_name}-alarms"


class EndpointObservability(Construct):
    """Metric filters, alarms and a dashboard for one endpoint."""

    def __init__(self, scope: Construct, construct_id: str, *, endpoint_name: str, first_audio_budget_ms: int,
                 scaling_metric: cloudwatch.IMetric, scaling_target: float, alarm_email: str | None) -> None:
        super().__init__(scope, construct_id)
        self.namespace = vm.namespace(endpoint_name)
        self.log_group = logs.LogGroup(
            self, "EndpointLogGroup", log_group_name=vm.log_group_name(endpoint_name),
            retention=LOG_RETENTION, removal_policy=RemovalPolicy.RETAIN)
        self.filters = self._filters(endpoint_name, first_audio_budget_ms)
        sagemaker_dims = {"EndpointName": endpoint_name, "VariantName": VARIANT_NAME}
        minute = Duration.minutes(1)
        self.first_audio_p95 = self.metric(vm.FIRST_AUDIO, "p95", minute)
        self.alarms = {
            "FirstAudio": cloudwatch.Alarm(
                self, "SlowFirstAudioAlarm", alarm_name=alarm_name(endpoint_name, "FirstAudio"),
                alarm_description=(f"{endpoint_name}: {SLOW_FIRST_AUDIO_PER_MINUTE}+ utterances a minute with first "
                                   f"audio over the {first_audio_budget_ms} ms budget in {FIRST_AUDIO_BREACHING} of "
                                   f"{FIRST_AUDIO_PERIODS} minutes (docs/operations.md#first-audio)"),
                # A count, not a p95: CloudWatch leaves a p95 unevaluated below 200 samples a period.
                metric=self.metric(vm.SLOW_FIRST_AUDIO, "Sum", minute), threshold=SLOW_FIRST_AUDIO_PER_MINUTE,
                evaluation_periods=FIRST_AUDIO_PERIODS, datapoints_to_alarm=FIRST_AUDIO_BREACHING,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            "Errors": cloudwatch.Alarm(
                self, "Invocation5xxAlarm", alarm_name=alarm_name(endpoint_name, "Errors"),
                alarm_description=(f"{endpoint_name}: {ERROR_5XX_THRESHOLD}+ 5xx responses in 5 minutes "
                                   "(docs/operations.md#5xx)"),
                metric=cloudwatch.Metric(namespace="AWS/SageMaker", metric_name="Invocation5XXErrors",
                                         dimensions_map=sagemaker_dims, statistic="Sum",
                                         period=Duration.minutes(5)),
                threshold=ERROR_5XX_THRESHOLD, evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            "Saturation": cloudwatch.Alarm(
                self, "SaturationAlarm", alarm_name=alarm_name(endpoint_name, "Saturation"),
                alarm_description=(f"{endpoint_name}: the scaling metric above its target ({scaling_target:g}) "
                                   f"for {SATURATION_PERIODS} minutes (docs/operations.md#saturation)"),
                metric=scaling_metric, threshold=scaling_target,
                evaluation_periods=SATURATION_PERIODS,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
            "Restarts": cloudwatch.Alarm(
                self, "ContainerRestartAlarm", alarm_name=alarm_name(endpoint_name, "Restarts"),
                alarm_description=(f"{endpoint_name}: the serving process died and was restarted "
                                   "(docs/operations.md#restarts)"),
                metric=self.metric(vm.RESTARTS, "Sum", Duration.minutes(5)), threshold=1, evaluation_periods=1,
                comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING),
        }
        self.topic = self._topic(endpoint_name, alarm_email)
        action = cw_actions.SnsAction(self.topic)
        for alarm in self.alarms.values():
            alarm.add_alarm_action(action)
            alarm.add_ok_action(action)
        self.dashboard = self._dashboard(endpoint_name, sagemaker_dims, first_audio_budget_ms,
                                         scaling_metric, scaling_target)

    def _topic(self, endpoint_name: str, alarm_email: str | None) -> sns.Topic:
        """enforce_ssl writes a topic policy holding only a Deny, which replaces SNS's default
        policy: without the Allow below CloudWatch may not publish and no alarm mail is sent."""
        topic = sns.Topic(self, "AlarmTopic", topic_name=topic_name(endpoint_name),
                          display_name=f"{endpoint_name} alarms", enforce_ssl=True)
        topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmsPublish",
            principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com")],
            actions=["sns:Publish"], resources=[topic.topic_arn],
            # Confused-deputy guard, as AWS's Knowledge Center example: only these alarms. Their
            # ARNs name this account, so an aws:SourceAccount condition would add nothing.
            conditions={"ArnLike": {"aws:SourceArn": [alarm.alarm_arn for alarm in self.alarms.values()]}}))
        Validations.of(topic).acknowledge(Acknowledgment(
            id="AwsSolutions-SNS2",
            reason="CloudWatch alarms can publish to an encrypted topic only through a customer managed "
                   "KMS key whose policy admits cloudwatch.amazonaws.com (not aws/sns); the messages "
                   "carry alarm names and metric values, no data of the service's users."))
        if alarm_email:
            # SNS mails a confirmation link first; nothing is delivered until it is followed.
            topic.add_subscription(subscriptions.EmailSubscription(alarm_email))
        return topic

    def metric(self, name: str, statistic: str, period: Duration) -> cloudwatch.Metric:
        return cloudwatch.Metric(namespace=self.namespace, metric_name=name, statistic=statistic, period=period)

    def _filters(self, endpoint_name: str, budget_ms: int) -> list[logs.CfnMetricFilter]:
        made = []
        for spec in vm.filters(budget_ms):
            flt = logs.CfnMetricFilter(
                self, f"{spec.metric}Filter",
                log_group_name=self.log_group.log_group_name,
                filter_pattern=spec.pattern,
                metric_transformations=[logs.CfnMetricFilter.MetricTransformationProperty(
                    metric_namespace=self.namespace, metric_name=spec.metric, metric_value=spec.value,
                    unit=spec.unit,
                    dimensions=[logs.CfnMetricFilter.DimensionProperty(key=key, value=f"$.{source}")
                                for key, source in spec.dimensions.items()] or None,
                )],
            )
            made.append(flt)
        return made

    def _dashboard(self, endpoint_name: str, dims: dict[str, str], budget_ms: int,
                   scaling_metric: cloudwatch.IMetric, scaling_target: float) -> cloudwatch.Dashboard:
        minute = Duration.minutes(1)
        budget = cloudwatch.HorizontalAnnotation(value=budget_ms, label=f"budget {budget_ms} ms")
        target = cloudwatch.HorizontalAnnotation(value=scaling_target, label=f"scaling target {scaling_target:g}")
        gpu = cloudwatch.Metric(namespace="/aws/sagemaker/Endpoints", metric_name="GPUUtilization",
                                dimensions_map=dims, statistic="Average", period=minute)
        sagemaker: dict[str, Any] = {"namespace": "AWS/SageMaker", "dimensions_map": dims, "period": minute}
        latencies = [cloudwatch.Metric(metric_name="FirstChunkLatency", statistic="p95", **sagemaker),
                     cloudwatch.Metric(metric_name="ModelLatency", statistic="p90", **sagemaker)]
        dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"{endpoint_name}-voice")
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Load against the scaling target (the policy's own metric)",
                                   left=[scaling_metric], left_annotations=[target], width=12),
            cloudwatch.GraphWidget(title="Time to first audio (container, ms)",
                                   left=[self.metric(vm.FIRST_AUDIO, "p50", minute), self.first_audio_p95],
                                   left_annotations=[budget], width=12),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Stalls (ms of silence a real-time listener waited)",
                                   left=[self.metric(vm.STALL, "Sum", minute),
                                         self.metric(vm.STALL, "Maximum", minute)],
                                   width=8),
            cloudwatch.GraphWidget(title="Errors and restarts", left=[
                cloudwatch.Metric(metric_name="Invocation5XXErrors", statistic="Sum", **sagemaker),
                cloudwatch.Metric(metric_name="Invocation4XXErrors", statistic="Sum", **sagemaker),
                self.metric(vm.RESTARTS, "Sum", minute)], width=8),
            cloudwatch.GraphWidget(title="GPU utilisation (%)", left=[gpu], width=8),
        )
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Sessions and model queue (per instance, each minute)", left=[
                self.metric(vm.OPEN_SESSIONS, "Average", minute), self.metric(vm.QUEUE_DEPTH, "Maximum", minute),
                self.metric(vm.RUNNING, "Average", minute)], width=12),
            cloudwatch.GraphWidget(title="SageMaker's own latencies (HTTP routes; units as SageMaker reports them)",
                                   left=latencies, width=12),
        )
        return dashboard

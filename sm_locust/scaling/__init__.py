"""Autoscaling tests (issue 20): how a scaling policy holds the SLO while the fleet grows, and what it costs.

Nothing is imported here, so the local side (the pure control-loop model and figures) never pulls in
boto3, and the AWS side (`scaling.aws`: Application Auto Scaling on a SageMaker variant, snapshot,
apply, restore, DescribeEndpoint polling) is loaded only when a run or a sweep needs it.
"""

"""Fast signed HTTP transport for SageMaker Runtime: no boto3 on the request path.

- `signing`: SigV4 signers (`lean` default, `botocore`, `crt`) behind a registry;
- `errors`: HTTP error responses and network failures -> `InvocationError`, named as botocore does;
- `eventstream`: the AWS event-stream binary framing (encoder; decoding is botocore's);
- `client`: `FastSageMakerClient` over geventhttpclient, fires Locust `request` events;
- `users`: `FastSageMakerUser`, the abstract Locust User building that client.

Importing this package imports nothing heavy; see docs/transport.md.
"""

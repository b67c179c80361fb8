"""What the AWS side accepts and where requests go, below every feature that talks to AWS.

    region.py       the one region rule every boto3 session and Locust child gets
    runtime_api.py  what SageMaker's runtime API accepts (endpoint names, headers, the 6 MB body)
"""

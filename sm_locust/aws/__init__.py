"""What the AWS side accepts and where requests go, below every feature that talks to AWS.

    clients.py      the one AWS client factory: region, profile, endpoint, credentials, retries and
                    timeouts by purpose; every boto3 client sm-locust makes comes from it
    region.py       the one region rule every boto3 session and Locust child gets
    s3.py           run folders to and from S3 (`run --upload`, `report s3://...`)
    runtime_api.py  what SageMaker's runtime API accepts (endpoint names, headers, the 6 MB body)
"""

"""The local SageMaker-compatible endpoint: runtime API + container contract, a real model,
fault injection and capacity knobs, so every sm-locust workflow runs and is tested offline."""

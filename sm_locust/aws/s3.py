"""Run folders to and from S3: `sm-locust run --upload s3://...` and `sm-locust report s3://...`.

For runs whose disk does not outlive them (a Kubernetes pod): the master uploads the run folder when
the run ends, also when it failed. Bad input fails before any traffic: `S3Location.parse` rejects a
malformed URL and `check_writable` puts and deletes a marker object (exit 2 on a missing bucket or
permission). Every S3 call takes an optional client (`s3=None`: the `sm_locust.aws.clients` factory's).
"""

from __future__ import annotations

import mimetypes
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import botocore.exceptions

from sm_locust.aws.clients import Purpose, client
from sm_locust.errors import RunError, UsageError

#: written and deleted by `check_writable`; skipped when a run is read back
MARKER_NAME = ".sm-locust-write-check"
# S3 bucket naming rules (general purpose buckets): 3-63 characters, lowercase letters, digits,
# dots and hyphens, starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_CONTENT_TYPES = {".csv": "text/csv", ".json": "application/json", ".html": "text/html", ".log": "text/plain"}


@dataclass(frozen=True)
class S3Location:
    """`s3://bucket/prefix`: a bucket and a key prefix without leading or trailing slashes."""

    bucket: str
    prefix: str = ""

    @classmethod
    def parse(cls, url: str, option: str = "--upload") -> S3Location:
        """Parse and check an s3:// URL; a UsageError names the bad part and the expected form."""
        expected = f"expected {option} s3://BUCKET/PREFIX"
        text = (url or "").strip()
        if not text:
            raise UsageError(f"{option} is empty; {expected}")
        parts = urlsplit(text)
        if parts.scheme != "s3":
            raise UsageError(f"{option} {url!r} is not an s3:// URL; {expected}")
        if parts.query or parts.fragment or "?" in text or "#" in text:
            raise UsageError(f"{option} {url!r} has a query or fragment; {expected}")
        bucket = parts.netloc
        if not bucket:
            raise UsageError(f"{option} {url!r} names no bucket; {expected}")
        if not _BUCKET.match(bucket) or ".." in bucket:
            raise UsageError(f"{option} {url!r}: {bucket!r} is not a valid S3 bucket name (3-63 characters: "
                             "lowercase letters, digits, dots, hyphens)")
        prefix = parts.path.strip("/")
        if "//" in prefix or any(seg in (".", "..") for seg in prefix.split("/") if prefix):
            raise UsageError(f"{option} {url!r} has an empty, '.' or '..' path segment; {expected}")
        return cls(bucket, prefix)

    def child(self, name: str) -> S3Location:
        return S3Location(self.bucket, f"{self.prefix}/{name}" if self.prefix else name)

    def key(self, relative: str) -> str:
        return f"{self.prefix}/{relative}" if self.prefix else relative

    @property
    def name(self) -> str:
        """The last path segment (the run id of a run's location)."""
        return self.prefix.rsplit("/", 1)[-1]

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class Transfer:
    """What an upload or download moved."""

    files: int
    bytes: int

    def describe(self) -> str:
        size = f"{self.bytes / 1e6:.1f} MB" if self.bytes >= 1e5 else f"{self.bytes / 1e3:.1f} kB"
        return f"{self.files} file{'s' if self.files != 1 else ''} ({size})"


def s3_client(profile: str | None = None, region: str | None = None):
    """An S3 client from the usual chain (env, profile, IRSA web identity, instance role).

    `AWS_ENDPOINT_URL_S3` (botocore's service-specific endpoint variable) points it elsewhere,
    e.g. at a moto server in tests.
    """
    try:
        return client("s3", Purpose.CONTROL, region=region, profile=profile)
    except botocore.exceptions.ProfileNotFound:
        raise UsageError(f"AWS profile {profile!r} not found; "
                         "check the profile option / AWS_PROFILE and ~/.aws/config") from None


def _explain(exc: BaseException, action: str, location: S3Location) -> str:
    """One line for an S3 failure: what was tried where, the error code, what to check."""
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return f"cannot {action} {location}: no AWS credentials (on Kubernetes: the ServiceAccount's IAM role)"
    if isinstance(exc, botocore.exceptions.ProfileNotFound):
        return f"cannot {action} {location}: {exc}"
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return f"cannot {action} {location}: S3 not reachable ({exc})"
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or "error")
        if code in ("NoSuchBucket", "404", "NotFound"):
            return f"cannot {action} {location}: bucket {location.bucket!r} does not exist"
        if code in ("AccessDenied", "403", "Forbidden", "AllAccessDisabled", "InvalidAccessKeyId",
                    "SignatureDoesNotMatch", "ExpiredToken"):
            need = "s3:PutObject" if action == "write to" else "s3:ListBucket and s3:GetObject"
            return (f"cannot {action} {location}: {code} (the role or user needs {need} on "
                    f"arn:aws:s3:::{location.bucket}/{location.prefix + '/' if location.prefix else ''}*)")
        message = error.get("Message") or ""
        return f"cannot {action} {location}: {code}{': ' + message if message else ''}"
    if isinstance(exc, botocore.exceptions.BotoCoreError):
        return f"cannot {action} {location}: {exc}"
    raise exc


def check_writable(location: S3Location, s3=None) -> None:
    """Put then delete a marker object under `location`; UsageError (exit 2) when that fails.

    Only s3:PutObject is required: when the delete is refused the empty marker stays (it is
    skipped when the run is read back).
    """
    s3 = s3 or s3_client()
    key = location.key(MARKER_NAME)
    try:
        s3.put_object(Bucket=location.bucket, Key=key, Body=b"")
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise UsageError(_explain(exc, "write to", location)) from None
    try:
        s3.delete_object(Bucket=location.bucket, Key=key)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError):
        pass


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MARKER_NAME)


def upload_folder(folder: str | os.PathLike[str], location: S3Location, s3=None) -> Transfer:
    """Upload every file under `folder` to `location/<relative path>`; RunError when one fails."""
    import boto3.exceptions  # lazy: boto3 (~230 ms, measured) only when there is something to upload

    folder = Path(folder)
    s3 = s3 or s3_client()
    files = _files(folder)
    total = 0
    for path in files:
        relative = path.relative_to(folder).as_posix()
        guessed = mimetypes.guess_type(path.name)[0]
        content_type = _CONTENT_TYPES.get(path.suffix) or guessed or "application/octet-stream"
        try:
            s3.upload_file(str(path), location.bucket, location.key(relative), ExtraArgs={"ContentType": content_type})
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise RunError(_explain(exc, "write to", location)) from None
        except boto3.exceptions.S3UploadFailedError as exc:  # the transfer manager wraps the ClientError
            cause = exc.__cause__ or exc.__context__
            raise RunError(_explain(cause, "write to", location) if cause
                           else f"cannot write to {location}: {exc}") from None
        except OSError as exc:
            raise RunError(f"cannot upload {path}: {exc.strerror or exc}") from None
        total += path.stat().st_size
    return Transfer(len(files), total)


def _safe_relative(key: str, prefix: str) -> PurePosixPath | None:
    """The key's path below the prefix, or None for folder markers, the write marker and keys that
    would leave the destination folder."""
    relative = key[len(prefix):].lstrip("/") if prefix else key
    if not relative or relative.endswith("/"):
        return None
    path = PurePosixPath(relative)
    if path.is_absolute() or any(part in ("", ".", "..") for part in path.parts) or path.name == MARKER_NAME:
        return None
    return path


def download_folder(location: S3Location, dest: str | os.PathLike[str], s3=None) -> Transfer:
    """Download every object under `location/` into `dest`; UsageError when there is none."""
    dest = Path(dest)
    s3 = s3 or s3_client()
    prefix = location.prefix + "/" if location.prefix else ""
    files = total = 0
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=location.bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                relative = _safe_relative(item["Key"], prefix)
                if relative is None:
                    continue
                target = dest.joinpath(*relative.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(location.bucket, item["Key"], str(target))
                files += 1
                total += int(item.get("Size") or 0)
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
        raise UsageError(_explain(exc, "read", location)) from None
    if not files:
        parent = S3Location(location.bucket, location.prefix.rpartition("/")[0])
        raise UsageError(f"nothing found at {location}/; list the runs there with `aws s3 ls {parent}/`")
    return Transfer(files, total)


def fetch_run(url: str, out: str | os.PathLike[str] | None = None, reports_dir: str | os.PathLike[str] = "reports",
              s3=None) -> tuple[Path, Transfer]:
    """Download the run at `url` (s3://bucket/prefix/run-id) to `out` (default reports/<run-id>).

    The download goes to a temporary folder beside the destination first, so a failed download
    leaves nothing half-written; files already in the destination (an earlier report of the same
    run) are replaced by the uploaded ones, and the rest are kept.
    """
    location = S3Location.parse(url, option="RUN_DIR")
    if not location.prefix:
        raise UsageError(f"RUN_DIR {url!r} names a bucket, not a run; expected s3://BUCKET/PREFIX/RUN-ID")
    dest = Path(out) if out else Path(reports_dir) / location.name
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.download-", dir=dest.parent))
    try:
        transfer = download_folder(location, staging, s3=s3)
        if not dest.exists():
            staging.rename(dest)
        else:
            for path in _files(staging):
                target = dest / path.relative_to(staging)
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest, transfer

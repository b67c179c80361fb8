"""AWS clients are built in one place: `sm_locust/aws/` (the client factory, `aws/clients.py`).

Read from the source with `ast`: outside `aws/`, no call builds a boto3 client (`boto3.client(...)`,
`session.client(...)`) or a boto3 / botocore session (`boto3.Session(...)`,
`boto3.session.Session(...)`, `botocore.session.Session(...)`), so every client gets the factory's
region, endpoint, credential, retry and timeout rules.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "sm_locust"
HOME = PACKAGE / "aws"


def _dotted(node: ast.AST) -> str:
    """`boto3.session.Session` for the expression `boto3.session.Session`; "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def builds_a_client(call: ast.Call) -> bool:
    """A call that makes a boto3 client or a boto3 / botocore session."""
    name = _dotted(call.func)
    if not name:
        return False
    head, _, last = name.rpartition(".")
    if last == "Session" and (not head or head.split(".")[0] in ("boto3", "botocore", "session")):
        return True
    return last == "client" and (head == "boto3" or head.lower().endswith("session"))


def client_builders(source: str) -> list[int]:
    """The line numbers of the calls in `source` that build a client or a session."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and builds_a_client(node)]


def test_the_finder_sees_every_way_to_build_a_client():
    source = ("import boto3, botocore.session\n"
              "a = boto3.client('s3')\n"
              "b = boto3.session.Session(profile_name='p')\n"
              "c = b.client('s3')\n"
              "d = self.session.client('s3')\n"
              "e = boto3.Session()\n"
              "f = botocore.session.Session().get_credentials()\n"
              "g = stand_in.client()\n"
              "h = Session()\n")
    # line 4 (`b.client`): a variable not named for a session is not guessed at; line 8 is not AWS's
    assert sorted(client_builders(source)) == [2, 3, 5, 6, 7, 9]


def test_no_module_outside_aws_builds_an_aws_client():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if HOME in path.parents:
            continue
        for line in client_builders(path.read_text()):
            found.append(f"{path.relative_to(PACKAGE.parent)}:{line}")
    assert not found, ("AWS clients or sessions built outside sm_locust/aws/ (use sm_locust.aws.clients.client): "
                       + ", ".join(found))


def test_the_factory_itself_is_seen_building_clients():
    """The check reads the files it should: the factory's own module builds a session and clients."""
    assert client_builders((HOME / "clients.py").read_text())

"""The Python client generated from entiserve's OpenAPI document (openapi-python-client, package
`entiserve_client`), run against a live server.

Imports every module of the generated package, then signs in and does create, read, filtered
list, a synchronous batch and a background CSV upload, checking every status and value.

Each call goes through the generated function of its route, found by the method and URL its
module sends. One call goes through the generated client's httpx client instead, because the
generated function cannot read its reply: the result CSV of a background request (the generator
parses every 200 as JSON). The run lists which call went which way.

Env: BASE_URL, ADMIN_PASSWORD. Exits 1 on any import failure or mismatch.
"""

import enum
import importlib
import inspect
import io
import json
import os
import pkgutil
import re
import sys
import time
import typing
import uuid
from types import ModuleType

import entiserve_client
from entiserve_client import AuthenticatedClient, Client
from entiserve_client.models import (
    BatchItem,
    BgRequest,
    Campaigns,
    CampaignsCreate,
    Token,
    TokenRequest,
    Upload,
    UploadEntity,
)
from entiserve_client.types import File


class Mismatch(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise Mismatch(what)


def env(name: str) -> str:
    value = os.environ.get(name)
    check(bool(value), f"set {name}")
    return value


DT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$")
# How a generated endpoint module names its route in `_get_kwargs`.
ROUTE = re.compile(r'"method": "(\w+)",\s*"url": "([^"]+)"')


def import_everything() -> tuple[dict[tuple[str, str], ModuleType], list[str]]:
    """Imports every module of the package: the endpoint modules by route, and the failures."""
    routes: dict[tuple[str, str], ModuleType] = {}
    failures: list[str] = []

    def failed(name: str) -> None:
        error = sys.exc_info()[1]
        failures.append(f"{name}: {type(error).__name__}: {error}")

    count = 0
    for info in pkgutil.walk_packages(entiserve_client.__path__, "entiserve_client.", onerror=failed):
        count += 1
        try:
            module = importlib.import_module(info.name)
        except Exception:
            failed(info.name)
            continue
        if info.name.startswith("entiserve_client.api.") and hasattr(module, "sync_detailed"):
            match = ROUTE.search(inspect.getsource(module))
            if match is None:
                failures.append(f"{info.name}: no method and URL found in its source")
                continue
            routes[(match[1].upper(), match[2])] = module
    print(f"imported {count - len(failures)} of {count} modules, {len(routes)} endpoint modules")
    return routes, failures


class Calls:
    """Which route went through which generated module, and which through httpx."""

    def __init__(self, routes: dict[tuple[str, str], ModuleType]):
        self.routes = routes
        self.generated: dict[str, str] = {}
        self.httpx: dict[str, str] = {}

    def module(self, method: str, path: str) -> ModuleType | None:
        module = self.routes.get((method, path))
        if module is not None:
            self.generated[f"{method} {path}"] = module.__name__
        return module

    def required(self, method: str, path: str) -> ModuleType:
        module = self.module(method, path)
        check(module is not None, f"no generated function for {method} {path}")
        return module

    def via_httpx(self, method: str, path: str, why: str) -> None:
        self.httpx[f"{method} {path}"] = why


def enum_argument(function, parameter: str, value: str) -> enum.Enum:
    """`value` as the enum a generated function takes for `parameter` (named after the operation)."""
    annotation = inspect.signature(function).parameters[parameter].annotation
    kind = next(t for t in typing.get_args(annotation) if isinstance(t, type) and issubclass(t, enum.Enum))
    return kind(value)


def expect_campaign(got: object, want: dict, what: str) -> Campaigns:
    check(isinstance(got, Campaigns), f"{what}: {got!r}, expected a Campaigns")
    check(isinstance(got.id, int) and got.id > 0, f"{what}: id {got.id!r}")
    if "id" in want:
        check(got.id == want["id"], f"{what}: id {got.id}, expected {want['id']}")
    check(got.name == want["name"], f"{what}: name {got.name!r}, expected {want['name']!r}")
    check(got.type_ == want.get("type", 1), f"{what}: type {got.type_!r}, expected {want.get('type', 1)}")
    active = want.get("is_active", True)
    check(got.is_active is active, f"{what}: is_active {got.is_active!r}, expected {active}")
    check(DT.match(got.created_dt) is not None, f"{what}: created_dt {got.created_dt!r}")
    check(DT.match(got.updated_dt) is not None, f"{what}: updated_dt {got.updated_dt!r}")
    return got


def expect_status(response, expected: int, what: str) -> None:
    status = int(response.status_code)
    body = response.content.decode(errors="replace")[:300]
    check(status == expected, f"{what}: status {status}, expected {expected}: {body}")


def sign_in(calls: Calls, base_url: str, password: str) -> AuthenticatedClient:
    anonymous = Client(base_url=base_url, raise_on_unexpected_status=True)
    signin = calls.required("POST", "/auth/token")
    response = signin.sync_detailed(client=anonymous, body=TokenRequest(login="admin", password=password))
    expect_status(response, 200, "POST /auth/token")
    token = response.parsed
    check(isinstance(token, Token) and len(token.token) >= 16, f"POST /auth/token: {token!r}")
    check(DT.match(token.expires_dt) is not None, f"POST /auth/token: expires_dt {token.expires_dt!r}")
    client = AuthenticatedClient(base_url=base_url, token=token.token, raise_on_unexpected_status=True)
    me = calls.required("GET", "/users/me").sync_detailed(client=client)
    expect_status(me, 200, "GET /users/me with the token")
    check(getattr(me.parsed, "login", None) == "admin", f"GET /users/me: {me.parsed!r}")
    print(f"signed in: bearer token until {token.expires_dt}")
    return client


def create_read_list(calls: Calls, client: AuthenticatedClient, tag: str) -> None:
    want = {"name": f"{tag} single", "type": 7, "is_active": False}
    create = calls.required("POST", "/campaigns")
    body = CampaignsCreate(name=want["name"], type_=want["type"], is_active=want["is_active"])
    response = create.sync_detailed(client=client, body=body)
    expect_status(response, 200, "POST /campaigns")
    want["id"] = expect_campaign(response.parsed, want, "POST /campaigns").id

    read = calls.required("GET", "/campaigns/{id}")
    response = read.sync_detailed(want["id"], client=client)
    expect_status(response, 200, f"GET /campaigns/{want['id']}")
    expect_campaign(response.parsed, want, f"GET /campaigns/{want['id']}")

    listing = calls.required("GET", "/campaigns")
    response = listing.sync_detailed(client=client, name=want["name"])
    expect_status(response, 200, "GET /campaigns?name=...")
    found = response.parsed
    check(isinstance(found, list) and len(found) == 1, f"GET /campaigns?name=...: {found!r}, expected 1 object")
    expect_campaign(found[0], want, "GET /campaigns?name=...")
    total = response.headers.get("X-Total-Count")
    check(total == "1", f"GET /campaigns?name=...: X-Total-Count {total!r}, expected '1'")
    print(f"created campaign {want['id']}, read it back and found it by name")


def batch(calls: Calls, client: AuthenticatedClient, tag: str) -> None:
    wants = [
        {"name": f"{tag} batch 1"},
        {"name": f"{tag} batch 2", "type": 2},
        {"name": f"{tag} batch 3", "is_active": False},
    ]
    items = [CampaignsCreate(name=w["name"], type_=w.get("type", 1), is_active=w.get("is_active", True)) for w in wants]
    create = calls.required("POST", "/campaigns")
    # Models where the document types the batch items, plain JSON objects where it does not.
    body_type = inspect.signature(create.sync_detailed).parameters["body"].annotation
    array = next(t for t in typing.get_args(body_type) if typing.get_origin(t) is list)
    typed = typing.get_args(array) == (CampaignsCreate,)
    print(f"batch items are {'typed' if typed else 'untyped'} in the generated client: {array}")
    body = items if typed else [item.to_dict() for item in items]
    bgrs = enum_argument(create.sync_detailed, "bgrs", "false")
    response = create.sync_detailed(client=client, body=body, bgrs=bgrs)
    expect_status(response, 200, "POST /campaigns?bgrs=false (batch)")
    results = response.parsed
    check(isinstance(results, list) and len(results) == 3, f"batch: {results!r}, expected 3 result items")
    for i, (result, want) in enumerate(zip(results, wants)):
        check(isinstance(result, BatchItem), f"batch item {i}: {result!r}")
        check(result.status == 200, f"batch item {i}: status {result.status}: {result.body}")
        expect_campaign(Campaigns.from_dict(json.loads(result.body)), want, f"batch item {i}")
    print("batch: 3 items created, each with status 200")


def upload(calls: Calls, client: AuthenticatedClient, tag: str) -> None:
    names = [f"{tag} upload {n}" for n in (1, 2, 3)]
    csv = "op,name,type\n" + "".join(f"c,{name},{i + 1}\n" for i, name in enumerate(names))
    # A file part where the document makes `csvfile` binary, a text part where it is a string.
    if "File" in str(Upload.__annotations__["csvfile"]):
        csvfile = File(payload=io.BytesIO(csv.encode()), file_name="campaigns.csv", mime_type="text/csv")
    else:
        csvfile = csv
    uploader = calls.required("POST", "/tools/uploader.ex.php")
    body = Upload(entity=UploadEntity("campaigns"), csvfile=csvfile, bgrs="1")
    response = uploader.sync_detailed(client=client, body=body)
    expect_status(response, 202, "POST /tools/uploader.ex.php (bgrs=1)")
    rid = getattr(response.parsed, "request", None)
    check(isinstance(rid, str) and re.fullmatch(r"[0-9a-f]{32}", rid) is not None, f"upload: {response.content!r}")

    status = calls.required("GET", "/bgrs/{rid}")
    deadline = time.monotonic() + 30
    while True:
        response = status.sync_detailed(rid, client=client)
        expect_status(response, 200, f"GET /bgrs/{rid}")
        records = response.parsed
        check(isinstance(records, list) and len(records) == 1, f"GET /bgrs/{rid}: {records!r}")
        record = records[0]
        check(isinstance(record, BgRequest) and record.rid == rid, f"GET /bgrs/{rid}: {record!r}")
        check(record.name == "uploader", f"GET /bgrs/{rid}: name {record.name!r}")
        if record.status_name == "finished":
            check(record.status_id == "4", f"GET /bgrs/{rid}: status_id {record.status_id!r}")
            check(record.status == "200", f"GET /bgrs/{rid}: status {record.status!r}")
            check(record.progress == "100.00", f"GET /bgrs/{rid}: progress {record.progress!r}")
            check(record.result.endswith(".csv"), f"GET /bgrs/{rid}: result {record.result!r}")
            break
        check(record.status_name == "in progress", f"GET /bgrs/{rid}: status_name {record.status_name!r}")
        check(time.monotonic() < deadline, f"GET /bgrs/{rid}: not finished after 30 s")
        time.sleep(0.2)

    calls.via_httpx("GET", "/bgrs/{rid}/result", "the generated function reads every reply as JSON; this one is CSV")
    response = client.get_httpx_client().get(f"/bgrs/{rid}/result")
    expect_status(response, 200, f"GET /bgrs/{rid}/result")
    content_type = response.headers.get("Content-Type", "")
    check(content_type.startswith("text/csv"), f"GET /bgrs/{rid}/result: Content-Type {content_type!r}")
    lines = response.text.strip().splitlines()
    check(lines[0] == "res,id,op,name,type", f"result CSV header {lines[0]!r}")
    check(len(lines) == len(names) + 1, f"result CSV: {len(lines) - 1} rows, expected {len(names)}")
    for i, (line, name) in enumerate(zip(lines[1:], names)):
        check(re.fullmatch(rf"OK,\d+,c,{re.escape(name)},{i + 1}", line) is not None, f"result CSV row {i + 1}: {line}")
    print(f"upload {rid}: finished, {len(names)} rows OK")


def main() -> int:
    routes, failures = import_everything()
    for failure in failures:
        print(f"IMPORT FAILED {failure}", file=sys.stderr)
    calls = Calls(routes)
    tag = f"py-{uuid.uuid4().hex[:12]}"
    try:
        client = sign_in(calls, env("BASE_URL").rstrip("/"), env("ADMIN_PASSWORD"))
        create_read_list(calls, client, tag)
        batch(calls, client, tag)
        upload(calls, client, tag)
    except Mismatch as mismatch:
        print(f"Python client check failed: {mismatch}", file=sys.stderr)
        return 1
    finally:
        for route, module in calls.generated.items():
            print(f"generated: {route} -> {module}")
        for route, why in calls.httpx.items():
            print(f"httpx:     {route} ({why})")
    if failures:
        print(f"Python client check failed: {len(failures)} generated modules do not import", file=sys.stderr)
        return 1
    print("Python client: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

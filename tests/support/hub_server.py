"""A stand-in for the Hugging Face Hub on 127.0.0.1, for push tests (no public Hub can be reached here).

It answers the calls huggingface_hub 2.4 makes for ``repo_info`` + ``update_repo_settings`` (visibility) +
``create_repo`` + ``list_repo_files`` +
``create_commit`` (README validation, preupload, the LFS batch API with basic transfer, upload
and verify, the NDJSON commit) and records every request, the files committed per repo and
the commits' messages. Binary files (.parquet, .png) are answered ``lfs`` like the Hub's
default .gitattributes; everything else goes inline (``regular``). Requests whose
``Authorization`` is not ``Bearer <token>`` get 401.

    with HubServer(token="hf_x") as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_TOKEN": "hf_x", "HF_HUB_DISABLE_XET": "1"}
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

LFS_SUFFIXES = (".parquet", ".png", ".arrow", ".bin")
_REPO = r"(?P<repo>[^/]+/[^/]+)"


@dataclass
class Commit:
    repo_id: str
    summary: str
    description: str
    added: dict[str, bytes]
    deleted: list[str]


@dataclass
class Repo:
    repo_id: str
    private: bool
    files: dict[str, bytes] = field(default_factory=dict)


class HubServer:
    def __init__(self, *, token: str):
        self.token = token
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.unauthorized: list[tuple[str, str]] = []
        self.unknown: list[tuple[str, str]] = []
        self.repos: dict[str, Repo] = {}
        self.create_payloads: list[dict] = []
        self.settings_payloads: list[dict] = []
        self.commits: list[Commit] = []
        self.lfs_objects: dict[str, bytes] = {}
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> HubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    # --- the routes ---------------------------------------------------------------------------

    def route(self, method: str, path: str, query: dict, body: bytes) -> tuple[int, object, dict]:
        if method == "POST" and path == "/api/validate-yaml":
            return 200, {"errors": [], "warnings": []}, {}
        if method == "POST" and path == "/api/repos/create":
            payload = json.loads(body)
            self.create_payloads.append(payload)
            repo_id = f"{payload['organization']}/{payload['name']}"
            if payload.get("type") != "dataset":
                return 400, {"error": "only dataset repos here"}, {}
            if repo_id in self.repos:
                return 409, {"error": "You already created this dataset repo", "url": f"{self.url}/datasets/{repo_id}"}, {}
            self.repos[repo_id] = Repo(repo_id, payload.get("visibility") == "private")
            return 200, {"url": f"{self.url}/datasets/{repo_id}", "name": repo_id}, {}
        if method == "GET" and (m := re.fullmatch(rf"/api/datasets/{_REPO}", path)):
            repo = self.repos.get(unquote(m["repo"]))
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            return 200, {"id": repo.repo_id, "private": repo.private, "sha": "0" * 40}, {}
        if method == "PUT" and (m := re.fullmatch(rf"/api/datasets/{_REPO}/settings", path)):
            repo = self.repos.get(unquote(m["repo"]))
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            payload = json.loads(body)
            self.settings_payloads.append(payload)
            if "visibility" in payload:
                repo.private = payload["visibility"] == "private"
            return 200, {}, {}
        if m := re.fullmatch(rf"/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)", path):
            repo = self.repos.get(unquote(m["repo"]))
            if repo is None:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            return 200, [{"type": "file", "path": p, "oid": hashlib.sha1(b).hexdigest(), "size": len(b)}
                         for p, b in sorted(repo.files.items())], {}
        if m := re.fullmatch(rf"/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)", path):
            if unquote(m["repo"]) not in self.repos:
                return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
            files = json.loads(body)["files"]
            return 200, {"files": [{"path": f["path"], "uploadMode": "lfs" if f["path"].endswith(LFS_SUFFIXES) else "regular",
                                    "shouldIgnore": False, "oid": None} for f in files]}, {}
        if m := re.fullmatch(rf"/datasets/{_REPO}\.git/info/lfs/objects/batch", path):
            payload = json.loads(body)
            objects = []
            for obj in payload["objects"]:
                actions = None if obj["oid"] in self.lfs_objects else {
                    "upload": {"href": f"{self.url}/lfs-upload/{obj['oid']}"},
                    "verify": {"href": f"{self.url}/lfs-verify"},
                }
                objects.append({"oid": obj["oid"], "size": obj["size"], "authenticated": True,
                                **({"actions": actions} if actions else {})})
            return 200, {"transfer": "basic", "objects": objects}, {}
        if method == "PUT" and (m := re.fullmatch(r"/lfs-upload/(?P<oid>[0-9a-f]{64})", path)):
            if hashlib.sha256(body).hexdigest() != m["oid"]:
                return 400, {"error": "sha256 mismatch"}, {}
            self.lfs_objects[m["oid"]] = body
            return 200, {}, {}
        if method == "POST" and path == "/lfs-verify":
            payload = json.loads(body)
            ok = payload["oid"] in self.lfs_objects and len(self.lfs_objects[payload["oid"]]) == payload["size"]
            return (200, {}, {}) if ok else (404, {"error": "object not uploaded"}, {})
        if m := re.fullmatch(rf"/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)", path):
            return self._commit(unquote(m["repo"]), body)
        self.unknown.append((method, path))
        return 404, {"error": f"not served by the test hub: {method} {path}"}, {}

    def _commit(self, repo_id: str, body: bytes) -> tuple[int, object, dict]:
        repo = self.repos.get(repo_id)
        if repo is None:
            return 404, {"error": "Repository not found"}, {"X-Error-Code": "RepoNotFound"}
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = lines[0]
        assert header["key"] == "header", header
        added: dict[str, bytes] = {}
        deleted: list[str] = []
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                assert value["encoding"] == "base64"
                added[value["path"]] = base64.b64decode(value["content"])
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    return 400, {"error": f"LFS object {value['oid']} was never uploaded"}, {}
                added[value["path"]] = self.lfs_objects[value["oid"]]
            elif line["key"] == "deletedFile":
                if value["path"] not in repo.files:
                    return 404, {"error": "A file with this name doesn't exist"}, {"X-Error-Code": "EntryNotFound"}
                deleted.append(value["path"])
            else:
                return 400, {"error": f"unsupported commit line {line['key']}"}, {}
        for path in deleted:
            del repo.files[path]
        repo.files.update(added)
        self.commits.append(Commit(repo_id, header["value"]["summary"], header["value"].get("description", ""),
                                   added, deleted))
        oid = hashlib.sha1(f"{repo_id}{len(self.commits)}".encode()).hexdigest()
        return 200, {"commitUrl": f"{self.url}/datasets/{repo_id}/commit/{oid}", "commitOid": oid,
                     "pullRequestUrl": None}, {}

    # --- HTTP plumbing ------------------------------------------------------------------------

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _serve(self) -> None:
                body = self._body()
                url = urlparse(self.path)
                with hub.lock:
                    hub.requests.append((self.command, url.path))
                    auth_needed = not url.path.startswith("/lfs-upload/")  # presigned-style, like S3
                    if auth_needed and self.headers.get("Authorization") != f"Bearer {hub.token}":
                        hub.unauthorized.append((self.command, url.path))
                        status, payload, headers = 401, {"error": "Invalid credentials"}, {}
                    else:
                        status, payload, headers = hub.route(self.command, url.path, parse_qs(url.query), body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

        return Handler

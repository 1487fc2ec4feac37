#!/usr/bin/env python3
"""The hostile-server suite of `stockroom client`: scripted servers that lie, stall, redirect and
name files after paths, and the driver that runs the client against each and checks what it did.

    python3 .ci/client-hostile.py [--work DIR] [-j N] [--only TEXT]... [-v] [--list] BINARY

Every scenario gets fresh folders, a scripted server (a subclass of `Honest` that overrides the
one answer it lies in) and a second listener on another address that must never see the proof or
a token. Besides its own checks, each scenario checks that the client did not crash, hang or
report safe to finish without a 2xx acknowledgement, and that no file outside --into and
--journal changed. Standard library only, plus the `openssl` command for the TLS scenarios.
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse

PRODUCT = "com.example.hostile.level1"
TX = "1000000000000001"
# Not a multiple of anything the client buffers by, so that an off-by-one shows.
CONTENT = b"".join(hashlib.sha256(b"hostile %d" % i).digest() for i in range(2100))[:65_531]
DAY = 86_400
SUITE_SECONDS = 170
NO_CONTENT_LENGTH_BYTES = 20 << 20
# How much a client may write to disk from a body of unknown length before giving up on it.
UNKNOWN_LENGTH_WRITE_BOUND = 1 << 20


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def etag_of(data):
    return '"%s"' % hashlib.sha256(data).hexdigest()[:16]


def repr_digest_of(data):
    return "sha-256=:%s:" % base64.b64encode(hashlib.sha256(data).digest()).decode()


# MARK: The scripted servers


class Request:
    def __init__(self, method, path, headers, body, raw):
        self.method, self.path, self.headers, self.body, self.raw = method, path, headers, body, raw

    def header(self, name):
        return self.headers.get(name)

    @property
    def bearer(self):
        value = self.header("Authorization") or ""
        return value[7:].strip() if value.startswith("Bearer ") else None

    def json(self):
        try:
            value = json.loads(self.body or b"null")
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def __str__(self):
        return "%s %s" % (self.method, self.path)


class Out:
    """Writes an answer byte by byte as the script wants it, including answers no server should give."""

    REASONS = {200: "OK", 204: "No Content", 206: "Partial Content", 307: "Temporary Redirect", 308: "Permanent Redirect",
               401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 416: "Range Not Satisfiable",
               500: "Internal Server Error", 503: "Service Unavailable"}

    def __init__(self, handler):
        self.handler = handler
        self.status = None

    def head(self, status, headers, close=False):
        self.status = status
        lines = ["HTTP/1.1 %d %s" % (status, self.REASONS.get(status, "Whatever"))]
        lines += ["%s: %s" % (name, value) for name, value in headers]
        if close:
            lines.append("Connection: close")
            self.hang_up()
        self.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def write(self, data):
        self.handler.wfile.write(data)

    def hang_up(self):
        """Close the connection once this answer is written, whatever it promised."""
        self.handler.close_connection = True

    def send(self, status, headers=(), body=b""):
        self.head(status, list(headers) + [("Content-Length", str(len(body)))])
        self.write(body)

    def json(self, status, value, headers=()):
        self.send(status, [("Content-Type", "application/json")] + list(headers), json.dumps(value).encode())

    def error(self, status, code, message=None, headers=()):
        self.json(status, {"error": {"code": code, "message": message or code}}, headers)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as libcurl expects of a real server
    timeout = 20  # an idle keep-alive connection does not keep its thread forever

    def log_message(self, *args):
        pass

    def dispatch(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(min(length, 16 << 20)) if length > 0 else b""
        raw = (self.requestline + "\r\n" + str(self.headers)).encode("latin-1", "replace") + body
        request = Request(self.command, self.path, self.headers, body, raw)
        script = self.server.script
        script.record(request)
        try:
            script.handle(request, Out(self))
        except OSError:  # the client hung up on a body it did not want: that is its right
            self.close_connection = True
        except Exception:
            traceback.print_exc()
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = dispatch


class Listener(http.server.ThreadingHTTPServer):
    """One address and port, answering as its script says, on threads of its own."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, script, host="127.0.0.1", tls=None):
        self.script, self.host, self.tls = script, host, tls
        super().__init__((host, 0), Handler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()

    @property
    def url(self):
        return "%s://%s:%d" % ("https" if self.tls else "http", self.host, self.port)

    def finish_request(self, request, client_address):
        if self.tls is None:
            return super().finish_request(request, client_address)
        # The handshake runs on the connection's own thread: a client that stalls in it stalls nobody else.
        request.settimeout(10)
        try:
            connection = self.tls.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as error:
            self.script.handshake_failures.append(str(error))
            return
        try:
            super().finish_request(connection, client_address)
        finally:
            try:
                connection.close()
            except OSError:
                pass

    def handle_error(self, request, client_address):
        # A client hanging up mid-answer is part of the game; anything else is the script's bug.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def stop(self):
        self.script.stopping.set()
        self.shutdown()
        self.server_close()


class Script:
    """What a listener answers. Every request is kept, to tell afterwards what reached whom."""

    def __init__(self, case):
        self.case = case
        self.lock = threading.Lock()
        self.requests = []
        self.handshake_failures = []
        self.stopping = threading.Event()

    def record(self, request):
        with self.lock:
            self.requests.append(request)

    def handle(self, request, out):
        raise NotImplementedError


class Elsewhere(Script):
    """The second listener, where redirects and foreign Locations point. It says yes to everything, so
    that a client which went there has every reason to carry on."""

    def handle(self, request, out):
        out.json(200, {})


class Honest(Script):
    """Stockroom's protocol, answered correctly. A scenario subclasses it and overrides the one answer it
    lies in: `files` and `restores` say what is on sale and what a restore lists."""

    files = {PRODUCT: CONTENT}
    restores = [(PRODUCT, TX)]

    def __init__(self, case):
        super().__init__(case)
        self.grants = {}  # token -> (transaction ID, product ID)
        self.acknowledged = set()  # transaction IDs whose acknowledgement got a 2xx

    def handle(self, request, out):
        path = urllib.parse.urlsplit(request.path).path
        if request.method == "GET" and path == "/v1/catalog":
            return self.catalog(request, out)
        if request.method == "POST" and path == "/v1/downloads":
            return self.grant(request, out)
        if request.method == "POST" and path == "/v1/restores":
            return self.restore(request, out)
        if request.method == "POST" and path.endswith("/ack"):
            return self.acknowledge(request, out)
        if request.method == "GET" and path.endswith("/content"):
            return self.content(request, out)
        out.error(404, "not_found")

    # The answers a scenario overrides.

    def catalog_products(self):
        return [{"productId": product, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()} for product, data in self.files.items()]

    def catalog(self, request, out):
        out.json(200, {"products": self.catalog_products()}, [("ETag", '"catalog-1"')])

    def location(self, transaction):
        return "/v1/downloads/%s/content" % urllib.parse.quote(transaction, safe="")

    def grant(self, request, out):
        body = request.json() or {}
        product, transaction = body.get("productId"), body.get("transactionId")
        if not (body.get("signedTransaction") or body.get("receiptData")):
            return out.error(400, "proof_missing")
        if product not in self.files or not isinstance(transaction, str):
            return out.error(404, "unknown_product")
        data = self.files[product]
        token = self.issue(transaction, product)
        headers = [("X-Download-Token", token), ("Location", self.location(transaction)), ("ETag", etag_of(data)), ("Repr-Digest", repr_digest_of(data))]
        self.send_file(request, out, 200, data, 0, headers)

    def send_file(self, request, out, status, data, start, headers):
        """data[start:] as the body of `status`; the scenarios that misbehave on bodies override this."""
        out.head(status, headers + [("Content-Type", "application/octet-stream"), ("Content-Length", str(len(data) - start))])
        out.write(data[start:])

    def content(self, request, out):
        granted = self.grants.get(request.bearer)
        if granted is None:
            return out.error(401, "token_invalid")
        data = self.files.get(granted[1], CONTENT)
        headers = [("ETag", etag_of(data)), ("Repr-Digest", repr_digest_of(data))]
        match = re.fullmatch(r"bytes=(\d+)-", request.header("Range") or "")
        if match and request.header("If-Range") == etag_of(data):
            start = int(match[1])
            if start >= len(data):
                return out.send(416, [("Content-Range", "bytes */%d" % len(data))])
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data))))
            return self.send_file(request, out, 206, data, start, headers)
        self.send_file(request, out, 200, data, 0, headers)

    def acknowledge(self, request, out):
        granted = self.grants.get(request.bearer)
        if granted is None:
            return out.error(401, "token_invalid")
        self.answer_acknowledgement(request, out, granted[0])
        if out.status is not None and 200 <= out.status < 300:
            with self.lock:
                self.acknowledged.add(granted[0])

    def answer_acknowledgement(self, request, out, transaction):
        out.json(200, {"transactionId": transaction, "acknowledged": True})

    def restore(self, request, out):
        if not (request.json() or {}).get("signedTransaction"):
            return out.error(400, "proof_missing")
        products = [{"productId": product, "transactionId": transaction, "token": self.issue(transaction, product), "location": self.location(transaction)}
                    for product, transaction in self.restores]
        out.json(200, {"products": products})

    def issue(self, transaction, product):
        token = "tok_" + secrets.token_hex(16)
        with self.lock:
            self.grants[token] = (transaction, product)
        self.case.secrets.add(token)
        return token


# MARK: The driver


class Run:
    def __init__(self, label, code, stdout, stderr, seconds, timed_out, peak_bytes):
        self.label, self.code, self.stdout, self.stderr = label, code, stdout, stderr
        self.seconds, self.timed_out, self.peak_bytes = seconds, timed_out, peak_bytes
        self.outcomes = []
        for line in stdout.decode("utf-8", "replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                self.outcomes.append(value)

    @property
    def text(self):
        return self.stdout.decode("utf-8", "replace")

    def first(self, key):
        return next((o.get(key) for o in self.outcomes if key in o), None)

    def summary(self):
        tail = self.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        return "exit %s in %.1f s; stdout %r; stderr %r" % ("timeout" if self.timed_out else self.code, self.seconds, self.text.strip()[:300], " | ".join(tail)[:300])


LIVE = set()  # process groups of running clients, killed if the suite is stopped
LIVE_LOCK = threading.Lock()


class Case:
    """One scenario's world: folders with victim files planted around --into, the scripted server,
    the second listeners (127.0.0.1 and 127.0.0.2, other ports), and its checks."""

    def __init__(self, suite, name):
        self.suite, self.name = suite, name
        self.folder = os.path.join(suite.work, re.sub(r"[^A-Za-z0-9.-]+", "-", name))
        self.box = os.path.join(self.folder, "box")
        self.parent = os.path.join(self.box, "a", "b")
        self.into = os.path.join(self.parent, "into")
        self.journal = os.path.join(self.parent, "journal")
        self.lines = []
        self.passed = self.failed = 0
        self.secrets = set()
        self.primary = None
        self.listeners = []
        # Victims: at the top of the box (where ../../../x from --into lands), beside --into, in a
        # sibling folder, and a file of the user's inside --into.
        self.victims = {
            os.path.join(self.box, "victim_file"): b"victim three levels above --into\n",
            os.path.join(self.box, "a", "victim_file"): b"victim two levels above --into\n",
            os.path.join(self.parent, "victim_file"): b"victim in the parent of --into\n",
            os.path.join(self.parent, "sibling", "victim_file"): b"victim in a sibling folder\n",
            os.path.join(self.into, "unrelated.txt"): b"the user's own file inside --into\n",
        }
        for path, data in self.victims.items():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as file:
                file.write(data)
        claims = {"transactionId": TX, "originalTransactionId": TX, "productId": PRODUCT}
        self.jws = b64url(b'{"alg":"ES256"}') + "." + b64url(json.dumps(claims).encode()) + ".c2ln"
        self.secrets |= {self.jws, self.jws.split(".")[1]}
        self.jws_file = os.path.join(self.folder, "transaction.jws")
        with open(self.jws_file, "w") as file:
            file.write(self.jws + "\n")
        # Same host on another port, and another host. Where 127.0.0.2 is not configured (macOS by
        # default), the second is one more port on 127.0.0.1.
        self.away = [Listener(Elsewhere(self), "127.0.0.1")]
        try:
            self.away.append(Listener(Elsewhere(self), "127.0.0.2"))
        except OSError:
            self.away.append(Listener(Elsewhere(self), "127.0.0.1"))
        self.listeners += self.away
        self.before = self.snapshot()

    # Servers and runs.

    def serve(self, script, tls=None):
        self.primary = Listener(script(self), tls=tls)
        self.listeners.append(self.primary)
        return self.primary.script

    def client(self, command, *extra, json_output=True, **options):
        """`stockroom client deliver|restore` against the primary, with this case's folders."""
        args = ["client", command, "--server", options.pop("server", self.primary.url)]
        if command == "deliver":
            args += ["--product", PRODUCT]
        args += ["--signed-transaction", self.jws_file, "--into", self.into, "--journal", self.journal]
        if json_output:
            args.append("--json")
        return self.run(args + list(extra), label=options.pop("label", command), **options)

    def run(self, args, label, timeout=20, env=None, umask=-1, watch=None, delivers=True, wrapper=()):
        """Runs the binary with a clean environment; a hang is killed with its process group.
        `delivers`: the run may report something safe to finish (not `client catalog`).
        `wrapper`: a command the binary runs under (a private mount namespace, say)."""
        environment = {k: v for k, v in os.environ.items()
                       if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy", "ssl_cert_file", "ssl_cert_dir",
                                            "nix_ssl_cert_file", "curl_ca_bundle", "stockroom_server")}
        environment["NO_PROXY"] = environment["no_proxy"] = "*"
        environment.update(env or {})
        peak = [0]
        done = threading.Event()
        if watch:
            # Polled, not exact: it catches a body written by the megabyte, which is what matters.
            def poll():
                while not done.wait(0.02):
                    peak[0] = max(peak[0], folder_bytes(watch, skip=self.victims))
            threading.Thread(target=poll, daemon=True).start()
        started = time.monotonic()
        process = subprocess.Popen(list(wrapper) + [self.suite.binary] + args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=environment, start_new_session=True, umask=umask, cwd=self.folder)
        with LIVE_LOCK:
            LIVE.add(process.pid)
        timed_out = False
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(process.pid)
            stdout, stderr = process.communicate()
        finally:
            with LIVE_LOCK:
                LIVE.discard(process.pid)
            done.set()
        if watch:
            peak[0] = max(peak[0], folder_bytes(watch, skip=self.victims))
        run = Run(label, process.returncode, stdout, stderr, time.monotonic() - started, timed_out, peak[0])
        if self.suite.verbose:
            self.lines.append("   %s: %s" % (label, run.summary()))
            seen = [(listener.url, str(r)) for listener in self.listeners for r in listener.script.requests]
            self.lines.append("   %s: requests so far: %s" % (label, "; ".join("%s %s" % pair for pair in seen)[:1500]))
        self.run_checks(run, timeout, delivers)
        return run

    def run_checks(self, run, timeout, delivers):
        """What holds for every run, whatever the server did."""
        self.check("%s: ends within %d s" % (run.label, timeout), not run.timed_out, run.summary())
        self.check("%s: does not crash" % run.label, run.timed_out or 0 <= run.code < 128, run.summary())
        self.check("%s: is not a usage error" % run.label, run.code != 64, run.summary())
        if not delivers or self.primary is None or not isinstance(self.primary.script, Honest):
            return
        acknowledged = self.primary.script.acknowledged
        claims = [o.get("transactionId") for o in run.outcomes if o.get("safeToFinish") is True]
        for line in run.text.splitlines():
            if re.search(r"(?<!not )safe to finish", line) and not line.lstrip().startswith("{"):
                words = line.split()
                claims.append(words[1].rstrip(":") if len(words) > 1 else None)
        if run.code == 0 and not claims:
            claims.append(None)
        unbacked = [c for c in claims if (c is None and not acknowledged) or (c is not None and c not in acknowledged)]
        self.check("%s: reports safe to finish only what the server acknowledged with a 2xx" % run.label, not unbacked,
                   "safe to finish: %r, acknowledged: %r; %s" % (unbacked, sorted(acknowledged), run.summary()))

    # Checks.

    def check(self, label, ok, detail=""):
        if ok:
            self.passed += 1
        else:
            self.failed += 1
            self.lines.append("FAILED: %s: %s%s" % (self.name, label, (" (%s)" % detail) if detail else ""))

    def expect_exit(self, run, wanted, what=None):
        """`wanted`: a status, or a predicate on it."""
        ok = (not run.timed_out) and (wanted(run.code) if callable(wanted) else run.code == wanted)
        self.check("%s: %s" % (run.label, what or "exits %s" % wanted), ok, run.summary())

    def expect_request(self, method, suffix, what):
        """That the run got as far as the lie: else the scenario tested nothing."""
        seen = [str(r) for r in self.primary.script.requests]
        self.check(what, any(r.method == method and urllib.parse.urlsplit(r.path).path.endswith(suffix) for r in self.primary.script.requests),
                   "the server saw: %s" % ("; ".join(seen)[:300] or "nothing"))

    def expect_nothing_elsewhere(self):
        seen = [str(r) for listener in self.away for r in listener.script.requests]
        self.check("the second listener sees no request at all", not seen, "; ".join(seen)[:300])

    def snapshot(self):
        return snapshot(self.box, own=(self.into, self.journal), keep=(os.path.join(self.into, "unrelated.txt"),))

    def finish(self):
        """The checks every scenario ends with: the box outside --into/--journal, and the second listener."""
        after = self.snapshot()
        changes = []
        for path in sorted(set(self.before) | set(after)):
            if path not in after:
                changes.append("%s removed" % path)
            elif path not in self.before:
                changes.append("%s appeared (%s)" % (path, after[path][0]))
            elif self.before[path] != after[path]:
                changes.append("%s changed (%s -> %s)" % (path, self.before[path][0], after[path][0]))
        self.check("no file outside --into and --journal changed, nor the user's file in --into", not changes, "; ".join(changes)[:600])
        leaks = []
        for listener in self.away:
            for request in listener.script.requests:
                carried = [s for s in self.secrets if s and s.encode() in request.raw]
                if carried:
                    leaks.append("%s %s carried %s" % (listener.url, request, "the proof" if self.jws.split(".")[1] in carried else "a token"))
        self.check("no proof or token reached the second listener", not leaks, "; ".join(leaks)[:400])

    def close(self):
        for listener in self.listeners:
            try:
                listener.stop()
            except Exception:
                pass


def snapshot(box, own, keep):
    """Every path under `box` with what it is: a regular file's digest and mode, a link's target. The
    folders in `own` are the client's: not descended into, except for the files in `keep`."""
    state = {}

    def visit(path):
        try:
            info = os.lstat(path)
        except OSError:
            return
        relative = os.path.relpath(path, box)
        if stat.S_ISLNK(info.st_mode):
            state[relative] = ("link", os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            if path in own:  # the client's: it may create, fill or empty it
                return
            state[relative] = ("folder", oct(stat.S_IMODE(info.st_mode)))
            for name in sorted(os.listdir(path)):
                visit(os.path.join(path, name))
        elif stat.S_ISREG(info.st_mode):
            with open(path, "rb") as file:
                state[relative] = ("file", hashlib.sha256(file.read()).hexdigest(), oct(stat.S_IMODE(info.st_mode)))
        else:
            state[relative] = ("other", stat.S_IFMT(info.st_mode))

    visit(box)
    for path in keep:
        visit(path)
    return state


def folder_bytes(folder, skip=()):
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            if path in skip:
                continue
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
    return total


def kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def regular_file_with(path, data):
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    with open(path, "rb") as file:
        return file.read() == data


def nonzero(code):
    return code != 0


# MARK: Scenarios

SCENARIOS = []


def scenario(name, budget=60):
    def register(function):
        SCENARIOS.append((name, budget, function))
        return function
    return register


# 1. Product IDs are file names: one that climbs out of --into must not be written there.

class ClimbingProductIDs(Honest):
    # The catalogue lists them too: a client that only trusts catalogued IDs must still not trust these.
    restores = [("../../../victim_file", "1000000000000011"), ("../x/y", "1000000000000012")]
    files = {product: CONTENT for product, _ in restores}


@scenario("01 restore lists product IDs ../../../victim_file and ../x/y")
def _(case):
    case.serve(ClimbingProductIDs)
    run = case.client("restore")
    case.expect_exit(run, nonzero, "exits non-zero")
    hostile = {product for product, _ in ClimbingProductIDs.restores}
    delivered = [o.get("productId") for o in run.outcomes if o.get("productId") in hostile and o.get("outcome") == "delivered"]
    case.check("restore: no climbing product ID is delivered", not delivered, run.summary())


# 2. Transaction IDs name the partial file and the journal entry.

class SlashedTransactionIDs(Honest):
    restores = [(PRODUCT, "../../1000"), ("com.example.hostile.level2", "../../../1001")]
    files = {PRODUCT: CONTENT, "com.example.hostile.level2": CONTENT[::-1]}

    def send_file(self, request, out, status, data, start, headers):
        # Half the body, then a hang-up, every time: a partial file stays wherever the client put it.
        out.head(status, headers + [("Content-Length", str(len(data) - start))])
        out.write(data[start:len(data) // 2])
        out.hang_up()


@scenario("02 restore lists transaction IDs ../../1000 and ../../../1001")
def _(case):
    case.serve(SlashedTransactionIDs)
    run = case.client("restore")
    case.expect_exit(run, nonzero, "is refused (exits non-zero)")
    delivered = [o for o in run.outcomes if "/" in (o.get("transactionId") or "") and o.get("outcome") == "delivered"]
    case.check("restore: no slashed transaction ID is delivered", not delivered, run.summary())


# 3. `..` and `` name --into's parent and --into itself; a revocation deletes "the file".

class RevokedFolderNames(Honest):
    restores = [("..", "1000000000000031"), ("", "1000000000000032")]
    files = {product: CONTENT for product, _ in restores}

    def content(self, request, out):
        out.error(403, "revoked", "The purchase was refunded.")


@scenario("03 restore lists products .. and \"\", then revokes them")
def _(case):
    case.serve(RevokedFolderNames)
    case.client("restore")
    case.check("--into is still there", os.path.isdir(case.into))
    case.check("--into's parent is still there", os.path.isdir(case.parent))


# 4, 5. Retry-After at and beyond the edge of the integers.

class Unavailable(Honest):
    retry_after = None

    def grant(self, request, out):
        out.error(503, "upstream_unavailable", "The App Store is unavailable.", [("Retry-After", self.retry_after)])


class UnavailableForever(Unavailable):
    retry_after = "9223372036854775807"


class UnavailableForAges(Unavailable):
    retry_after = "99999999999"


def expect_bounded_retry(case, run):
    case.expect_exit(run, 2)
    wait = run.first("retryAfter")
    case.check("%s: retryAfter is at most a day" % run.label, isinstance(wait, int) and 1 <= wait <= DAY, "retryAfter %r; %s" % (wait, run.summary()))


@scenario("04 503 with Retry-After: 9223372036854775807")
def _(case):
    case.serve(UnavailableForever)
    expect_bounded_retry(case, case.client("deliver", label="first deliver"))
    # The journal now holds the date: reading it back must not overflow either.
    expect_bounded_retry(case, case.client("deliver", label="second deliver, same journal"))


@scenario("05 503 with Retry-After: 99999999999")
def _(case):
    case.serve(UnavailableForAges)
    expect_bounded_retry(case, case.client("deliver"))


# 6. A journal entry nested deeper than any decoder should follow.

@scenario("06 journal entry of 513 '[' planted before the run")
def _(case):
    planted = b"[" * 513
    os.makedirs(case.journal, mode=0o700)
    with open(os.path.join(case.journal, TX + ".json"), "wb") as file:
        file.write(planted)
    case.serve(Honest)
    run = case.client("deliver")
    case.expect_exit(run, 0, "sets the entry aside and delivers (exit 0)")
    set_aside = []
    for root, _, names in os.walk(case.journal):
        for name in names:
            path = os.path.join(root, name)
            if path != os.path.join(case.journal, TX + ".json") and regular_file_with(path, planted):
                set_aside.append(path)
    case.check("the unreadable entry is kept, renamed, in the journal folder", set_aside, "journal holds %r" % sorted(os.listdir(case.journal)) if os.path.isdir(case.journal) else "no journal")
    case.check("the file is the served one", regular_file_with(os.path.join(case.into, PRODUCT), CONTENT))


# 7. No acknowledgement, no "safe to finish", even when the file is already on disk.

class AcknowledgementFails(Honest):
    def answer_acknowledgement(self, request, out, transaction):
        out.error(500, "internal", "The acknowledgement could not be recorded.")


@scenario("07 every acknowledgement answered 500")
def _(case):
    case.serve(AcknowledgementFails)
    case.expect_exit(case.client("deliver"), 2)
    case.expect_request("POST", "/ack", "deliver: reached the acknowledgement")
    run = case.client("restore", label="restore afterwards (file on disk)")
    case.expect_exit(run, nonzero, "does not exit 0")
    case.check("restore afterwards: says nothing is safe to finish", not any(o.get("safeToFinish") for o in run.outcomes), run.summary())


# 8. An acknowledgement redirected elsewhere.

class AcknowledgementRedirected(Honest):
    status, target = 307, None

    def answer_acknowledgement(self, request, out, transaction):
        out.send(self.status, [("Location", "%s/v1/downloads/%s/ack" % (self.target, transaction))])


def redirected_acknowledgement(status, away):
    def body(case):
        script = case.serve(AcknowledgementRedirected)
        script.status, script.target = status, case.away[away].url
        run = case.client("deliver")
        case.expect_request("POST", "/ack", "deliver: reached the acknowledgement")
        case.expect_exit(run, nonzero, "does not exit 0")
        case.expect_nothing_elsewhere()
    return body


scenario("08a acknowledgement answered 307 to the second listener (same host, other port)")(redirected_acknowledgement(307, 0))
scenario("08b acknowledgement answered 308 to the second listener (127.0.0.2)")(redirected_acknowledgement(308, 1))


# 9. The grant redirected elsewhere: following a 307/308 re-posts the proof.

class GrantRedirected(Honest):
    status, target = 307, None

    def grant(self, request, out):
        out.send(self.status, [("Location", self.target + "/v1/downloads")])


def redirected_grant(status, away):
    def body(case):
        script = case.serve(GrantRedirected)
        script.status, script.target = status, case.away[away].url
        run = case.client("deliver")
        case.expect_exit(run, nonzero, "exits non-zero")
        case.expect_nothing_elsewhere()
    return body


scenario("09a POST /v1/downloads answered 307 to the second listener (same host, other port)")(redirected_grant(307, 0))
scenario("09b POST /v1/downloads answered 308 to the second listener (127.0.0.2)")(redirected_grant(308, 1))


# 10. A grant whose Location is on another origin, and a body cut short so the client must go there.

class ForeignLocation(Honest):
    prefix = None

    def location(self, transaction):
        return "%s/v1/downloads/%s/content" % (self.prefix, transaction)

    def send_file(self, request, out, status, data, start, headers):
        out.head(status, headers + [("Content-Length", str(len(data) - start))])
        out.write(data[start:start + (len(data) - start) // 2])
        out.hang_up()


def foreign_location(form):
    def body(case):
        script = case.serve(ForeignLocation)
        script.prefix = form % case.away[0].port
        run = case.client("deliver")
        case.expect_exit(run, nonzero, "does not exit 0")
    return body


scenario("10a grant's Location is absolute (http://127.0.0.1:<second>/...), body cut short")(foreign_location("http://127.0.0.1:%d"))
scenario("10b grant's Location is scheme-relative (//127.0.0.1:<second>/...), body cut short")(foreign_location("//127.0.0.1:%d"))


# 11. Symbolic links where the client writes.

def planted_link(which):
    def body(case):
        partial = os.path.join(case.into, ".%s.%s.partial" % (PRODUCT, TX))
        destination = os.path.join(case.into, PRODUCT)
        link, victim = {"partial": (partial, os.path.join(case.parent, "sibling", "victim_file")),
                        "destination": (destination, os.path.join(case.parent, "victim_file"))}[which]
        os.symlink(victim, link)
        case.serve(Honest)
        run = case.client("deliver")
        if run.code == 0:
            case.check("deliver: the delivered file is a regular file with the served bytes", regular_file_with(destination, CONTENT), run.summary())
    return body


scenario("11a symbolic link at the partial file's path, to a victim")(planted_link("partial"))
scenario("11b symbolic link at the destination, to a victim")(planted_link("destination"))


# 12. A body trickled so slowly that each byte beats a per-byte timeout.

class Trickle(Honest):
    def send_file(self, request, out, status, data, start, headers):
        out.head(status, headers + [("Content-Length", str(len(data) - start))])
        for offset in range(start, min(len(data), start + 60)):  # at most 2 minutes
            if self.stopping.wait(2):
                break
            out.write(data[offset:offset + 1])
        out.hang_up()


@scenario("12 body trickled at 1 byte every 2 s, --timeout 2", budget=60)
def _(case):
    case.serve(Trickle)
    run = case.client("deliver", "--timeout", "2", timeout=45)
    case.expect_exit(run, 2)
    case.check("deliver: gives up within 30 s", not run.timed_out and run.seconds <= 30, run.summary())


# 13. A 200 with no Content-Length: a body the client cannot bound.

class UnboundedBody(Honest):
    chunked = False

    def send_file(self, request, out, status, data, start, headers):
        framing = [("Transfer-Encoding", "chunked")] if self.chunked else []
        out.head(status, headers + [("Content-Type", "application/octet-stream")] + framing, close=not self.chunked)
        block = hashlib.sha256(b"junk").digest() * 2048
        for _ in range(NO_CONTENT_LENGTH_BYTES // len(block)):
            if self.stopping.is_set():
                break
            out.write(b"%x\r\n%s\r\n" % (len(block), block) if self.chunked else block)
        if self.chunked:
            out.write(b"0\r\n\r\n")


class ChunkedBody(UnboundedBody):
    chunked = True


def unbounded_body(script):
    def body(case):
        case.serve(script)
        run = case.client("deliver", timeout=40, watch=case.box)
        case.expect_exit(run, nonzero, "does not exit 0")
        case.check("deliver: writes at most %d KiB of it" % (UNKNOWN_LENGTH_WRITE_BOUND >> 10), run.peak_bytes <= UNKNOWN_LENGTH_WRITE_BOUND,
                   "peak %d bytes on disk" % run.peak_bytes)
    return body


scenario("13a 200 with no Content-Length, 20 MB closed-delimited", budget=80)(unbounded_body(UnboundedBody))
scenario("13b 200 with no Content-Length, 20 MB chunked", budget=80)(unbounded_body(ChunkedBody))


# 14. TLS: whom the client trusts.

class Certificates:
    """A CA made for the suite, a server certificate it signed for IP:127.0.0.1, and the pins."""

    lock = threading.Lock()
    made = None

    @classmethod
    def get(cls, suite):
        with cls.lock:
            if cls.made is None:
                cls.made = cls(os.path.join(suite.work, "tls"))
            return cls.made

    def __init__(self, folder):
        os.makedirs(folder)
        self.ca = os.path.join(folder, "ca.pem")
        ca_key = os.path.join(folder, "ca.key")
        extensions = os.path.join(folder, "server.ext")
        with open(extensions, "w") as file:
            file.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        openssl("req", "-x509", *ec, "-keyout", ca_key, "-out", self.ca, "-days", "2", "-subj", "/CN=Stockroom hostile suite CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

        def server(name):
            """A certificate the CA signed for IP:127.0.0.1, on a key of its own, and a TLS context serving it."""
            certificate, key, request = (os.path.join(folder, name + suffix) for suffix in (".pem", ".key", ".csr"))
            openssl("req", "-new", *ec, "-keyout", key, "-out", request, "-subj", "/CN=127.0.0.1")
            openssl("x509", "-req", "-in", request, "-CA", self.ca, "-CAkey", ca_key, "-CAcreateserial", "-out", certificate,
                    "-days", "2", "-extfile", extensions)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(certificate, key)
            return certificate, context

        self.certificate, self.context = server("server")
        # An object store the server redirects content to: the same CA, another key.
        _, self.store_context = server("store")
        self.pin = spki_pin(self.certificate)
        self.wrong_pin = spki_pin(self.ca)  # a real key, just not the server's


def openssl(*args, stdin=None):
    return subprocess.run(["openssl"] + list(args), input=stdin, capture_output=True, check=True, timeout=30).stdout


def spki_pin(certificate):
    """curl's sha256// pin: base64 of the SHA-256 of the key's SubjectPublicKeyInfo DER."""
    public = openssl("x509", "-in", certificate, "-pubkey", "-noout")
    der = openssl("pkey", "-pubin", "-outform", "der", stdin=public)
    digest = openssl("dgst", "-sha256", "-binary", stdin=der)
    return "sha256//" + base64.b64encode(digest).decode()


def over_tls(flags, delivered, environment=None):
    def body(case):
        certificates = Certificates.get(case.suite)
        script = case.serve(Honest, tls=certificates.context)
        extra = [value.format(ca=certificates.ca, pin=certificates.pin, wrong=certificates.wrong_pin) for value in flags]
        env = {k: v.format(ca=certificates.ca) for k, v in (environment or {}).items()}
        run = case.client("deliver", *extra, env=env)
        if delivered:
            case.expect_exit(run, 0)
            case.check("deliver: the file is the served one", regular_file_with(os.path.join(case.into, PRODUCT), CONTENT))
        else:
            case.expect_exit(run, 2, "is not delivered: exits 2")
            case.check("deliver: no request went over a connection it does not trust", not script.requests,
                       "the server saw %s" % ", ".join(map(str, script.requests)))
    return body


scenario("14a TLS, --cacert ca.pem")(over_tls(["--cacert", "{ca}"], True))
scenario("14b TLS, the CA not trusted")(over_tls([], False))
scenario("14c TLS, SSL_CERT_FILE=ca.pem")(over_tls([], True, {"SSL_CERT_FILE": "{ca}"}))
scenario("14c2 TLS, CURL_CA_BUNDLE=ca.pem")(over_tls([], True, {"CURL_CA_BUNDLE": "{ca}"}))
scenario("14d TLS, --cacert and the server's --pin")(over_tls(["--cacert", "{ca}", "--pin", "{pin}"], True))
scenario("14e TLS, --cacert and pins joined by ; (the right one second)")(over_tls(["--cacert", "{ca}", "--pin", "{wrong};{pin}"], True))
scenario("14f TLS, --cacert and --pin repeated (the right one second)")(over_tls(["--cacert", "{ca}", "--pin", "{wrong}", "--pin", "{pin}"], True))
scenario("14g TLS, --cacert and another key's --pin")(over_tls(["--cacert", "{ca}", "--pin", "{wrong}"], False))


@scenario("14i TLS, --cacert replaces the system's CA folder (the server's CA is there)")
def _(case):
    # libcurl also reads its built-in CA folder (Debian's /etc/ssl/certs) unless told not to, so
    # `--cacert` alone kept every system CA: here the server's CA is the one in that folder, seen
    # through a private mount namespace, and the client trusts only another CA.
    certificates = Certificates.get(case.suite)
    system = os.path.join(case.folder, "system-certs")
    os.makedirs(system)
    shutil.copy(certificates.ca, os.path.join(system, "suite-ca.pem"))
    shutil.copy(certificates.ca, os.path.join(system, "ca-certificates.crt"))  # Debian's bundle, which libcurl reads by default
    openssl("rehash", system)
    app_ca = os.path.join(case.folder, "app-ca.pem")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", os.path.join(case.folder, "app-ca.key"),
            "-out", app_ca, "-days", "2", "-subj", "/CN=The app's own CA")
    # Root may mount in a mount namespace of its own; anyone else in a user namespace's.
    namespace = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-rm"]
    wrapper = namespace + ["sh", "-c", 'mount --bind "$0" /etc/ssl/certs && exec "$@"', system]
    probe = subprocess.run(wrapper + ["sh", "-c", "test -e /etc/ssl/certs/suite-ca.pem"], capture_output=True, timeout=20)
    case.check("the system's CA folder can be stood in for (unshare, mount)", probe.returncode == 0, probe.stderr.decode(errors="replace")[-300:])
    script = case.serve(Honest, tls=certificates.context)
    trusted = case.run(["client", "catalog", "--server", case.primary.url], label="catalog with the system's CAs", wrapper=wrapper, delivers=False)
    case.check("the server's CA passes as a system CA (else nothing was tested)", trusted.code == 0, trusted.summary())
    script.requests.clear()
    run = case.client("deliver", "--cacert", app_ca, wrapper=wrapper)
    case.expect_exit(run, 2, "is not delivered: exits 2")
    case.check("deliver: no request went over a connection it does not trust", not script.requests,
               "the server saw %s" % ", ".join(map(str, script.requests)))


@scenario("14h TLS, POST /v1/downloads redirected to http:// on the second listener")
def _(case):
    certificates = Certificates.get(case.suite)
    script = case.serve(GrantRedirected, tls=certificates.context)
    script.status, script.target = 307, case.away[0].url
    run = case.client("deliver", "--cacert", certificates.ca)
    case.check("deliver: reached the HTTPS server's redirect (else nothing was tested)", any(r.method == "POST" for r in script.requests), run.summary())
    case.expect_exit(run, nonzero, "exits non-zero")
    case.expect_nothing_elsewhere()


class ContentRedirected(Honest):
    """`--content-delivery redirect`: the claim answered 303 and the content 307 to a presigned URL on
    `store`, with Stockroom's word for the bytes (Repr-Digest, X-Content-Size) and the resumable path
    in Content-Location; the bytes come from the store."""

    store = None

    def redirect(self, out, status, transaction, product, token=None):
        data = self.files[product]
        headers = [("Location", "%s/bucket/%s?X-Amz-Expires=60&X-Amz-Signature=0123abcd" % (self.store, product)),
                   ("Content-Location", self.location(transaction)), ("ETag", etag_of(data)), ("Repr-Digest", repr_digest_of(data)),
                   ("X-Content-Size", str(len(data))), ("X-Transaction-Id", transaction), ("Cache-Control", "no-store")]
        out.send(status, headers + ([("X-Download-Token", token)] if token else []))

    def grant(self, request, out):
        body = request.json() or {}
        product, transaction = body.get("productId"), body.get("transactionId")
        if product not in self.files or not isinstance(transaction, str):
            return out.error(404, "unknown_product")
        self.redirect(out, 303, transaction, product, self.issue(transaction, product))

    def content(self, request, out):
        granted = self.grants.get(request.bearer)
        if granted is None:
            return out.error(401, "token_invalid")
        self.redirect(out, 307, granted[0], granted[1])


class Store(Script):
    """An object store: the content at any path, under its own ETag (an MD5, not Stockroom's)."""

    def handle(self, request, out):
        out.send(200, [("ETag", '"0123456789abcdef0123456789abcdef"'), ("Content-Type", "application/octet-stream")], CONTENT)


@scenario("14j TLS, content redirected (303) to an http:// store on the second listener")
def _(case):
    certificates = Certificates.get(case.suite)
    script = case.serve(ContentRedirected, tls=certificates.context)
    script.store = case.away[0].url
    run = case.client("deliver", "--cacert", certificates.ca)
    case.expect_request("POST", "/v1/downloads", "deliver: reached the HTTPS server's 303 (else nothing was tested)")
    case.expect_exit(run, 2, "is not delivered: exits 2 (bad_answer, retry later)")
    case.expect_nothing_elsewhere()


@scenario("14k TLS, content redirected (303) to an https:// store with another key, --cacert and the server's --pin")
def _(case):
    certificates = Certificates.get(case.suite)
    script = case.serve(ContentRedirected, tls=certificates.context)
    store = Listener(Store(case), tls=certificates.store_context)
    case.listeners.append(store)
    script.store = store.url
    run = case.client("deliver", "--cacert", certificates.ca, "--pin", certificates.pin)
    case.expect_exit(run, 0, "delivers: the pin is the server's, the CA file also the store's")
    case.check("deliver: the file is the store's", regular_file_with(os.path.join(case.into, PRODUCT), CONTENT))
    asked = store.script.requests
    case.check("deliver: the store got one GET", [r.method for r in asked] == ["GET"], "; ".join(map(str, asked)))
    carried = [str(r) for r in asked if r.header("Authorization") or r.header("Cookie") or any(x and x.encode() in r.raw for x in case.secrets)]
    case.check("deliver: the store got no token, proof or cookie", not carried, "; ".join(carried))
    case.expect_request("POST", "/ack", "deliver: acknowledged to the server")
    case.expect_nothing_elsewhere()


# 15. The journal holds replayable proofs: its folder and files are the user's alone.

@scenario("15 journal folder already there with mode 0777 (umask 000)")
def _(case):
    os.makedirs(case.journal)
    os.chmod(case.journal, 0o777)
    case.serve(Honest)
    case.client("deliver", umask=0)
    mode = stat.S_IMODE(os.stat(case.journal).st_mode)
    case.check("the journal folder is 0700", mode == 0o700, oct(mode))
    entries = {}
    for root, folders, names in os.walk(case.journal):
        for name in names:
            path = os.path.join(root, name)
            entries[os.path.relpath(path, case.journal)] = stat.S_IMODE(os.lstat(path).st_mode)
    case.check("the journal holds an entry", entries)
    loose = {name: oct(mode) for name, mode in entries.items() if mode != 0o600}
    case.check("every journal entry file is 0600", not loose, repr(loose))


# 16. Catalogue product IDs that are terminal escape sequences.

class ControlCharacters(Honest):
    def catalog_products(self):
        return [{"productId": product, "size": 1, "sha256": "00" * 32}
                for product in ("com.example.\x1b[31mred\x1b[0m", "com.example.bell\x07", "com.example.real\rcom.example.spoofed")]


@scenario("16 catalogue product IDs with ESC, BEL and CR")
def _(case):
    case.serve(ControlCharacters)
    for flags in ([], ["--json"]):
        label = "catalog" + (" --json" if flags else "")
        run = case.run(["client", "catalog", "--server", case.primary.url, "--cache", os.path.join(case.into, "cache" + str(len(flags)))] + flags, label=label, delivers=False)
        case.expect_exit(run, lambda code: code in (0, 2), "exits 0 or 2")
        raw = sorted({"0x%02x" % b for b in run.stdout if (b < 0x20 and b not in (0x09, 0x0a)) or b == 0x7f})
        case.check("%s: stdout holds no raw control bytes" % label, not raw, "found %s; %s" % (", ".join(raw), run.summary()))


# 17. 204 is an acknowledgement too.

class AcknowledgedWithNoContent(Honest):
    def answer_acknowledgement(self, request, out, transaction):
        out.head(204, [])


@scenario("17 acknowledgement answered 204 No Content")
def _(case):
    case.serve(AcknowledgedWithNoContent)
    case.expect_exit(case.client("deliver"), 0)
    case.expect_request("POST", "/ack", "deliver: reached the acknowledgement")


# 18. Sanity: the honest script, so that a failure above is the lie's and not the script's.

@scenario("18a honest server: deliver")
def _(case):
    case.serve(Honest)
    run = case.client("deliver", json_output=False)
    case.expect_exit(run, 0)
    case.check("deliver: says safe to finish", "safe to finish" in run.text, run.summary())
    case.check("deliver: the file is the served bytes", regular_file_with(os.path.join(case.into, PRODUCT), CONTENT))


@scenario("18b honest server: restore")
def _(case):
    case.serve(Honest)
    run = case.client("restore")
    case.expect_exit(run, 0)
    case.check("restore: the file is the served bytes", regular_file_with(os.path.join(case.into, PRODUCT), CONTENT))


# MARK: Running them


class Suite:
    def __init__(self, binary, work, verbose):
        self.binary, self.work, self.verbose = binary, work, verbose


def run_case(suite, name, function, result):
    case = None
    try:
        case = Case(suite, name)
        function(case)
        case.finish()
    except Exception:
        if case is None:
            case = type("Broken", (), {"lines": [], "passed": 0, "failed": 0})()
        case.failed += 1
        case.lines.append("FAILED: %s: the scenario itself broke: %s" % (name, traceback.format_exc().strip().splitlines()[-1]))
        traceback.print_exc()
    finally:
        if case is not None and hasattr(case, "close"):
            case.close()
        result["case"] = case
        result["done"].set()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("binary")
    parser.add_argument("--work", help="a folder for the scenarios' files (default: a new temporary one, removed after)")
    parser.add_argument("-j", "--jobs", type=int, default=4, help="scenarios at once (default 4)")
    parser.add_argument("--only", action="append", help="run the scenarios whose name contains this (repeatable)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and stop")
    parser.add_argument("-v", "--verbose", action="store_true", help="show each run's outcome and the requests each listener saw")
    options = parser.parse_args()
    chosen = [s for s in SCENARIOS if not options.only or any(text in s[0] for text in options.only)]
    if options.list:
        print("\n".join(name for name, _, _ in chosen))
        return 0
    binary = os.path.realpath(options.binary)
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print("FAILED: %s is not an executable" % binary)
        print("client-hostile: 0 passed, 1 failed")
        return 1
    owned = options.work is None
    work = options.work or tempfile.mkdtemp(prefix="client-hostile.")
    os.makedirs(work, exist_ok=True)
    # SIGTERM (from `timeout` or the bash trap) unwinds through the finally below, killing clients.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    suite = Suite(binary, work, options.verbose)
    passed = failed = 0
    started = time.monotonic()
    slots = threading.Semaphore(max(1, options.jobs))
    try:
        results = []
        for name, budget, function in chosen:
            result = {"done": threading.Event(), "started": None, "budget": budget}

            def worker(name=name, function=function, result=result):
                with slots:
                    result["started"] = time.monotonic()
                    run_case(suite, name, function, result)

            threading.Thread(target=worker, daemon=True).start()
            results.append((name, result))
        for name, result in results:
            # A scenario is waited for until its own budget runs out (counted from its start), then
            # counted failed; every wait inside it is bounded too, so this is the last resort.
            while not result["done"].wait(0.2):
                if result["started"] is not None and time.monotonic() - result["started"] > result["budget"]:
                    break
                if time.monotonic() - started > SUITE_SECONDS:
                    break
            case = result.get("case")
            if not result["done"].is_set() or case is None:
                failed += 1
                print("FAILED: %s: did not finish within its %d s budget" % (name, result["budget"]), flush=True)
                continue
            for line in case.lines:
                print(line, flush=True)
            passed += case.passed
            failed += case.failed
            print("-- %s: %d checks, %d failed" % (name, case.passed + case.failed, case.failed), flush=True)
    finally:
        with LIVE_LOCK:
            for pid in list(LIVE):
                kill_group(pid)
        if owned:
            shutil.rmtree(work, ignore_errors=True)
    print("client-hostile: %d passed, %d failed" % (passed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # Scenario threads that overran their budget are abandoned, not joined.
    os._exit(code)
